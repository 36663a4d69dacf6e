"""Reciprocals and roots for `fabric.kernels.mathlib`: reciprocal, rsqrt and sqrt by
bit-trick estimates and Newton steps, with their constants and measured ulp bounds.

Methods:
- rsqrt: the 0x5F3759DF bit-trick estimate, then three Newton steps y (1.5 - 0.5 x y^2).
  With specials, on |x|, then max with +inf for a zero or subnormal |x| (inf's bits
  shifted right by 32 times the exponent field), max with a NaN for x < 0 (an affine map
  of the bits, `_negative_nan`), and the sign bit of x added (-0 gives -inf).
- sqrt: x rsqrt(min(x, FLT_MAX)), then max with the NaN for x < 0.
- reciprocal: the 0x7EF311C3 bit-trick estimate (magic - bits), then three Newton steps
  y (2 - d y); refined, the third as y + y (1 - d y).
"""

from __future__ import annotations

from collections.abc import Sequence

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import F32_MAX, ONE_BITS, _check

RSQRT_MAGIC = 0x5F3759DF
INF_BITS = 0x7F800000
NEGATIVE_NAN_BIAS = 0xFEFF8001 - (1 << 32)  # as int32
RECIPROCAL_MAGIC = 0x7EF311C3
RECIPROCAL_CLAMP = 2.0**127  # reciprocal with specials: |x| clamped (inf's reciprocal: 0)
NEWTON_STEPS = 3

# Measured bounds (fp32 ulps of the correctly rounded result; see `fabric.kernels.mathlib`)
RSQRT_ULPS = 2
SQRT_ULPS = 3
RECIPROCAL_ULPS = 2
RECIPROCAL_REFINED_ULPS = 1


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
