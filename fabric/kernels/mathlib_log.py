"""Logarithms for `fabric.kernels.mathlib`: log and log1p, with their constants and
measured ulp bounds.

Methods:
- log: x = 2^k m with m in [sqrt(2)/2, sqrt(2)) from the bits alone: the significand S
  (the hidden bit added for normal x) converts exactly to a float (itof), whose exponent
  joins x's; log(x) = k ln2 + log1p(f), f = m - 1 (exact), log1p(f) = f + f^2 Q(f) with a
  degree-8 Q (near-minimax in relative error, 4e-9), summed as
  ((f^2 Q + k LN2_LO) + f) + k LN2_HI. Zero, the sign and inf/NaN come from integer and
  float identities (no select): an integer term -inf for +-0 and NaN for x < 0, and
  x - min(x, FLT_MAX), which is 0 for finite x, inf for +inf and NaN for -inf and NaN.
- log1p: log(u) + c / u for u = 1 + x rounded and its rounding error c (see the function).
"""

from __future__ import annotations

from collections.abc import Sequence

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import F32_MAX, LN2_HI, LN2_LO, ONE_BITS, _check, _f32, _horner
from fabric.kernels.mathlib_roots import reciprocal

# log1p(f) = f + f^2 Q(f) on [sqrt(2)/2 - 1, sqrt(2) - 1], near-minimax in relative error
# (4e-9, weighted least squares iterated to equal ripple); Horner coefficients, highest first
LOG_COEFFS = tuple(_f32(c) for c in (
    -0.07623113691806793, 0.12905602157115936, -0.1324300915002823, 0.141816183924675,
    -0.16609050333499908, 0.20001985132694244, -0.25001585483551025, 0.33333325386047363,
    -0.49999988079071045))
SQRT_HALF_BITS = 0x3F3504F3  # sqrt(2)/2 in fp32: m's lower end
# x = S 2^(max(E, 1) - 150) for the significand S and exponent field E; the float S has
# exponent field kv + 127, so k = kv + max(E, 1) - 150 = (ix >> 23) + (E - [E > 0]) - 276
LOG_BIAS = 276

# Measured bounds (fp32 ulps of the correctly rounded result; see `fabric.kernels.mathlib`)
LOG_ULPS = 1
LOG1P_ULPS = 2


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
