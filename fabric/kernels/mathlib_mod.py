"""fmod and remainder for `fabric.kernels.mathlib`: dst = fmod(x, y) (C's fmod, torch.fmod)
or remainder(x, y) (Python's %, torch.remainder), exact, with y a vector or a number.

Method, on the magnitudes a = |x|, b = |y| (x's sign is added back last; fmod(x, y) =
sign(x) fmod(a, b)):
1. Scale by a power of two s (exact): s = 2^64 for b < 2^-62, 2^-64 for b >= 2^64 (inf
   too), else 1; A = a s, B = min(b s, 2^64) (B = 2^64 stands for an infinite b, a divisor
   above every finite A). Then B is in [2^-62, 2^64]: nothing below underflows or
   overflows while the quotient is in range, and the result is R = fmod(A, B) / s.
2. Estimate the quotient t = A / B: p = A r with r the refined reciprocal of B (within
   1 ulp), so |p - t| <= 1.5 2^-23 t < 1 for t < 2^22; q0 = round(max(p - 0.5, 0))
   (through the shifter 2^23, exact) is then within 1 of the quotient q = trunc(t):
   p - 0.5 lies in (q - 1.5, q + 0.5).
3. W(k) = A - k B for an integer k, evaluated as fl(fl(A - P) - E), P = fl(k B) and E =
   k B - P exactly (Dekker's product: k split by rounding to 12 significant bits, B by
   truncation, the four partial products exact, each partial sum exact; no fma, so the
   result does not depend on how the engine rounds one). Then:
   - W(q) = R exactly: P / 2 <= A <= 2 P for q >= 1 (Sterbenz: A - P is exact), R is
     representable, so one rounding of the exact R gives R; W(0) = A.
   - W(q + 1) < 0: the sum A - P is again exact (q >= 1) or P = B > A (q = 0).
   - W(q - 1) >= B: A - P exact (q >= 3), or P = B and fl(A - B) >= B by monotonicity.
   So with s_dn = signbit(W(q0)) and s_up = 1 - signbit(W(q0) - B) (W(q0) - B exact by
   Sterbenz where W(q0) >= B), q1 = q0 + s_up - s_dn = q and W(q1) = fmod(A, B) exactly.
4. R = W(q1) / s (exact, flushed where the true result is below FLT_MIN); where q1 = 0 the
   result is a itself (max with [q1 = 0] a: A = a s may have flushed for s = 2^-64); NaN
   where q1 >= FMOD_QUOTIENT_MAX (a max with NaN bits shifted out otherwise); x's sign bit
   added.
remainder: fmod + y where fmod (flushed) is nonzero and its sign differs from y's (torch's
rule, also for zeros: remainder(-0, 2) = -0, remainder(2, -2) = +0): fmod - n, n = -y where the
rule holds, else -y's bits shifted right by 31 (a subnormal, read as +0, so -0 stays -0
and an infinite y adds no NaN).

Domain: exact (0 ulps) for every x, y with |x / y| < FMOD_QUOTIENT_MAX = 2^22; NaN from
2^22 on (a long division would be needed: the quotient has more than 22 bits), never a
wrong value. Special values (as torch, subnormal inputs read as zeros of their sign and
subnormal results flushed to zero): fmod(x, +-0) = NaN, fmod(+-inf, y) = NaN,
fmod(x, +-inf) = x for finite x, fmod(+-0, y) = +-0, NaN in gives NaN; remainder(x, +-inf)
= x where x and y have one sign (or x is 0), y where they differ.

Instruction counts: vector y, fmod 83, remainder 97; numeric y, fmod 56 (55 where s = 1),
remainder 65 (66 for a negative y).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.mathlib_common import ONE_BITS, _check, _f32
from fabric.kernels.mathlib_roots import reciprocal

FMOD_QUOTIENT_MAX = 2.0**22  # |x / y| below which fmod is exact; NaN from here on
FMOD_SCALE_LO = 2.0**-62  # b below it is scaled up by 2^64
FMOD_SCALE_HI = 2.0**64  # b from it on is scaled down by 2^-64; B's clamp (inf's stand-in)
SCALE_STEP_BITS = 64 << 23  # 2^64 as an exponent step of the bits
NAN_BITS = 0x7FC00000
ROUNDER = 2.0**23  # (v + 2^23) - 2^23 rounds v in [0, 2^23) to an integer, half to even
FMOD_SCRATCH = 12  # vector y
FMOD_SCALAR_SCRATCH = 8  # y a number


def fmod(dst: Mem, x: Mem, y: Mem | float, scratch: Sequence[Mem],
         remainder: bool = False) -> list:
    """dst = fmod(x, y) (remainder(x, y) with `remainder`), exact where |x / y| < 2^22, NaN
    beyond (module docstring).

    Args:
        dst, x: memory DSDs of n elements; dst may be x.
        y: a memory DSD of n elements (apart from dst), or a number fixed at build time.
        scratch: FMOD_SCRATCH memory DSDs of n elements (FMOD_SCALAR_SCRATCH for a number).
        remainder: Python's % (torch.remainder) instead of C's fmod.

    Returns:
        the instructions (vector y: 83, 97 with remainder; a number: 56, 65 or 66).
    """
    vector = isinstance(y, Mem)
    need = FMOD_SCRATCH if vector else FMOD_SCALAR_SCRATCH
    name = "remainder" if remainder else "fmod"
    _check(name, dst, x, scratch, need, True)
    if vector:
        _check(name, dst, y, (), 0, False)
        a, big_a, bq, bh, bl, u, q, *t = scratch[:need]
        code = [
            ins.shl(a, x, 1), ins.shr(a, a, 1),  # a = |x|
            ins.shl(t[0], y, 1), ins.shr(t[0], t[0], 1),  # b = |y|
            # s = 2^(64 (k - 1)), k = [b < 2^-62] + [b < 2^64]: the sign bits of b - bound
            ins.add(t[1], t[0], -FMOD_SCALE_LO), ins.shr(t[1], t[1], 31),
            ins.add(t[2], t[0], -FMOD_SCALE_HI), ins.shr(t[2], t[2], 31),
            ins.iaddv(t[1], t[1], t[2]), ins.shl(t[1], t[1], 29),
            ins.iaddv(u, t[1], ONE_BITS - SCALE_STEP_BITS),
            ins.mul(big_a, a, u), ins.mul(bq, t[0], u),
            ins.min_(bq, bq, FMOD_SCALE_HI),  # B (inf -> 2^64)
            ins.isubv(u, 2 * ONE_BITS, u),  # 1 / s
            ins.shr(bh, bq, 12), ins.shl(bh, bh, 12), ins.sub(bl, bq, bh),  # B = bh + bl
            *reciprocal(t[0], bq, (t[1],), refined=True),  # NaN for B = 0
            ins.mul(t[0], big_a, t[0]),  # p
        ]
        consts = None
    else:
        a, big_a, q, *t = scratch[:need]
        consts = _scalar_constants(float(y))
        s, bq, bh, bl, u, r = consts
        code = [ins.shl(a, x, 1), ins.shr(a, a, 1)]
        if s == 1.0:
            big_a = a
        else:
            code.append(ins.mul(big_a, a, s))
        code.append(ins.mul(t[0], big_a, r))  # p
    code += [
        ins.sub(t[0], t[0], 0.5), ins.max_(t[0], t[0], 0.0), ins.add(t[0], t[0], ROUNDER),
        ins.sub(q, t[0], ROUNDER),  # q0, within 1 of the quotient
        *_w(q, big_a, bq, bh, bl, t),  # t[0] = W(q0)
        ins.sub(t[1], t[0], bq), ins.shr(t[1], t[1], 31), ins.shr(t[0], t[0], 31),
        ins.iaddv(t[0], t[0], t[1]), ins.itof(t[0], t[0]),  # s_dn + (1 - s_up)
        ins.sub(q, q, t[0]), ins.add(q, q, 1.0),  # q1 = the quotient
        *_w(q, big_a, bq, bh, bl, t),  # t[0] = W(q1) = fmod(A, B)
        ins.mul(t[0], t[0], u),  # / s
        # where q1 = 0 the result is a (A may have flushed): max with [q1 = 0] a
        ins.min_(t[1], q, 1.0), ins.sub(t[1], 1.0, t[1]), ins.mul(t[1], t[1], a),
        ins.max_(t[0], t[0], t[1]),
        # NaN where q1 >= 2^22: NaN's bits shifted right by 31 [q1 < 2^22] (+0 there)
        ins.add(t[1], q, -FMOD_QUOTIENT_MAX), ins.shr(t[1], t[1], 31),
        ins.shl(t[1], t[1], 5), ins.shr(t[1], NAN_BITS, t[1]), ins.max_(t[0], t[0], t[1]),
        ins.isubv(t[1], x, a),  # the sign bit of x
    ]
    if not remainder:
        return code + [ins.iaddv(dst, t[0], t[1])]
    code += [ins.shr(t[2], x, 31)]  # d = sign(x) != sign(y)
    if vector:
        code += [ins.shr(t[3], y, 31), ins.iaddv(t[2], t[2], t[3]), ins.shl(t[2], t[2], 31),
                 ins.shr(t[2], t[2], 31)]
    elif np.signbit(np.float32(y)):
        code += [ins.isubv(t[2], 1, t[2])]
    code += [
        ins.iaddv(t[3], t[0], 0x7FFFFFFF), ins.shr(t[3], t[3], 31),  # |fmod| != 0
        ins.iaddv(t[2], t[2], t[3]), ins.shr(t[2], t[2], 1),  # c = both
        ins.isubv(t[2], 1, t[2]), ins.shl(t[2], t[2], 5),  # shift 32 (1 - c) (saturates)
    ]
    if vector:
        code += [ins.iaddv(t[3], y, 0x80000000 - (1 << 32)), ins.shr(t[3], t[3], t[2])]
    else:
        neg_bits = int(np.array(-np.float32(y), np.float32).view(np.int32))
        code += [ins.shr(t[3], neg_bits, t[2])]
    # fmod - (-y) where c, fmod - (+0) elsewhere (a -0 fmod stays -0)
    return code + [ins.iaddv(t[0], t[0], t[1]), ins.sub(dst, t[0], t[3])]


def _w(k: Mem, big_a: Mem, bq, bh, bl, t: Sequence[Mem]) -> list:
    """t[0] = W(k) = fl(fl(A - P) - E), P = fl(k B), E = k B - P exactly (Dekker: k split by
    rounding to 12 significant bits, B = bh + bl by truncation); t: five scratch vectors."""
    kh, kl, p, e, pr = t[:5]
    return [
        ins.iaddv(kh, k, 0x800), ins.shr(kh, kh, 12), ins.shl(kh, kh, 12),  # k rounded
        ins.sub(kl, k, kh),
        ins.mul(p, k, bq),
        ins.mul(e, kh, bh), ins.sub(e, e, p),
        ins.mul(pr, kh, bl), ins.add(e, e, pr),
        ins.mul(pr, kl, bh), ins.add(e, e, pr),
        ins.mul(pr, kl, bl), ins.add(e, e, pr),  # E
        ins.sub(p, big_a, p), ins.sub(kh, p, e),
    ]


def _scalar_constants(y: float) -> tuple[float, ...]:
    """(s, B, bh, bl, 1 / s, 1 / B) for a number y, as the vector code computes them (the
    reciprocal correctly rounded; NaN where y is 0, subnormal or NaN)."""
    f32 = np.float32
    b = abs(f32(y))
    if not np.isnan(b) and b < np.finfo(f32).tiny:
        b = f32(0.0)
    s = 2.0**64 if b < FMOD_SCALE_LO else (2.0**-64 if b >= FMOD_SCALE_HI else 1.0)
    bq = f32(min(float(b) * s, FMOD_SCALE_HI)) if not np.isnan(b) else f32(np.nan)
    bh = (np.array(bq, f32).view(np.uint32) >> np.uint32(12) << np.uint32(12)).view(f32)
    bl = f32(bq - bh)
    r = _f32(1.0 / float(bq)) if bq > 0 else float("nan")
    return s, float(bq), float(bh), float(bl), 1.0 / s, r
