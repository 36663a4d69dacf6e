"""atan2 and hypot (`fabric.kernels.binary_math`, the sequences of `mathlib_binary`):
accuracy over dense 2-D sweeps, special values against eager PyTorch, the fabric against its
numpy mirror bit for bit, exact cycles, and 16-bit storage (pow, the kernel's third
function: test_pow_kernel.py).

- Sweeps (host): `mathlib_numpy.emulate` runs each instruction list as the fabric computes
  it over about 1.2 million pairs per function in both fma modes: random pairs over every
  magnitude and sign, uniform pairs near the origin, pairs near the diagonal |a| = |b| and
  across the reduction's split |a| / |b| = tan(pi / 8), tiny and huge ratios (near the
  axes). The error is |got - ref| / ulp(ref), ref numpy's float64 function rounded to fp32
  with the fabric's flush of subnormal inputs and results, and must not exceed the stated
  bound (ATAN2_ULPS, HYPOT_ULPS).
- Fabric (one 4x4 config): each function runs once on 16 PEs over 1024 pairs (the special
  grid, then a sample of the sweep); its output equals the mirror's bit for bit in one fma
  mode, so the sweep's bound and the special values hold on the fabric; cycles equal the
  model (2 + the sequence + the bank stalls the engine counts).
- Special values: every pair of SPECIALS (+-0, +-1, +-inf, NaN, +-1e-30, +-1e30, +-1e-40
  (subnormal), +-FLT_MAX, 2.5, 1e38) against torch's fp32 function (its default subnormal
  mode; torch's vectorized atan2 and hypot lose huge arguments under
  `torch.set_flush_denormal(True)`), with the fabric's flush applied to torch's inputs and
  outputs: equal (NaN to NaN, the sign of zero too) wherever an input is zero, infinite or
  NaN or torch gives 0 or inf; within the bound elsewhere.
- 16-bit storage: the output is the fp32 kernel's on the widened inputs rounded once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fabric import FabricConfig, Rect
from fabric.instructions import Mem
from fabric.kernels import (
    binary_math_cycles,
    binary_math_reference,
    build_binary_math,
    run_kernel,
)
from fabric.kernels import (
    mathlib as ml,
)
from fabric.kernels import mathlib_numpy as mn
from fabric.kernels.binary_math import FUNCTIONS
from fabric.numerics import round_to
from tests.kernels.kernel_cases import bits_equal, grid_then_sample, pair_grid, ulp_error
from tests.kernels.kernel_cases import flush_subnormals as _flush

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 4, 4)
M, N = 16, 64  # 64 pairs per PE
MIN_TABLE_ROWS = (128, 256)  # the unary kernels' engine (test_unary_functions)
F32_MAX = float(np.finfo(np.float32).max)
INF, NAN = math.inf, math.nan
SPECIALS = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e-30, -1e-30, 1e30, -1e30, 1e-40, -1e-40,
            F32_MAX, -F32_MAX, 2.5, 1e38]
BOUND = {"atan2": ml.ATAN2_ULPS, "hypot": ml.HYPOT_ULPS}  # the functions tested here
TORCH = {"atan2": torch.atan2, "hypot": torch.hypot}
SWEEP = 200_000


def _sweep() -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) pairs of the sweep, fp32, subnormals flushed (module docstring)."""
    rng = np.random.default_rng(7)

    def signs(k):
        return rng.choice([-1.0, 1.0], (2, k))

    s = signs(SWEEP)
    mags = np.exp2(rng.uniform(-126, 127.99, (2, SWEEP)))
    parts = [(s[0] * mags[0], s[1] * mags[1])]
    u = rng.uniform(-4, 4, (2, SWEEP))
    parts.append((u[0], u[1]))
    m = np.exp2(rng.uniform(-100, 100, SWEEP))
    r = rng.uniform(0.3, 1.0, SWEEP)  # across tan(pi / 8), up to the diagonal
    s = signs(SWEEP)
    parts += [(s[0] * m * r, s[1] * m), (s[0] * m, s[1] * m * r)]
    d = 1 + rng.uniform(-1e-3, 1e-3, SWEEP)  # the diagonal
    parts.append((s[0] * m * d, s[1] * m))
    t = np.exp2(rng.uniform(-60, 0, SWEEP))  # near the axes
    parts += [(s[0] * m * t, s[1] * m), (s[0] * m, s[1] * m * t)]
    a, b = (np.concatenate([p[i] for p in parts]).astype(np.float32) for i in (0, 1))
    return _flush(a), _flush(b)


def _emulate(fn, a, b, fused):
    code_of, scratch = FUNCTIONS[fn]
    code = code_of(Mem("y"), Mem("a"), Mem("b"), [Mem(f"s{i}") for i in range(scratch)])
    return mn.emulate(code, {"a": a, "b": b}, fused)["y"].view(np.float32)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("fn", list(BOUND))
def test_within_stated_ulps_over_dense_sweep(fn, fused):
    a, b = _sweep()
    got = _emulate(fn, a, b, fused)
    ref = binary_math_reference(fn, a, b)
    keep = np.isfinite(ref)  # hypot: beyond FLT_MAX, inf (the special values)
    assert keep.mean() > 0.99
    err = ulp_error(got[keep], ref[keep])
    worst = int(np.argmax(err))
    assert err.max() <= BOUND[fn], (f"{fn}: {err[worst]:.1f} ulps at "
                                    f"({a[keep][worst]!r}, {b[keep][worst]!r})")
    assert (got[~keep] == INF).all()


# ---- the fabric ---------------------------------------------------------------------------
def _grid():
    return pair_grid(SPECIALS, SPECIALS)


def _points():
    """The kernel's 1024 pairs: the special grid, then an even sample of the sweep."""
    return grid_then_sample(_grid(), _sweep(), M * N)


@pytest.fixture(scope="module")
def fabric_runs():
    """fn -> (a, b, fp32 kernel output, cycles, model, the busiest PE's bank stalls), each
    run on first use."""
    cache = {}

    def get(fn):
        if fn not in cache:
            a, b = _points()
            k = build_binary_math(CONFIG, RECT, M, N, fn)
            res = run_kernel(k, {"a": a.reshape(M, N), "b": b.reshape(M, N)},
                             min_table_rows=MIN_TABLE_ROWS)
            cache[fn] = (a, b, res.output.reshape(-1), res.cycles, k.model_cycles,
                         int(res.stats.bank_stall.max()))
        return cache[fn]

    return get


@pytest.mark.parametrize("fn", list(BOUND))
def test_fabric_is_the_mirror_bit_for_bit_with_exact_cycles(fabric_runs, fn):
    a, b, y, cycles, model, stalls = fabric_runs(fn)
    assert any(bits_equal(y, _emulate(fn, a, b, fused)) for fused in (True, False)), fn
    e = M * N // 16
    assert cycles == model == 2 + binary_math_cycles(CONFIG, fn, e) + stalls


@pytest.mark.parametrize("fn", list(BOUND))
def test_special_values_as_torch(fabric_runs, fn):
    a, b, y, *_ = fabric_runs(fn)
    ga, gb = _grid()
    got = y[:ga.size]
    want = _flush(TORCH[fn](torch.from_numpy(_flush(ga)), torch.from_numpy(_flush(gb))).numpy())
    special = ~np.isfinite(ga) | ~np.isfinite(gb) | (_flush(ga) == 0) | (_flush(gb) == 0)
    for i in range(ga.size):
        g, w = got[i], want[i]
        case = (fn, ga[i], gb[i], g, w)
        if np.isnan(w):
            assert np.isnan(g), case
        elif special[i] or np.isinf(w) or w == 0:
            assert g == w and np.signbit(g) == np.signbit(w), case
        else:  # torch's value is itself within an ulp of the exact one
            assert ulp_error(np.float32(g), np.float32(w)) <= BOUND[fn] + 1, case


def test_special_values_of_note():
    """The edges IEEE and torch define: the signed zeros and pi of atan2, the infinities'
    multiples of pi / 4, hypot(inf, NaN) = inf."""
    pi, pio2, pio4 = (np.float32(v) for v in (math.pi, math.pi / 2, math.pi / 4))
    cases = {"atan2": [((0.0, 0.0), 0.0), ((-0.0, 0.0), -0.0), ((0.0, -0.0), pi),
                       ((-0.0, -0.0), -pi), ((1.0, 0.0), pio2), ((-1.0, -0.0), -pio2),
                       ((INF, INF), pio4), ((-INF, -INF), np.float32(-3 * math.pi / 4)),
                       ((1e30, -INF), pi), ((-1e30, INF), -0.0), ((NAN, INF), NAN)],
             "hypot": [((INF, NAN), INF), ((NAN, -INF), INF), ((NAN, 1.0), NAN),
                       ((-0.0, -0.0), 0.0), ((3e38, 3e38), INF), ((3.0, -4.0), 5.0),
                       ((1e-40, 0.0), 0.0)]}
    for fn, pairs in cases.items():
        a, b = (np.array([p[0][i] for p in pairs], np.float32) for i in (0, 1))
        want = np.array([p[1] for p in pairs], np.float32)
        for fused in (True, False):
            assert bits_equal(_emulate(fn, a, b, fused), want), fn


def test_cycle_formulas():
    """WSE-2 cycles per element (even e), as docs and `binary_math`'s table state them;
    the stage estimate of the frontend (rounded up)."""
    config = FabricConfig.small(1, 1)
    assert binary_math_cycles(config, "atan2", 1000) == 66.5 * 1000
    assert binary_math_cycles(config, "hypot", 1000) == 51.5 * 1000


def test_bad_arguments():
    with pytest.raises(ValueError, match="fn must be one of"):
        build_binary_math(CONFIG, RECT, 4, 4, "fmod")
    with pytest.raises(ValueError, match="acc_dtype"):
        build_binary_math(CONFIG, RECT, 4, 4, "atan2", dtype="f16", acc_dtype="f16")


# ---- 16-bit storage -----------------------------------------------------------------------
@pytest.mark.parametrize(("fn", "dtype"), [("atan2", "f16"), ("hypot", "bf16")])
def test_half_storage_is_the_rounded_fp32_kernel(fn, dtype):
    rng = np.random.default_rng(11)
    a, b = (round_to((3 * rng.standard_normal((M, N))).astype(np.float32), dtype)
            for _ in range(2))
    a[0, :4], b[0, :4] = [0.0, -0.0, INF, 1.0], [-0.0, -0.0, INF, NAN]
    k = build_binary_math(CONFIG, RECT, M, N, fn, dtype=dtype)
    assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, "f32")
    e = M * N // 16
    cvt = math.ceil(e / CONFIG.simd_width("cvt", "f16"))
    res = run_kernel(k, {"a": a, "b": b}, min_table_rows=MIN_TABLE_ROWS)
    stalls = int(res.stats.bank_stall.max())
    assert res.cycles == k.model_cycles == 2 + 3 * cvt + binary_math_cycles(CONFIG, fn, e) \
        + stalls
    f32 = [_emulate(fn, a.reshape(-1), b.reshape(-1), fused).reshape(M, N)
           for fused in (True, False)]
    assert any(bits_equal(res.output, round_to(y, dtype)) for y in f32)
