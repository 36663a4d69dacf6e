"""Elementwise gelu (tanh form) over a 2D tensor distributed in blocks on a rectangle
(`base.Blocks`; the kernel is `unary.build_blockwise` around `gelu_code`).

gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed through the
identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)):

    gelu(x) = x / (1 + exp(t)),  t = -2u = x (A + B x^2),  A = -2 sqrt(2/pi), B = 0.044715 A

which needs exp and a reciprocal only (`fabric.kernels.mathlib`) and, unlike 1 + tanh(u),
does not cancel for negative x. exp's argument is clamped at GELU_T_MAX = 69 so that
1 + exp(t) stays in the refined reciprocal's domain (<= 2^100): for t > 69 (x below about
-8.9, where |gelu(x)| < 1e-29 |x|) the result is x / (1 + e^69) instead of a smaller value.

Layout: the (m, n) tensor is split into `split(m, rect.rows)` row blocks and
`split(n, rect.cols)` column blocks; PE (i, j) holds block (i, j), row major, in the first
mb_i * nb_j words of its symbols (sized for the largest block). A register holds each PE's
element count, so a PE processes its own block only.

Cycle model (exact): every PE starts its task in cycle 0, runs one straight list of
synchronous ops over its e = mb * nb elements, and returns:

    T = 2 + gelu_cycles(config, e_max)
    gelu_cycles = 3 c(mul) + c(fma) + exp_cycles + c(add) + reciprocal_cycles(refined)
                = 27 e on WSE-2 for even e      (c(op) = ceil(e / w_op))

Numerics: each step's rounding and the mathlib bounds give, for t = x (A + B x^2),
    |y - gelu(x)| <= u |gelu(x)| (GELU_T_ULPS |t| s + 2 EXP_ULPS s + 2 RECIPROCAL_REFINED_ULPS
                  + 3),  s = e^t / (1 + e^t) <= 1, u = 2^-24,
plus 1e-29 |x| for t > GELU_T_MAX (`gelu_tolerance` computes it).

16-bit storage (dtype "f16", "bf16" or "cb16", acc_dtype "f32" only: the exp and reciprocal
polynomials need fp32): x and y are 16-bit symbols; x is widened exactly (`to_f32`) into an
fp32 working vector, the fp32 code above runs unchanged, and y is rounded once (`to_half`):
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
GELU_A = float(np.float32(-2 * SQRT_2_OVER_PI))
GELU_B = float(np.float32(-2 * SQRT_2_OVER_PI * 0.044715))
GELU_T_MAX = 69.0
GELU_T_ULPS = 4  # relative error of t = x (A + B x^2), in units of u = 2^-24
GELU_WORDS = 5  # fp32 words per element: x, y and three scratch vectors


# ---- the elementwise code ---------------------------------------------------------------
def gelu_code(y: Mem, x: Mem, scratch: Sequence[Mem]) -> list:
    """Instructions computing y = gelu(x) elementwise (tanh form, see the module docstring).

    Args:
        y, x: memory DSDs of the same n elements (y may be x: it is written last).
        scratch: three memory DSDs of n elements, apart from x, y and each other.
    """
    if len(scratch) < 3:
        raise ValueError(f"gelu: needs 3 scratch vectors, got {len(scratch)}")
    t, s0, s1 = scratch[:3]
    return [
        ins.mul(t, x, x),
        ins.fma(t, GELU_A, t, GELU_B),  # A + B x^2
        ins.mul(t, t, x),  # t = -2u
        *ml.exp(t, t, (s0, s1), hi=GELU_T_MAX),
        ins.add(t, t, 1.0),
        *ml.reciprocal(s0, t, (s1,), refined=True),
        ins.mul(y, x, s0),
    ]


def gelu_cycles(config: FabricConfig, e: int) -> int:
    """Cycles of `gelu_code` over e elements: 3 c(mul) + c(fma) + exp_cycles + c(add)
    + reciprocal_cycles(refined), c(op) = ceil(e / w_op)."""
    def c(op):
        return math.ceil(e / config.simd_width(*SIMD_NAME[op]))

    return (3 * c(Op.MUL) + c(Op.FMA) + ml.exp_cycles(config, e) + c(Op.ADD)
            + ml.reciprocal_cycles(config, e, refined=True))


# ---- references ---------------------------------------------------------------------------
def gelu_reference(x: np.ndarray) -> np.ndarray:
    """numpy's tanh-form gelu in float64, rounded to fp32."""
    x = np.asarray(x, np.float64)
    u = SQRT_2_OVER_PI * (x + 0.044715 * x**3)
    with np.errstate(over="ignore", invalid="ignore"):
        return (0.5 * x * (1 + np.tanh(u))).astype(np.float32)


def gelu_tolerance(x: np.ndarray) -> np.ndarray:
    """Per-element bound on |fabric - gelu_reference| (module docstring), plus the float64
    reference's own cancellation in 1 + tanh(u) (|x| 2^-52)."""
    x = np.asarray(x, np.float64)
    u32 = 2.0**-24
    with np.errstate(over="ignore", invalid="ignore"):
        t = x * (GELU_A + GELU_B * x * x)
        s = np.where(t > 0, 1 / (1 + np.exp(-np.minimum(t, 700))),
                     np.exp(np.maximum(t, -700)) / (1 + np.exp(np.maximum(t, -700))))
        y = np.abs(x) / (1 + np.exp(np.minimum(t, 700)))
        rel = u32 * (GELU_T_ULPS * np.abs(t) * s + 2 * ml.EXP_ULPS * s
                     + 2 * ml.RECIPROCAL_REFINED_ULPS + 3)
        tol = rel * y + np.abs(x) * (2.0**-52 + np.where(t > GELU_T_MAX, 1e-29, 0.0))
    return np.where(np.isfinite(tol), tol, np.inf)


# ---- the kernel ---------------------------------------------------------------------------
def build_gelu(config: FabricConfig, rect: Rect, m: int, n: int, dtype: str = "f32",
               acc_dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """gelu of an (m, n) tensor in 2D blocks on `rect` (no communication).

    Args:
        config, rect: the fabric and the rectangle of PEs to use.
        m, n: tensor sizes; rows split over rect.rows, columns over rect.cols (`split`).
        dtype: storage format of x and y: "f32", "f16", "bf16" or "cb16".
        acc_dtype: "f32" only (16-bit inputs are widened, computed in fp32 and rounded
            once; a 16-bit computation raises ValueError).
        colors: unused (the kernel routes nothing); accepted for the common signature.

    Returns:
        a Kernel: inputs {"x": (m, n)}, output (m, n); model_cycles from the module
        docstring's formula.
    """
    del colors
    check_dtypes("gelu", dtype, acc_dtype, half_acc=False)
    return build_blockwise(config, rect, m, n, "gelu", gelu_code, GELU_WORDS - 2, gelu_cycles,
                           dtype)
