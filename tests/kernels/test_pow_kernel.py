"""pow(a, b) = a ** b of two tensors (`fabric.kernels.binary_math` fn "pow", the sequence of
`mathlib_pow`): accuracy over dense 2-D sweeps, special values against eager PyTorch, the
fabric against its numpy mirror bit for bit, exact cycles, and 16-bit storage.

- Sweeps (host): `mathlib_numpy.emulate` runs the instruction list as the fabric computes
  it over 600,000 pairs in both fma modes: bases of every magnitude and sign with
  exponents that spread u = b log|a| over the whole range [-89, 89] (a third of them
  integers: negative bases' odd and even powers), bases near 1 with large exponents, bases
  within 2^-20 of 1 with huge ones, the common range (|a| <= 4, |b| <= 8), integer
  exponents of negative bases, and tiny exponents. The error is |got - ref| / ulp(ref),
  ref numpy's float64 power rounded to fp32 with the fabric's flush of subnormal inputs
  (`binary_math_reference`); it must not exceed `pow_ulps_bound(a, b)` = min(1.5 + |u| /
  32, POW_ULPS = 3) ulps wherever the result is at least EXP_TINY (below, it is exactly 0,
  as exp's; beyond FLT_MAX, inf): 1 ulp for |u| < 16, 2 for |u| < 48. Powers of two by
  integers are exact.
- Fabric (one 4x4 config): the kernel runs once on 16 PEs over 1024 pairs (the special
  grid, then a sample of the sweep); its output equals the mirror's bit for bit in one fma
  mode, so the sweep's bound and the special values hold on the fabric; cycles equal the
  model (2 + the sequence + the bank stalls the engine counts), 124 per element on WSE-2.
- Special values: every pair of BASES x EXPONENTS (zeros, +-1, infinities, NaN, odd, even
  and fractional powers, 2^24 + 2 and 2^23 + 1, subnormals, huge and tiny numbers) against
  torch.pow in fp32, with the fabric's flush applied to torch's inputs and outputs: equal
  (NaN to NaN, the sign of zero too) wherever an input is zero, infinite or NaN or torch
  gives 0 or inf; within the bound plus torch's own ulp elsewhere.
- 16-bit storage: the output is the fp32 kernel's on the widened inputs rounded once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fabric import FabricConfig, Rect
from fabric.instructions import Mem
from fabric.kernels import binary_math_cycles, binary_math_reference, build_binary_math
from fabric.kernels import mathlib as ml
from fabric.kernels import mathlib_numpy as mn
from fabric.kernels.base import run_kernel
from fabric.numerics import round_to
from tests.kernels.kernel_cases import bits_equal, grid_then_sample, pair_grid, ulp_error
from tests.kernels.kernel_cases import flush_subnormals as _flush

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 4, 4)
M, N = 16, 64  # 64 pairs per PE
MIN_TABLE_ROWS = (128, 256)  # the unary kernels' engine (test_unary_functions)
F32_MAX = float(np.finfo(np.float32).max)
INF, NAN = math.inf, math.nan
BASES = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1e-30, -1e-30,
         1e30, -1e30, 1e-40, -1e-40, F32_MAX, -F32_MAX, 1.0000001, 0.99999994, -1.0000001]
EXPONENTS = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
             7.0, 0.1, 1e-40, -1e-40, 1e-30, 1.5e-38, 1e30, -1e30, 1e38, 2.0**24, 2.0**24 + 2,
             2.0**23 + 1, -(2.0**23 + 1), 2.0**23 - 0.5]
PART = 100_000  # pairs per part of the sweep


def _signs(rng, k):
    return rng.choice([-1.0, 1.0], k)


def _exponents_for(rng, a, u_max=89.0):
    """Exponents that put u = b log|a| uniformly in [-u_max, u_max]; a third rounded to
    integers."""
    with np.errstate(divide="ignore", invalid="ignore"):
        b = rng.uniform(-u_max, u_max, a.size) / np.log(np.abs(a))
    return np.where(rng.random(a.size) < 1 / 3, np.round(b), b)


def _sweep() -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) pairs of the sweep, fp32, subnormals flushed (module docstring)."""
    rng = np.random.default_rng(7)
    a = _signs(rng, PART) * np.exp2(rng.uniform(-126, 128, PART))
    parts = [(a, _exponents_for(rng, a))]
    a = 1 + rng.uniform(-0.45, 0.45, PART)  # 2 atanh(s) over its whole range
    parts.append((a, _exponents_for(rng, a)))
    a = 1 + rng.uniform(-2.0**-20, 2.0**-20, PART)  # the smallest logs, the largest b
    parts.append((a, _exponents_for(rng, a)))
    b = rng.uniform(-8, 8, PART)
    parts.append((rng.uniform(-4, 4, PART), np.where(rng.random(PART) < 0.5, np.round(b), b)))
    a = _signs(rng, PART) * rng.uniform(0.5, 2, PART)  # odd and even powers of both signs
    parts.append((a, rng.integers(-120, 121, PART).astype(np.float64)))
    a = _signs(rng, PART) * np.exp2(rng.uniform(-126, 128, PART))
    parts.append((a, _signs(rng, PART) * np.exp2(rng.uniform(-126, 0, PART))))
    a, b = (np.concatenate([p[i] for p in parts]).astype(np.float32) for i in (0, 1))
    b = np.where(np.isfinite(b), b, 0).astype(np.float32)  # log|a| = 0: any b
    return _flush(a), _flush(b)


def _emulate(a, b, fused, dst="y"):
    code = ml.pow_(Mem(dst), Mem("a"), Mem("b"), [Mem(f"s{i}") for i in range(ml.POW_SCRATCH)])
    return mn.emulate(code, {"a": a, "b": b}, fused)[dst].view(np.float32)


def _exact(a, b):
    with np.errstate(all="ignore"):
        return np.power(_flush(a).astype(np.float64), _flush(b).astype(np.float64))


@pytest.fixture(scope="module")
def sweep_runs():
    """fused -> (a, b, the mirror's output, the fp32-rounded reference, |exact|), each
    computed on first use."""
    cache = {}

    def get(fused):
        if fused not in cache:
            a, b = _sweep()
            cache[fused] = (a, b, _emulate(a, b, fused), binary_math_reference("pow", a, b),
                            np.abs(_exact(a, b)))
        return cache[fused]

    return get


@pytest.mark.parametrize("fused", [False, True])
def test_within_stated_ulps_over_dense_sweep(sweep_runs, fused):
    a, b, got, ref, exact = sweep_runs(fused)
    bounded = (exact >= ml.EXP_TINY * (1 + 1e-6)) & (exact <= F32_MAX * (1 - 1e-5))
    assert bounded.mean() > 0.8
    err = ulp_error(got[bounded], ref[bounded])
    excess = err - ml.pow_ulps_bound(a[bounded], b[bounded])
    worst = int(np.argmax(excess))
    assert excess.max() <= 0, (f"{err[worst]:.2f} ulps at ({a[bounded][worst]!r}, "
                               f"{b[bounded][worst]!r})")
    flushed = exact < ml.EXP_TINY * (1 - 1e-6)
    assert (got[flushed] == 0).all()  # below EXP_TINY: exactly 0, as exp
    beyond = np.isinf(exact) | (exact > F32_MAX * (1 + 1e-5))
    assert np.isinf(got[beyond]).all()
    assert (np.isnan(got) == np.isnan(exact)).all()


def test_measured_error_grows_slowly_with_u(sweep_runs):
    """The bound's shape: an ulp for |u| < 16 (correctly rounded or the neighbour), two for
    |u| < 48."""
    a, b, got, ref, exact = sweep_runs(True)
    with np.errstate(all="ignore"):
        u = np.abs(b.astype(np.float64) * np.log(np.abs(a.astype(np.float64))))
    normal = (exact >= 2 * ml.EXP_TINY) & np.isfinite(ref)
    err = ulp_error(got, ref)
    assert err[normal & (u < 16)].max() <= 1
    assert err[normal & (u < 48)].max() <= 2


@pytest.mark.parametrize("fused", [False, True])
def test_powers_of_two_by_integers_are_exact(fused):
    """2^k exactly for every integer power k of 2, +-0.5, 4, 8 down to 2^-125 (below
    EXP_TINY = 2^-125.5: 0) and up to inf."""
    n = np.arange(-130.0, 131.0, dtype=np.float32)
    for base in (2.0, -2.0, 0.5, -0.5, 4.0, 8.0):
        a = np.full(n.shape, base, np.float32)
        with np.errstate(over="ignore"):
            want = np.power(np.float64(base), n)
            want = np.where(np.abs(want) < ml.EXP_TINY, want * 0, want).astype(np.float32)
        assert bits_equal(_emulate(a, n, fused), want), base


def test_dst_may_be_the_base_or_the_exponent():
    a, b = (v[::50] for v in _sweep())
    for fused in (True, False):
        y = _emulate(a, b, fused)
        assert bits_equal(_emulate(a, b, fused, dst="a"), y)
        assert bits_equal(_emulate(a, b, fused, dst="b"), y)


# ---- the fabric ---------------------------------------------------------------------------
def _grid():
    return pair_grid(BASES, EXPONENTS)


def _points():
    """The kernel's 1024 pairs: the special grid, then an even sample of the sweep."""
    return grid_then_sample(_grid(), _sweep(), M * N)


@pytest.fixture(scope="module")
def fabric_run():
    """(a, b, fp32 kernel output, cycles, model, the busiest PE's bank stalls)."""
    a, b = _points()
    k = build_binary_math(CONFIG, RECT, M, N, "pow")
    res = run_kernel(k, {"a": a.reshape(M, N), "b": b.reshape(M, N)},
                     min_table_rows=MIN_TABLE_ROWS)
    return (a, b, res.output.reshape(-1), res.cycles, k.model_cycles,
            int(res.stats.bank_stall.max()))


def test_fabric_is_the_mirror_bit_for_bit_with_exact_cycles(fabric_run):
    a, b, y, cycles, model, stalls = fabric_run
    assert any(bits_equal(y, _emulate(a, b, fused)) for fused in (True, False))
    e = M * N // 16
    assert cycles == model == 2 + binary_math_cycles(CONFIG, "pow", e) + stalls


def test_special_values_as_torch(fabric_run):
    a, b, y, *_ = fabric_run
    ga, gb = _grid()
    got = y[:ga.size]
    fa, fb = _flush(ga), _flush(gb)
    want = _flush(torch.pow(torch.from_numpy(fa), torch.from_numpy(fb)).numpy())
    special = ~np.isfinite(fa) | ~np.isfinite(fb) | (fa == 0) | (fb == 0)
    bound = ml.pow_ulps_bound(fa, fb) + 1  # and torch's own ulp
    for i in range(ga.size):
        g, w = got[i], want[i]
        case = (ga[i], gb[i], g, w)
        if np.isnan(w):
            assert np.isnan(g), case
        elif special[i] or np.isinf(w) or w == 0:
            assert g == w and np.signbit(g) == np.signbit(w), case
        elif abs(w) < ml.EXP_TINY:  # flushed, as exp
            assert g == 0 and np.signbit(g) == np.signbit(w), case
        else:
            assert ulp_error(np.float32(g), np.float32(w)) <= bound[i], case


def test_special_values_of_note():
    """C99's edges: x ** 0 = 1 ** y = 1 (NaN too), (-1) ** inf = 1, the signs of zero and
    infinity by the parity of b, NaN for a negative base and a fractional exponent."""
    cases = [((NAN, 0.0), 1.0), ((1.0, NAN), 1.0), ((-1.0, INF), 1.0), ((-1.0, NAN), NAN),
             ((-0.0, -3.0), -INF), ((-0.0, -2.0), INF), ((-0.0, 3.0), -0.0), ((-0.0, 2.5), 0.0),
             ((-INF, 3.0), -INF), ((-INF, -3.0), -0.0), ((-INF, 2.5), INF), ((0.5, INF), 0.0),
             ((0.5, -INF), INF), ((2.0, -INF), 0.0), ((-8.0, 1.0 / 3), NAN),
             ((-2.0, 2.0**24 + 2), INF), ((-1.0, 2.0**23 + 1), -1.0), ((3.0, 4.0), 81.0),
             ((1e-40, -1.0), INF), ((-1e-40, 3.0), -0.0)]
    a, b = (np.array([c[0][i] for c in cases], np.float32) for i in (0, 1))
    want = np.array([c[1] for c in cases], np.float32)
    for fused in (True, False):
        assert bits_equal(_emulate(a, b, fused), want)


def test_cycle_formula():
    """WSE-2 cycles per element (even e), as `binary_math`'s and `mathlib`'s tables state."""
    assert binary_math_cycles(FabricConfig.small(1, 1), "pow", 1000) == 124 * 1000


# ---- 16-bit storage -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_storage_is_the_rounded_fp32_kernel(dtype):
    rng = np.random.default_rng(11)
    a = round_to(rng.uniform(-4, 4, (M, N)).astype(np.float32), dtype)
    b = round_to(np.round(rng.uniform(-6, 6, (M, N)) * 2).astype(np.float32) / 2, dtype)
    a[0, :4], b[0, :4] = [0.0, -2.0, INF, 1.0], [-1.0, 3.0, -0.5, NAN]
    k = build_binary_math(CONFIG, RECT, M, N, "pow", dtype=dtype)
    assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, "f32")
    e = M * N // 16
    cvt = math.ceil(e / CONFIG.simd_width("cvt", "f16"))
    res = run_kernel(k, {"a": a, "b": b}, min_table_rows=MIN_TABLE_ROWS)
    stalls = int(res.stats.bank_stall.max())
    assert res.cycles == k.model_cycles == 2 + 3 * cvt + binary_math_cycles(CONFIG, "pow", e) \
        + stalls
    f32 = [_emulate(a.reshape(-1), b.reshape(-1), fused).reshape(M, N)
           for fused in (True, False)]
    assert any(bits_equal(res.output, round_to(y, dtype)) for y in f32)
