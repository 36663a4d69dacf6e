"""Special values (inf, NaN, overflow) as eager PyTorch gives them, on the fabric and in the
numpy mirror (`mathlib_numpy.emulate`), for the kernels fixed for them: layer norm and the
reciprocal; the other elementwise math's are in test_mathlib.py and test_unary_functions.py.

layer_norm (torch.nn.functional.layer_norm, fp32 on CPU): a row holding inf or NaN, or
whose sum of squares (x - mean)^2 overflows fp32, comes out all NaN; the
other rows match the float64 reference within `layernorm_tolerance`.
"""

import numpy as np

from fabric import FabricConfig, Rect
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels import rownorm as rn
from fabric.kernels.base import Blocks, run_kernel
from fabric.kernels.mathlib_numpy import emulate
from fabric.kernels.unary import build_unary

CONFIG = FabricConfig.small(4, 4)
F32_MAX = float(np.finfo(np.float32).max)


def test_layernorm_rows_with_specials_or_overflow_are_nan():
    rows = np.array([[np.inf, 1, 2, 3, 4], [-np.inf, 1, 2, 3, 4], [np.nan, 1, 2, 3, 4],
                     [1e30, -1e30, 1e20, 0, 5], [F32_MAX, F32_MAX, 1, 0, 2],
                     [1e19, -1e19, 0, 1, 2],  # variance 4e37, squares 1e38: finite
                     [1e18, -1e18, 0, 1, 2],  # variance 4e35, finite
                     [0.5, -1.5, 2, 3, -4]], np.float32)
    m, n = rows.shape
    gamma = np.linspace(0.5, 2, n).astype(np.float32)
    beta = np.linspace(-1, 1, n).astype(np.float32)
    rect = Rect(0, 0, 2, 2)  # rows spread over two PEs: the NaN crosses the allreduce
    out = run_kernel(rn.build_layernorm(CONFIG, rect, m, n),
                     {"x": rows, "gamma": gamma, "beta": beta}).output
    nan_rows = [0, 1, 2, 3, 4]
    assert np.isnan(out[nan_rows]).all(), out[nan_rows]
    finite = [5, 6, 7]
    ref = rn.layernorm_reference(rows[finite], gamma, beta)
    tol = rn.layernorm_tolerance(rows[finite], gamma, beta, Blocks.of(rect, len(finite), n))
    assert (np.abs(out[finite] - ref) <= tol).all(), (out[finite], ref)


# ---- reciprocal with specials (`unary` "reciprocal": runtime divisors x / y = x * (1 / y))
FLT_MIN = float(np.finfo(np.float32).tiny)
EDGES = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-40, FLT_MIN, -FLT_MIN,
                  2.0**-125, 1.0, -3.0, 2.0**100, 2.0**125, -(2.0**126), 2.0**126 * 1.5,
                  1e38, -F32_MAX, F32_MAX], np.float32)


def _flushed_reciprocal(x):
    """1 / x in float64 with subnormal x read as zero, results below FLT_MIN flushed to a
    zero of their sign, rounded to fp32 (torch.reciprocal with flushed subnormals)."""
    x = np.where(np.abs(x) < FLT_MIN, x * 0, x).astype(np.float64)
    with np.errstate(divide="ignore"):
        y = 1 / x
    return np.where(np.abs(y) < FLT_MIN, y * 0, y).astype(np.float32)


def test_reciprocal_specials_on_the_fabric():
    x = EDGES.reshape(1, -1)
    k = build_unary(CONFIG, Rect(0, 0, 1, 2), 1, x.size, "reciprocal")
    res = run_kernel(k, {"x": x})
    want = _flushed_reciprocal(x)
    signed = ~np.isnan(want)  # zeros and infinities carry the sign of x
    np.testing.assert_array_equal(np.signbit(res.output)[signed], np.signbit(want)[signed])
    np.testing.assert_allclose(res.output, want, rtol=2.0**-23, atol=0)  # 1 ulp
    assert res.cycles == k.model_cycles


def test_reciprocal_specials_dense_sweep_in_the_numpy_mirror():
    """A log-spaced sweep over every magnitude, both signs: within RECIPROCAL_REFINED_ULPS
    wherever 1 / x is normal, exact zeros, infinities and NaN elsewhere."""
    with np.errstate(over="ignore"):
        mag = np.exp2(np.linspace(-149, 128, 20001)).astype(np.float32)
    x = np.concatenate([mag, -mag, EDGES])
    y = emulate(ml.reciprocal(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(5)],
                              refined=True, specials=True), {"x": x})["y"].view(np.float32)
    want = _flushed_reciprocal(x)
    same = (y == want) | (np.isnan(y) & np.isnan(want))
    finite = np.isfinite(want) & (want != 0)
    with np.errstate(invalid="ignore"):
        err = np.abs(y.astype(np.float64) - want) / np.spacing(np.abs(want)).astype(np.float64)
    ok = same | (finite & (err <= ml.RECIPROCAL_REFINED_ULPS))
    assert ok.all(), x[~ok][:8]
    assert (np.signbit(y) == np.signbit(want))[~np.isnan(want)].all()


def test_reciprocal_specials_cycles_formula():
    code = ml.reciprocal(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(5)], refined=True,
                         specials=True)
    for n in (1, 7, 64):
        assert ml.reciprocal_cycles(CONFIG, n, True, True) == ml.sequence_cycles(CONFIG, code, n)
