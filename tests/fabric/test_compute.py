"""DSD builtins on memory operands against numpy, with their exact cycle counts.

Every test runs one tile on all 8 PEs of a row with different data per PE. A local task with
one synchronous DSD op of n elements, launched on an idle fabric, takes
ceil(n / w) + 2 cycles: 1 to start the task, ceil(n / w) for the op at SIMD width
w = config.simd_width(op, "f32"), 1 for the implicit RET. fp32 elementwise results are
compared bit-exactly with numpy's float32 result of the same op; fma is checked by
`assert_fma_equal` (see programs.py for why two roundings are accepted).
"""

import math

import numpy as np
import pytest

from fabric import Tile
from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from tests.fabric.programs import ROW, assert_fma_equal, run_tile

N = 20  # symbol length
rng = np.random.default_rng(1234)
A = rng.standard_normal((1, 8, N)).astype(np.float32)
B = rng.standard_normal((1, 8, N)).astype(np.float32)
D0 = rng.standard_normal((1, 8, N)).astype(np.float32)

BINARY = {
    "add": (ins.add, np.add),
    "sub": (ins.sub, np.subtract),
    "mul": (ins.mul, np.multiply),
    "max": (ins.max_, np.maximum),
}


def three_vectors():
    t = Tile("t")
    return t, t.symbol("a", "f32", N), t.symbol("b", "f32", N), t.symbol("d", "f32", N)


def run3(t, params=None):
    sim, stats = run_tile(t, {"a": A, "b": B, "d": D0}, params=params)
    return sim.memcpy_d2h("d"), stats


def expect(values, n, offset=0):
    """D0 with elements offset..offset+n-1 replaced by values[..., :n]."""
    out = D0.copy()
    out[..., offset:offset + n] = values[..., :n]
    return out


def check_cycles(stats, op, n, waits=0):
    """Start, the op's groups, RET; `waits` groups wait a cycle on a bank pair."""
    w = ROW.simd_width(op, "f32")
    assert stats.cycles == math.ceil(n / w) + 2 + waits
    np.testing.assert_array_equal(stats.bank_stall, waits)
    if not waits:  # every PE was busy every cycle and never stalled
        np.testing.assert_array_equal(stats.busy, stats.cycles)
        assert stats.stall.sum() == 0
    np.testing.assert_array_equal(stats.busy + stats.stall, stats.cycles)


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_binary_op_matches_numpy(op, n):
    make, ref = BINARY[op]
    t, a, b, d = three_vectors()
    t.local_task("main", [make(d.dsd(length=n), a.dsd(length=n), b.dsd(length=n))])
    out, stats = run3(t)
    np.testing.assert_array_equal(out, expect(ref(A, B), n))
    check_cycles(stats, op, n)


@pytest.mark.parametrize("n", [1, 3, 20])
def test_mov_copies_bits(n):
    t, a, _, d = three_vectors()
    t.local_task("main", [ins.mov(d.dsd(offset=N - n, length=n), a.dsd(length=n))])
    out, stats = run3(t)
    np.testing.assert_array_equal(out, expect(A, n, offset=N - n))
    check_cycles(stats, "mov", n)


@pytest.mark.parametrize("n", [1, 4, 20])
def test_fma_with_immediate_scalar(n):
    s = 0.37
    t, a, b, d = three_vectors()
    t.local_task("main", [ins.fma(d.dsd(length=n), a.dsd(length=n), b.dsd(length=n), s)])
    out, stats = run3(t)
    assert_fma_equal(out[..., :n], A[..., :n], B[..., :n], s)
    np.testing.assert_array_equal(out[..., n:], D0[..., n:])
    check_cycles(stats, "fma", n)


def test_fma_with_register_scalar_per_pe():
    """The scalar comes from a register initialised per PE by `params`."""
    s = np.linspace(-2, 3, 8, dtype=np.float32).reshape(1, 8)
    t, a, b, d = three_vectors()
    t.local_task("main", [ins.fma(d.dsd(), a.dsd(), b.dsd(), "s")])
    out, stats = run3(t, params={"s": s})
    for c in range(8):
        assert_fma_equal(out[0, c], A[0, c], B[0, c], s[0, c])
    check_cycles(stats, "fma", N)


@pytest.mark.parametrize(
    ("op", "make", "ref"),
    [
        ("add", lambda d, a: ins.add(d, a, 2.5), lambda a: a + np.float32(2.5)),
        ("sub", lambda d, a: ins.sub(d, 1.0, a), lambda a: np.float32(1.0) - a),
        ("mul", lambda d, a: ins.mul(d, a, "k"), lambda a: a * np.float32(-0.75)),
        ("max", lambda d, a: ins.max_(d, a, 0.0), lambda a: np.maximum(a, np.float32(0))),
        ("mov", lambda d, a: ins.mov(d, 6.25), lambda a: np.full_like(a, 6.25)),
    ],
    ids=["add-imm", "imm-sub", "mul-reg", "relu", "mov-broadcast"],
)
def test_scalar_operands_broadcast(op, make, ref):
    t, a, _, d = three_vectors()
    t.local_task("main", [make(d.dsd(), a.dsd())])
    out, stats = run3(t, params={"k": np.float32(-0.75)})
    np.testing.assert_array_equal(out, ref(A))
    check_cycles(stats, op, N)


def test_in_place_update():
    """d = d + d reads and writes the same words; each element is read before written.
    Its two reads of one word are in one bank pair: every group waits a cycle."""
    t, _, _, d = three_vectors()
    t.local_task("main", [ins.add(d.dsd(), d.dsd(), d.dsd())])
    out, stats = run3(t)
    np.testing.assert_array_equal(out, D0 + D0)
    check_cycles(stats, "add", N, waits=math.ceil(N / ROW.simd_width("add", "f32")))


def test_ops_run_in_sequence_and_cycles_add_up():
    """Three sync ops back to back: 1 + sum(ceil(n/w)) + 1 cycles, plus the groups that
    wait on a bank pair (a, b, d read pairwise: two start parities for three symbols, so
    the layout leaves one pair meeting: the 7 elements of d and b)."""
    t, a, b, d = three_vectors()
    code = [
        ins.mul(d.dsd(), a.dsd(), b.dsd()),        # d = a*b        20 cycles (w=1)
        ins.add(d.dsd(), d.dsd(), a.dsd()),        # d = a*b + a    10 cycles (w=2)
        ins.max_(d.dsd(length=7), d.dsd(length=7), b.dsd(length=7)),  # 7 cycles (w=1)
    ]
    t.local_task("main", code)
    out, stats = run3(t)
    ref = A * B + A
    ref[..., :7] = np.maximum(ref[..., :7], B[..., :7])
    np.testing.assert_array_equal(out, ref)
    assert [read_pair_stalls(ROW, t, [op]) for op in code] == [0, 0, 7]
    assert stats.cycles == 1 + 20 + 10 + 7 + 1 + 7
