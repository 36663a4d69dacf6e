"""16-bit builtins on the engine, each bit-exact against a numpy emulation of its rounding
(fp16, bf16, cbfloat16), with cycle counts at the 16-bit SIMD widths of the config.

Emulation: the sources widen exactly to fp32 (`from_half`, itself checked against ml_dtypes and
a plain-Python reference in test_numerics_formats), numpy computes in float32, and the result
is rounded once to the 16-bit format by ml_dtypes / numpy (fp16, bf16) or `to_half`
(cbfloat16). Inputs keep every fp32 intermediate normal (bf16 exponents within +-63), so the
engine's flush-to-zero of fp32 subnormals never applies; 16-bit products are exact in fp32, so
fused and separate multiply-add agree.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from fabric import FabricConfig, Port, Program, Rect, Simulator, Tile, build
from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.errors import BuildError
from fabric.isa import I_SIMD
from fabric.numerics import FORMATS, from_half, to_half
from tests.fabric.programs import ROW, ROW_RECT, run_tile

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow is tested
N = 13  # odd: the last word of a symbol holds one value
HALVES = ("f16", "bf16", "cb16")
HOST = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
OPS = {
    "add": (ins.add, ("add", "f16"), lambda a, b, s: a + b),
    "sub": (ins.sub, ("sub", "f16"), lambda a, b, s: a - b),
    "mul": (ins.mul, ("mul", "f16"), lambda a, b, s: a * b),
    "max": (ins.max_, ("max", "f16"), lambda a, b, s: np.maximum(a, b)),
    "min": (ins.min_, ("max", "f16"), lambda a, b, s: np.minimum(a, b)),
    "fma": (ins.fma, ("fma", "f16"), lambda a, b, s: a + b * s),
    "mov": (ins.mov, ("mov", "f16"), lambda a, b, s: a),
}


def round16(x, dtype):
    """fp32 values -> 16-bit patterns by the reference libraries (cb16: to_half)."""
    x = np.asarray(x, np.float32)
    if dtype in HOST:
        return x.astype(HOST[dtype]).view(np.uint16)
    return to_half(x, dtype)


def patterns(out, dtype):
    """memcpy_d2h values of a 16-bit symbol -> their bit patterns."""
    return np.asarray(out).view(np.uint16) if dtype in HOST else to_half(out, dtype)


def random_halves(rng, dtype, shape):
    """Finite random 16-bit patterns: every fp16 / cbfloat16 exponent (subnormals, and sums
    that overflow to infinity), bf16 exponents 2^-63 .. 2^63."""
    fmt = FORMATS[dtype]
    lo, hi = (64, 191) if dtype == "bf16" else (0, fmt.emax_field)
    exp = rng.integers(lo, hi, shape)
    man = rng.integers(0, 1 << fmt.mbits, shape)
    sign = rng.integers(0, 2, shape)
    return ((sign << 15) | (exp << fmt.mbits) | man).astype(np.uint16)


def host_values(bits, dtype):
    """Data for memcpy_h2d holding exactly these patterns."""
    return bits.view(HOST[dtype]) if dtype in HOST else from_half(bits, dtype)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("name", list(OPS))
def test_half_builtin_bit_exact_and_cycles(name, dtype):
    make, key, ref = OPS[name]
    rng = np.random.default_rng(hash((name, dtype)) % 2**32)
    a, b = (random_halves(rng, dtype, (1, 8, N)) for _ in range(2))
    s = np.float32(rng.choice([0.75, -1.5, 3.0e-3, 300.0]))
    tile = Tile("t")
    x, y, z = (tile.symbol(n, dtype, N) for n in "xyz")
    args = (z.dsd(), x.dsd()) if name == "mov" else (z.dsd(), x.dsd(), y.dsd())
    tile.local_task("main", [make(*args, s, dtype=dtype) if name == "fma" else
                             make(*args, dtype=dtype)])
    sim, stats = run_tile(tile, {"x": host_values(a, dtype), "y": host_values(b, dtype)})
    s16 = from_half(to_half(s, dtype), dtype)  # the immediate is rounded to the format
    want = round16(ref(from_half(a, dtype), from_half(b, dtype), s16), dtype)
    np.testing.assert_array_equal(patterns(sim.memcpy_d2h("z"), dtype), want)
    assert stats.cycles == math.ceil(N / ROW.simd_width(*key)) + 2
    # wse2: 16-bit add/sub/mul/mov and fmach 4 wide; fmaxh has no SIMD mode (docs/engine.md)
    assert ROW.simd_width(*key) == (1 if name in ("max", "min") else 4)


@pytest.mark.parametrize("dtype", HALVES)
def test_fmachs_accumulates_in_fp32(dtype):
    """fp32 acc + 16-bit b * 16-bit s: one fp32 rounding, never a 16-bit one."""
    rng = np.random.default_rng(7)
    b = random_halves(rng, dtype, (1, 8, N))
    acc = rng.standard_normal((1, 8, N)).astype(np.float32) * np.float32(1e3)
    tile = Tile("t")
    x, y = tile.symbol("x", dtype, N), tile.symbol("acc", "f32", N)
    code = [ins.fmachs(y.dsd(), y.dsd(), x.dsd(), 0.1, dtype=dtype)]
    tile.local_task("main", code)
    sim, stats = run_tile(tile, {"x": host_values(b, dtype), "acc": acc})
    s16 = from_half(to_half(np.float32(0.1), dtype), dtype)
    want = acc + from_half(b, dtype) * s16
    np.testing.assert_array_equal(sim.memcpy_d2h("acc").view(np.uint32), want.view(np.uint32))
    # groups of 2 from element 2g: acc's words keep one bank pair, x's half-words alternate
    # two (2g mod 4), so every other group meets acc's whatever the layout: 3 of 7 wait
    waits = read_pair_stalls(ROW, tile, code)
    np.testing.assert_array_equal(stats.bank_stall, waits)
    assert waits == 3
    assert stats.cycles == math.ceil(N / ROW.simd_width("mul_acc32", "f16")) + 2 + waits == 12


@pytest.mark.parametrize("dtype", HALVES)
def test_conversions_every_pattern_and_random_fp32(dtype):
    """to_f32 on all 65,536 patterns (8 PEs x 8,192) and to_half on random fp32 patterns
    (NaN, inf, ties, subnormals included), against the reference libraries; cycles at the
    conversion width."""
    n = 8192
    every = np.arange(1 << 16, dtype=np.uint16).reshape(1, 8, n)
    rng = np.random.default_rng(11)
    fp32 = rng.integers(0, 1 << 32, (1, 8, n // 2), dtype=np.uint64).astype(np.uint32)
    tile = Tile("t")
    h, f = tile.symbol("h", dtype, n), tile.symbol("f", "f32", n // 2)
    back = tile.symbol("back", dtype, n // 2)
    tile.local_task("widen", [ins.to_f32(f.dsd(length=n // 2), h.dsd(length=n // 2), dtype)])
    tile.local_task("narrow", [ins.to_half(back.dsd(), f.dsd(), dtype)])
    # widen half of the patterns per run (f holds n/2 fp32 values)
    for part in range(2):
        data = {"h": host_values(np.roll(every, -part * n // 2, axis=-1), dtype)}
        sim, stats = run_tile(tile, data, task="widen")
        want = from_half(every[..., part * n // 2:(part + 1) * n // 2], dtype)
        np.testing.assert_array_equal(sim.memcpy_d2h("f").view(np.uint32), want.view(np.uint32))
        assert stats.cycles == math.ceil(n // 2 / ROW.simd_width("cvt", "f16")) + 2
    sim, stats = run_tile(tile, {"f": fp32.view(np.float32)}, task="narrow")
    want = round16(fp32.view(np.float32), dtype)
    np.testing.assert_array_equal(patterns(sim.memcpy_d2h("back"), dtype), want)


def test_fp16_overflows_to_inf_cbfloat16_stays_finite():
    tile = Tile("t")
    for dtype in ("f16", "cb16"):
        x = tile.symbol("x" + dtype, dtype, 4)
        tile.local_task("main" if dtype == "f16" else "cb",
                        [ins.mul(x.dsd(), x.dsd(), x.dsd(), dtype=dtype)])
    data = np.array([300.0, -1000.0, 255.0, 2.0], np.float32)  # squares: 9e4, 1e6, 65025, 4
    sim, _ = run_tile(tile, {"xf16": data, "xcb16": data})
    f16 = sim.memcpy_d2h("xf16").astype(np.float32)
    assert np.isinf(f16[..., :2]).all() and np.isfinite(f16[..., 2:]).all()
    sim2, _ = run_tile(tile, {"xf16": data, "xcb16": data}, task="cb")
    cb = sim2.memcpy_d2h("xcb16")
    assert np.isfinite(cb).all()
    np.testing.assert_allclose(cb, np.broadcast_to(data * data, cb.shape), rtol=2.0 ** -10)


def test_fp32_and_16bit_ops_in_the_same_cycles():
    """PEs 0-3 run an fp32 add while PEs 4-7 run an f16 add in the same cycles (the engine
    then takes its 16-bit datapath for every PE): both results stay exact."""
    rng = np.random.default_rng(9)
    wide, half = Tile("wide"), Tile("half")
    u, v = wide.symbol("u", "f32", N), wide.symbol("v", "f32", N)
    wide.local_task("main", [ins.add(v.dsd(), u.dsd(), v.dsd())])
    x, y = half.symbol("x", "f16", N), half.symbol("y", "f16", N)
    half.local_task("main", [ins.add(y.dsd(), x.dsd(), y.dsd(), dtype="f16")])
    prog = Program(ROW)
    prog.place(wide, Rect(0, 0, 1, 4))
    prog.place(half, Rect(0, 4, 1, 4))
    sim = Simulator(ROW, prog)
    a32, b32 = (rng.standard_normal((1, 4, N)).astype(np.float32) for _ in range(2))
    a16, b16 = (random_halves(rng, "f16", (1, 4, N)) for _ in range(2))
    for name, value in (("u", a32), ("v", b32), ("x", a16.view(np.float16)),
                        ("y", b16.view(np.float16))):
        sim.memcpy_h2d(name, value)
    sim.launch("main")
    stats = sim.run(max_cycles=1000)
    np.testing.assert_array_equal(sim.memcpy_d2h("v"), a32 + b32)
    want = round16(from_half(a16, "f16") + from_half(b16, "f16"), "f16")
    np.testing.assert_array_equal(sim.memcpy_d2h("y").view(np.uint16), want)
    # the fp32 add (width 2) is the longer one
    assert stats.cycles == math.ceil(N / ROW.simd_width("add", "f32")) + 2


def test_half_words_pack_and_neighbours_survive():
    """Odd offsets, stride 3 and a partial destination: the halves an op does not write keep
    their values, SRAM holds two values per word (low half first), capacity doubles."""
    rng = np.random.default_rng(3)
    a = random_halves(rng, "f16", (1, 8, 16))
    old = random_halves(rng, "f16", (1, 8, 11))
    tile = Tile("t")
    x, y = tile.symbol("x", "f16", 16), tile.symbol("y", "f16", 11)
    # y[1:6] = x[1], x[4], x[7], x[10], x[13]
    tile.local_task("main", [ins.mov(y.dsd(offset=1, length=5), x.dsd(offset=1, length=5,
                                                                       stride=3), dtype="f16")])
    sim, stats = run_tile(tile, {"x": a.view(np.float16), "y": old.view(np.float16)})
    want = old.copy()
    want[..., 1:6] = a[..., 1:14:3]
    np.testing.assert_array_equal(sim.memcpy_d2h("y").view(np.uint16), want)
    words = sim.sram_view()[0, :, 8:14]  # y starts at word 8 (after x's 8 words)
    np.testing.assert_array_equal(words & 0xFFFF, want[0, :, 0::2])
    np.testing.assert_array_equal(words[:, :5] >> 16, want[0, :, 1::2])
    assert (words[:, 5] >> 16 == 0).all()  # the unused half of the odd last word
    assert stats.cycles == math.ceil(5 / 4) + 2
    assert sim.info.sram_used_words[0, 0] == 8 + 6


def _send_receive(dtype, packed, a, b):
    """PE 0 sends x on color 0, PE 1 adds what arrives to its y; returns (sim, stats)."""
    send, recv = Tile("send"), Tile("recv")
    x = send.symbol("x", dtype, N)
    send.local_task("main", [ins.mov(ins.FabOut(0, N, packed=packed), x.dsd(), dtype=dtype)])
    y = recv.symbol("y", dtype, N)
    recv.local_task("main", [ins.add(y.dsd(), ins.FabIn(0, N, packed=packed), y.dsd(),
                                     dtype=dtype)])
    prog = Program(ROW)
    prog.place(send, Rect(0, 0, 1, 1))
    prog.place(recv, Rect(0, 1, 1, 1))
    prog.route(Rect(0, 0, 1, 1), 0, rx=Port.RAMP, tx=Port.EAST)
    prog.route(Rect(0, 1, 1, 1), 0, rx=Port.WEST, tx=Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.memcpy_h2d("x", host_values(a, dtype))
    sim.memcpy_h2d("y", host_values(b, dtype))
    sim.launch("main")
    return sim, sim.run(max_cycles=1000)


@pytest.mark.parametrize("packed", [False, True])
def test_fabric_carries_16bit_values(packed):
    """A 16-bit fabric operand is the low half of a wavelet, or with `packed` two values per
    wavelet (low half first): N values then take ceil(N / 2) wavelets and cycles."""
    rng = np.random.default_rng(5)
    a, b = (random_halves(rng, "cb16", (N,)) for _ in range(2))
    sim, stats = _send_receive("cb16", packed, a, b)
    want = round16(from_half(a, "cb16") + from_half(b, "cb16"), "cb16")
    np.testing.assert_array_equal(patterns(sim.memcpy_d2h("y")[0, 0], "cb16"), want)
    assert stats.injected == stats.consumed == (math.ceil(N / 2) if packed else N)
    # start, first wavelet across one hop (3 cycles), one wavelet per cycle, the ret
    assert stats.cycles == (math.ceil(N / 2) if packed else N) + 1 + 3 + 1


def test_packed_fabric_operand_must_be_16bit():
    tile = Tile("t")
    w = tile.symbol("w", "f32", 8)
    tile.local_task("main", [ins.mov(ins.FabOut(0, 8, packed=True), w.dsd())])
    prog = Program(ROW)
    prog.place(tile, ROW_RECT)
    prog.route(ROW_RECT, 0, rx=Port.RAMP, tx=Port.RAMP)
    with pytest.raises(BuildError, match="only 16-bit operands pack"):
        build(ROW, prog)


def test_wse3_tables_use_doubled_16bit_widths():
    cfg = FabricConfig.small(1, 8, "wse3")
    tile = Tile("t")
    h, f = tile.symbol("h", "f16", 8), tile.symbol("f", "f32", 8)
    tile.local_task("main", [ins.fma(h.dsd(), h.dsd(), h.dsd(), 1.0, dtype="f16"),
                             ins.fmachs(f.dsd(), f.dsd(), h.dsd(), 1.0),
                             ins.add(h.dsd(), h.dsd(), h.dsd(), dtype="cb16"),
                             ins.to_f32(f.dsd(), h.dsd(), "f16")])
    prog = Program(cfg)
    prog.place(tile, Rect(0, 0, 1, 8))
    with pytest.raises(BuildError, match="symbol 'h' of dtype f16, but add"):
        build(cfg, prog)
    tile.tasks.clear()
    tile.local_task("main", [ins.fma(h.dsd(), h.dsd(), h.dsd(), 1.0, dtype="f16"),
                             ins.fmachs(f.dsd(), f.dsd(), h.dsd(), 1.0),
                             ins.to_f32(f.dsd(), h.dsd(), "f16")])
    tables, _ = build(cfg, prog)
    assert np.asarray(tables.instr)[:3, I_SIMD].tolist() == [8, 4, 4]


def test_build_errors_name_the_operand_and_dtypes():
    tile = Tile("t")
    h, w = tile.symbol("h", "f16", 8), tile.symbol("w", "f32", 8)
    cases = [
        (ins.add(w.dsd(), h.dsd(), w.dsd()), "operand a is symbol 'h' of dtype f16"),
        (ins.add(h.dsd(), h.dsd(), w.dsd(), dtype="f16"), "operand b is symbol 'w' of dtype f32"),
        (ins.fmachs(h.dsd(), w.dsd(), h.dsd(), 1.0), "operand dst is symbol 'h'"),
        (ins.load("r", h.dsd()), "holds 16-bit f16 values"),
    ]
    for code, message in cases:
        tile.tasks.clear()
        tile.local_task("main", [code])
        prog = Program(ROW)
        prog.place(tile, ROW_RECT)
        with pytest.raises(BuildError, match=message):
            build(ROW, prog)
    with pytest.raises(ValueError, match="dtype 'f8'"):
        ins.add(w.dsd(), w.dsd(), w.dsd(), dtype="f8")


def test_sram_capacity_doubles_for_16bit():
    full = Tile("full")
    full.symbol("h", "cb16", 2 * ROW.sram_words)
    prog = Program(ROW)
    prog.place(full, ROW_RECT)
    _, info = build(ROW, prog)
    assert info.sram_used_words.max() == ROW.sram_words
    over = Tile("over")
    over.symbol("h", "bf16", 2 * ROW.sram_words - 1)
    over.symbol("g", "f16", 2)
    prog = Program(ROW)
    prog.place(over, ROW_RECT)
    with pytest.raises(BuildError, match="h: 49152 B, g: 4 B"):
        build(ROW, prog)
