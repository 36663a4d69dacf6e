"""fmod and remainder (`fabric.kernels.mathlib_mod`, `fabric.kernels.modulo`): exact (0 ulps)
where |x / y| < FMOD_QUOTIENT_MAX = 2^22, NaN from there on, torch's special values.

- Sweeps (host): `mathlib_numpy.emulate` runs the instruction lists in numpy as the fabric
  computes them, in both fma modes (the method uses no fma), over random pairs of every
  magnitude, integer pairs, whole quotients, x next to multiples of y, quotients next to
  2^22, and the special values; against np.fmod in float64 on the fp32 inputs (with the
  fabric's flush: subnormal inputs read as zeros, subnormal fmod results flushed), bit for
  bit; remainder by torch's rule on that fmod.
- Fabric (FabricConfig.small(4, 4)): by a tensor and by numbers, fmod and remainder; the
  output equals the mirror bit for bit and the cycles the model.
- Special values against eager torch on 32-element tensors (its vectorized kernels).
- 16-bit storage: the fp32 kernel on the widened inputs, rounded once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fabric import FabricConfig, Rect
from fabric.instructions import Mem
from fabric.kernels import mathlib_numpy as mn
from fabric.kernels.base import run_kernel
from fabric.kernels.mathlib_mod import (
    FMOD_QUOTIENT_MAX,
    FMOD_SCALAR_SCRATCH,
    FMOD_SCRATCH,
    fmod,
)
from fabric.kernels.modulo import build_modulo, modulo_cycles
from fabric.numerics import round_to

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 4, 4)
M, N = 16, 64
MIN_TABLE_ROWS = (128, 256)
F32 = np.finfo(np.float32)
INF, NAN = math.inf, math.nan
SPECIALS = np.array([INF, -INF, NAN, 0.0, -0.0, 1e-40, -1e-40, F32.tiny, 1e-30, -1e-30, 1.0,
                     -1.0, 2.5, -3.0, 7.0, 1e30, -1e30, float(F32.max), -float(F32.max)],
                    np.float32)
NUMBERS = (2.5, -3.0, 1.5, 7.0, 0.1, -1e-3, 1e-30, 3e-38, 1e30, -2.0**70, 6.283185307179586,
           INF, -INF, 0.0, NAN)


def _flush(v):
    v = np.asarray(v, np.float32)
    return np.where(np.abs(v) < F32.tiny, np.copysign(np.float32(0), v), v)


def reference(x, y, op="fmod"):
    """op(x, y) as the fabric computes it: flushed inputs, np.fmod in float64 (exact),
    flushed, NaN where |x / y| >= 2^22; remainder: + y where that fmod is nonzero and its
    sign differs from y's (torch's rule)."""
    x, y = np.broadcast_arrays(_flush(x), _flush(y))
    with np.errstate(all="ignore"):
        r = _flush(np.fmod(x.astype(np.float64), y.astype(np.float64)).astype(np.float32))
        if op == "remainder":
            adj = (r != 0) & (np.signbit(r) != np.signbit(y))
            r = np.where(adj, _flush((r.astype(np.float64) + y).astype(np.float32)), r)
        beyond = np.abs(x.astype(np.float64) / y.astype(np.float64)) >= FMOD_QUOTIENT_MAX
    return np.where(beyond & np.isfinite(x), np.float32(np.nan), r).astype(np.float32)


def emulate(x, y, op="fmod", fused=True):
    """The instruction list of op by the tensor y (or the number y) run in numpy."""
    x = np.asarray(x, np.float32)
    if isinstance(y, float):
        s = [Mem(f"s{i}") for i in range(FMOD_SCALAR_SCRATCH)]
        code = fmod(Mem("r"), Mem("x"), y, s, op == "remainder")
        return mn.emulate(code, {"x": x}, fused)["r"].view(np.float32)
    s = [Mem(f"s{i}") for i in range(FMOD_SCRATCH)]
    code = fmod(Mem("r"), Mem("x"), Mem("y"), s, op == "remainder")
    x, y = np.broadcast_arrays(x, np.asarray(y, np.float32))
    return mn.emulate(code, {"x": x, "y": y}, fused)["r"].view(np.float32)


def _same_bits(got, want):
    """Equal bit for bit, any NaN equal to any NaN."""
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


def _assert_exact(x, y, got, op):
    want = reference(x, y, op)
    bad = ~_same_bits(got, want)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        xs, ys = np.broadcast_arrays(np.asarray(x, np.float32), np.asarray(y, np.float32))
        raise AssertionError(f"{op}: {bad.sum()} of {bad.size} differ, first x={xs.flat[i]!r} "
                             f"y={ys.flat[i]!r}: got {got.flat[i]!r}, want {want.flat[i]!r}")


def _pairs(seed=0, n=150_000):
    """(x, y) fp32 pairs: random of every magnitude with quotients up to 2^24, integers,
    whole quotients, x next to multiples of y, quotients next to 2^22, the specials."""
    rng = np.random.default_rng(seed)
    f = np.float32
    with np.errstate(all="ignore"):
        y = (rng.standard_normal(n) * np.exp2(rng.uniform(-128, 128, n))).astype(f)
        x = (y * rng.standard_normal(n) * np.exp2(rng.uniform(-30, 24, n))).astype(f)
        xs = (rng.standard_normal(n) * np.exp2(rng.uniform(-130, 128, n))).astype(f)
        ys = (rng.standard_normal(n) * np.exp2(rng.uniform(-130, 128, n))).astype(f)
        xi = rng.integers(-10**6, 10**6, n).astype(f)
        yi = rng.integers(1, 1000, n).astype(f) * rng.choice([-1, 1], n).astype(f)
        k = rng.integers(0, 2**22, n).astype(f)
        yw = (rng.standard_normal(n) * np.exp2(rng.uniform(-60, 60, n))).astype(f)
        xw = (k * yw).astype(f)  # whole quotients where the product is exact, else near
        xn = np.nextafter(xw, np.where(rng.random(n) < 0.5, np.inf, -np.inf).astype(f))
        kb = (FMOD_QUOTIENT_MAX + rng.integers(-3, 3, n)).astype(f)
        xb = (kb * yw * (1 + rng.uniform(-1e-6, 1e-6, n))).astype(f)
    sx, sy = (np.repeat(SPECIALS, SPECIALS.size), np.tile(SPECIALS, SPECIALS.size))
    xs_all = np.concatenate([x, xs, xi, xw, xn, xb, sx, np.arange(64, dtype=f)])
    ys_all = np.concatenate([y, ys, yi, yw, yw, yw, sy, np.full(64, 7, f)])
    return xs_all, ys_all


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("op", ["fmod", "remainder"])
def test_tensor_divisor_is_exact_over_dense_sweep(op, fused):
    x, y = _pairs()
    _assert_exact(x, y, emulate(x, y, op, fused), op)


@pytest.mark.parametrize("op", ["fmod", "remainder"])
@pytest.mark.parametrize("y", NUMBERS)
def test_number_divisor_is_exact_over_dense_sweep(y, op):
    rng = np.random.default_rng(1)
    f = np.float32
    yy = f(y) if np.isfinite(y) and y != 0 else f(1.0)
    with np.errstate(all="ignore"):
        x = np.concatenate([
            (yy * rng.standard_normal(40_000) * np.exp2(rng.uniform(-30, 23, 40_000))).astype(f),
            (rng.standard_normal(20_000) * np.exp2(rng.uniform(-130, 128, 20_000))).astype(f),
            (rng.integers(-2**20, 2**20, 20_000) * yy).astype(f), SPECIALS])
    for fused in (True, False):
        _assert_exact(x, np.full(x.shape, y, f), emulate(x, float(y), op, fused), op)


def test_quotients_from_2_22_give_nan():
    y = np.float32(3.0)
    below = np.float32(3 * (2**22 - 1) + 2)  # quotient 2^22 - 1 + 2/3: exact, 2
    x = np.array([below, 3 * 2**22, 3 * 2**22 + 1, 1e38, -3 * 2**22], np.float32)
    got = emulate(x, np.full(x.shape, y), "fmod")
    assert got[0] == np.fmod(np.float64(below), 3.0) == 2
    assert np.isnan(got[1:]).all()
    assert np.isnan(emulate(x[1:], 3.0, "remainder")).all()


def test_special_values_as_torch():
    """Eager torch on 32-element tensors (its vectorized kernels), with the flush."""
    sx = np.repeat(SPECIALS, SPECIALS.size)
    sy = np.tile(SPECIALS, SPECIALS.size)
    for op in ("fmod", "remainder"):
        fn = getattr(torch, op)
        want = fn(torch.from_numpy(_flush(sx)), torch.from_numpy(_flush(sy))).numpy()
        with np.errstate(all="ignore"):
            beyond = np.abs(sx.astype(np.float64) / sy) >= FMOD_QUOTIENT_MAX
        want = np.where(beyond, np.float32(np.nan), _flush(want))
        got = emulate(sx, sy, op)
        assert _same_bits(got, want).all(), op
        for y in NUMBERS:
            w = fn(torch.from_numpy(_flush(SPECIALS)), float(_flush(np.float32(y)))).numpy()
            with np.errstate(all="ignore"):
                w = np.where(np.abs(SPECIALS.astype(np.float64) / np.float32(y))
                             >= FMOD_QUOTIENT_MAX, np.float32(np.nan), _flush(w))
            assert _same_bits(emulate(SPECIALS, float(y), op), w).all(), (op, y)
    # the signs of zeros and infinite divisors, spelled out
    assert str(emulate(np.float32([-0.0, 2.0, -4.0]), 2.0, "remainder")) == "[-0.  0. -0.]"
    assert emulate(np.float32([-1.0]), INF, "remainder")[0] == INF
    assert emulate(np.float32([2.0]), -2.0, "remainder")[0] == 0
    assert not np.signbit(emulate(np.float32([2.0]), -2.0, "remainder")[0])


@pytest.fixture(scope="module")
def fabric_inputs():
    x, y = _pairs(seed=3, n=2000)
    rng = np.random.default_rng(4)
    pick = np.concatenate([np.arange(SPECIALS.size**2) + x.size - 64 - SPECIALS.size**2,
                           rng.choice(x.size - 64 - SPECIALS.size**2,
                                      M * N - SPECIALS.size**2, replace=False)])
    return x[pick].reshape(M, N), y[pick].reshape(M, N)


@pytest.mark.parametrize("op,divisor", [("fmod", None), ("remainder", None),
                                        ("fmod", 2.5), ("remainder", -1e30)])
def test_fabric_is_the_mirror_bit_for_bit_with_exact_cycles(fabric_inputs, op, divisor):
    x, y = fabric_inputs
    k = build_modulo(CONFIG, RECT, M, N, op, divisor)
    inputs = {"x": x} if divisor is not None else {"x": x, "d": y}
    res = run_kernel(k, inputs, min_table_rows=MIN_TABLE_ROWS)
    want = emulate(x, divisor if divisor is not None else y, op)
    assert _same_bits(res.output, want).all()
    _assert_exact(x, y if divisor is None else np.float32(divisor), res.output, op)
    e = M * N // 16
    stalls = int(res.stats.bank_stall.max())
    assert res.cycles == k.model_cycles == 2 + modulo_cycles(CONFIG, op, e, divisor) + stalls


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_half_storage_is_the_rounded_fp32_kernel(dtype):
    rng = np.random.default_rng(5)
    x = round_to((rng.standard_normal((M, N)) * 40).astype(np.float32), dtype)
    y = round_to((rng.uniform(0.5, 4, (M, N)) * rng.choice([-1, 1], (M, N))).astype(
        np.float32), dtype)
    k = build_modulo(CONFIG, RECT, M, N, "remainder", None, dtype)
    res = run_kernel(k, {"x": x, "d": y}, min_table_rows=MIN_TABLE_ROWS)
    e = M * N // 16
    cvt = math.ceil(e / CONFIG.simd_width("cvt", "f16"))
    stalls = int(res.stats.bank_stall.max())
    assert res.cycles == k.model_cycles == (2 + 3 * cvt + modulo_cycles(CONFIG, "remainder", e)
                                            + stalls)
    assert np.array_equal(res.output, round_to(reference(x, y, "remainder"), dtype))


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="op must be"):
        build_modulo(CONFIG, RECT, M, N, "mod")
    with pytest.raises(ValueError, match="acc_dtype"):
        build_modulo(CONFIG, RECT, M, N, "fmod", 2.0, "bf16", "bf16")
