"""The exponential's relatives of `fabric.kernels.mathlib`: exp2, sinh and cosh, with their
constants and measured ulp bounds (exp's own family is `mathlib_exp`).

Methods:
- exp2: t = x clamped to [-127, 128]; n = round(t) through the shifter 1.5 * 2^23 (its low
  bits then hold n), f = t - n exact, |f| <= 1/2 (not exp(x ln 2): the rounding of x ln 2
  would cost ~40 ulps at |x| ~ 100); 2^f by a degree-6 polynomial (exp's, its coefficients
  times ln2^k), in [0.70, 1.42]; 2^n applied by adding n << 23 to its bits: an exact
  scaling wherever 2^x is normal, and inf at t = 128 (2^f = 1 there, and 1's bits plus
  128 << 23 are inf's; below 128, 2^f < 1 and the result is finite); a last fma p + 0 f
  flushes the subnormal bits left below 2^-126 to 0 and carries a NaN (whose bits the add
  may change). Integers give exact powers of two (f = 0, 2^f = 1).
- cosh: h = exp(|x|) / 2 by exp's reduction and polynomial with 2^(n - 2) (n reaches 130,
  so h is finite up to where cosh itself overflows, 89.4159), then h + (1 / 4) / h with the
  refined reciprocal of min(h, 2^100) (beyond, 1 / (4h) is far below an ulp of h).
- sinh: |x| <= 1: |x| + |x| z P(z), z = x^2, P the Taylor polynomial of (sinh(x) / x - 1)
  / x^2 (remainder below 1e-12); |x| > 1: h - (1 / 4) / h with h as in cosh (h >= 1.36,
  1 / (4h) <= 0.18: no cancellation); a 0/1 mask picks one exactly, x's sign bit added
  back. Finite up to where sinh itself overflows, as cosh.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import LN2_HI, LN2_LO, _check, _f32, _horner, _pick
from fabric.kernels.mathlib_exp import EXP2_COEFFS, EXP_COEFFS, LOG2E, SHIFTER
from fabric.kernels.mathlib_roots import reciprocal

EXP2_CLAMP_LO, EXP2_CLAMP_HI = -127.0, 128.0  # 2^-127 flushes to 0, 2^128 is inf
# 2^f = sum c_k (f ln 2)^k on |f| <= 1/2: exp's polynomial with c_k ln2^k (rounded once)
EXP2_POLY = tuple(_f32(c * math.log(2) ** k)
                  for k, c in zip(range(len(EXP_COEFFS) - 1, -1, -1), EXP_COEFFS))
HYPER_CLAMP = 90.0  # exp(|x|) / 2 is inf from 89.416 on; 90 keeps n = 130 (2^(n-2) = inf)
HYPER_RECIPROCAL_MAX = 2.0**100  # the refined reciprocal's range
SINH_SPLIT = 1.0  # sinh's polynomial up to |x| = 1, h - 1 / (4h) beyond
# (sinh(c) / c - 1) / c^2 = sum_k c^(2k) / (2k + 3)!, highest first (k = 5 .. 0)
SINH_COEFFS = tuple(_f32(1.0 / math.factorial(2 * k + 3)) for k in range(5, -1, -1))

# Measured bounds (fp32 ulps of the correctly rounded result, both fma modes;
# tests/kernels/test_unary_functions.py)
EXP2_ULPS = 1
SINH_ULPS = 2
COSH_ULPS = 2


def exp2(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = 2^src, within EXP2_ULPS ulps wherever 2^src is normal (module docstring);
    exact at integers.

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: two memory DSDs of n elements.

    Edge values (as torch.exp2, subnormal results flushed): x >= 128 and +inf give inf;
    x < -126 (2^x below FLT_MIN) and -inf give +0; +-0 give 1; NaN gives NaN.
    """
    _check("exp2", dst, src, scratch, 2, True)
    t, k = scratch[:2]
    return [
        ins.max_(t, src, EXP2_CLAMP_LO), ins.min_(t, t, EXP2_CLAMP_HI),
        ins.add(k, t, SHIFTER),  # 1.5 * 2^23 + n, n = round(t)
        ins.sub(dst, k, SHIFTER),  # n (exact)
        ins.sub(t, t, dst),  # f = t - n (exact)
        *_horner(dst, t, EXP2_POLY),  # 2^f
        ins.shl(k, k, 23),  # n << 23
        ins.iaddv(dst, dst, k),  # 2^f 2^n by the exponent field
        ins.fma(dst, dst, t, 0.0),  # subnormal bits to 0; a NaN f gives NaN
    ]


def _half_exp(h: Mem, a: Mem, t: Mem, k: Mem) -> list:
    """h = exp(a) / 2 for a >= 0 (or NaN), within exp's bound, inf from 89.416 on: exp's
    sequence (`mathlib_exp.exp`) with a clamped to HYPER_CLAMP and 2^(n - 2) for 2^(n - 1),
    n <= 130 (2^(n - 2) = (n + 125) << 23, inf for n = 130). t, k: scratch (t may be a)."""
    shifter = SHIFTER + 125
    return [
        ins.min_(t, a, HYPER_CLAMP),
        ins.fma(k, shifter, t, LOG2E),  # 1.5 * 2^23 + 125 + n, n = round(t log2 e)
        ins.sub(h, k, shifter),  # n (exact)
        ins.fma(t, t, h, -LN2_HI), ins.fma(t, t, h, -LN2_LO),  # r = t - n ln2
        *_horner(h, t, EXP2_COEFFS),  # 2 exp(r)
        ins.shl(k, k, 23),  # 2^(n - 2)
        ins.mul(h, h, k),
    ]


def cosh(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = cosh(src), within COSH_ULPS ulps for every x with a finite cosh (module
    docstring).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: four memory DSDs of n elements.

    Edge values (as torch.cosh): +-inf and |x| > 89.4159 give inf, +-0 give 1, NaN NaN.
    """
    _check("cosh", dst, src, scratch, 4, True)
    a, k, h, q = scratch[:4]
    return [
        ins.shl(a, src, 1), ins.shr(a, a, 1),  # |x|
        *_half_exp(h, a, a, k),  # h = exp(|x|) / 2
        ins.min_(q, h, HYPER_RECIPROCAL_MAX),
        *reciprocal(dst, q, (a,), refined=True),
        ins.fma(dst, h, dst, 0.25),  # h + 1 / (4h)
    ]


def sinh(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = sinh(src), within SINH_ULPS ulps for every x with a finite sinh (module
    docstring).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: six memory DSDs of n elements.

    Edge values (as torch.sinh): +-inf and |x| > 89.4159 give +-inf, +-0 give +-0, NaN NaN.
    """
    _check("sinh", dst, src, scratch, 6, True)
    a, g, m, h, t, k = scratch[:6]
    return [
        ins.shl(a, src, 1), ins.shr(a, a, 1),  # |x|
        ins.isubv(g, src, a),  # the sign bit of x
        ins.sub(m, SINH_SPLIT, a), ins.shr(m, m, 31), ins.itof(m, m),  # [|x| > 1]
        *_half_exp(h, a, t, k),  # h = exp(|x|) / 2
        ins.min_(t, h, HYPER_RECIPROCAL_MAX),
        *reciprocal(k, t, (dst,), refined=True),
        ins.fma(h, h, k, -0.25),  # h - 1 / (4h), |x| > 1
        ins.min_(a, a, SINH_SPLIT),  # c (finite for the product in the pick)
        ins.mul(t, a, a),
        *_horner(k, t, SINH_COEFFS), ins.mul(k, k, t), ins.mul(k, k, a),
        ins.add(k, k, a),  # c + c z P(z), |x| <= 1
        *_pick(dst, m, h, k),  # h may be inf where m is 1; k is finite
        ins.iaddv(dst, dst, g),
    ]
