"""pow(a, b) = a ** b of two vectors for `fabric.kernels.mathlib` (torch.pow's argument
order: a the base, b the exponent), with its constants and measured ulp bounds.

Method: y = exp(u), u = b log|a|, with u carried as u_hi + u_lo to about 2^-29 |u|, so that
the error stays within POW_ULPS ulps over the whole range (exp(fl(b log|a|)) with a 1-ulp
log gains an ulp every few units of |u|: the scalar `unary_params.pow`'s `pow_ulps` allows
2 + 6 |u| to 2 + 12 |u|):
- log|a| = k ln 2 + 2 atanh(s), s = f / (2 + f), f = m - 1, |a| = 2^k m with m in
  [sqrt(2)/2, sqrt 2) read from the bits as `mathlib_log.log` does, so |s| <= 0.1716.
  2 + f = d + dl exactly; s = s12 + s_lo with s12 the first 12 bits of f / d and s_lo =
  rho / d, rho = f - s12 (d + dl) (s12 times each 12-bit half of d exact, the first
  difference exact by Sterbenz, the rest 2^-11 of f: s within about 2^-33).
  T = 2 atanh(s) - 2 s = (2/3) s^3 + s^5 Q(z), z = s^2 = s12^2 + s_lo (2 s12 + s_lo) (s12^2
  exact), s^3 = (s12 + s_lo) z, 2/3 in two parts, Q a near-minimax quadratic (3.9e-7 of a
  term below 2 % of T); T is below 1 % of the log, within about 3 ulps of itself.
  log|a| = L_hi + L_lo: H = k LN2_HI (exact) plus W = fl(2 s12 + c), c = T + k LN2_LO +
  2 s_lo, each sum's rounding error kept (Fast2Sum: |H| >= |W| unless k = 0; |2 s12| >= |c|
  unless W is tiny next to H). Measured relative error: 2^-28.9.
- u = b (L_hi + L_lo), b clamped to [-2^32, 2^32] first (beyond, |u| >= 2^32 2^-24 = 256
  for every |a| != 1: exp overflows or flushes as for the true b; for |a| = 1, log|a| = 0
  and u = 0, so (-1) ** +-inf = 1): L_hi = Lh + rest (Lh its first 12 bits) and b = bh +
  bl (12 bits each) make bh Lh and bl Lh exact; u_hi = fl(bh Lh + (bl Lh + b (rest +
  L_lo))), u_lo its rounding error (Fast2Sum).
- exp: `mathlib_exp.exp`'s sequence (n = round(u_hi log2 e), Cody-Waite r = u_hi - n ln 2,
  2 exp(r) by the doubled polynomial, times 2^(n - 1)) with u_lo added to r; u_lo clamped
  below at LO_CLAMP, so that where u_hi is clamped (b huge) the result still overflows to
  inf or flushes to 0.
- Special values, by exact 0/1 masks from the bits (integer ops wherever a NaN may be read,
  whose sign means nothing): u_hi and u_lo become +0 (their bits shifted right by 32) where
  a = +1 or b is +-0 (or subnormal): 1 for every other operand, NaN too. u_hi gains b S,
  S = -inf for a zero (or subnormal) a, +inf for an infinite one, NaN for a NaN, else 0
  (the log of those a comes out as some finite value). The parity of b from g = c -
  2 round(c / 2), c = min(|b|, 2^24) (the shifter 2^23 rounds; both steps exact; every
  |b| >= 2^24 is even): g = 0 for an even integer (+-inf too), +-1 for an odd one, else |g|
  in (0, 1), read from the bits of |g|. NaN bits are added to u_hi where a is negative and
  finite (not -0, not -inf) and b not an integer; a's sign bit is added to the result
  where b is odd.

Special values as torch.pow (C99's powf), subnormal inputs read as zeros of their sign:
pow(x, +-0) = 1 and pow(+1, y) = 1 for every x, y (NaN too); pow(-1, +-inf) = 1; pow(+-0,
y) = +-inf for y < 0 odd, +inf for other y < 0, +-0 for y > 0 odd, +0 for other y > 0;
pow(x, -inf) = +inf for |x| < 1, +0 for |x| > 1, pow(x, +inf) the reverse; pow(-inf, y) =
-0, +0, -inf, +inf for y < 0 odd, y < 0 other, y > 0 odd, y > 0 other; pow(+inf, y < 0) = +0,
pow(+inf, y > 0) = +inf; pow(x < 0 finite, y not an integer) = NaN; NaN otherwise gives NaN.
Results below EXP_TINY = 2^-125.5 flush to 0, as exp's, results beyond FLT_MAX are inf.

Instructions: 145; WSE-2 cycles 124 n for even n (`sequence_cycles`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import (
    F32_MAX,
    LN2_HI,
    LN2_LO,
    ONE_BITS,
    _check,
    _f32,
    _horner,
)
from fabric.kernels.mathlib_exp import (
    EXP2_COEFFS,
    EXP_CLAMP_HI,
    EXP_CLAMP_LO,
    LOG2E,
    SHIFTER,
)
from fabric.kernels.mathlib_log import SQRT_HALF_BITS
from fabric.kernels.mathlib_mod import ROUNDER
from fabric.kernels.mathlib_roots import reciprocal

# (2 atanh(s) - 2 s - (2/3) s^3) / s^5 = Q(s^2) on s^2 <= (3 - 2 sqrt 2)^2 = 0.02944
# (|s| <= 0.1716), near-minimax in relative error (3.9e-7: least squares on Chebyshev
# nodes); Horner coefficients, highest first
ATANH_TAIL = tuple(_f32(c) for c in (0.23047544062137604, 0.28562256693840027,
                                     0.4000001549720764))
TWO_THIRDS_HI = _f32(2 / 3)
TWO_THIRDS_LO = _f32(2 / 3 - TWO_THIRDS_HI)
POW_EXPONENT_CLAMP = 2.0**32  # b's clamp (module docstring)
PARITY_CLAMP = 2.0**24  # from here on every fp32 value is an even integer
LO_CLAMP = -0.125  # u_lo's lower clamp (|u_lo| <= 2^-18 wherever u_hi is not clamped)
ODD_BIAS = 0x01000000  # |g| << 1 = 0x7F000000 (|g| = 1) plus this sets the sign bit
POW_SCRATCH = 8

# Measured bounds (fp32 ulps of the correctly rounded result, dense sweeps of every
# magnitude of a and b, both fma modes; tests/kernels/test_pow_kernel.py): POW_ULPS for
# every pair, and `pow_ulps_bound` per pair: u's relative error (2^-28.9 from the log)
# grows into an ulp of y every 30 or so units of |u| (1 ulp measured up to |u| = 28.7, 2 up
# to 81.6, 3 beyond: 12 million pairs)
POW_ULPS = 3
POW_ULPS_AT_ZERO = 1.5  # pow_ulps_bound at u = 0
POW_ULPS_PER_U = 1 / 32  # and its growth with |u| = |b log|a||


def pow_ulps_bound(a, b) -> np.ndarray:
    """The bound of pow_(a, b)'s error in ulps of the correctly rounded result, per pair
    (float64 array): POW_ULPS_AT_ZERO + POW_ULPS_PER_U |b log|a||, at most POW_ULPS."""
    a64, b64 = (np.asarray(v, np.float64) for v in (a, b))
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.abs(b64 * np.log(np.abs(a64)))
    return np.minimum(POW_ULPS_AT_ZERO + POW_ULPS_PER_U * np.nan_to_num(u, nan=0.0),
                      POW_ULPS)


def pow_(dst: Mem, a: Mem, b: Mem, scratch: Sequence[Mem]) -> list:
    """dst = a ** b (torch.pow(a, b)), within POW_ULPS ulps wherever the result is at
    least EXP_TINY (module docstring).

    Args:
        dst, a, b: memory DSDs of n elements (dst may be a or b: both are read before dst
            is written).
        scratch: POW_SCRATCH (8) memory DSDs of n elements.

    Edge values: torch.pow's (C99 powf; module docstring), with the fabric's flush of
    subnormal inputs and results.
    """
    _check("pow", dst, a, scratch, POW_SCRATCH, True)
    _check("pow", dst, b, scratch, POW_SCRATCH, True)
    x, k, f, d, dl, r, s, sp = scratch[:POW_SCRATCH]
    return [
        *_specials(sp, x, k, a),
        *_log_parts(x, k, f, d, dl, r, s),
        *_times_exponent(k, f, x, k, b, sp, r, s),
        *_masks(x, k, f, a, b, sp, r, d),
        *_exp_of_parts(dst, k, f, x, r, d, s),
    ]


def _specials(sp: Mem, x: Mem, t: Mem, a: Mem) -> list:
    """x = the bits of |a|; sp = S (module docstring): -inf for a zero or subnormal |a|, +inf
    for inf, NaN for NaN, else +0. t scratch."""
    return [
        ins.shl(x, a, 1), ins.shr(x, x, 1),
        ins.min_(sp, x, F32_MAX), ins.sub(sp, x, sp),  # +0 finite, inf, NaN (zero: +0)
        # -inf bits where the exponent field is 0: (E - 1) >> 8 is 0x00FFFFFF there, else 0
        ins.shr(t, x, 23), ins.isubv(t, t, 1), ins.shr(t, t, 8), ins.shl(t, t, 23),
        ins.add(sp, sp, t),
    ]


def _log_parts(x: Mem, k: Mem, f: Mem, d: Mem, dl: Mem, r: Mem, s: Mem) -> list:
    """log|a| = x + k (L_hi, L_lo; module docstring) from x = the bits of |a| (some finite
    value for a zero, subnormal, infinite or NaN a). f, d, dl, r, s scratch; s ends as
    s12."""
    return [
        # |a| = 2^k m, m in [sqrt(2)/2, sqrt 2): m >= sqrt(2)/2 carries into the exponent
        ins.iaddv(x, x, ONE_BITS - SQRT_HALF_BITS),
        ins.shr(k, x, 23), ins.itof(k, k), ins.add(k, k, -127.0),
        ins.shl(x, x, 9), ins.shr(x, x, 9), ins.iaddv(x, x, SQRT_HALF_BITS),
        ins.sub(f, x, 1.0),  # f, exact
        ins.add(d, f, 2.0), ins.sub(x, d, 2.0), ins.sub(dl, f, x),  # 2 + f = d + dl
        *reciprocal(r, d, (x,)),  # 1 / d within 2 ulps, d in [1.7, 2.5]
        ins.mul(s, f, r), ins.shr(s, s, 12), ins.shl(s, s, 12),  # s12
        ins.shr(x, d, 12), ins.shl(x, x, 12), ins.sub(d, d, x),  # d = x + d (12 bits each)
        # rho = f - s12 (2 + f): the first difference exact, the rest 2^-11 of f
        ins.mul(x, s, x), ins.sub(f, f, x), ins.mul(x, s, d), ins.sub(f, f, x),
        ins.mul(x, s, dl), ins.sub(f, f, x),
        ins.mul(f, f, r),  # s_lo
        ins.fma(r, f, s, 2.0), ins.mul(r, r, f), ins.mul(x, s, s),
        ins.add(x, x, r),  # z = s12^2 + s_lo (2 s12 + s_lo), s12^2 exact
        ins.mul(r, s, x), ins.mul(dl, f, x), ins.add(r, r, dl),  # s^3 = (s12 + s_lo) z
        *_horner(d, x, ATANH_TAIL), ins.mul(d, d, x), ins.mul(d, d, r),  # s^5 Q2(z)
        ins.fma(d, d, r, TWO_THIRDS_HI), ins.fma(d, d, r, TWO_THIRDS_LO),  # T
        ins.fma(d, d, k, LN2_LO), ins.fma(d, d, f, 2.0),  # c = T + k LN2_LO + 2 s_lo
        ins.fma(r, d, s, 2.0),  # W = c + 2 s12
        ins.fma(x, r, s, -2.0), ins.sub(d, d, x),  # W's rounding error
        ins.mul(k, k, LN2_HI),  # H, exact (|k| < 2^9, LN2_HI has 15 bits)
        ins.add(x, k, r),  # L_hi
        ins.sub(k, x, k), ins.sub(k, r, k), ins.add(k, k, d),  # L_lo
    ]


def _times_exponent(u_hi: Mem, u_lo: Mem, l_hi: Mem, l_lo: Mem, b: Mem, sp: Mem, t: Mem,
                    bc: Mem) -> list:
    """u_hi, u_lo = b (l_hi + l_lo) (module docstring), plus b S in u_hi; u_hi may be l_lo
    (u_hi is written after l_lo's last read). t, bc scratch."""
    return [
        ins.max_(bc, b, -POW_EXPONENT_CLAMP), ins.min_(bc, bc, POW_EXPONENT_CLAMP),
        ins.shr(t, l_hi, 12), ins.shl(t, t, 12),  # Lh
        ins.sub(l_hi, l_hi, t), ins.add(l_lo, l_hi, l_lo),  # the rest of L_hi, plus L_lo
        ins.shr(l_hi, bc, 12), ins.shl(l_hi, l_hi, 12), ins.sub(u_lo, bc, l_hi),  # bh, bl
        ins.mul(l_hi, l_hi, t), ins.mul(u_lo, u_lo, t),  # bh Lh, bl Lh: exact
        ins.mul(t, bc, l_lo), ins.add(u_lo, u_lo, t),
        ins.add(u_hi, l_hi, u_lo), ins.sub(l_hi, u_hi, l_hi), ins.sub(u_lo, u_lo, l_hi),
        ins.mul(t, bc, sp), ins.add(u_hi, u_hi, t),  # +-inf, NaN where a is special
    ]


def _masks(flip: Mem, u_hi: Mem, u_lo: Mem, a: Mem, b: Mem, sp: Mem, g: Mem,
           t: Mem) -> list:
    """The special values' masks (module docstring): u_hi, u_lo shifted out where a = +1 or
    b = +-0; NaN added to u_hi where a < 0 is finite and b not an integer; flip = a's sign
    bit where b is an odd integer, else 0. g, t scratch (sp is read)."""
    return [
        # [a == +1]: a - 1 is +0 exactly there; its bits with the sign cleared, minus 1
        ins.sub(flip, a, 1.0), ins.shl(flip, flip, 1), ins.shr(flip, flip, 1),
        ins.isubv(flip, flip, 1), ins.shr(flip, flip, 31),
        ins.shl(g, b, 1), ins.shr(g, g, 1),  # |b| bits
        ins.shr(t, g, 23), ins.isubv(t, t, 1), ins.shr(t, t, 31),  # [b zero or subnormal]
        ins.iaddv(flip, flip, t), ins.shl(flip, flip, 5),
        ins.shr(u_hi, u_hi, flip), ins.shr(u_lo, u_lo, flip),
        # g = c - 2 round(c / 2), c = min(|b|, 2^24); then the bits of |g| << 1
        ins.min_(g, g, PARITY_CLAMP), ins.mul(t, g, 0.5), ins.add(t, t, ROUNDER),
        ins.sub(t, t, ROUNDER), ins.fma(g, g, t, -2.0), ins.shl(g, g, 1),
        ins.isubv(t, g, 1), ins.shr(t, t, 31),  # [b even] (a NaN b too)
        ins.iaddv(g, g, ODD_BIAS), ins.shr(g, g, 31),  # [b odd]
        # shift = 32 ([a zero, infinite or NaN] + [b even] + [b odd]): 0 only where the
        # NaN term stays: all ones (a NaN) where a + 0 < 0
        ins.shl(flip, sp, 1), ins.shr(flip, flip, 31),
        ins.iaddv(flip, flip, t), ins.iaddv(flip, flip, g), ins.shl(flip, flip, 5),
        ins.add(t, a, 0.0), ins.shr(t, t, 31), ins.isubv(t, 0, t),
        ins.shr(t, t, flip), ins.add(u_hi, u_hi, t),
        # a's sign bit where b is odd: (s + odd) >> 1, back at bit 31
        ins.shr(flip, a, 31), ins.iaddv(flip, flip, g), ins.shr(flip, flip, 1),
        ins.shl(flip, flip, 31),
    ]


def _exp_of_parts(dst: Mem, u_hi: Mem, u_lo: Mem, flip: Mem, r: Mem, e: Mem,
                  n: Mem) -> list:
    """dst = exp(u_hi + u_lo) with flip's sign bit added: `mathlib_exp.exp`'s sequence with
    u_lo added to the reduced argument. r, e, n scratch."""
    shifter = SHIFTER + 126
    return [
        ins.max_(u_lo, u_lo, LO_CLAMP),
        ins.max_(r, u_hi, EXP_CLAMP_LO), ins.min_(r, r, EXP_CLAMP_HI),
        ins.fma(e, shifter, r, LOG2E),  # 1.5 2^23 + 126 + n, n = round(u_hi log2 e)
        ins.sub(n, e, shifter),
        ins.fma(r, r, n, -LN2_HI), ins.fma(r, r, n, -LN2_LO), ins.add(r, r, u_lo),
        *_horner(dst, r, EXP2_COEFFS),  # 2 exp(r)
        ins.shl(e, e, 23), ins.mul(dst, dst, e),  # times 2^(n - 1)
        ins.iaddv(dst, dst, flip),
    ]
