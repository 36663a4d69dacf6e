"""Elementwise math from the PE's builtins: exp, sigmoid, tanh, log, rsqrt, sqrt, reciprocal
and the normal tail Phi(-b) (for the exact gelu).

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
| exp | 2 | yes | 1 ulp | exp(x) >= EXP_TINY = 2^-125.5 (x >= -86.99) | 14.5 n |
| exp, hi=None (x <= 0) | 2 | yes | 1 ulp | [EXP_LO, 0] = [-87.33, 0] | 13.5 n |
| sigmoid | 4 | yes | 3 ulps | sigmoid(x) >= FLT_MIN (x >= -87.33) | 26.5 n |
| tanh | 4 | yes | 3 ulps | all finite x | 27.5 n |
| log | 4 | yes | 1 ulp | every x > 0, subnormals included | 34 n |
| log1p | 6 | yes | 2 ulps | every x > -1 (subnormal x reads as 0) | 47.5 n |
| rsqrt | 1 | no | 2 ulps | positive normal x | 13 n |
| rsqrt, specials | 4 | yes | 2 ulps | positive normal x | 18.5 n |
| sqrt | 4 | yes | 3 ulps | positive normal x | 16 n |
| reciprocal | 1 | no | 2 ulps | 2^-126 <= abs(x) <= 2^125 | 8 n |
| reciprocal, refined | 1 | no | 1 ulp | 2^-126 <= abs(x) <= 2^100 | 8.5 n |
| reciprocal, refined, specials | 5 | yes | 1 ulp | every x with a normal 1/x | 18 n |
| gauss_tail (Phi(-b)) | 4 | no | 7 ulps | 0 <= b <= GAUSS_MAX, Phi(-b) >= FLT_MIN | 43.5 n |

(WSE-2 cycles for even n; `exp_cycles(config, n)` etc. give the exact formulas from the SIMD
widths.) The bounds (EXP_ULPS, SIGMOID_ULPS, ...) are measured against numpy's float64
result rounded to fp32, over dense sweeps of each domain plus edge values
(tests/kernels/test_mathlib.py, test_unary_functions.py; `mathlib_numpy.emulate` runs the
sequences in numpy bit for bit, for sweeps of millions of points), and hold whether the
engine rounds fma once or twice. Cycle counts are those of the synchronous ops, ceil(n / w)
each at the op's SIMD width w (`config.simd_width`), with nothing else in between.

Special values: exp, sigmoid, tanh, log, sqrt, rsqrt and reciprocal (with specials) give eager
PyTorch's results for +-inf, NaN, +-0, overflow and underflow, with the fabric's flush of
subnormals (docs/engine.md, Numbers): a result below FLT_MIN = 2^-126 comes out as 0 (exp:
below 2^-125.5, see `exp`) where PyTorch gives a subnormal, and a subnormal input reads as a
zero of its sign (PyTorch with `torch.set_flush_denormal(True)` does the same). Each
function's docstring lists its values.

Methods:
- exp: clamp x to [-87.5, 89]; n = round(x log2 e) through the shifter 1.5 * 2^23 + 126
  (whose low bits then hold n + 126); r = x - n ln2 in two parts (Cody-Waite),
  |r| <= ln2 / 2; 2 exp(r) by a degree-6 polynomial (Horner, doubled coefficients); times
  2^(n - 1), whose bits are the shifter's bits << 23: the product overflows to inf and
  flushes to 0 as IEEE rounding does, and 2^(n - 1) is 0 for n = -126. (hi=None: 2^n is
  applied by adding n << 23 to the bits of exp(r), for x <= 0 only.)
- sigmoid: e = exp(-|x|) (2^n normal or 0, so exp(-|x|) below FLT_MIN is exactly 0),
  r = 1 / (1 + e) (refined reciprocal), sigmoid = max(e, +-1) r with the sign of x: e r
  for x < 0, r for x >= 0; no cancellation.
- tanh: tanh|x| = (1 - e) / (1 + e) with e = exp(-2|x|); 1 - e = -expm1(-2|x|) is
  computed as 2^n (-expm1(r)) + (1 - 2^n) from a polynomial for -expm1 on the reduced
  argument, so that small |x| loses no bits; the quotient uses `reciprocal`; the sign bit of
  x is added back.
- log: x = 2^k m with m in [sqrt(2)/2, sqrt(2)) from the bits alone: the significand S
  (the hidden bit added for normal x) converts exactly to a float (itof), whose exponent
  joins x's; log(x) = k ln2 + log1p(f), f = m - 1 (exact), log1p(f) = f + f^2 Q(f) with a
  degree-8 Q (near-minimax in relative error, 4e-9), summed as
  ((f^2 Q + k LN2_LO) + f) + k LN2_HI. Zero, the sign and inf/NaN come from integer and
  float identities (no select): an integer term -inf for +-0 and NaN for x < 0, and
  x - min(x, FLT_MAX), which is 0 for finite x, inf for +inf and NaN for -inf and NaN.
- rsqrt: the 0x5F3759DF bit-trick estimate, then three Newton steps y (1.5 - 0.5 x y^2).
  With specials, on |x|, then max with +inf for a zero or subnormal |x| (inf's bits
  shifted right by 32 times the exponent field), max with a NaN for x < 0 (an affine map
  of the bits, `_negative_nan`), and the sign bit of x added (-0 gives -inf).
- sqrt: x rsqrt(min(x, FLT_MAX)), then max with the NaN for x < 0.
- reciprocal: the 0x7EF311C3 bit-trick estimate (magic - bits), then three Newton steps
  y (2 - d y); refined, the third as y + y (1 - d y).
- gauss_tail: Phi(-b) = exp(-b^2 / 2) Q(1 / (1 + K b)) with b^2 split exactly enough
  (see the function).

Example:
    >>> from fabric import Tile
    >>> t = Tile("t")
    >>> x, y, s0, s1 = (t.symbol(name, "f32", 64) for name in ("x", "y", "s0", "s1"))
    >>> t.local_task("main", exp(y.dsd(), x.dsd(), (s0.dsd(), s1.dsd())))
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.instructions import Mem
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


def _f32(value: float) -> float:
    """`value` rounded to fp32, as a Python float (the immediates of the instructions)."""
    return float(np.float32(value))


LOG2E = _f32(1.4426950408889634)
# ln 2 split so that n * LN2_HI is exact for |n| < 2^9 (LN2_HI has 15 significant bits)
LN2_HI = 0.693145751953125
LN2_LO = _f32(math.log(2) - LN2_HI)
# adding 1.5 * 2^23 rounds a float below 2^22 in magnitude to an integer n and leaves
# n in the low mantissa bits (two's complement): (bits << 23) == n << 23
SHIFTER = 12582912.0

EXP_HI = _f32(88.72283)  # exp(EXP_HI) is just below FLT_MAX (beyond: inf); n = 128, r < 0
EXP_LO = _f32(-87.33)  # hi=None: the clamp; exp(EXP_LO) is just above FLT_MIN (2^-126)
# exp's clamp: n = round(x log2 e) stays in [-126, 128] (2^(n-1) normal, or 0 for n = -126),
# and the clamped ends still give 0 (exp(-87.5) < FLT_MIN) and inf (exp(89) > FLT_MAX)
EXP_CLAMP_LO, EXP_CLAMP_HI = -87.5, 89.0
# exp(-a) (`_exp_neg`, a >= 0): a <= 88 keeps n = round(-a log2 e) >= -127 (2^n normal or 0)
EXP_NEG_CLAMP = 88.0
# exp(r) = 1 + r + r^2 q(r) on |r| <= ln2/2, near-minimax in relative error (3e-9);
# Horner coefficients from the highest power down
EXP_COEFFS = tuple(_f32(c) for c in (
    0.0013814320469247333, 0.008368851204637678, 0.04166840109511134,
    0.16666519522901546, 0.4999999337300977, 1.0, 1.0))
EXP2_COEFFS = tuple(2 * c for c in EXP_COEFFS)  # 2 exp(r): exact doubling of each coefficient
# exp(-w) = sum c_k (-w)^k: the odd coefficients negated
EXP_NEG_COEFFS = tuple(c if k % 2 == 0 else -c
                       for k, c in zip(range(len(EXP_COEFFS) - 1, -1, -1), EXP_COEFFS))

TANH_CLAMP = 9.5  # tanh(9.5) rounds to 1.0 in fp32
# -expm1(-2 z) = z (2 + z Q(z)) on |z| <= ln2/4, near-minimax in relative error (1.4e-8)
TANH_COEFFS = tuple(_f32(c) for c in (
    -0.08884782141138865, 0.2677369615122719, -0.6666753315535603, 1.3333233353509268,
    -1.9999999244184408, 2.0, 0.0))

# log1p(f) = f + f^2 Q(f) on [sqrt(2)/2 - 1, sqrt(2) - 1], near-minimax in relative error
# (4e-9, weighted least squares iterated to equal ripple); Horner coefficients, highest first
LOG_COEFFS = tuple(_f32(c) for c in (
    -0.07623113691806793, 0.12905602157115936, -0.1324300915002823, 0.141816183924675,
    -0.16609050333499908, 0.20001985132694244, -0.25001585483551025, 0.33333325386047363,
    -0.49999988079071045))
SQRT_HALF_BITS = 0x3F3504F3  # sqrt(2)/2 in fp32: m's lower end
ONE_BITS = 0x3F800000
# x = S 2^(max(E, 1) - 150) for the significand S and exponent field E; the float S has
# exponent field kv + 127, so k = kv + max(E, 1) - 150 = (ix >> 23) + (E - [E > 0]) - 276
LOG_BIAS = 276
F32_MAX = float(np.finfo(np.float32).max)

# Phi(-b) = exp(-b^2 / 2) Q(t), t = 1 / (1 + GAUSS_K b), b in [0, GAUSS_MAX]: Q of degree 10,
# near-minimax in relative error (4.5e-9) with fp32 coefficients; Horner, highest first.
# Beyond GAUSS_MAX = 13.25, b Phi(-b) < 3e-39 is below FLT_MIN, and b^2 / 2 <= 87.8 keeps
# the exponent n >= -127 (2^n normal or 0)
GAUSS_MAX = 13.25
GAUSS_K = _f32(0.28)
GAUSS_COEFFS = (
    -0.018757984042167664, 0.12525784969329834, -0.3267420828342438, 0.3997347056865692,
    -0.26096177101135254, 0.21111580729484558, 0.033570315688848495, 0.11504167318344116,
    0.1098845973610878, 0.11186303943395615, -6.149617547634989e-06)
# exp(-w / 2) = sum c_k (-w / 2)^k: the exp polynomial in w = -2r
EXP_HALF_NEG_COEFFS = tuple(c * (-0.5) ** k
                            for k, c in zip(range(len(EXP_COEFFS) - 1, -1, -1), EXP_COEFFS))

RSQRT_MAGIC = 0x5F3759DF
INF_BITS = 0x7F800000
NEGATIVE_NAN_BIAS = 0xFEFF8001 - (1 << 32)  # as int32
RECIPROCAL_MAGIC = 0x7EF311C3
RECIPROCAL_CLAMP = 2.0**127  # reciprocal with specials: |x| clamped (inf's reciprocal: 0)
NEWTON_STEPS = 3

# Measured bounds (fp32 ulps of the correctly rounded result; see module docstring)
EXP_ULPS = 1
EXP_TINY = 2.0**-125.5  # exp's results below this are flushed to 0 (above it: EXP_ULPS)
TANH_ULPS = 3
LOG_ULPS = 1
LOG1P_ULPS = 2
RSQRT_ULPS = 2
SQRT_ULPS = 3
SIGMOID_ULPS = 3
GAUSS_ULPS = 7
RECIPROCAL_ULPS = 2
RECIPROCAL_REFINED_ULPS = 1


def _span(m: Mem) -> tuple[int, int] | None:
    """First and last word a DSD touches in its symbol, or None when registers or a
    whole-symbol length leave it unknown here."""
    if m.offset_reg is not None or m.length_reg is not None or m.length is None:
        return None
    row_length = m.length if m.row_length is None else m.row_length
    rows = -(-m.length // row_length)
    row_stride = row_length * m.stride if m.row_stride is None else m.row_stride
    ends = [m.offset + i * m.stride + j * row_stride
            for i in (0, min(row_length, m.length) - 1) for j in (0, rows - 1)]
    return min(ends), max(ends)


def _overlap(a: Mem, b: Mem) -> bool:
    if a.symbol != b.symbol:
        return False
    sa, sb = _span(a), _span(b)
    return sa is None or sb is None or (sa[0] <= sb[1] and sb[0] <= sa[1])


def _check(name: str, dst: Mem, src: Mem, scratch: Sequence[Mem], needed: int,
           dst_may_be_src: bool) -> None:
    if len(scratch) < needed:
        raise ValueError(f"{name}: needs {needed} scratch vectors, got {len(scratch)}")
    scratch = list(scratch[:needed])
    if not all(isinstance(m, Mem) for m in [dst, src, *scratch]):
        raise ValueError(f"{name}: dst, src and scratch must be memory DSDs (Mem)")
    pairs = [(dst, src)] if not dst_may_be_src else []
    pairs += [(s, o) for i, s in enumerate(scratch) for o in [dst, src, *scratch[:i]]]
    for a, b in pairs:
        if _overlap(a, b):
            raise ValueError(f"{name}: operands may overlap: {a} and {b} (scratch must be "
                             "apart from dst, src and each other"
                             + ("" if dst_may_be_src else "; dst must be apart from src")
                             + ")")


def _horner(dst: Mem, r: Mem, coeffs: Sequence[float]) -> list:
    """dst = sum_k coeffs[k] r^(K-k) by Horner; a zero constant term costs no add.
    dst must differ from r."""
    code = [ins.fma(dst, coeffs[1], r, coeffs[0])]
    for c in coeffs[2:]:
        code.append(ins.mul(dst, dst, r))
        if c != 0.0:
            code.append(ins.add(dst, dst, c))
    return code


def exp(dst: Mem, src: Mem, scratch: Sequence[Mem], hi: float | None = EXP_CLAMP_HI) -> list:
    """dst = exp(src), within EXP_ULPS ulps wherever exp(src) >= EXP_TINY; as torch at the
    ends (with the fabric's flush to zero).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: two memory DSDs of n elements.
        hi: src is clamped to [EXP_CLAMP_LO, hi] first (hi <= EXP_CLAMP_HI; above EXP_HI the
            result is inf). hi=None: src is known to be <= 0 (x - max(x) in a softmax): the
            older, cheaper sequence without the upper clamp (see Edge values).

    Returns:
        the instructions (19, or 18 with hi=None).

    Method: n = round(t log2 e), r = t - n ln2 (Cody-Waite), 2 exp(r) by the polynomial
    with doubled coefficients (exact), and the product with 2^(n-1), whose bits are
    (n + 126) << 23: the low bits of k = (1.5 * 2^23 + 126) + t log2 e. The product rounds
    to inf above FLT_MAX, and 2^(n-1) is 0 for n = -126.

    Edge values (as torch.exp, subnormal results flushed to 0): +inf and x > EXP_HI give
    inf; -inf, and every x where exp(x) < EXP_TINY = 2^-125.5 (x below about -86.99) give
    +0 (the fabric flushes results below 2^-126 = FLT_MIN; here the half binade above too,
    where n = -126); NaN gives NaN; +-0 give 1.
    With hi=None the result is exp(EXP_LO) = 1.18e-38 below EXP_LO (-87.33) and -inf gives
    that too: in a softmax it vanishes next to the row sum.
    """
    _check("exp", dst, src, scratch, 2, True)
    t, k = scratch[:2]
    if hi is None:  # x <= 0: 2^n by adding n << 23 to the bits of exp(r)
        return [
            ins.max_(t, src, EXP_LO),
            ins.fma(k, SHIFTER, t, LOG2E),  # k = 1.5 * 2^23 + n, n = round(x log2 e)
            ins.sub(dst, k, SHIFTER),  # n (exact)
            ins.fma(t, t, dst, -LN2_HI),
            ins.fma(t, t, dst, -LN2_LO),  # r = x - n ln2
            *_horner(dst, t, EXP_COEFFS),  # exp(r), in [0.7, 1.42]
            ins.shl(k, k, 23),  # n << 23
            ins.iaddv(dst, dst, k),  # exp(r) * 2^n
        ]
    if not EXP_CLAMP_LO < hi <= EXP_CLAMP_HI:
        raise ValueError(f"exp: need {EXP_CLAMP_LO} < hi <= {EXP_CLAMP_HI}, got hi={hi}")
    shifter = SHIFTER + 126
    return [
        ins.max_(t, src, EXP_CLAMP_LO),
        ins.min_(t, t, _f32(hi)),
        ins.fma(k, shifter, t, LOG2E),  # k = 1.5 * 2^23 + 126 + n, n = round(t log2 e)
        ins.sub(dst, k, shifter),  # n (exact)
        ins.fma(t, t, dst, -LN2_HI),
        ins.fma(t, t, dst, -LN2_LO),  # r = t - n ln2
        *_horner(dst, t, EXP2_COEFFS),  # 2 exp(r), in [1.4, 2.83]
        ins.shl(k, k, 23),  # 2^(n-1): (n + 126) << 23
        ins.mul(dst, dst, k),  # exp(r) 2^n, rounded to inf or flushed to 0 at the ends
    ]


def _exp_neg(dst: Mem, src: Mem, t: Mem, k: Mem) -> list:
    """dst = exp(-src) for src >= 0 (or NaN), within EXP_ULPS ulps, results below FLT_MIN
    flushed to +0 exactly (+inf gives 0). t, k: scratch (t may be src; dst may be src).

    As `exp` on -src, with n = round(-t log2 e) in [-127, 0] (t = min(src, EXP_NEG_CLAMP)), so
    that 2^n = (n + 127) << 23 is normal or exactly 0 (n = -127) and exp(r) in [0.7, 1.42]
    needs no doubling: the product is subnormal exactly when exp(-src) is (flushed to 0).
    w = t + n ln2 = -r, and the polynomial in w has the odd coefficients negated."""
    shifter = SHIFTER + 127
    return [
        ins.min_(t, src, EXP_NEG_CLAMP),
        ins.fma(k, shifter, t, -LOG2E),  # k = 1.5 * 2^23 + 127 + n, n = round(-t log2 e)
        ins.sub(dst, k, shifter),  # n (exact)
        ins.fma(t, t, dst, LN2_HI),
        ins.fma(t, t, dst, LN2_LO),  # w = t + n ln2 = -r
        *_horner(dst, t, EXP_NEG_COEFFS),  # exp(r) = exp(-w)
        ins.shl(k, k, 23),  # 2^n: (n + 127) << 23
        ins.mul(dst, dst, k),
    ]


def sigmoid(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = 1 / (1 + exp(-src)), within SIGMOID_ULPS ulps for every finite src whose
    sigmoid is at least FLT_MIN.

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: four memory DSDs of n elements.

    Returns:
        the instructions (36).

    Method: e = exp(-|x|) in (0, 1] (`_exp_neg`), r = 1 / (1 + e) (the refined reciprocal,
    1 + e in [1, 2]); sigmoid(x) = r for x >= 0 and e r for x < 0, i.e. max(e, g) r with
    g = +-1 carrying the sign of x (its bits: sign(x) + 0x3F800000). Nothing cancels, so
    the tail sigmoid(x) ~ e^x of negative x keeps its relative accuracy.

    Edge values (as torch.sigmoid, subnormal results flushed): +inf and x >= 17 give 1;
    -inf and x below about -87.34 give +0; +-0 give 0.5; NaN gives NaN.
    """
    _check("sigmoid", dst, src, scratch, 4, True)
    a, g, k, q = scratch[:4]
    return [
        ins.shl(a, src, 1),
        ins.shr(a, a, 1),  # |x|
        ins.isubv(g, src, a),  # the sign bit of x
        ins.iaddv(g, g, ONE_BITS),  # +-1
        *_exp_neg(dst, a, a, k),  # e = exp(-|x|)
        ins.add(a, dst, 1.0),  # 1 + e, in [1, 2]
        *reciprocal(k, a, (q,), refined=True),
        ins.max_(dst, dst, g),  # 1 for x >= 0, e for x < 0
        ins.mul(dst, dst, k),
    ]


def gauss_tail(dst: Mem, b: Mem, scratch: Sequence[Mem], times_b: bool = False) -> list:
    """dst = Phi(-b) (times b with `times_b`), the standard normal's upper tail
    P(Z > b) = erfc(b / sqrt 2) / 2, for 0 <= b <= GAUSS_MAX (the caller clamps; NaN gives
    NaN), within GAUSS_ULPS ulps (relative: no cancellation in the tail).

    Args:
        dst, b: memory DSDs of n elements (distinct).
        scratch: four memory DSDs of n elements.
        times_b: return b Phi(-b) (one more mul), whose only small factor is the last.

    Returns:
        the instructions (57, 58 with times_b).

    Method: Phi(-b) = exp(-b^2 / 2) Q(t) with t = 1 / (1 + GAUSS_K b) (the refined
    reciprocal) and Q of degree 10 (GAUSS_COEFFS). b^2 / 2 reaches 87.8, where one rounding
    would cost 100 ulps of the exponential, so b^2 = hi + lo exactly enough: bh = b with its
    low 12 bits cleared, hi = bh^2 (exact), lo = (b - bh)(b + bh) (|lo| < b^2 2^-10); n is
    round(-(hi + lo) log2 e / 2), w = (hi + 2 n ln2) + lo = -2r with the first sum exact
    (Sterbenz), and exp(r) = exp(-w / 2) by the exp polynomial in w. 2^n, n in [-127, 0],
    comes from the bits as in `_exp_neg` (0 for n = -127). The product of the small factor
    exp(-b^2 / 2) is taken last, so the result is flushed only where it is below FLT_MIN.
    """
    _check("gauss_tail", dst, b, scratch, 4, False)
    h, lo, k, e = scratch[:4]
    shifter = SHIFTER + 127
    q = [ins.mul(h, h, b)] if times_b else []
    return [
        ins.shr(h, b, 12),
        ins.shl(h, h, 12),  # bh: 12 significant bits
        ins.sub(lo, b, h),  # b - bh (exact)
        ins.add(k, b, h),
        ins.mul(lo, lo, k),  # lo = (b - bh)(b + bh)
        ins.mul(h, h, h),  # hi = bh^2 (exact)
        ins.add(k, h, lo),
        ins.fma(k, shifter, k, -LOG2E / 2),  # 1.5 * 2^23 + 127 + n, n = round(-b^2 log2 e / 2)
        ins.sub(e, k, shifter),  # n (exact)
        ins.fma(h, h, e, 2 * LN2_HI),  # hi + 2 n LN2_HI, exact
        ins.fma(h, h, e, 2 * LN2_LO),
        ins.add(h, h, lo),  # w = -2r, |r| <= ln2 / 2
        *_horner(e, h, EXP_HALF_NEG_COEFFS),  # exp(r)
        ins.shl(k, k, 23),  # 2^n: (n + 127) << 23
        ins.mul(e, e, k),  # exp(-b^2 / 2), flushed below FLT_MIN
        ins.fma(h, 1.0, b, GAUSS_K),  # 1 + K b, in [1, 4.7]
        *reciprocal(k, h, (lo,), refined=True),  # t
        *_horner(h, k, GAUSS_COEFFS),  # Q(t)
        *q,
        ins.mul(dst, h, e),
    ]


def reciprocal(dst: Mem, src: Mem, scratch: Sequence[Mem], refined: bool = False,
               specials: bool = False) -> list:
    """dst = 1 / src, within RECIPROCAL_ULPS ulps for |src| in [2^-126, 2^125].

    Args:
        dst, src: memory DSDs of n elements (distinct, unless `specials`).
        scratch: one memory DSD of n elements (five with `specials`).
        refined: take the last Newton step as y + y (1 - src y) (one more add): within
            RECIPROCAL_REFINED_ULPS ulps, for |src| in [2^-126, 2^100] only (beyond, the
            correction y (1 - src y) is subnormal and the fabric flushes it to zero).
        specials: every src, torch's values at the ends (17 more ops; dst may then be src):
            the Newton steps run on the significand m in [1, 2) of |src| = m 2^(E - 127)
            (|src| clamped to 2^127 first), whose reciprocal is then scaled by 2^(127 - E)
            (exact; a result below FLT_MIN flushes to 0) and maxed with +inf for a zero or
            subnormal |src| (`_inf_if_zero`); the sign bit of src is added last. Within the
            bound of `refined` (or not) for every normal src with a normal reciprocal.

    Returns:
        the instructions (10, 11 refined, 17 more with specials).

    Edge values: without specials the sign is kept; +-0 gives NaN; |src| > 2^125 (and
    +-inf) gives garbage (the estimate's bits go negative or subnormal); NaN gives NaN.
    With specials (as torch.reciprocal, subnormal src read as zero and subnormal results
    flushed): +-0 give +-inf, +-inf and |src| > 2^126 give +-0, NaN gives NaN.
    """
    if specials:
        _check("reciprocal", dst, src, scratch, 5, True)
        a, g, k, p, q = scratch[:5]
        return [
            ins.shl(a, src, 1),
            ins.shr(a, a, 1),  # |x|
            ins.isubv(g, src, a),  # the sign bit of x
            ins.min_(a, a, RECIPROCAL_CLAMP),  # inf -> 2^127 (its reciprocal flushes to 0)
            *_inf_if_zero(k, a),  # +inf for a zero or subnormal |x|, else +0
            ins.shr(p, a, 23),
            ins.isubv(p, 254, p),
            ins.shl(p, p, 23),  # 2^(127 - E): +0 for E = 254, -inf for a NaN (E = 255)
            ins.shl(a, a, 9),
            ins.shr(a, a, 9),
            ins.iaddv(a, a, ONE_BITS),  # the significand m in [1, 2)
            *reciprocal(dst, a, (q,), refined=refined),  # 1 / m in (0.5, 1]
            ins.mul(dst, dst, p),  # exact scaling, flushed where 1 / |x| < FLT_MIN
            ins.max_(dst, dst, k),
            ins.fma(dst, dst, p, 0.0),  # + 0 p: NaN for a NaN x
            ins.iaddv(dst, dst, g),
        ]
    _check("reciprocal", dst, src, scratch, 1, False)
    (e,) = scratch[:1]
    code = [ins.isubv(dst, RECIPROCAL_MAGIC, src)]  # within 5.1 % of 1/src
    for _ in range(NEWTON_STEPS - int(refined)):
        code += [ins.mul(e, src, dst), ins.sub(e, 2.0, e), ins.mul(dst, dst, e)]
    if refined:
        code += [ins.mul(e, src, dst), ins.sub(e, 1.0, e), ins.mul(e, e, dst),
                 ins.add(dst, dst, e)]
    return code


def rsqrt(dst: Mem, src: Mem, scratch: Sequence[Mem], specials: bool = False) -> list:
    """dst = 1 / sqrt(src), within RSQRT_ULPS ulps for positive normal src.

    Args:
        dst, src: memory DSDs of n elements (distinct, unless `specials`).
        scratch: one memory DSD of n elements (four with `specials`).
        specials: give torch's values outside the positive normals (11 more ops; dst may
            then be src).

    Returns:
        the instructions (14, or 25 with specials).

    Edge values: without specials, +0 gives 1.5^3 * 0x5F3759DF as a float, 4.459e19, instead
    of inf; negative src, -0 and +inf give garbage; NaN gives NaN; subnormal src is not
    supported. With specials (as torch.rsqrt, subnormal src read as zero): +0 gives +inf,
    -0 -inf, +inf +0, src < 0 (and -inf) NaN, NaN NaN.
    """
    if not specials:
        _check("rsqrt", dst, src, scratch, 1, False)
        return _rsqrt_core(dst, src, scratch[0])
    _check("rsqrt", dst, src, scratch, 4, True)
    a, e, g, t = scratch[:4]
    return [
        ins.shl(a, src, 1),
        ins.shr(a, a, 1),  # |x|
        ins.isubv(g, src, a),  # the sign bit of x
        *_negative_nan(t, src),
        # the Newton steps on |x|: finite for +-0 and subnormals, -inf for +inf
        *_rsqrt_core(dst, a, e),
        *_inf_if_zero(e, a),
        ins.max_(dst, dst, e),  # +inf for +-0; +0 for +inf (-inf before)
        ins.max_(dst, dst, t),  # NaN for x < 0
        ins.iaddv(dst, dst, g),  # -inf for -0
    ]


def sqrt(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = sqrt(src), as src * rsqrt(src), within SQRT_ULPS ulps for positive normal src.

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: four memory DSDs of n elements.

    Returns:
        the instructions (19).

    Edge values (as torch.sqrt, subnormal src read as zero): +-0 give +-0 (the Newton steps
    stay finite on zero: 0 * 6.7e19), +inf gives +inf (src clamped to FLT_MAX inside the
    rsqrt: inf * 5.4e-20), src < 0 (and -inf) NaN, NaN NaN.
    """
    _check("sqrt", dst, src, scratch, 4, True)
    c, y, e, t = scratch[:4]
    return [
        *_negative_nan(t, src),
        ins.min_(c, src, F32_MAX),
        *_rsqrt_core(y, c, e),
        ins.mul(dst, src, y),
        ins.max_(dst, dst, t),
    ]


def _rsqrt_core(dst: Mem, src: Mem, e: Mem) -> list:
    """The 0x5F3759DF bit-trick estimate and NEWTON_STEPS Newton steps (dst != src)."""
    code = [ins.shr(dst, src, 1), ins.isubv(dst, RSQRT_MAGIC, dst)]  # within 3.5 %
    for _ in range(NEWTON_STEPS):
        # x y first: y^2 would be subnormal (flushed) for x near FLT_MAX
        code += [ins.mul(e, src, dst), ins.mul(e, e, dst), ins.fma(e, 1.5, e, -0.5),
                 ins.mul(dst, dst, e)]
    return code


def _negative_nan(t: Mem, src: Mem) -> list:
    """t = a NaN where src < 0 (src <= -FLT_MIN: negative normals and -inf), else a negative
    finite number or -inf (so that max(v, t) is v for every v >= -0 and NaN for those).

    The bits: (b >> 8) + 0xFEFF8001 maps b in [0, 0x807FFFFF] (the non-negatives, -0 and
    negative subnormals) into [0xFEFF8001, 0xFF800000] (negative normals, -inf) and
    b in [0x80800000, 0xFFFFFFFF] into [0xFF800001, 0xFFFF8000] (NaNs)."""
    return [ins.shr(t, src, 8), ins.iaddv(t, t, NEGATIVE_NAN_BIAS)]


def _inf_if_zero(dst: Mem, a: Mem) -> list:
    """dst = +inf where a (bits of |x|) is zero or subnormal, else +0: inf's bits shifted
    right by 32 E (E the exponent field; the shift saturates at 31)."""
    return [ins.shr(dst, a, 23), ins.shl(dst, dst, 5), ins.shr(dst, INF_BITS, dst)]


def tanh(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = tanh(src), within TANH_ULPS ulps for every finite src.

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: four memory DSDs of n elements.

    Returns:
        the instructions (38).

    Edge values: |src| >= TANH_CLAMP (and +-inf) gives exactly +-1; +-0 gives +-0; NaN
    gives NaN.
    """
    _check("tanh", dst, src, scratch, 4, True)
    a, k, m, q = scratch[:4]
    return [
        ins.shl(a, src, 1),
        ins.shr(a, a, 1),  # |x|
        ins.min_(a, a, TANH_CLAMP),
        ins.fma(k, SHIFTER, a, _f32(-2 * 1.4426950408889634)),  # n = round(-2|x| log2 e)
        ins.sub(m, k, SHIFTER),
        # z = |x| + n ln2 / 2 = -r / 2 for r = -2|x| - n ln2 (halving keeps both exact)
        ins.fma(a, a, m, LN2_HI / 2),
        ins.fma(a, a, m, LN2_LO / 2),
        *_horner(m, a, TANH_COEFFS),  # -expm1(r)
        ins.shl(k, k, 23),
        ins.iaddv(k, k, 127 << 23),  # 2^n
        ins.mul(m, m, k),
        ins.sub(k, 1.0, k),
        ins.add(m, m, k),  # 1 - e = 2^n (-expm1(r)) + (1 - 2^n), e = exp(-2|x|)
        ins.sub(k, 2.0, m),  # 1 + e
        *reciprocal(a, k, (q,), refined=True),  # 1 + e in [1, 2]
        ins.mul(m, m, a),  # |tanh x|
        ins.shr(a, src, 31),
        ins.shl(a, a, 31),  # sign bit of x
        ins.iaddv(dst, m, a),
    ]


def log(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = log(src) (natural), within LOG_ULPS ulps for every src > 0, subnormal included.

    Args:
        dst, src: memory DSDs of n elements (dst may be src: it is written last).
        scratch: four memory DSDs of n elements.

    Returns:
        the instructions (54).

    Edge values (as torch.log): +-0 gives -inf; src < 0 (-inf and negative subnormals
    included) gives NaN; +inf gives +inf; NaN gives NaN; log(1) = +0.
    """
    _check("log", dst, src, scratch, 4, True)
    a, k, t, f = scratch[:4]
    return [
        # ---- k (float in k) and m, from the bits of src
        ins.shl(a, src, 1),  # the bits of |x|, shifted left once (kept for the specials)
        ins.shr(k, a, 24),  # E, the exponent field
        ins.iaddv(t, k, 255),
        ins.shr(t, t, 8),  # [E > 0]: 1 for normal x (and inf, NaN), 0 for zero, subnormal
        ins.isubv(k, k, t),  # max(E, 1) - 1
        ins.shl(t, t, 23),
        ins.shl(f, src, 9),
        ins.shr(f, f, 9),  # the mantissa field
        ins.iaddv(f, f, t),  # S < 2^24: the significand with its hidden bit
        ins.itof(f, f),  # S as a float, exact, normal unless S = 0
        ins.iaddv(f, f, ONE_BITS - SQRT_HALF_BITS),  # ix: m >= sqrt(2)/2 carries into E
        ins.shr(t, f, 23),
        ins.iaddv(k, k, t),
        ins.isubv(k, k, LOG_BIAS),
        ins.itof(k, k),  # k, exact
        ins.shl(f, f, 9),
        ins.shr(f, f, 9),
        ins.iaddv(f, f, SQRT_HALF_BITS),  # m in [sqrt(2)/2, sqrt(2))
        ins.sub(f, f, 1.0),  # f = m - 1, exact (Sterbenz)
        # ---- log1p(f) + k ln2
        *_horner(t, f, LOG_COEFFS),  # Q(f)
        ins.mul(t, t, f),
        ins.mul(t, t, f),  # f^2 Q(f)
        ins.fma(t, t, k, LN2_LO),
        ins.add(t, t, f),
        ins.fma(t, t, k, LN2_HI),  # k LN2_HI is exact: |k| < 2^9, LN2_HI has 15 bits
        # ---- specials: -inf bits for +-0, NaN bits for x < 0, else 0
        ins.shr(a, a, 1),  # |x| bits
        ins.iaddv(a, a, 0x7FFFFFFF),
        ins.shr(a, a, 31),  # [x != 0]
        ins.shr(k, src, 31),  # sign bit
        ins.iaddv(k, k, a),
        ins.shr(k, k, 1),  # [x < 0 and x != 0]
        ins.isubv(k, 0, k),
        ins.shl(k, k, 22),  # 0xFFC00000 (a NaN) or 0
        ins.isubv(a, a, 1),
        ins.shl(a, a, 23),  # 0xFF800000 (-inf) or 0
        ins.iaddv(a, a, k),  # the two cases exclude each other
        ins.add(t, t, a),
        ins.min_(k, src, F32_MAX),
        ins.sub(k, src, k),  # 0 for finite x, +inf for +inf, NaN for -inf and NaN
        ins.add(dst, t, k),
    ]


LOG1P_CLAMP = 2.0**24  # above, 1 + x's rounding error is irrelevant next to log(x) >= 16.6
RECIPROCAL_RANGE = (2.0**-100, 2.0**100)  # the refined reciprocal's domain


def log1p(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = log(1 + src), within LOG1P_ULPS ulps for every src > -1 (subnormal src reads
    as 0).

    Args:
        dst, src: memory DSDs of n elements (dst may be src: src is read before dst is
            written).
        scratch: six memory DSDs of n elements.

    Returns:
        the instructions (74).

    Method: u = 1 + x rounded, and its rounding error c = x - (u - 1), exact for
    x <= 2^24 (u - 1 is exact for u in [0.5, 2^24] and the difference is a small multiple
    of ulp(x)); log1p(x) = log(u) + c / u to first order (c / u <= 2^-24 relative), with
    `log` on u and c / u from the refined reciprocal of u clamped to [2^-100, 2^100]
    (only where c is 0 or irrelevant). Above 2^24, c is taken at x = 2^24 (|c / u| <
    2^-24 next to log(x) >= 16.6). For |x| < 2^-25, u = 1 and the result is c / u = x.

    Edge values (as torch.log1p): -1 gives -inf; src < -1 (and -inf) NaN; +inf +inf; NaN
    NaN; +-0 give +0 (torch: -0 for -0).
    """
    _check("log1p", dst, src, scratch, 6, True)
    c, u, r, *rest = scratch[:6]
    lo, hi = RECIPROCAL_RANGE
    return [
        ins.min_(c, src, LOG1P_CLAMP),
        ins.add(u, c, 1.0),
        ins.sub(r, u, 1.0),  # exact
        ins.sub(c, c, r),  # c = x - (u - 1), exact (docstring)
        ins.max_(u, u, lo),
        ins.min_(u, u, hi),
        *reciprocal(r, u, (rest[0],), refined=True),
        ins.mul(c, c, r),  # c / u
        ins.add(u, src, 1.0),  # u (the clamps removed: 0, inf and NaN reach `log`)
        *log(dst, u, (r, *rest)),
        ins.add(dst, dst, c),
    ]
