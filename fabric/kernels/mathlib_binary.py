"""The two-argument functions of `fabric.kernels.mathlib`: atan2(y, x) and hypot(x, y), with
their constants and measured ulp bounds.

Methods (every branch computed for every element, picked by exact 0/1 masks; a = min(|x|,
|y|) and b = max(|x|, |y|), both read flushed, as `|v| = max(v, -v)`):
- scaling (`_scaled`): a and b times p = 2^(127 - E), E the exponent field of b clamped to
  [2^-126, 2^126], exactly (two integer ops give 2^(E - 127) from b's bits, a third p), so
  that b' = b p lies in [1, 4) for every finite nonzero b: no overflow, no subnormal, the
  reciprocal in range; b = 0 gives b' = 0, b = inf b' = inf.
- atan2: infinite b is replaced first (b' = 4, a' = 4 if a is infinite too, else 0: the
  ratio 1 or 0) and b' = 0 by 1 (a' = 0: ratio 0); then Cephes' atanf reduction on the ratio
  r = a / b in [0, 1]: w = [r > tan(pi / 8)], u = (a - w b) / (b + w a), |u| <= tan(pi /
  8), as q = num / den by one refined reciprocal plus the reciprocal times the residual
  num + en - q den (en: the rounding error of a - w b, exact by Fast2Sum), so that u is
  within about an ulp; atan(r) = w pi / 4 + u + c, c = u z P(z), z = u^2
  (`mathlib_atrig.ATAN_COEFFS`). The quadrant, from q = [|y| > |x|] (the bits of |x| and |y|
  compared as integers) and s = signbit(x) (-0 negative): the angle is
  k pi / 2 + F atan(r), k = 2 s + q - 2 s q, F = (1 - 2 s)(1 - 2 q), summed as
  (j QPI_HI + F u) + (j QPI_LO + F c), j = 2 k + F w in 0..4, F folded into u's numerator,
  j QPI_HI exact (QPI_HI is pi / 4 on a 2^-22 grid), so that the large terms meet in one
  rounding; y's sign bit added last.
- hypot: NaN inputs are first replaced by +0 (their bits shifted out), so that an infinity
  wins; h = sqrt(a'^2 + b'^2) / p, the square root from two Newton steps of the rsqrt
  estimate and one correction on its residual (s0 + (s - s0^2) rsqrt(s) / 2); then max with
  +inf where b' is infinite, and max with x 0 + y 0 (NaN for an infinite or NaN input,
  else +-0) shifted out where h is infinite: NaN where an input is NaN and none infinite.

Special values as torch (subnormal inputs read as zeros of their sign): atan2(+-0, +0) =
+-0, atan2(+-0, -0) = +-pi, atan2(+-0, x < 0) = +-pi, atan2(+-0, x > 0) = +-0, atan2(y, +-0)
= +-pi / 2 (y != 0), atan2(+-inf, +inf) = +-pi / 4, atan2(+-inf, -inf) = +-3 pi / 4,
atan2(+-inf, finite x) = +-pi / 2, atan2(+-y, +inf) = +-0, atan2(+-y, -inf) = +-pi (y
finite), NaN in either gives NaN. hypot(+-inf, anything) = +inf (NaN too), NaN with a finite
value gives NaN, hypot(+-0, +-0) = +0, an overflowing result +inf.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_atrig import ATAN_COEFFS, TAN_PI8
from fabric.kernels.mathlib_common import _check, _f32, _horner
from fabric.kernels.mathlib_roots import INF_BITS, RSQRT_MAGIC, reciprocal

# pi / 4 in two parts: HI on a 2^-22 grid (j QPI_HI exact in fp32 for j <= 4), LO the rest
QPI_HI = round(math.pi / 4 * 2.0**22) / 2.0**22
QPI_LO = _f32(math.pi / 4 - QPI_HI)
SCALE_LO, SCALE_HI = 2.0**-126, 2.0**126  # the clamp of b whose exponent gives the scale
SCALE_BITS = 0x7F000000  # 2^(127 - E) = bits (254 - E) << 23 = SCALE_BITS - (E << 23)
QUIET_NAN_BITS = 0x7FC00000
ATAN2_SCRATCH = 9
HYPOT_SCRATCH = 8

# Measured bounds (fp32 ulps of the correctly rounded result, dense 2-D sweeps, both fma
# modes; tests/kernels/test_binary_math.py)
ATAN2_ULPS = 2
HYPOT_ULPS = 1


def _abs(dst: Mem, src: Mem, t: Mem) -> list:
    """dst = |src| = max(src, -src), read flushed (a subnormal gives +0, -0 gives +0, NaN
    NaN); t scratch."""
    return [ins.mul(t, src, -1.0), ins.max_(dst, src, t)]


def _scaled(b: Mem, a: Mem, inv: Mem, p: Mem) -> list:
    """b, a = b p, a p with p = 2^(127 - E) (p kept in `p`, 1 / p in `inv`), E the exponent
    field of b clamped to [SCALE_LO, SCALE_HI]: b p in [1, 4) for finite nonzero b, exact
    (a p flushes only below 2^-126 b p)."""
    return [
        ins.max_(inv, b, SCALE_LO), ins.min_(inv, inv, SCALE_HI),
        ins.shr(inv, inv, 23), ins.shl(inv, inv, 23),  # 2^(E - 127): the fraction cleared
        ins.isubv(p, SCALE_BITS, inv),  # 2^(127 - E)
        ins.mul(b, b, p), ins.mul(a, a, p),
    ]


def atan2(dst: Mem, y: Mem, x: Mem, scratch: Sequence[Mem]) -> list:
    """dst = atan2(y, x), within ATAN2_ULPS ulps for every pair (module docstring).

    Args:
        dst, y, x: memory DSDs of n elements (dst may be y: y and x are read by the first
            ops only, dst written by the last).
        scratch: ATAN2_SCRATCH (9) memory DSDs of n elements.

    Edge values: torch.atan2's (module docstring): the sign of zero and +-pi by the sign
    bits of y and x, the infinities' multiples of pi / 4, NaN for a NaN.
    """
    _check("atan2", dst, y, scratch, ATAN2_SCRATCH, True)
    _check("atan2", dst, x, scratch, ATAN2_SCRATCH, True)
    ax, ay, g, e1, f, t, v, ib, ia = scratch[:ATAN2_SCRATCH]
    return [
        *_abs(ax, x, t), *_abs(ay, y, t),
        ins.shr(g, y, 31), ins.shl(g, g, 31),  # y's sign bit
        ins.shr(e1, x, 31), ins.itof(e1, e1), ins.fma(e1, 1.0, e1, -2.0),  # 1 - 2 s
        # 1 - 2 q, q = [|y| > |x|] from the bits as integers (both non-negative)
        ins.isubv(f, ax, ay), ins.shr(f, f, 31), ins.itof(f, f), ins.fma(f, 1.0, f, -2.0),
        ins.mul(f, f, e1),  # F
        ins.max_(t, ax, ay), ins.min_(ax, ax, ay),  # b in t, a in ax
        *_scaled(t, ax, ay, v),
        # infinite b: b' = 4, a' = 4 [a infinite] (b' < 4 for finite b); b' = 0: 1
        ins.min_(v, t, 4.0), ins.sub(ib, t, v), ins.min_(ib, ib, 1.0),  # [b infinite]
        ins.max_(t, v, 1.0),
        ins.min_(v, ax, 4.0), ins.sub(ia, ax, v), ins.min_(ia, ia, 1.0),  # [a infinite]
        ins.sub(ib, 1.0, ib), ins.mul(ax, v, ib), ins.fma(ax, ax, ia, 4.0),
        # w = [a > tan(pi / 8) b]: the sign bit of tan(pi / 8) b - a
        ins.mul(v, t, TAN_PI8), ins.sub(v, v, ax), ins.shr(v, v, 31), ins.itof(v, v),
        # den = b + w a (in ib), num = a - w b (in ay) and its rounding error en = a -
        # (num + w b) (in ax; exact, as |w b| >= a: 0 where a >= b / 2)
        ins.mul(ia, ax, v), ins.add(ib, t, ia),
        ins.mul(t, t, v), ins.sub(ay, ax, t), ins.add(t, ay, t), ins.sub(ax, ax, t),
        # j = 2 k + F w = 2 - e1 + F (w - 1)
        ins.add(v, v, -1.0), ins.mul(v, v, f), ins.sub(v, v, e1), ins.add(v, v, 2.0),
        *reciprocal(ia, ib, (t,), refined=True),  # den in [1, 8]
        # u = (num + en) / den, |u| <= tan(pi / 8): q = num r, plus r times the residual
        # num + en - q den (num - q den exact: q den is within 2 ulps of num)
        ins.mul(t, ay, ia), ins.mul(e1, t, ib), ins.sub(e1, ay, e1), ins.add(e1, e1, ax),
        ins.mul(e1, e1, ia), ins.add(ax, t, e1),
        ins.mul(ax, ax, f),  # F u
        ins.mul(ay, ax, ax),  # z
        *_horner(t, ay, ATAN_COEFFS), ins.mul(t, t, ay), ins.mul(t, t, ax),  # F c
        ins.fma(ax, ax, v, QPI_HI), ins.fma(t, t, v, QPI_LO),
        ins.add(ax, ax, t),
        ins.iaddv(dst, ax, g),
    ]


def _sqrt_core(dst: Mem, s: Mem, r: Mem, e: Mem) -> list:
    """dst = sqrt(s) for s in [0, 32] (or 0): two Newton steps of the rsqrt estimate r
    (within 5e-6), s0 = s r, then s0 + (s - s0^2) r / 2 (within an ulp)."""
    code = [ins.shr(r, s, 1), ins.isubv(r, RSQRT_MAGIC, r)]
    for _ in range(2):
        code += [ins.mul(e, s, r), ins.mul(e, e, r), ins.fma(e, 1.5, e, -0.5),
                 ins.mul(r, r, e)]
    return code + [ins.mul(dst, s, r), ins.mul(e, dst, dst), ins.sub(e, s, e),
                   ins.mul(e, e, r), ins.fma(dst, dst, e, 0.5)]


def _nan_to_zero(dst: Mem, src: Mem, k: Mem) -> list:
    """dst = |src| with a NaN replaced by +0: the bits of |src| shifted left twice by 32 (the
    shifter saturates at 31) where they exceed inf's. k scratch."""
    return [
        ins.shl(dst, src, 1), ins.shr(dst, dst, 1),  # |src|
        ins.isubv(k, INF_BITS, dst), ins.shr(k, k, 31), ins.shl(k, k, 5),  # 32 for a NaN
        ins.shl(dst, dst, k), ins.shl(dst, dst, k),
    ]


def hypot(dst: Mem, x: Mem, y: Mem, scratch: Sequence[Mem]) -> list:
    """dst = hypot(x, y) = sqrt(x^2 + y^2) without overflow or underflow on the way, within
    HYPOT_ULPS ulps for every pair (module docstring).

    Args:
        dst, x, y: memory DSDs of n elements (dst may be x: x and y are read by the first
            ops only, dst written by the last).
        scratch: HYPOT_SCRATCH (8) memory DSDs of n elements.

    Edge values (as torch.hypot): an infinite input gives +inf (with a NaN too), else a NaN
    gives NaN; +-0, +-0 give +0; a result beyond FLT_MAX +inf.
    """
    _check("hypot", dst, x, scratch, HYPOT_SCRATCH, True)
    _check("hypot", dst, y, scratch, HYPOT_SCRATCH, True)
    ax, ay, k, z, b, inv, p, s = scratch[:HYPOT_SCRATCH]
    return [
        *_nan_to_zero(ax, x, k), *_nan_to_zero(ay, y, k),
        ins.mul(z, x, 0.0), ins.fma(z, z, y, 0.0),  # NaN for inf or NaN inputs, else +-0
        ins.max_(b, ax, ay), ins.min_(ax, ax, ay),  # b, a (float ops: flushed)
        *_scaled(b, ax, inv, p),
        ins.min_(ay, b, 4.0), ins.sub(b, b, ay),  # b' clamped; inf where b is infinite
        ins.min_(ax, ax, 4.0),
        ins.mul(s, ax, ax), ins.mul(ay, ay, ay), ins.add(s, s, ay),  # in [0, 32]
        *_sqrt_core(ax, s, p, k),
        ins.mul(ax, ax, inv),  # unscaled: a normal number, or inf by overflow
        ins.max_(ax, ax, b),  # inf where an input is infinite
        # the NaN term shifted out (to +0) where the result is infinite
        ins.iaddv(k, ax, 0x00800000), ins.shr(k, k, 31), ins.shl(k, k, 5),
        ins.shr(z, z, k),
        ins.max_(dst, ax, z),
    ]
