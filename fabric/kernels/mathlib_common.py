"""What the routines of `fabric.kernels.mathlib` share: fp32 immediates (`_f32`), the
constants of more than one family (ln 2 in two parts, the bits of 1.0, FLT_MAX), the
operand checks (`_check`: memory DSDs, enough scratch vectors, no overlap) and Horner's
scheme (`_horner`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.instructions import Mem


def _f32(value: float) -> float:
    """`value` rounded to fp32, as a Python float (the immediates of the instructions)."""
    return float(np.float32(value))


# ln 2 split so that n * LN2_HI is exact for |n| < 2^9 (LN2_HI has 15 significant bits)
LN2_HI = 0.693145751953125
LN2_LO = _f32(math.log(2) - LN2_HI)
ONE_BITS = 0x3F800000
F32_MAX = float(np.finfo(np.float32).max)


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


def _abs_below(m: Mem, src: Mem, bound: float) -> list:
    """m = 1.0 where |src| < bound, else 0.0: the sign bit of |src| - bound (|src| with its
    sign bit cleared)."""
    return [ins.shl(m, src, 1), ins.shr(m, m, 1), ins.add(m, m, -bound), ins.shr(m, m, 31),
            ins.itof(m, m)]


def _sign_factor(dst: Mem, src: Mem) -> list:
    """dst = 1 - 2 signbit(src): +1.0 or -1.0, src's sign (-0 and negative NaNs too)."""
    return [ins.shr(dst, src, 31), ins.itof(dst, dst), ins.mul(dst, dst, -2.0),
            ins.add(dst, dst, 1.0)]


def _pick(dst: Mem, m: Mem, p: Mem, q: Mem, q_times_m: Mem | None = None) -> list:
    """dst = m p + (1 - m) q for a 0/1 mask m, exactly: m p - (m q - q), one term zero; m q -
    q is +0 where m is 1 (x - x), and p - +0 keeps p's sign (-0 too). m and p are
    overwritten; `q_times_m`: q's stand-in in the product (q clamped where q may be
    infinite and m 0, so that the product is 0, not NaN; default q)."""
    return [ins.mul(p, p, m), ins.mul(m, m, q if q_times_m is None else q_times_m),
            ins.sub(m, m, q), ins.sub(dst, p, m)]
