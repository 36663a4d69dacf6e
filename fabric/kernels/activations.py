"""Elementwise gelu, in both of PyTorch's forms, over a 2D tensor distributed in blocks on a
rectangle (`base.Blocks`; the kernel is `unary.build_blockwise` around `gelu_code` or
`gelu_erf_code`).

approximate="tanh": gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
computed through the identity 0.5 (1 + tanh(u)) = sigmoid(2u):

    gelu(x) = x sigmoid(z),  z = 2u = x (A + B x^2),  A = 2 sqrt(2/pi), B = 0.044715 A

with `mathlib.sigmoid`, which does not cancel for negative x (1 + tanh(u) does).

approximate="none" (exact, nn.GELU's default): gelu(x) = x Phi(x), Phi the standard normal
CDF, computed as

    gelu(x) = (x - min(x, 0)) - b Phi(-b),  b = min(|x|, GAUSS_MAX)

(for x >= 0: x (1 - Phi(-x)); for x < 0: x Phi(x) = -|x| Phi(-|x|)), with the tail
b Phi(-b) from `mathlib.gauss_tail` (exp(-b^2 / 2) times a polynomial in 1 / (1 + K b)),
which keeps its relative accuracy where 1 + erf(x / sqrt 2) cancels. x - min(x, 0) is
relu(x), except NaN for -inf.

Cycle model (exact): every PE starts its task in cycle 0, runs one straight list of
synchronous ops over its e = mb * nb elements, and returns:

    T = 2 + gelu_cycles(config, e_max, approximate) + stalls(e_max)
    tanh: 3 c(mul) + c(fma) + sigmoid_cycles + c(mul)           = 30.5 e on WSE-2 (even e)
    none: 2 c(shl/shr) + 2 c(min) + 2 c(sub) + gauss_tail_cycles(times_b)
                                                                 = 47.5 e on WSE-2 (even e)
(c(op) = ceil(e / w_op); stalls: the element groups that wait under the bank read-pair
rule, `fabric.banks.read_pair_stalls` of the code with the tile's bank-aware layout).

Numerics (measured over dense sweeps, tests/kernels/test_activations.py):
- tanh: within GELU_TANH_ULPS + GELU_Z_ULPS |z| (1 - sigmoid(z)) ulps of the float64 value
  x / (1 + exp(-z)) (`gelu_tolerance`): z's three roundings are amplified by exp, as the
  function's own condition number is (about 10 at x = -3); where sigmoid(z) < FLT_MIN
  (x below about -9.9) the result is -0 (PyTorch's fp32 tanh form gives -0 from x = -5.5).
- none: within GELU_ERF_ULPS ulps of the float64 value x erfc(-x / sqrt 2) / 2 wherever
  |gelu(x)| >= FLT_MIN (and |x| >= 2^-125: for smaller |x| the result is within FLT_MIN).
Special values as eager PyTorch, with subnormal results flushed: gelu(+inf) = +inf, gelu(-inf)
= NaN, NaN gives NaN, large negative x gives -0 (tanh form) or +0 (erf form; PyTorch: -0),
+-0 give +-0 (tanh form) / +0 (erf form). PyTorch's vectorized CPU kernel of the erf form
returns NaN for +inf (its scalar path and float64 give inf); this kernel gives inf.

16-bit storage (dtype "f16", "bf16" or "cb16", acc_dtype "f32" only: the polynomials need
fp32): x and y are 16-bit symbols; x is widened exactly (`to_f32`) into an fp32 working
vector, the fp32 code above runs unchanged, and y is rounded once (`to_half`):
    T = 2 + 2 ceil(e_max / w_cvt) + gelu_cycles(config, e_max)     (w_cvt: ("cvt", "f16"))
The result is the fp32 kernel's output on the same (16-bit) inputs, rounded to dtype; with
the fp32 bound far below half a 16-bit ulp, it is the correctly rounded gelu except near
ties (at most 1 ulp of dtype off). bf16 subnormal inputs (below 2^-126) widen exactly but
the fp32 ops flush them to zero.

Example:
    >>> k = build_gelu(FabricConfig.small(4, 4), Rect(0, 0, 3, 4), 50, 37)  # doctest: +SKIP
    >>> y = run_kernel(k, {"x": x}).output                                   # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.isa import SIMD_NAME, Op
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Kernel, check_dtypes
from fabric.kernels.unary import build_blockwise
from fabric.program import Rect

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
GELU_A = float(np.float32(2 * SQRT_2_OVER_PI))
GELU_B = float(np.float32(2 * SQRT_2_OVER_PI * 0.044715))
APPROXIMATIONS = ("tanh", "none")
# measured bounds (fp32 ulps of the float64 value rounded to fp32; module docstring)
GELU_TANH_ULPS = 4
GELU_Z_ULPS = 3  # the relative error of z, in ulps, as exp amplifies it
GELU_ERF_ULPS = 8
SCRATCH = {"tanh": 5, "none": 6}  # fp32 scratch vectors per element
GELU_WORDS = {k: 2 + v for k, v in SCRATCH.items()}  # fp32 words per element: x, y, scratch
SIGMOID_FLUSH = -87.33  # sigmoid(z) < FLT_MIN below about ln(FLT_MIN) = -87.3365


# ---- the elementwise code ---------------------------------------------------------------
def gelu_code(y: Mem, x: Mem, scratch: Sequence[Mem]) -> list:
    """Instructions computing y = gelu(x) elementwise, tanh form (module docstring).

    Args:
        y, x: memory DSDs of the same n elements (y may be x: it is written last).
        scratch: five memory DSDs of n elements, apart from x, y and each other.
    """
    if len(scratch) < SCRATCH["tanh"]:
        raise ValueError(f"gelu: needs {SCRATCH['tanh']} scratch vectors, got {len(scratch)}")
    z = scratch[0]
    return [
        ins.mul(z, x, x),
        ins.fma(z, GELU_A, z, GELU_B),  # A + B x^2
        ins.mul(z, z, x),  # z = 2u
        *ml.sigmoid(z, z, scratch[1:5]),
        ins.mul(y, x, z),
    ]


def gelu_erf_code(y: Mem, x: Mem, scratch: Sequence[Mem]) -> list:
    """Instructions computing y = gelu(x) = x Phi(x) elementwise, exact (erf) form (module
    docstring).

    Args:
        y, x: memory DSDs of the same n elements (y may be x: x is read by the first ops).
        scratch: six memory DSDs of n elements, apart from x, y and each other.
    """
    if len(scratch) < SCRATCH["none"]:
        raise ValueError(f"gelu: needs {SCRATCH['none']} scratch vectors, got {len(scratch)}")
    b, p = scratch[:2]
    return [
        ins.shl(b, x, 1),
        ins.shr(b, b, 1),  # |x|
        ins.min_(b, b, ml.GAUSS_MAX),
        ins.min_(p, x, 0.0),
        ins.sub(y, x, p),  # relu(x), NaN for -inf
        *ml.gauss_tail(p, b, scratch[2:6], times_b=True),  # b Phi(-b)
        ins.sub(y, y, p),
    ]


CODE = {"tanh": gelu_code, "none": gelu_erf_code}


def gelu_cycles(config: FabricConfig, e: int, approximate: str = "tanh") -> int:
    """Cycles of `gelu_code` (tanh) or `gelu_erf_code` (none) over e elements (module
    docstring), c(op) = ceil(e / w_op)."""
    def c(op):
        return math.ceil(e / config.simd_width(*SIMD_NAME[op]))

    if approximate == "tanh":
        return 3 * c(Op.MUL) + c(Op.FMA) + ml.sigmoid_cycles(config, e)
    return (c(Op.SHL) + c(Op.SHR) + 2 * c(Op.MIN) + 2 * c(Op.SUB)
            + ml.gauss_tail_cycles(config, e, times_b=True))


# ---- references ---------------------------------------------------------------------------
def gelu_reference(x: np.ndarray, approximate: str = "tanh") -> np.ndarray:
    """gelu in float64, rounded to fp32: x / (1 + exp(-z)) (tanh form; no cancellation) or
    x erfc(-x / sqrt 2) / 2 (none, math.erfc)."""
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if approximate == "tanh":
            y = x / (1 + np.exp(-2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
        else:
            y = x * np.vectorize(math.erfc, otypes=[np.float64])(-x / math.sqrt(2)) / 2
    return y.astype(np.float32)


def gelu_tolerance(x: np.ndarray, approximate: str = "tanh") -> np.ndarray:
    """Per-element bound on |fabric - gelu_reference| (module docstring): in ulps of the
    reference, GELU_ERF_ULPS (none) or GELU_TANH_ULPS + GELU_Z_ULPS |z| (1 - sigmoid(z))
    (tanh), plus FLT_MIN for the flushed values; the whole value where the tanh form's
    sigmoid(z) is below FLT_MIN (the result is -0 there)."""
    x = np.asarray(x, np.float64)
    tiny = float(np.finfo(np.float32).tiny)
    ref = np.abs(gelu_reference(x, approximate)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        ulp = np.spacing(np.maximum(ref, np.float32(tiny))).astype(np.float64)
        if approximate == "tanh":
            z = 2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3)
            ulps = GELU_TANH_ULPS + GELU_Z_ULPS * np.abs(z) / (1 + np.exp(np.minimum(z, 700)))
            flushed = np.where(z < SIGMOID_FLUSH, ref.astype(np.float64), 0.0)
        else:
            ulps, flushed = np.full(x.shape, float(GELU_ERF_ULPS)), 0.0
        tol = ulps * ulp + tiny + flushed
    return np.where(np.isfinite(tol), tol, np.inf)


# ---- the kernel ---------------------------------------------------------------------------
def build_gelu(config: FabricConfig, rect: Rect, m: int, n: int, dtype: str = "f32",
               acc_dtype: str = "f32", colors: Sequence[int] | None = None,
               approximate: str = "tanh") -> Kernel:
    """gelu of an (m, n) tensor in 2D blocks on `rect` (no communication).

    Args:
        config, rect: the fabric and the rectangle of PEs to use.
        m, n: tensor sizes; rows split over rect.rows, columns over rect.cols (`split`).
        dtype: storage format of x and y: "f32", "f16", "bf16" or "cb16".
        acc_dtype: "f32" only (16-bit inputs are widened, computed in fp32 and rounded
            once; a 16-bit computation raises ValueError).
        colors: unused (the kernel routes nothing); accepted for the common signature.
        approximate: "tanh" (the tanh form) or "none" (exact, erf form), as
            torch.nn.functional.gelu's argument.

    Returns:
        a Kernel: inputs {"x": (m, n)}, output (m, n); model_cycles from the module
        docstring's formula.
    """
    del colors
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"gelu: approximate must be one of {APPROXIMATIONS}, "
                         f"got {approximate!r}")
    check_dtypes("gelu", dtype, acc_dtype, half_acc=False)
    kernel = build_blockwise(config, rect, m, n, "gelu", CODE[approximate],
                             SCRATCH[approximate],
                             lambda cfg, e: gelu_cycles(cfg, e, approximate), dtype)
    kernel.info["approximate"] = approximate
    return kernel
