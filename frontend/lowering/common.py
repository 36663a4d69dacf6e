"""Helpers shared by the lowering rules."""

from __future__ import annotations

import math

from frontend.values import Const, Ref

# Single-PE cycles per element of each kernel (fp32, WSE-2 widths; the kernels' cycle
# models): a stage's work, which sizes its tile against the others'.
CYCLES_PER_ELEMENT = {"map": 1, "elementwise": 1, "gelu": 27, "softmax": 17, "layernorm": 6,
                      "tanh": 28, "exp": 14}


def as2d(shape) -> tuple[int, int]:
    """(rows, cols) of a tensor seen as a matrix: the last dimension as columns."""
    shape = tuple(shape)
    if not shape:
        return 1, 1
    return max(1, math.prod(shape[:-1])), shape[-1]


def out_shape(node) -> tuple[int, ...]:
    val = node.meta["val"]
    if isinstance(val, (tuple, list)):
        val = val[0]
    return tuple(val.shape)


def relayout(value, fn):
    """Apply a layout function (view, permute, expand, ...) to a Const's tensor or a Ref's
    index map."""
    if isinstance(value, Const):
        return Const(fn(value.value))
    if isinstance(value, Ref):
        return Ref(fn(value.index), value.dtype)
    raise TypeError(f"cannot relayout {type(value).__name__}")


def expand_to(value, shape):
    """A Const or Ref broadcast to `shape` (materialized as a full index map / tensor)."""
    return relayout(value, lambda t: t.expand(shape).contiguous())


def shape_of(value) -> tuple[int, ...]:
    if isinstance(value, Const):
        return tuple(value.value.shape)
    return tuple(value.shape)
