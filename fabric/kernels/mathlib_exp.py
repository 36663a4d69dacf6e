"""The exponential family of `fabric.kernels.mathlib`: exp, sigmoid, tanh and the normal
tail Phi(-b) (`gauss_tail`, for the exact gelu), with their constants and measured
ulp bounds.

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
- expm1: |x| < 1/2: a degree-8 Taylor polynomial; beyond, exp(x) - 1; picked per element
  by a 0/1 mask (see the function).
- erf: |x| < 1/2: x times a Taylor polynomial in x^2; beyond, 1 - 2 Phi(-|x| sqrt 2) with
  x's sign; picked per element by a 0/1 mask.
- gauss_tail: Phi(-b) = exp(-b^2 / 2) Q(1 / (1 + K b)) with b^2 split exactly enough
  (see the function).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import (
    F32_MAX,
    LN2_HI,
    LN2_LO,
    ONE_BITS,
    _abs_below,
    _check,
    _f32,
    _horner,
    _pick,
    _sign_factor,
)
from fabric.kernels.mathlib_roots import reciprocal

LOG2E = _f32(1.4426950408889634)
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

# Measured bounds (fp32 ulps of the correctly rounded result; see `fabric.kernels.mathlib`)
EXP_ULPS = 1
EXP_TINY = 2.0**-125.5  # exp's results below this are flushed to 0 (above it: EXP_ULPS)
TANH_ULPS = 3
SIGMOID_ULPS = 3
GAUSS_ULPS = 7


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


EXPM1_SPLIT = 0.5  # expm1's polynomial on (-EXPM1_SPLIT, EXPM1_SPLIT), exp(x) - 1 beyond
# Taylor coefficients of expm1(c) / c = sum_k c^k / (k + 1)!, highest first (k = 7 .. 0):
# the remainder c^8 / 9! is below 2^-25 of expm1(c) for |c| < 0.5
EXPM1_COEFFS = tuple(_f32(1.0 / math.factorial(k + 1)) for k in range(7, -1, -1))
EXPM1_ULPS = 2  # measured over dense sweeps (tests/kernels/test_unary_functions.py)


def expm1(dst: Mem, src: Mem, scratch: Sequence[Mem], nonpositive: bool = False) -> list:
    """dst = exp(src) - 1, within EXPM1_ULPS ulps for every x whose result is normal (small
    |x| included, where exp(x) - 1 itself loses the bits eager PyTorch's expm1 keeps).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: four memory DSDs of n elements.
        nonpositive: src <= 0 (or NaN) only: exp without its upper clamp, one op less.

    Method: |x| < EXPM1_SPLIT: c (c^7 / 8! + ... + 1/2) + c by Horner on c = x clamped to
    the split; beyond: exp(x) - 1 (exp's 1 ulp is at most 2.6 ulps of exp(x) - 1 there,
    the subtraction exact or half an ulp). A 0/1 mask from the sign bit of |x| - split
    picks one, exactly (`_pick`). Edge values as
    torch.expm1: +inf gives inf, -inf -1, NaN NaN, +-0 +-0.
    """
    _check("expm1", dst, src, scratch, 4, True)
    m, p, c, e = scratch[:4]
    code = [ins.max_(c, src, -EXPM1_SPLIT)]
    if not nonpositive:
        code.append(ins.min_(c, c, EXPM1_SPLIT))
    code += [*_horner(p, c, EXPM1_COEFFS), ins.mul(p, p, c),
             *_abs_below(m, src, EXPM1_SPLIT),
             *exp(dst, src, (c, e), hi=None if nonpositive else EXP_CLAMP_HI),
             ins.add(dst, dst, -1.0)]
    if nonpositive:  # dst is in [-1, 0]
        return code + _pick(dst, m, p, dst)
    # an infinite dst (where m is 0) clamped in the pick's product
    return code + [ins.min_(e, dst, F32_MAX), *_pick(dst, m, p, dst, q_times_m=e)]


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


ERF_SPLIT = 0.5  # erf's Taylor polynomial below |x| = 1/2, 1 - 2 Phi(-|x| sqrt 2) beyond
# erf(x) / x = sum_n c_n x^(2n), c_n = 2 / sqrt(pi) (-1)^n / (n! (2n + 1)), highest first
# (n = 6 .. 0): the remainder below 2^-30 of erf(x) for |x| < 1/2
ERF_COEFFS = tuple(_f32(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)))
                   for n in range(6, -1, -1))
ERF_ULPS = 4  # measured over dense sweeps (tests/kernels/test_unary_functions.py)


def erf(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = erf(src), within ERF_ULPS ulps for every x (relative: small |x| included).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: six memory DSDs of n elements.

    Method: |x| >= ERF_SPLIT: 1 - 2 Phi(-b) (`gauss_tail`) at b = |x| sqrt 2 (clamped to
    GAUSS_MAX, where Phi(-b) is below 2^-129), with x's sign (a factor 1 - 2 signbit(x));
    erf is at least 0.52 there, so the tail's absolute error of (2 GAUSS_ULPS + 1) 2^-25 is
    a few ulps of it. |x| < ERF_SPLIT: x P(x^2), P the Taylor polynomial of erf(x) / x,
    odd in x, -0 kept. A 0/1 mask from the sign bit of |x| - ERF_SPLIT picks one, as in
    `expm1`. Edge values as torch.erf: +-inf give +-1, NaN NaN.
    """
    _check("erf", dst, src, scratch, 6, True)
    b, q, *rest = scratch[:6]
    code = [ins.shl(b, src, 1), ins.shr(b, b, 1), ins.mul(b, b, _f32(math.sqrt(2))),
            ins.min_(b, b, GAUSS_MAX), *gauss_tail(q, b, rest),
            ins.mul(q, q, -2.0), ins.add(q, q, 1.0)]  # erf(|x|), beyond the split
    sign, m, x2, p = rest
    code += [*_sign_factor(sign, src), ins.mul(q, q, sign),  # with x's sign
             *_abs_below(m, src, ERF_SPLIT)]
    # x clamped to the split (an infinite x would give inf times 0 below), in sign's place
    code += [ins.min_(sign, src, ERF_SPLIT), ins.max_(sign, sign, -ERF_SPLIT),
             ins.mul(x2, sign, sign), *_horner(p, x2, ERF_COEFFS), ins.mul(p, p, sign)]
    return code + _pick(dst, m, p, q)  # q is finite


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


