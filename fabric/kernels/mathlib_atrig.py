"""The inverse trigonometric functions of `fabric.kernels.mathlib`: atan, asin and acos, with
their constants and measured ulp bounds.

Methods (Cephes' atanf and asinf, every branch computed for every element and picked by 0/1
masks, exactly):
- atan: t = |x| (clamped to ATAN_CLAMP, past which atan is pi / 2 in fp32); r = t for
  t <= tan(pi / 8), (t - 1) / (t + 1) for t <= tan(3 pi / 8), -1 / t beyond, as num / den
  with one refined reciprocal; atan(r) = r + r z P(z), z = r^2, |r| <= tan(pi / 8); plus
  w pi / 4 (w = 0, 1, 2) in two parts; x's sign bit added back.
- asin: a = |x|; a <= 1/2: asin(a) = a + a z P(z), z = a^2; a > 1/2: pi / 2 - 2 asin(s),
  s = sqrt(z), z = (1 - a) / 2 (exact), the square root from rsqrt plus one Newton step on
  its residual (within an ulp: the 3-ulp `sqrt` would cost twice that here). The
  polynomial's argument v (a or s, and z) is picked first; asin(v) = v + c, c = v z P(z),
  and the result C pi / 2 + F asin(v), (C, F) = (0, 1) or (1, -2), is summed as
  (C PIO2_HI + F v) + (C PIO2_LO + F c) (`_combine`: F v and C PIO2_HI exact, so that
  doubling asin(v) near |x| = 1/2 doubles no rounding); x's sign bit added back.
- acos: the same polynomial on the same argument, with (C, F) by x's sign s and the mask m
  (a > 1/2): C = 1 - m s, F = s (3m - 1): 2 asin(s) for x > 1/2 (no cancellation near
  x = 1), pi - 2 asin(s) for x < -1/2, pi / 2 - asin(x) between, summed as in asin.

asin and acos give NaN for |x| > 1 (a NaN maxed in: `mathlib_roots._negative_nan` of
(1 - a) / 2). Special values as torch: atan(+-inf) = +-pi / 2, atan(+-0) = +-0, asin(+-0)
= +-0, acos(+-0) = pi / 2, acos(1) = +0, acos(-1) = pi, NaN gives NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import ONE_BITS, _check, _f32, _horner
from fabric.kernels.mathlib_roots import NEGATIVE_NAN_BIAS, _rsqrt_core, reciprocal

# pi / 2 and pi / 4 in two parts: HI the fp32 rounding, LO the rest (HI + LO within 1e-15)
PIO2_HI = _f32(math.pi / 2)
PIO2_LO = _f32(math.pi / 2 - PIO2_HI)
PIO4_HI, PIO4_LO = PIO2_HI / 2, PIO2_LO / 2
TAN_PI8 = _f32(math.tan(math.pi / 8))  # 0.41421357
TAN_3PI8 = _f32(math.tan(3 * math.pi / 8))  # 2.4142137
# beyond 2^26, pi / 2 - 1 / t rounds to fp32's pi / 2 (as atan(t) does); the clamp keeps
# -1 / t in the refined reciprocal's range and inf out of the products
ATAN_CLAMP = 2.0**26
# atan(r) = r + r z P(z), z = r^2, |r| <= tan(pi / 8): Cephes' atanf, highest first
ATAN_COEFFS = (_f32(8.05374449538e-2), _f32(-1.38776856032e-1), _f32(1.99777106478e-1),
               _f32(-3.33329491539e-1))
# asin(a) = a + a z P(z), z = a^2, a <= 1/2: Cephes' asinf, highest first
ASIN_COEFFS = (_f32(4.2163199048e-2), _f32(2.4181311049e-2), _f32(4.5470025998e-2),
               _f32(7.4953002686e-2), _f32(1.6666752422e-1))

# Measured bounds (fp32 ulps of the correctly rounded result, every x, both fma modes;
# tests/kernels/test_unary_functions.py)
ATAN_ULPS = 3
ASIN_ULPS = 2
ACOS_ULPS = 1


def atan(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = atan(src), within ATAN_ULPS ulps for every x (module docstring).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: six memory DSDs of n elements.

    Edge values (as torch.atan): +-inf give +-pi / 2 (fp32's, 1.5707964), +-0 give +-0,
    NaN NaN.
    """
    _check("atan", dst, src, scratch, 6, True)
    a, g, m2, m3, u, d = scratch[:6]
    return [
        ins.shl(a, src, 1), ins.shr(a, a, 1),  # t = |x|
        ins.isubv(g, src, a),  # the sign bit of x
        ins.min_(a, a, ATAN_CLAMP),
        # m2 = [t > tan(pi / 8)], m3 = [t > tan(3 pi / 8)]: the sign bits of bound - t
        ins.sub(m2, TAN_PI8, a), ins.shr(m2, m2, 31), ins.itof(m2, m2),
        ins.sub(m3, TAN_3PI8, a), ins.shr(m3, m3, 31), ins.itof(m3, m3),
        ins.sub(u, 1.0, m3),
        # den = t m2 + (1 - m3): 1, t + 1, t; num = t (1 - m3) - m2: t, t - 1, -1 (each a
        # sum with a zero term or t - 1, rounded once)
        ins.mul(d, a, m2), ins.add(d, d, u),
        ins.mul(u, a, u), ins.sub(u, u, m2),
        ins.add(m3, m2, m3),  # w: the multiple of pi / 4
        *reciprocal(a, d, (m2,), refined=True),
        ins.mul(u, u, a),  # r, |r| <= tan(pi / 8)
        ins.mul(a, u, u),  # z
        *_horner(m2, a, ATAN_COEFFS), ins.mul(m2, m2, a), ins.mul(m2, m2, u),
        ins.add(m2, m2, u),  # atan(r)
        ins.fma(m2, m2, m3, PIO4_LO), ins.fma(m2, m2, m3, PIO4_HI),  # + w pi / 4
        ins.iaddv(dst, m2, g),
    ]


def asin(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = asin(src), within ASIN_ULPS ulps for |src| <= 1, NaN beyond (module docstring).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: six memory DSDs of n elements.

    Edge values (as torch.asin): +-1 give +-pi / 2, +-0 +-0, |x| > 1 (and +-inf) NaN,
    NaN NaN.
    """
    _check("asin", dst, src, scratch, 6, True)
    v, c, m, nan, code = _asin_core(dst, src, scratch)
    g = scratch[1]
    return code + [
        ins.fma(dst, 1.0, m, -3.0),  # F = 1 - 3m: 1 or -2
        *_combine(v, c, m, dst),
        ins.max_(v, v, nan),
        ins.iaddv(dst, v, g),
    ]


def acos(dst: Mem, src: Mem, scratch: Sequence[Mem]) -> list:
    """dst = acos(src), within ACOS_ULPS ulps for |src| <= 1, NaN beyond (module docstring).

    Args:
        dst, src: memory DSDs of n elements (dst may be src).
        scratch: six memory DSDs of n elements.

    Edge values (as torch.acos): 1 gives +0, -1 pi (fp32's), +-0 pi / 2, |x| > 1 (and
    +-inf) NaN, NaN NaN.
    """
    _check("acos", dst, src, scratch, 6, True)
    v, c, m, nan, code = _asin_core(dst, src, scratch)
    s = scratch[1]
    return code + [
        ins.iaddv(s, s, ONE_BITS),  # s = +-1, x's sign
        ins.fma(dst, -1.0, m, 3.0), ins.mul(dst, dst, s),  # F = s (3m - 1)
        ins.mul(m, m, s), ins.sub(m, 1.0, m),  # C = 1 - m s: 0, 1 or 2
        *_combine(v, c, m, dst),
        ins.max_(dst, v, nan),
    ]


def _combine(v: Mem, c: Mem, k: Mem, f: Mem) -> list:
    """v = (k PIO2_HI + f v) + (k PIO2_LO + f c): k pi / 2 + f asin(v) for asin(v) = v + c,
    k in {0, 1, 2}, f in {+-1, +-2}; f v, f c and k PIO2_HI exact, so that the large
    terms meet in one rounding (the sum with LO apart: one rounding more only near x = 1/2,
    where 2 asin(v) would double the rounding of v + c). c and f are overwritten."""
    return [
        ins.mul(v, v, f), ins.mul(c, c, f),
        ins.fma(v, v, k, PIO2_HI), ins.fma(c, c, k, PIO2_LO),
        ins.add(v, v, c),
    ]


def _asin_core(dst: Mem, src: Mem, scratch: Sequence[Mem]):
    """asin(v) = v + c by the polynomial, v = |x| where |x| <= 1/2, sqrt((1 - |x|) / 2)
    beyond.

    Returns (v, c, m, nan, code): v (scratch[4]), c = v z P(z) (scratch[0]), m = [|x| >
    1/2] (0/1, scratch[2]), nan (a NaN where |x| > 1, else negative: scratch[5]);
    scratch[1] holds x's sign bit. src is read by the first ops only; dst is used as
    scratch after them."""
    a, g, m, z, v, nan = scratch[:6]
    code = [
        ins.shl(a, src, 1), ins.shr(a, a, 1),  # |x|
        ins.isubv(g, src, a),  # the sign bit of x
        ins.sub(m, 0.5, a), ins.shr(m, m, 31), ins.itof(m, m),  # m = [|x| > 1/2]
        ins.sub(z, 1.0, a), ins.mul(z, z, 0.5),  # (1 - |x|) / 2, exact
        # s = sqrt(z): s0 = z rsqrt(z), then s0 + (z - s0^2) rsqrt(z) / 2 (the residual's
        # subtraction exact; s0^2 rounded costs at most half an ulp of s)
        *_rsqrt_core(nan, z, v),
        ins.mul(v, z, nan),  # s0 (0 for z = 0: the rsqrt estimate stays finite)
        ins.mul(dst, v, v), ins.sub(dst, z, dst), ins.mul(dst, dst, nan),
        ins.fma(v, v, dst, 0.5),  # s
        ins.shr(nan, z, 8), ins.iaddv(nan, nan, NEGATIVE_NAN_BIAS),  # NaN where z < 0
        # the argument: v = |x| (1 - m) + s m and z = (|x| (1 - m))^2 + z m, each a sum
        # with a zero term
        ins.sub(dst, 1.0, m), ins.mul(a, a, dst),
        ins.mul(v, v, m), ins.add(v, v, a),
        ins.mul(z, z, m), ins.mul(dst, a, a), ins.add(z, z, dst),
        *_horner(a, z, ASIN_COEFFS), ins.mul(a, a, z),
        ins.mul(a, a, v),  # c: asin(v) = v + c
    ]
    return v, a, m, nan, code
