"""mathlib on the fabric: accuracy in fp32 ulps against numpy, edge values, exact cycles.

Each function runs once on all 16 PEs of a 4x4 fabric over N = 272 points per PE: a dense
4096-point sweep of its useful range plus edge values. The reference is numpy's float64
result rounded to fp32; the error of a point is |got - ref| / ulp(ref) (np.spacing), and the
maximum over the sweep must not exceed the bound stated in `fabric.kernels.mathlib`. The
engine may fuse fma (one rounding) or not; the bounds hold for both.

A local task of synchronous ops takes 1 (start) + sum ceil(N / w) + 1 (implicit ret) cycles;
the formulas `*_cycles` must give exactly that. The two programs below (exp, rsqrt and
reciprocal as three tasks of one tile; tanh and the refined reciprocal as two) share one
table bucket, so the module compiles the engine once.
"""

import math

import numpy as np
import pytest

from fabric import FabricConfig, Program, Rect, Simulator, Tile
from fabric.banks import read_pair_stalls
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels import mathlib_numpy as mn

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 4, 4)
N = 272  # points per PE: 16 * 272 = 4352 = 4096 sweep + 256 slots for edge values
SWEEP = 4096
F32 = np.finfo(np.float32)
TINY, HUGE = float(F32.tiny), float(F32.max)
SMALL = ("exp", "rsqrt", "reciprocal")  # the tasks of one program
PROGRAMS = {**{name: SMALL for name in SMALL}, "tanh": ("tanh", "refined"),
            "refined": ("tanh", "refined")}
GENERATORS = {"exp": ml.exp, "tanh": ml.tanh, "rsqrt": ml.rsqrt, "reciprocal": ml.reciprocal,
              "refined": lambda d, s, t: ml.reciprocal(d, s, t, refined=True)}
BOUND = {"exp": ml.EXP_ULPS, "tanh": ml.TANH_ULPS, "rsqrt": ml.RSQRT_ULPS,
         "reciprocal": ml.RECIPROCAL_ULPS, "refined": ml.RECIPROCAL_REFINED_ULPS}
CYCLES = {"exp": ml.exp_cycles, "tanh": ml.tanh_cycles, "rsqrt": ml.rsqrt_cycles,
          "reciprocal": ml.reciprocal_cycles,
          "refined": lambda c, n: ml.reciprocal_cycles(c, n, refined=True)}
REFERENCE = {"exp": np.exp, "tanh": np.tanh, "rsqrt": lambda v: 1 / np.sqrt(v),
             "reciprocal": lambda v: 1 / v, "refined": lambda v: 1 / v}
# 32-bit integer ops and fp32 max/min run one element per cycle on WSE-2 (docs/engine.md,
# "Public facts"); fp32 add/sub/mov two.
PER_ELEMENT_WSE2 = {"exp": 16, "tanh": 32, "rsqrt": 14, "reciprocal": 8.5, "refined": 9}


def _log2_sweep(lo, hi, n):
    return np.exp2(np.linspace(lo, hi, n))


# the useful range of each function, 4096 points
SWEEPS = {
    # exp(-86.98) is just above EXP_TINY, below which exp flushes to 0
    "exp": np.concatenate([np.linspace(-86.98, ml.EXP_HI, 3072), np.linspace(-1, 1, 1024)]),
    "tanh": np.concatenate([np.linspace(-10, 10, 2048), _log2_sweep(-100, 3.4, 1024),
                            -_log2_sweep(-100, 3.4, 1024)]),
    "rsqrt": np.concatenate([_log2_sweep(-126, 127.9, 3072), np.linspace(0.25, 4, 1024)]),
    "reciprocal": np.concatenate([_log2_sweep(-126, 125, 1536), -_log2_sweep(-126, 125, 1536),
                                  np.linspace(0.25, 4, 512), np.linspace(-4, -0.25, 512)]),
    "refined": np.concatenate([_log2_sweep(-126, 100, 1536), -_log2_sweep(-126, 100, 1536),
                               np.linspace(0.25, 4, 512), np.linspace(-4, -0.25, 512)]),
}
# edge values inside the accurate domain: checked against the same ulp bound
EDGES_ACCURATE = {
    "exp": [0.0, -0.0, 1e-30, -1e-30, TINY, -TINY, 1e-7, -1e-7, -86.98, ml.EXP_HI],
    "tanh": [0.0, -0.0, 1e-30, -1e-30, TINY, -TINY, 1e-7, -1e-7, 9.0, -9.0, 100.0, -100.0,
             HUGE, -HUGE],
    "rsqrt": [TINY, HUGE, 1.0, 4.0, 0.25],
    "reciprocal": [TINY, -TINY, 1.0, -1.0, 2.0**125, -(2.0**125), 3.0, -3.0],
    "refined": [TINY, -TINY, 1.0, -1.0, 2.0**100, -(2.0**100), 3.0, -3.0],
}
# documented behaviour outside it: (input, expected output); NaN means NaN
EDGES_DOCUMENTED = {
    # overflow to inf, underflow to 0 (as torch, with the fabric's flush of subnormals)
    "exp": [(88.73, np.inf), (100.0, np.inf), (np.inf, np.inf), (-87.0, 0.0), (-100.0, 0.0),
            (-np.inf, 0.0), (np.nan, np.nan)],
    "tanh": [(np.inf, 1.0), (-np.inf, -1.0), (np.nan, np.nan)],
    "rsqrt": [(0.0, "rsqrt0"), (np.nan, np.nan)],
    "reciprocal": [(0.0, np.nan), (-0.0, np.nan), (np.nan, np.nan)],
    "refined": [(0.0, np.nan), (np.nan, np.nan)],
}


def _inputs(name):
    documented = [x for x, _ in EDGES_DOCUMENTED[name]]
    points = np.concatenate([SWEEPS[name], EDGES_ACCURATE[name], documented]).astype(np.float32)
    assert SWEEPS[name].size == SWEEP and points.size <= 16 * N
    padded = np.ones(16 * N, np.float32)  # spare slots hold 1.0, inside every domain
    padded[:points.size] = points
    return padded


def _program(tasks):
    tile = Tile("math")
    x, y = tile.symbol("x", "f32", N), tile.symbol("y", "f32", N)
    scratch = [tile.symbol(f"s{i}", "f32", N).dsd() for i in range(4)]
    for name in tasks:
        tile.local_task(name, GENERATORS[name](y.dsd(), x.dsd(), scratch))
    prog = Program(CONFIG)
    prog.place(tile, RECT)
    return prog, tile


@pytest.fixture(scope="module")
def results():
    """name -> (inputs, outputs, the bank read-pair waits counted without a run (every PE
    alike), kernel cycles), one run per function, run on first use."""
    cache = {}

    def get(name):
        if name not in cache:
            prog, tile = _program(PROGRAMS[name])
            sim = Simulator(CONFIG, prog)
            xs = _inputs(name)
            sim.memcpy_h2d("x", xs.reshape(4, 4, N))
            sim.launch(name)
            stats = sim.run(max_cycles=50_000)
            stalls = read_pair_stalls(CONFIG, tile, tile.tasks[name].code)
            np.testing.assert_array_equal(stats.bank_stall, stalls)
            cache[name] = (xs, sim.memcpy_d2h("y").reshape(-1), stalls, stats.cycles)
        return cache[name]

    return get


def ulp_error(got, x, name):
    with np.errstate(all="ignore"):
        ref = REFERENCE[name](x.astype(np.float64)).astype(np.float32)
    ulp = np.spacing(np.maximum(np.abs(ref), np.float32(TINY))).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref.astype(np.float64)) / ulp


@pytest.mark.parametrize("name", sorted(BOUND))
def test_accuracy_within_stated_ulps(results, name):
    xs, ys, *_ = results(name)
    n = SWEEP + len(EDGES_ACCURATE[name])
    err = ulp_error(ys[:n], xs[:n], name)
    worst = int(np.argmax(err))
    assert err.max() <= BOUND[name], (f"{name}: {err.max():.2f} ulps at x={xs[worst]!r} "
                                      f"(got {ys[worst]!r})")
    # signed zeros are exact
    for v in (0.0, -0.0):
        idx = [i for i in range(SWEEP, n) if xs[i] == 0 and math.copysign(1, xs[i]) ==
               math.copysign(1, v)]
        for i in idx:
            expect = {"exp": 1.0, "tanh": v}[name]
            assert ys[i] == expect and math.copysign(1, ys[i]) == math.copysign(1, expect)


@pytest.mark.parametrize("name", sorted(BOUND))
def test_documented_edge_values(results, name):
    xs, ys, *_ = results(name)
    start = SWEEP + len(EDGES_ACCURATE[name])
    saturated = {"rsqrt0": np.float32(4.459e19)}
    for i, (x, expect) in enumerate(EDGES_DOCUMENTED[name]):
        got = ys[start + i]
        if isinstance(expect, str):
            # a finite stand-in for inf or 0, as documented (to 4 significant digits)
            ref = saturated[expect]
            assert abs(float(got) / float(ref) - 1) < 1e-3, (name, x, got)
        elif np.isnan(expect):
            assert np.isnan(got), (name, x, got)
        else:
            assert got == expect, (name, x, got)


@pytest.mark.parametrize("name", sorted(BOUND))
def test_fabric_equals_numpy_mirror(results, name):
    """`mathlib_numpy.emulate` runs the instruction list in numpy as the fabric computes it: the
    fabric's output equals it bit for bit (NaN where NaN) in one of the two fma modes."""
    xs, ys, *_ = results(name)
    code = GENERATORS[name](Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(4)])
    nan = np.isnan(ys)
    for fused in (True, False):
        mirror = mn.emulate(code, {"x": xs}, fused)["y"].view(np.float32)
        if np.array_equal(nan, np.isnan(mirror)) and np.array_equal(
                ys[~nan].view(np.uint32), mirror[~nan].view(np.uint32)):
            return
    pytest.fail(f"{name}: the fabric differs from mathlib.emulate in both fma modes")


def test_emulate_mirrors_log_reference():
    """The generic mirror and log's step-by-step reference agree on random bit patterns."""
    x = np.random.default_rng(1).integers(0, 2**32, 20_000, dtype=np.uint64)
    x = x.astype(np.uint32).view(np.float32)
    code = ml.log(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(4)])
    for fused in (False, True):
        got = mn.emulate(code, {"x": x}, fused)["y"].view(np.float32)
        ref = mn.log_reference(x, fused)
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        assert np.array_equal(got[~np.isnan(got)].view(np.uint32),
                              ref[~np.isnan(ref)].view(np.uint32))


@pytest.mark.parametrize("name", sorted(BOUND))
def test_cycles_equal_formula(results, name):
    *_, stalls, cycles = results(name)
    assert cycles == CYCLES[name](CONFIG, N) + stalls + 2


@pytest.mark.parametrize("generation", ["wse2", "wse3"])
@pytest.mark.parametrize("name", sorted(BOUND))
def test_formula_matches_instruction_list(name, generation):
    """The stated formula is the sum of ceil(n / w) over the generated ops, on both SIMD
    tables, for even and odd n."""
    config = FabricConfig.small(1, 1, generation=generation)
    code = GENERATORS[name](Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(4)])
    for n in (1, 2, 7, 100, 4097):
        assert CYCLES[name](config, n) == ml.sequence_cycles(config, code, n)
    if generation == "wse2":
        assert CYCLES[name](config, 1000) == PER_ELEMENT_WSE2[name] * 1000


def test_exp_without_upper_clamp_drops_one_op():
    """hi=None (softmax's x - max(x) <= 0): the older sequence, one op less; below EXP_LO
    (and at -inf) it saturates at exp(EXP_LO), just above FLT_MIN (numpy mirror)."""
    config = FabricConfig.small(1, 1)
    code = ml.exp(Mem("y"), Mem("x"), [Mem("s0"), Mem("s1")], hi=None)
    assert len(code) == 18
    for n in (1, 7, 100):
        assert ml.exp_cycles(config, n, upper_clamp=False) == ml.sequence_cycles(config, code, n)
    x = np.array([-np.inf, -100.0, ml.EXP_LO, -1.0, 0.0], np.float32)
    y = mn.emulate(code, {"x": x})["y"].view(np.float32)
    floor = np.float32(np.exp(np.float64(ml.EXP_LO)))
    assert abs(y[0] / floor - 1) < 1e-6 and y[0] == y[1] == y[2] and y[4] == 1.0
    assert abs(y[3] / np.exp(-1.0) - 1) < 2**-23


def test_bad_operands_are_named():
    x, y, s = Mem("x", length=8), Mem("y", length=8), Mem("s", length=8)
    with pytest.raises(ValueError, match="needs 4 scratch"):
        ml.tanh(y, x, [s])
    with pytest.raises(ValueError, match="dst must be apart from src"):
        ml.rsqrt(x, x, [s])
    with pytest.raises(ValueError, match="may overlap"):
        ml.exp(y, x, [s, Mem("s", offset=4, length=8)])
    # disjoint pieces of one scratch symbol are fine
    ml.exp(y, x, [Mem("s", length=8), Mem("s", offset=8, length=8)])
    with pytest.raises(ValueError, match="hi <= 89"):
        ml.exp(y, x, [s, Mem("t", length=8)], hi=100.0)
