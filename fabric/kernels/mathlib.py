"""Elementwise math from the PE's builtins: exp, exp2, expm1, sigmoid, tanh, sinh, cosh, erf,
sin, cos, tan, atan, asin, acos, atan2, hypot, pow (a ** b of two vectors), log, log1p,
rsqrt, sqrt, reciprocal and the normal tail Phi(-b) (for the exact gelu).

The PE has no transcendental instructions; each function here is a generator that returns
the list of DSD instructions computing `dst = f(src)` element by element, built only from
mov/add/sub/mul/fma/max/min and the 32-bit integer ops (iaddv, isubv, shl, shr) applied to
fp32 bit patterns. The caller puts the list into a task and declares the scratch vectors.

Every operand is a memory DSD (`fabric.instructions.Mem`) of the same n elements: `dst`,
`src` and the scratch vectors, which must not overlap each other (except where a function
allows dst == src). Lengths may come from a register (`Mem(..., length_reg=...)`), so one
tile can serve PEs holding different numbers of elements.

| function | scratch | dst may be src | max error | domain of that bound | WSE-2 cycles |
|---|---|---|---|---|---|
| exp | 2 | yes | 1 ulp | exp(x) >= EXP_TINY = 2^-125.5 (x >= -86.99) | 16 n |
| exp, hi=None (x <= 0) | 2 | yes | 1 ulp | [EXP_LO, 0] = [-87.33, 0] | 15 n |
| expm1 | 4 | yes | 2 ulps | normal results | 38 n |
| expm1, nonpositive (x <= 0) | 4 | yes | 2 ulps | normal results | 35 n |
| erf | 6 | yes | 4 ulps | every x | 75.5 n |
| exp2 | 2 | yes | 1 ulp | 2^x normal (x >= -126; exact at integers) | 15 n |
| sin, cos | 6 | yes | 3 ulps | abs(x) < TRIG_MAX = 65536 (NaN beyond) | 42 n |
| tan | 6 | yes | 4 ulps | abs(x) < TRIG_MAX = 65536 (NaN beyond) | 44 n |
| atan | 6 | yes | 3 ulps | every x | 33.5 n |
| asin | 6 | yes | 2 ulps | abs(x) <= 1 (NaN beyond) | 48 n |
| acos | 6 | yes | 1 ulp | abs(x) <= 1 (NaN beyond) | 50.5 n |
| sinh | 6 | yes | 2 ulps | finite sinh(x) (abs(x) <= 89.41) | 47 n |
| cosh | 4 | yes | 2 ulps | finite cosh(x) (abs(x) <= 89.41) | 28 n |
| sigmoid | 4 | yes | 3 ulps | sigmoid(x) >= FLT_MIN (x >= -87.33) | 30.5 n |
| tanh | 4 | yes | 3 ulps | all finite x | 32 n |
| log | 4 | yes | 1 ulp | every x > 0, subnormals included | 48 n |
| log1p | 6 | yes | 2 ulps | every x > -1 (subnormal x reads as 0) | 63.5 n |
| rsqrt | 1 | no | 2 ulps | positive normal x | 14 n |
| rsqrt, specials | 4 | yes | 2 ulps | positive normal x | 25 n |
| sqrt | 4 | yes | 3 ulps | positive normal x | 19 n |
| reciprocal | 1 | no | 2 ulps | 2^-126 <= abs(x) <= 2^125 | 8.5 n |
| reciprocal, refined | 1 | no | 1 ulp | 2^-126 <= abs(x) <= 2^100 | 9 n |
| reciprocal, refined, specials | 5 | yes | 1 ulp | every x with a normal 1/x | 26 n |
| gauss_tail (Phi(-b)) | 4 | no | 7 ulps | 0 <= b <= GAUSS_MAX, Phi(-b) >= FLT_MIN | 45.5 n |
| fmod(x, y) (y: number) | 12 (8) | yes | exact | abs(x / y) < 2^22 (NaN beyond) | 68.5 n (45 n) |
| remainder (y: number) | 12 (8) | yes | exact | abs(x / y) < 2^22 (NaN beyond) | 82 n (53.5 n) |
| atan2(y, x) | 9 | dst may be y | 2 ulps | every pair | 66.5 n |
| hypot(x, y) | 8 | dst may be x | 1 ulp | every pair with a finite result | 51.5 n |
| pow_(a, b) = a ** b | 8 | dst may be a or b | 3 ulps | results >= EXP_TINY (2^-125.5) | 124 n |

(WSE-2 cycles for even n; `exp_cycles(config, n)` etc. give the exact formulas from the SIMD
widths.) The bounds (EXP_ULPS, SIGMOID_ULPS, ...) are measured against numpy's float64
result rounded to fp32, over dense sweeps of each domain plus edge values
(tests/kernels/test_mathlib.py, test_unary_functions.py; `mathlib_numpy.emulate` runs the
sequences in numpy bit for bit, for sweeps of millions of points), and hold whether the
engine rounds fma once or twice. Cycle counts are those of the synchronous ops, ceil(n / w)
each at the op's SIMD width w (`config.simd_width`), with nothing else in between.

Special values: every routine (reciprocal and rsqrt with specials) gives eager PyTorch's
results for +-inf, NaN, +-0, overflow and underflow, with the fabric's flush of
subnormals (docs/engine.md, Numbers): a result below FLT_MIN = 2^-126 comes out as 0 (exp:
below 2^-125.5, see `exp`) where PyTorch gives a subnormal, and a subnormal input reads as a
zero of its sign (PyTorch with `torch.set_flush_denormal(True)` does the same). Each
function's docstring lists its values.

The routines live by family, each module with its methods: `mathlib_exp` (exp, expm1,
sigmoid, tanh, erf, gauss_tail), `mathlib_hyper` (exp2, sinh, cosh), `mathlib_trig` (sin,
cos, tan), `mathlib_atrig` (atan, asin, acos), `mathlib_binary` (atan2, hypot: two sources, dst
first), `mathlib_pow` (pow_: a ** b of two sources), `mathlib_roots` (reciprocal, rsqrt, sqrt)
and `mathlib_log` (log, log1p), on the operand checks and shared constants of
`mathlib_common`; `mathlib_cycles` gives their cycles. This module re-exports the routines,
their constants and their cycle formulas.

Example:
    >>> from fabric import Tile
    >>> t = Tile("t")
    >>> x, y, s0, s1 = (t.symbol(name, "f32", 64) for name in ("x", "y", "s0", "s1"))
    >>> t.local_task("main", exp(y.dsd(), x.dsd(), (s0.dsd(), s1.dsd())))
"""

from __future__ import annotations

from fabric.kernels.mathlib_atrig import (  # noqa: F401  (atan, asin, acos)
    ACOS_ULPS,
    ASIN_COEFFS,
    ASIN_ULPS,
    ATAN_CLAMP,
    ATAN_COEFFS,
    ATAN_ULPS,
    PIO2_HI,
    PIO2_LO,
    TAN_3PI8,
    TAN_PI8,
    acos,
    asin,
    atan,
)
from fabric.kernels.mathlib_binary import (  # noqa: F401  (atan2, hypot)
    ATAN2_SCRATCH,
    ATAN2_ULPS,
    HYPOT_SCRATCH,
    HYPOT_ULPS,
    QPI_HI,
    QPI_LO,
    atan2,
    hypot,
)
from fabric.kernels.mathlib_common import F32_MAX, LN2_HI, LN2_LO, ONE_BITS  # noqa: F401
from fabric.kernels.mathlib_cycles import (  # noqa: F401  (the routines' costs)
    exp_cycles,
    gauss_tail_cycles,
    log1p_cycles,
    log_cycles,
    reciprocal_cycles,
    rsqrt_cycles,
    sequence_cycles,
    sigmoid_cycles,
    sqrt_cycles,
    tanh_cycles,
)
from fabric.kernels.mathlib_exp import (  # noqa: F401  (exp, sigmoid, tanh, gauss_tail)
    ERF_COEFFS,
    ERF_SPLIT,
    ERF_ULPS,
    EXP2_COEFFS,
    EXP_CLAMP_HI,
    EXP_CLAMP_LO,
    EXP_COEFFS,
    EXP_HALF_NEG_COEFFS,
    EXP_HI,
    EXP_LO,
    EXP_NEG_CLAMP,
    EXP_NEG_COEFFS,
    EXP_TINY,
    EXP_ULPS,
    EXPM1_COEFFS,
    EXPM1_SPLIT,
    EXPM1_ULPS,
    GAUSS_COEFFS,
    GAUSS_K,
    GAUSS_MAX,
    GAUSS_ULPS,
    LOG2E,
    SHIFTER,
    SIGMOID_ULPS,
    TANH_CLAMP,
    TANH_COEFFS,
    TANH_ULPS,
    erf,
    exp,
    expm1,
    gauss_tail,
    sigmoid,
    tanh,
)
from fabric.kernels.mathlib_hyper import (  # noqa: F401  (exp2, sinh, cosh)
    COSH_ULPS,
    EXP2_CLAMP_HI,
    EXP2_CLAMP_LO,
    EXP2_POLY,
    EXP2_ULPS,
    HYPER_CLAMP,
    SINH_COEFFS,
    SINH_SPLIT,
    SINH_ULPS,
    cosh,
    exp2,
    sinh,
)
from fabric.kernels.mathlib_log import (  # noqa: F401  (log, log1p)
    LOG1P_CLAMP,
    LOG1P_ULPS,
    LOG_BIAS,
    LOG_COEFFS,
    LOG_ULPS,
    RECIPROCAL_RANGE,
    SQRT_HALF_BITS,
    log,
    log1p,
)
from fabric.kernels.mathlib_mod import FMOD_QUOTIENT_MAX, fmod  # noqa: F401  (fmod, %)
from fabric.kernels.mathlib_pow import (  # noqa: F401  (pow_: a ** b)
    ATANH_TAIL,
    POW_SCRATCH,
    POW_ULPS,
    POW_ULPS_AT_ZERO,
    POW_ULPS_PER_U,
    pow_,
    pow_ulps_bound,
)
from fabric.kernels.mathlib_roots import (  # noqa: F401  (reciprocal, rsqrt, sqrt)
    INF_BITS,
    NEGATIVE_NAN_BIAS,
    NEWTON_STEPS,
    RECIPROCAL_CLAMP,
    RECIPROCAL_MAGIC,
    RECIPROCAL_REFINED_ULPS,
    RECIPROCAL_ULPS,
    RSQRT_MAGIC,
    RSQRT_ULPS,
    SQRT_ULPS,
    reciprocal,
    rsqrt,
    sqrt,
)
from fabric.kernels.mathlib_trig import (  # noqa: F401  (sin, cos, tan)
    COS_COEFFS,
    PIO2_PARTS,
    SIN_COEFFS,
    TAN_COEFFS,
    TAN_ULPS,
    TRIG_MAX,
    TRIG_ULPS,
    TWO_OVER_PI,
    cos,
    sin,
    tan,
)
