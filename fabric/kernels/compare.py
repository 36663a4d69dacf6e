"""Elementwise comparison with a scalar as a 0/1 mask: y = 1.0 where (x op s) else 0.0, for
x of shape (m, n) in 2D blocks on a rectangle (layout of `base.Blocks`), op "gt",
"lt", "ge", "le", "eq" or "ne". The mask is what a select multiplies by (relu's gradient is
g * (x > 0)); token ids compared with a padding id give the attention and position masks.

The PE has no compare builtin; the mask comes from max/min/mul/add, exactly:

    d = x - s (gt, le) or s - x (lt, ge)      d > 0 exactly when x > s (x < s)
    step = min(max(d, 0) * 2^127, 1)          0 for d <= 0; for d >= 2^-126 (the smallest
                                              normal) max(d, 0) * 2^127 >= 2, so 1
    y = step (gt, lt) or 1 - step (le, ge)    (-step + 1: exact for step in {0, 1})
    ne, eq: d = |x - s| = max(x - s, -(x - s)) (one scratch vector), y = step (ne) or
    1 - step (eq)

int32 input (from_int32=True, dtype "f32" only): x holds int32 words (token ids as the host
writes them); one `itof` first makes them fp32, exact for |x| <= 2^24, the range in which
the fabric carries integer values as fp32 (larger ids are refused at run time by the
frontend's embedding checks, not here).

x - s is exact in sign: it is 0 only when x == s, except that the fabric's fp32 ops flush
subnormal results to zero, so |x - s| < 2^-126 reads as equality (with s = 0: a subnormal
x compares as 0). NaN inputs give an unspecified 0 or 1.

Cycle model (exact): T = 2 + sum over the ops of ceil(e_max / w_op) (task start and end,
one straight list of synchronous ops over the PE's e elements; `mathlib.sequence_cycles`):
3 ops plus the subtraction (none for s = 0 with gt/le), plus 2 for le/ge; eq/ne: the
subtraction (a copy for s = 0), a negation and a max before the 3, plus 2 for eq; plus the
itof of an int32 input.

Example:
    >>> k = build_compare(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 6, 5, "gt", 0.0)
    >>> y = run_kernel(k, {"x": x}).output                       # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Kernel
from fabric.kernels.unary import build_blockwise
from fabric.program import Rect

OPS = ("gt", "lt", "ge", "le", "eq", "ne")
_BIG = float(2.0 ** 127)  # any normal fp32 d > 0 times this is >= 2


def compare_code(op: str, scalar: float, from_int32: bool = False):
    """code_of(y, x, scratch) for `build_blockwise`: the straight op list above (eq and ne
    use scratch[0]; y may be x)."""
    s = float(np.float32(scalar))

    def code_of(y, x, scratch):
        code = []
        if from_int32:
            code.append(ins.itof(y, x))  # int32 words -> fp32, exact up to 2^24
            x = y
        if op in ("eq", "ne"):  # |x - s| into y
            code.append(ins.add(y, x, -s) if s != 0.0 else ins.mov(y, x))
            code += [ins.mul(scratch[0], y, -1.0), ins.max_(y, y, scratch[0])]
            src = y
        elif op in ("gt", "le"):
            src = x
            if s != 0.0:
                code.append(ins.add(y, x, -s))  # x + (-s) is x - s, rounded once
                src = y
        else:  # s - x = (-x) + s
            code += [ins.mul(y, x, -1.0), ins.add(y, y, s)]
            src = y
        code += [ins.max_(y, src, 0.0), ins.mul(y, y, _BIG), ins.min_(y, y, 1.0)]
        if op in ("le", "ge", "eq"):
            code += [ins.mul(y, y, -1.0), ins.add(y, y, 1.0)]
        return code

    return code_of


def build_compare(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "gt",
                  scalar: float = 0.0, dtype: str = "f32", from_int32: bool = False) -> Kernel:
    """y = 1.0 where x op scalar else 0.0, x and y (m, n); op "gt", "lt", "ge", "le", "eq",
    "ne". Inputs {"x"}; output (m, n). dtype: storage of x and y (a 16-bit x is widened
    exactly, the mask is exact in every format). from_int32: x holds int32 words (dtype
    "f32" only); the load writes x's words as given, so pass the ids' bits as float32
    (`ids.astype(np.int32).view(np.float32)`; the frontend writes an integer input's words
    so, and probes the layout with the plain load)."""
    if op not in OPS:
        raise ValueError(f"compare: op must be one of {OPS}, got {op!r}")
    if not np.isfinite(np.float32(scalar)):
        raise ValueError(f"compare: the scalar must be a finite fp32 value, got {scalar}")
    if from_int32 and dtype != "f32":
        raise ValueError(f"compare: an int32 input needs dtype 'f32', got {dtype!r}")
    code_of = compare_code(op, scalar, from_int32)
    scratch = 1 if op in ("eq", "ne") else 0

    def cycles_of(cfg, e):
        probe = ins.Mem("y", length=e)
        work = [ins.Mem("s0", length=e)] * scratch
        return ml.sequence_cycles(cfg, code_of(probe, ins.Mem("x", length=e), work), e)

    kernel = build_blockwise(config, rect, m, n, f"compare_{op}", code_of, scratch, cycles_of,
                             dtype)
    kernel.info.update(op=op, scalar=float(np.float32(scalar)), from_int32=from_int32)
    return kernel


def compare_reference(x: np.ndarray, op: str = "gt", scalar: float = 0.0) -> np.ndarray:
    """numpy's mask, with the fabric's flush of subnormal differences (see above)."""
    x = np.asarray(x, np.float32)
    s = np.float32(scalar)
    d = {"gt": x - s, "le": x - s, "eq": np.abs(x - s), "ne": np.abs(x - s)}.get(op, s - x)
    d = np.where(np.abs(d) < np.float32(2.0 ** -126), np.float32(0), d)
    step = (d > 0).astype(np.float32)
    return step if op in ("gt", "lt", "ne") else np.float32(1) - step
