"""sin, cos and tan of `fabric.kernels.mathlib`, with their constants and measured ulp bounds
(tan's method: `tan`).

Method: q = round(x 2 / pi) through the shifter 1.5 * 2^23 (its low bits then hold q, plus
one for cos: cos x = sin(x + pi / 2)); r = x - q pi / 2 in seven parts (Cody-Waite, see
PIO2_PARTS: exact near the zeros of sin whether an fma rounds once or twice), |r| <= pi / 4;
sin r and cos r by the minimax polynomials of Cephes' sinf and cosf; the quadrant's low
bit picks one (a 0/1 mask, the pick exact and -0 kept), its second bit the sign.

Bounds (TRIG_ULPS, TAN_ULPS) hold for |x| < TRIG_MAX = 65536, where the reduction keeps
r's bits; from there on the result is NaN, not a value drifting from the true one (eager
PyTorch reduces exactly at any size). +-inf and NaN give NaN, sin(+-0) = +-0, cos(+-0) = 1,
tan(+-0) = +-0, as torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import F32_MAX, _check, _f32, _horner, _pick
from fabric.kernels.mathlib_exp import SHIFTER
from fabric.kernels.mathlib_roots import reciprocal

TWO_OVER_PI = _f32(0.6366197723675814)
# pi / 2 in seven parts: six of 8 significant bits, whose products with q are exact for
# |q| < 2^16, and the rest rounded (5.7e-18; the sum is pi / 2 within 2e-25), so that near
# a zero of sin, where r is small, every subtraction is exact (Sterbenz) and r keeps its
# bits; each part positive (truncated, not rounded), so that q = 0 leaves -0 as -0
PIO2_PARTS = (1.5703125, 4.825592041015625e-4, 1.2665987014770508e-06, 9.89530235528946e-10,
              2.5579538487363607e-12, 5.384581669432009e-15, _f32(5.721188916458728e-18))
SIN_COEFFS = (_f32(-1.9515295891e-4), _f32(8.3321608736e-3), _f32(-1.6666654611e-1))
COS_COEFFS = (_f32(2.443315711809948e-5), _f32(-1.388731625493765e-3),
              _f32(4.166664568298827e-2))
TRIG_MAX = 65536.0  # |x| below which the bounds hold; NaN from there on
TRIG_ULPS = 3  # measured over dense sweeps (tests/kernels/test_unary_functions.py)
# tan r = r + r z P(z), z = r^2, |r| <= pi / 4: Cephes' tanf, highest first
TAN_COEFFS = (_f32(9.38540185543e-3), _f32(3.11992232697e-3), _f32(2.44301354525e-2),
              _f32(5.34112807005e-2), _f32(1.33387994085e-1), _f32(3.33331568548e-1))
TAN_ULPS = 4  # measured over dense sweeps, as TRIG_ULPS


def sin(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = sin(src), within TRIG_ULPS ulps for |src| < TRIG_MAX (module docstring).
    dst may be src; scratch: six memory DSDs of n elements."""
    return _sin_quadrant(dst, src, scratch, "sin", 0)


def cos(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = cos(src) = sin(src + pi / 2), as `sin`."""
    return _sin_quadrant(dst, src, scratch, "cos", 1)


def _sin_quadrant(dst: Mem, src: Mem, scratch: Sequence[Mem], name: str, offset: int) -> list:
    """dst = sin(src + offset pi / 2): the quadrant q + offset's bits pick and sign."""
    _check(name, dst, src, scratch, 6, True)
    k, q, r, z, s, c = scratch[:6]
    code = [
        *_reduce(k, q, r, src, offset),
        ins.mul(z, r, r),
        # sin r = r + r (r^2 S(r^2)), r^2 S(r^2) made +0 where it is -0 (at r = 0), so that
        # the product takes r's sign and the sum keeps -0
        *_horner(s, z, SIN_COEFFS), ins.mul(s, s, z), ins.add(s, s, 0.0), ins.mul(s, s, r),
        ins.add(s, s, r),
        *_horner(c, z, COS_COEFFS), ins.mul(c, c, z), ins.mul(c, c, z),
        ins.fma(c, c, z, -0.5), ins.add(c, c, 1.0),  # cos r = 1 - r^2 / 2 + r^4 C(r^2)
        # m = 1 where the quadrant is even (sin r), 0 where odd (cos r)
        ins.shl(q, k, 31), ins.shr(q, q, 31), ins.itof(q, q), ins.mul(q, q, -1.0),
        ins.add(q, q, 1.0),
        # the sign: 1 - 2 (the quadrant's second bit)
        ins.shl(r, k, 30), ins.shr(r, r, 31), ins.itof(r, r), ins.mul(r, r, -2.0),
        ins.add(r, r, 1.0),
        # sin r or cos r, exactly (sin r's -0 kept), signed
        *_pick(s, q, s, c), ins.mul(s, s, r),
        # NaN where |x| >= TRIG_MAX: the sign bit of |x| - TRIG_MAX (0 there), 1 - it scaled
        # past FLT_MAX to inf, then inf - inf; +0 elsewhere, subtracted (-0 - +0 is -0)
        *_nan_beyond(dst, s, q, src),
    ]
    return code


def _reduce(k: Mem, q: Mem, r: Mem, src: Mem, offset: int = 0) -> list:
    """k = 1.5 * 2^23 + q + offset (the quadrant in its low bits), q = round(x 2 / pi),
    r = x - q pi / 2 in seven parts (module docstring), |r| <= pi / 4."""
    shifter = SHIFTER + offset
    return [
        ins.fma(k, shifter, src, TWO_OVER_PI),  # 1.5 * 2^23 + q + offset
        ins.sub(q, k, shifter),  # q (exact)
        ins.fma(r, src, q, -PIO2_PARTS[0]),
        *(ins.fma(r, r, q, -part) for part in PIO2_PARTS[1:]),  # r = x - q pi / 2
    ]


def _nan_beyond(dst: Mem, v: Mem, q: Mem, src: Mem) -> list:
    """dst = v, NaN where |src| >= TRIG_MAX: the sign bit of |x| - TRIG_MAX (0 there), 1 -
    it scaled past FLT_MAX to inf, then inf - inf; +0 elsewhere, subtracted (-0 - +0 is
    -0). q: scratch."""
    return [
        ins.shl(q, src, 1), ins.shr(q, q, 1), ins.add(q, q, -TRIG_MAX), ins.shr(q, q, 31),
        ins.itof(q, q), ins.mul(q, q, -F32_MAX), ins.add(q, q, F32_MAX), ins.mul(q, q, 2.0),
        ins.sub(q, q, q), ins.sub(dst, v, q),
    ]


def tan(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = tan(src), within TAN_ULPS ulps for |src| < TRIG_MAX, NaN beyond (module
    docstring). dst may be src; scratch: six memory DSDs of n elements.

    Method: sin's reduction (q, r, |r| <= pi / 4); t = tan r = r + r z P(z), z = r^2 (Cephes'
    tanf); tan x = t for even q, -1 / t for odd q, as num / den with num = t (1 - m) - m and
    den = t m + (1 - m) (m = q mod 2; each exact: one term is zero), one refined reciprocal
    (den is 1 for even q, so t = 0 needs none). For odd q, r is never 0 (no fp32 x is an
    odd multiple of pi / 2).

    Edge values (as torch.tan): +-0 give +-0; +-inf and NaN give NaN.
    """
    _check("tan", dst, src, scratch, 6, True)
    k, q, r, z, t, e = scratch[:6]
    return [
        *_reduce(k, q, r, src),
        ins.mul(z, r, r),
        # t = r + r (z P(z)), z P(z) made +0 where it is -0 (r = 0: -0 kept, as in sin)
        *_horner(t, z, TAN_COEFFS), ins.mul(t, t, z), ins.add(t, t, 0.0), ins.mul(t, t, r),
        ins.add(t, t, r),
        ins.shl(q, k, 31), ins.shr(q, q, 31), ins.itof(q, q),  # m = 1 for odd q
        ins.sub(z, 1.0, q),  # 1 - m
        ins.mul(k, t, q), ins.add(k, k, z),  # den: 1 or t
        ins.mul(t, t, z), ins.sub(t, t, q),  # num: t or -1
        *reciprocal(r, k, (e,), refined=True),
        ins.mul(t, t, r),
        *_nan_beyond(dst, t, q, src),
    ]
