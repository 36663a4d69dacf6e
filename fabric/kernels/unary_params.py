"""Elementwise functions with parameters, each one straight code sequence over every PE's
block (`unary.build_blockwise`: the same layout, 16-bit storage and cycle model as the
unary kernels):

| kernel | y | scratch | ulps | WSE-2 cycles, even e |
|---|---|---|---|---|
| elu(alpha, scale, in_scale) | ELU (below) | 5 | 2 | 38.5 e (*) |
| pow(p), p not an integer | exp(p log x) | 6 | `pow_ulps` | 77.5 e |
| pow(p), p an even integer | exp(p log abs(x)) | 5 | `pow_ulps` | 67.5 e |
| pow(p), p an odd integer | the same, negated for negative x | 6 | `pow_ulps` | 72 e |

(*) plus 1 e for each of scale and in_scale (input_scale) other than 1. ELU: y = scale x where
x > 0, else alpha scale expm1(input_scale x). It covers SELU (scale
1.0507..., alpha 1.6733...) and CELU (input_scale 1 / alpha), as PyTorch writes both.
Its expm1 is mathlib's (on x <= 0), within 2 ulps where exp(x) - 1 would lose the bits of a
small result that eager PyTorch's expm1 keeps.

pow: y = exp(t), t = p log x, so y's relative error is t's absolute error (log's LOG_ULPS
ulps of log x times |p|, t's rounding) plus exp's own: `pow_ulps` gives the bound per x,
between about 2 + 6 |t| and 2 + 12 |t| ulps (the dense sweeps measure at most 79 ulps, |t|
up to 60), so beyond fp32 validation's 11 to 22 ulps (rtol 1.3e-6) once |t| exceeds about
2 (x^p outside [0.1, 10]); the frontend takes sqrt, rsqrt, products and reciprocals for the
exponents they serve (+-0.5, integers up to 4 in magnitude). An integer p takes abs(x) and
gives odd powers the sign of x (a factor 1 - 2 signbit(x)); a non-integer p gives NaN for
x < 0, as PyTorch. Special values as eager PyTorch (0, inf, NaN in, 0 or inf out), with the
fabric's flush of subnormals; ELU gives +0 where PyTorch gives -0 (at x = -0).

Model (exact): T = 2 + sequence_cycles(code, e_max) + bank read-pair stalls, as
`build_blockwise` states it.

Example:
    >>> k = build_elu(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 8, 6, alpha=1.0)
    >>> y = run_kernel(k, {"x": x}).output                       # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Kernel, check_dtypes
from fabric.kernels.mathlib_common import F32_MAX, _sign_factor
from fabric.kernels.unary import build_blockwise, code_cycles
from fabric.program import Rect

ELU_ULPS = 2  # measured over dense sweeps (tests/kernels/test_unary_functions.py)
ELU_SCRATCH = 5  # scratch vectors of `elu_code`: x's negative part and expm1's four


def elu_code(alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0):
    """code_of(y, x, scratch) of ELU (ELU_SCRATCH vectors; y may be x): x's negative part n =
    min(x, 0) (times input_scale), its expm1 (`mathlib.expm1`, nonpositive) times alpha
    scale, plus max(x, 0) times scale (one of the two terms is zero)."""
    neg = float(np.float32(alpha) * np.float32(scale))  # PyTorch's negcoef, in fp32

    def code(y, x, s):
        n, *rest = s
        out = [ins.min_(n, x, 0.0)]
        if input_scale != 1.0:
            out.append(ins.mul(n, n, float(input_scale)))
        out += [*ml.expm1(n, n, rest[:4], nonpositive=True), ins.mul(n, n, neg),
                ins.max_(y, x, 0.0)]
        if scale != 1.0:
            out.append(ins.mul(y, y, float(scale)))
        return out + [ins.add(y, y, n)]

    return code


def pow_code(exponent: float):
    """code_of(y, x, scratch) of x ** exponent (module docstring): `pow_scratch` vectors;
    y may be x."""
    p = float(exponent)
    odd = p.is_integer() and int(p) % 2 != 0

    def code(y, x, s):
        t, extra, *logs = s if len(s) > 5 or not p.is_integer() or odd else (s[0], None, *s[1:])
        # abs(x): the sign bit cleared, then a subnormal flushed to 0 (by an fp32 add, as
        # every fp32 op reads it), so that x is read as the other kernels read it
        out = [ins.shl(t, x, 1), ins.shr(t, t, 1), ins.add(t, t, 0.0)]
        if odd:  # 1 - 2 signbit(x): the sign an odd power keeps
            out += _sign_factor(extra, x)
        elif not p.is_integer():  # NaN where x is negative and finite (not -0, not -inf)
            out += _nan_where_negative_finite(extra, x, t, logs[0])
        out += [*ml.log(t, t, logs[:4]), ins.mul(t, t, p)]
        if not p.is_integer():
            out.append(ins.add(t, t, extra))
        out += ml.exp(y, t, logs[:2])
        return out + ([ins.mul(y, y, extra)] if odd else [])

    return code


def _nan_where_negative_finite(dst, x, abs_x, s) -> list:
    """dst = NaN where x < 0 is finite, else 0 (added to t, a non-integer power's log, it
    makes those NaN as PyTorch does; -0 and -inf keep their powers of abs(x)): the product
    of two 0/1 sign bits, that of x + 0 (-0 + 0 is +0) and that of abs(x) / 2 - FLT_MAX
    (negative for every finite x), scaled past FLT_MAX to inf, then inf - inf."""
    return [ins.add(dst, x, 0.0), ins.shr(dst, dst, 31), ins.itof(dst, dst),
            ins.mul(s, abs_x, 0.5), ins.add(s, s, -F32_MAX), ins.shr(s, s, 31), ins.itof(s, s),
            ins.mul(dst, dst, s), ins.mul(dst, dst, F32_MAX), ins.mul(dst, dst, 2.0),
            ins.sub(dst, dst, dst)]


def pow_scratch(exponent: float) -> int:
    """Scratch vectors of `pow_code`: abs(x) and its log, the sign factor (odd powers) or
    the NaN term (non-integer ones), and log's four."""
    return 5 if float(exponent).is_integer() and int(exponent) % 2 == 0 else 6


def pow_ulps(x, exponent: float) -> np.ndarray:
    """The bound of x ** exponent's error in ulps of the result, per x (float64 array):
    t = p log x carries LOG_ULPS ulps of log x times |p| and half an ulp of its own
    rounding (both absolute, so relative errors of y = exp(t), in units of 2^-24, at most
    one ulp of y each), plus exp's EXP_ULPS and the final rounding; the signs' factor is
    exact."""
    x = np.abs(np.asarray(x, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_x = np.abs(np.log(x))
        t = np.abs(exponent) * log_x
        abs_t = (np.abs(exponent) * ml.LOG_ULPS * np.spacing(log_x.astype(np.float32))
                 + np.spacing(t.astype(np.float32)) / 2).astype(np.float64)
    return ml.EXP_ULPS + 1 + 2 * abs_t * 2.0**24


def elu_reference(x, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0):
    """ELU in float64 rounded to fp32 (PyTorch's formula, expm1 exact)."""
    x = np.asarray(x, np.float64)
    neg = float(np.float32(alpha) * np.float32(scale))
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.where(x > 0, x * scale, np.expm1(np.minimum(x, 0) * input_scale) * neg)
    return y.astype(np.float32)


def pow_reference(x, exponent: float):
    """x ** exponent in float64 rounded to fp32 (NaN for x < 0 and a non-integer
    exponent, as PyTorch)."""
    with np.errstate(all="ignore"):
        return np.power(np.asarray(x, np.float64), float(exponent)).astype(np.float32)


def build_elu(config: FabricConfig, rect: Rect, m: int, n: int, alpha: float = 1.0,
              scale: float = 1.0, input_scale: float = 1.0, dtype: str = "f32",
              acc_dtype: str = "f32") -> Kernel:
    """y = elu(x) of shape (m, n) as PyTorch's aten.elu(x, alpha, scale, input_scale) (SELU
    and CELU are ELUs). Inputs {"x"}; output (m, n).

    Raises ValueError for input_scale <= 0 (x's negative part must stay negative) or a
    16-bit computation (acc_dtype must be "f32")."""
    if not input_scale > 0:
        raise ValueError(f"elu: input_scale must be positive, got {input_scale!r}")
    check_dtypes("elu", dtype, acc_dtype, half_acc=False)
    code = elu_code(alpha, scale, input_scale)
    k = build_blockwise(config, rect, m, n, "elu", code, ELU_SCRATCH,
                        code_cycles(code, ELU_SCRATCH), dtype)
    k.info.update(alpha=alpha, scale=scale, input_scale=input_scale)
    return k


def build_pow(config: FabricConfig, rect: Rect, m: int, n: int, exponent: float,
              dtype: str = "f32", acc_dtype: str = "f32") -> Kernel:
    """y = x ** exponent of shape (m, n), as exp(exponent log x) (module docstring).
    Inputs {"x"}; output (m, n).

    Raises ValueError for exponent 0 (y is 1: no kernel needed) or a non-finite one, or a
    16-bit computation."""
    if not math.isfinite(exponent) or exponent == 0:
        raise ValueError(f"pow: exponent must be finite and nonzero, got {exponent!r}")
    check_dtypes("pow", dtype, acc_dtype, half_acc=False)
    code, scratch = pow_code(exponent), pow_scratch(exponent)
    k = build_blockwise(config, rect, m, n, "pow", code, scratch, code_cycles(code, scratch),
                        dtype)
    k.info.update(exponent=float(exponent))
    return k
