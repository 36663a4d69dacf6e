"""The pointwise kernels of `fabric.kernels.compare` (exact comparisons of two tensors or a
tensor and a scalar, the bitwise select, maximum / minimum / leaky_relu) and the unary
log1p and abs (`unary.build_unary`): results against numpy, cycles against the models.

Comparisons, select, maximum, minimum, abs are exact, so they are checked bit for bit
(masks against numpy's IEEE comparisons, NaN and +-0 and +-inf and subnormals among the
operands). log1p is within `mathlib.LOG1P_ULPS` (2) fp32 ulps of numpy's float64 log1p
rounded to fp32 over a dense sweep (the numpy mirror `emulate`, both fma roundings) and on
the fabric; its special values are torch's. The cycle models are exact (straight lists of
synchronous ops), so the measured cycles must equal them (the 10 % rule holds a fortiori).
"""

import math

import numpy as np
import pytest
import torch

from fabric import FabricConfig
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels import mathlib_numpy as mn
from fabric.kernels.base import run_kernel
from fabric.kernels.compare import (
    RELATIONS,
    SCRATCH,
    build_extremum,
    build_relation,
    build_select,
    extremum_reference,
    relation_code,
    relation_reference,
    select_reference,
)
from fabric.kernels.unary import build_unary
from fabric.numerics.convert import round_to
from fabric.program import Rect

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 2, 3)
F32 = np.float32
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-40, -1e-40,
                     1.4e-45, 3.4e38, -3.4e38, 1.0000001, 0.99999994, 65536.0, 1.1754944e-38],
                    F32)


def _pairs(seed=0):
    """(x, z) of shape (24, 20): every pair of SPECIALS, then random values of which about
    a third equal their partner and a fifth are its neighbour."""
    gen = np.random.default_rng(seed)
    x, z = (a.ravel() for a in np.meshgrid(SPECIALS, SPECIALS))
    n = 24 * 20 - x.size
    rx = gen.standard_normal(n).astype(F32)
    rz = np.where(gen.random(n) < 0.3, rx, gen.standard_normal(n).astype(F32))
    rz = np.where(gen.random(n) < 0.2, np.nextafter(rx, F32(9)), rz)
    return (np.concatenate([x, rx]).reshape(24, 20), np.concatenate([z, rz]).reshape(24, 20))


def _run(kernel, inputs):
    res = run_kernel(kernel, inputs)
    assert res.cycles == kernel.model_cycles, (kernel.name, res.cycles, kernel.model_cycles)
    return res.output


@pytest.mark.parametrize("op", RELATIONS)
def test_relation_of_two_tensors_is_exact(op):
    x, z = _pairs()
    got = _run(build_relation(CONFIG, RECT, 24, 20, op), {"x": x, "z": z})
    np.testing.assert_array_equal(got, relation_reference(x, z, op))


@pytest.mark.parametrize("op,scalar", [("eq", -math.inf), ("ne", 0.0), ("gt", 1e-40),
                                       ("le", math.nan), ("lt", -0.0), ("ge", 1.0)])
def test_relation_with_a_scalar_is_exact(op, scalar):
    x, _ = _pairs(1)
    got = _run(build_relation(CONFIG, RECT, 24, 20, op, scalar=scalar), {"x": x})
    np.testing.assert_array_equal(got, relation_reference(x, F32(scalar), op))


def test_relation_emulated_sweep_is_exact():
    """Every relation over 40 000 random pairs and all special pairs, in the numpy mirror."""
    gen = np.random.default_rng(2)
    x, z = (a.ravel() for a in _pairs(3))
    bits = gen.integers(0, 2**32, 40000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([x, bits.view(F32)])
    z = np.concatenate([z, np.where(gen.random(40000) < 0.5, bits + np.uint32(1),
                                    bits ^ np.uint32(1 << 31)).view(F32)])
    scratch = [Mem(f"s{i}") for i in range(SCRATCH)]
    for op in RELATIONS:
        with np.errstate(invalid="ignore"):
            got = mn.emulate(relation_code(op)(Mem("y"), Mem("x"), Mem("z"), scratch),
                             {"x": x, "z": z})["y"].view(F32)
            np.testing.assert_array_equal(got, relation_reference(x, z, op), err_msg=op)


def test_relation_of_integers():
    gen = np.random.default_rng(4)
    x = gen.integers(-2**31, 2**31, (24, 20)).astype(np.int32)
    z = np.where(gen.random((24, 20)) < 0.3, x, gen.integers(-5, 5, (24, 20))).astype(np.int32)
    x[0, :3] = [0, -1, 2**31 - 1]
    for op in ("lt", "eq"):
        got = _run(build_relation(CONFIG, RECT, 24, 20, op, kind="int"),
                   {"x": x.view(F32), "z": z.view(F32)})
        np.testing.assert_array_equal(got, relation_reference(x, z, op))
    got = _run(build_relation(CONFIG, RECT, 24, 20, "eq", scalar=0, kind="int"), {"x": x.view(F32)})
    np.testing.assert_array_equal(got, relation_reference(x, 0, "eq"))


def test_relation_in_half_storage():
    x, z = (round_to(v, "bf16") for v in _pairs(5))
    got = _run(build_relation(CONFIG, RECT, 24, 20, "ge", dtype="bf16"), {"x": x, "z": z})
    np.testing.assert_array_equal(got, relation_reference(x, z, "ge"))


def test_select_moves_bits():
    x, z = _pairs(6)
    c = (np.random.default_rng(7).random((24, 20)) < 0.5).astype(F32)
    got = _run(build_select(CONFIG, RECT, 24, 20), {"c": c, "a": x, "b": z})
    assert np.array_equal(got.view(np.uint32), select_reference(c, x, z).view(np.uint32))
    got = _run(build_select(CONFIG, RECT, 24, 20, b=-math.inf), {"c": c, "a": x})
    assert np.array_equal(got.view(np.uint32), select_reference(c, x, -np.inf).view(np.uint32))
    # an integer mask (a bool input's 0 / 1 words), a scalar a, half storage
    cint = c.astype(np.int32).view(F32)
    h = round_to(z, "f16")
    got = _run(build_select(CONFIG, RECT, 24, 20, a=0.1, dtype="f16"), {"c": c, "b": h})
    want = select_reference(c, round_to(F32(0.1), "f16"), h)
    np.testing.assert_array_equal(got, want)
    got = _run(build_select(CONFIG, RECT, 24, 20), {"c": cint, "a": x, "b": z})
    assert np.array_equal(got.view(np.uint32), select_reference(c, x, z).view(np.uint32))


@pytest.mark.parametrize("op,slope", [("maximum", None), ("minimum", None),
                                      ("leaky_relu", 0.01), ("leaky_relu", 1.5)])
def test_extremum(op, slope):
    x, z = _pairs(8)
    if op == "leaky_relu":  # NaN, +-inf, +-0 and normals (subnormals read as 0)
        x = np.where(np.abs(x) < 1e-37, F32(0), x)
        got = _run(build_extremum(CONFIG, RECT, 24, 20, op, slope), {"x": x})
    else:
        x, z = (np.where(np.abs(v) < 1.2e-38, F32(0), v) for v in (x, z))
        got = _run(build_extremum(CONFIG, RECT, 24, 20, op), {"x": x, "z": z})
    want = extremum_reference(x, z, op, slope)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0])), "signed zeros"


def test_abs_and_signbit_are_exact():
    x, _ = _pairs(9)
    got = _run(build_unary(CONFIG, RECT, 24, 20, "abs"), {"x": x})
    assert np.array_equal(got.view(np.uint32), np.abs(x).view(np.uint32))
    got = _run(build_unary(CONFIG, RECT, 24, 20, "signbit"), {"x": x})
    np.testing.assert_array_equal(got, np.signbit(x).astype(F32))


# ---- log1p ------------------------------------------------------------------------------------
def _ulps(got, x):
    with np.errstate(all="ignore"):
        ref = np.log1p(x.astype(np.float64)).astype(F32)
    ulp = np.spacing(np.maximum(np.abs(ref), F32(np.finfo(F32).tiny))).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / ulp


def _log1p_points(n):
    """Log-uniform sweeps of both signs (x > -1), linear sweeps of [-1, 2] and of the
    rounding of 1 + x (|x| near 2^-24), n points in all."""
    k = n // 6
    pts = np.concatenate([
        np.exp2(np.linspace(-126, 127.99, 2 * k)), -np.exp2(np.linspace(-126, -1e-7, k)),
        np.linspace(-1, 2, k), np.linspace(-0.35, 0.45, k),
        np.linspace(-1.3e-7, 1.3e-7, n - 5 * k)]).astype(F32)
    return pts[pts > -1]


@pytest.mark.parametrize("fused", [True, False])
def test_log1p_ulp_bound_dense_emulated(fused):
    x = _log1p_points(600_000)
    code = ml.log1p(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(6)])
    got = mn.emulate(code, {"x": x}, fused=fused)["y"].view(F32)
    err = _ulps(got, x)
    assert err.max() <= ml.LOG1P_ULPS, (err.max(), x[np.argmax(err)])


def test_log1p_on_the_fabric_bound_specials_and_cycles():
    x = np.full(24 * 20, F32(0.5))
    pts = _log1p_points(400)
    specials = np.array([0.0, -1.0, -2.0, math.inf, -math.inf, math.nan, 3.4e38, 1e-30,
                         -0.5, -0.9999999], F32)
    x[:pts.size] = pts
    x[-specials.size:] = specials
    k = build_unary(CONFIG, RECT, 24, 20, "log1p")
    got = _run(k, {"x": x.reshape(24, 20)}).reshape(-1)
    finite = np.isfinite(got) & (x > -1)
    assert _ulps(got[finite], x[finite]).max() <= ml.LOG1P_ULPS
    torch.testing.assert_close(torch.from_numpy(got[-specials.size:]),
                               torch.log1p(torch.from_numpy(specials)), equal_nan=True,
                               rtol=2 * 2**-23, atol=0)
    assert ml.log1p_cycles(CONFIG, 80) == ml.sequence_cycles(
        CONFIG, ml.log1p(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(6)]), 80)


def test_itof_reads_int32_words():
    """An integer input's words as numbers: exact below 2^24, rounded to nearest even above
    (numpy's int32 -> float32)."""
    gen = np.random.default_rng(10)
    x = gen.integers(-2**31, 2**31, (24, 20)).astype(np.int32)
    x[0, :4] = [0, 1, -1, 2**24 + 1]
    got = _run(build_unary(CONFIG, RECT, 24, 20, "itof"), {"x": x.view(F32)})
    np.testing.assert_array_equal(got, x.astype(F32))
