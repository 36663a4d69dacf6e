"""The numpy side of `fabric.kernels.mathlib`: `emulate`, a mirror of a straight list of DSD
ops computed bit for bit as the fabric computes it (subnormals read as zero, fma rounded
once or twice), which makes dense sweeps of the math kernels cheap on the host; and
`log_reference`, `log`'s arithmetic step by step.

Example:
    >>> code = mathlib.exp(Mem("y"), Mem("x"), [Mem("s0"), Mem("s1")])   # doctest: +SKIP
    >>> emulate(code, {"x": xs})["y"].view(np.float32)                    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.isa import Op
from fabric.kernels.mathlib import (
    F32_MAX,
    LN2_HI,
    LN2_LO,
    LOG_BIAS,
    LOG_COEFFS,
    ONE_BITS,
    SQRT_HALF_BITS,
)

# ---- a numpy mirror of a straight list of DSD ops -------------------------------------------
_FLOAT_OPS = (Op.ADD, Op.SUB, Op.MUL, Op.FMA, Op.MAX, Op.MIN)


def _daz(x: np.ndarray) -> np.ndarray:
    """fp32 values with subnormals read as (signed) zero, as the fabric's float ops read them."""
    return np.where(np.abs(x) < np.float32(np.finfo(np.float32).tiny), x * np.float32(0), x)


def _fma_once(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """a + b * s rounded once to fp32: b * s is exact in float64, and the float64 sum rounded
    to odd then to fp32 is the correctly rounded fp32 sum (53 >= 24 + 2 bits)."""
    a64, p = a.astype(np.float64), b.astype(np.float64) * s.astype(np.float64)
    t = a64 + p
    bt = t - a64
    err = (a64 - (t - bt)) + (p - bt)  # the rounding error of t (TwoSum)
    even = (t.view(np.uint64) & np.uint64(1)) == 0
    nudge = np.isfinite(t) & (err != 0) & even
    t = np.where(nudge, np.nextafter(t, np.where(err > 0, np.inf, -np.inf)), t)
    return t.astype(np.float32)


def emulate(code: Sequence, values: dict, fused: bool = True) -> dict:
    """Run a straight list of synchronous DSD ops (as the generators above return) in numpy,
    as the fabric computes it: fp32 ops on flushed operands with flushed results, fma
    rounded once (`fused`) or as a product and a sum, int32 ops on the bit patterns.

    Every memory operand stands for its whole symbol (offsets, strides and length registers
    are ignored: the generators apply every op to the same n elements).

    Args:
        code: the instructions.
        values: symbol name -> fp32 (or uint32 bit pattern) array, all of one shape; symbols
            written before they are read need no entry.

    Returns:
        symbol name -> uint32 bit patterns after the last op (view them as np.float32).

    Example:
        >>> y = emulate(exp(Mem("y"), Mem("x"), [Mem("s0"), Mem("s1")]), {"x": x})["y"]
    """
    u32, f32 = np.uint32, np.float32
    mem = {k: np.ascontiguousarray(v).view(u32) if np.asarray(v).dtype == u32
           else np.ascontiguousarray(v, f32).view(u32) for k, v in values.items()}

    def bits(operand):
        if isinstance(operand, ins.Imm):
            return u32(operand.bits & 0xFFFFFFFF)
        if isinstance(operand, Mem):
            return mem[operand.symbol]
        raise ValueError(f"emulate: unsupported operand {operand!r}")

    with np.errstate(all="ignore"):
        for item in code:
            op, a = item.op, bits(item.a)
            b = bits(item.b) if item.b is not None else None
            if op in _FLOAT_OPS or op == Op.FTOI:
                fa, fb = (_daz(np.asarray(x).view(f32)) if x is not None else None
                          for x in (a, b))
            if op == Op.FMA:
                fs = _daz(np.asarray(bits(item.s)).view(f32))
                fa, fb, fs = np.broadcast_arrays(fa, fb, fs)
                out = _fma_once(fa, fb, fs) if fused else _daz(fb * fs) + fa
            elif op in (Op.MAX, Op.MIN):  # NaN wins; -0 < +0 (as XLA)
                fa, fb = np.broadcast_arrays(fa, fb)
                pick_a = np.signbit(fa) == (op == Op.MIN)
                out = np.where(fa == fb, np.where(pick_a, fa, fb),
                               (np.minimum if op == Op.MIN else np.maximum)(fa, fb))
            elif op in _FLOAT_OPS:
                out = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply}[op](fa, fb)
            elif op == Op.ITOF:
                out = np.asarray(a).view(np.int32).astype(f32)
            if op in _FLOAT_OPS or op == Op.ITOF:
                result = _daz(np.asarray(out, f32)).view(u32)
            elif op == Op.FTOI:
                r = np.clip(np.rint(fa), -2.0**31, 2.0**31 - 128)
                result = np.where(np.isnan(fa), 0, r).astype(np.int32).view(u32)
            elif op == Op.MOV:
                result = a
            elif op in (Op.IADDV, Op.ISUBV):
                result = a + b if op == Op.IADDV else a - b
            elif op in (Op.SHL, Op.SHR):
                shift = np.minimum(b, u32(31))
                result = a << shift if op == Op.SHL else a >> shift
            else:
                raise ValueError(f"emulate: unsupported op {op.name}")
            shape = np.broadcast_shapes(*(np.shape(v) for v in mem.values()))
            mem[item.dst.symbol] = np.broadcast_to(np.asarray(result, u32), shape).copy()
    return mem


# ---- numpy references ---------------------------------------------------------------------
def _flush(x: np.ndarray) -> np.ndarray:
    """fp32 with subnormals flushed to (signed) zero, as the fabric's float ops do."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < np.float32(np.finfo(np.float32).tiny), x * np.float32(0), x)


def _fma(a, b, s, fused: bool) -> np.ndarray:
    if fused:
        return _flush(np.float64(a) + np.float64(b) * np.float64(s))
    return _flush(a + _flush(b * np.float32(s)))


def log_reference(x: np.ndarray, fused: bool = False) -> np.ndarray:
    """The arithmetic of `log` step by step in numpy: integer ops on uint32 bit patterns,
    each float op rounded to fp32 with subnormal results flushed; `fused`: one rounding per
    fma (the engine may round fma once or twice). The fabric's result equals this bit for
    bit for one of the two."""
    u, f32 = np.uint32, np.float32
    b = np.ascontiguousarray(x, np.float32).view(u)
    with np.errstate(all="ignore"):
        a = b << u(1)
        e = a >> u(24)
        normal = (e + u(255)) >> u(8)
        sig = ((b << u(9)) >> u(9)) + (normal << u(23))
        ix = sig.view(np.int32).astype(f32).view(u) + u(ONE_BITS - SQRT_HALF_BITS)
        k = (e - normal + (ix >> u(23)) - u(LOG_BIAS)).view(np.int32).astype(f32)
        f = _flush((((ix << u(9)) >> u(9)) + u(SQRT_HALF_BITS)).view(f32) - f32(1))
        q = _fma(f32(LOG_COEFFS[1]), f, LOG_COEFFS[0], fused)
        for c in LOG_COEFFS[2:]:
            q = _flush(_flush(q * f) + f32(c))
        q = _flush(_flush(q * f) * f)
        r = _flush(_fma(q, k, LN2_LO, fused) + f)
        r = _fma(r, k, LN2_HI, fused)
        nonzero = ((a >> u(1)) + u(0x7FFFFFFF)) >> u(31)
        negative = ((b >> u(31)) + nonzero) >> u(1)
        special = ((nonzero - u(1)) << u(23)) + ((u(0) - negative) << u(22))
        xf = _flush(b.view(f32))
        r = _flush(r + special.view(f32))
        return _flush(r + _flush(xf - np.minimum(xf, f32(F32_MAX)))).reshape(np.shape(x))
