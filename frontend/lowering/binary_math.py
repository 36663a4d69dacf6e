"""Elementwise math of two tensors: atan2(y, x) and hypot(x, y), with PyTorch broadcasting,
as one stage of `build_binary_math` (the sequences of `fabric.kernels.mathlib_binary`:
atan2 within 2 ulps, hypot within 1, torch's special values); `binary_math_stage` also
serves pow of two tensors (`powers`).

Both operands are broadcast to the output shape; a constant operand (a tensor the model
holds, a 0-d tensor) is held on a resident tile (`common.constant`), so that the kernel
reads two runtime tensors in one layout. Integer and bool operands are refused (eager
promotes them to float; the fabric would need their words converted first)."""

from __future__ import annotations

import numbers

import torch

from fabric.kernels import BINARY_MATH_WORDS, binary_math_cycles, build_binary_math
from frontend.lowering.common import (
    blockwise_stage,
    constant,
    cycles_per_element,
    expand_to,
    out_shape,
)
from frontend.lowering.core import rule
from frontend.values import Const, Ref

aten = torch.ops.aten

FUNCTIONS = {aten.atan2.default: "atan2", aten.hypot.default: "hypot"}
CYCLES = {fn: cycles_per_element(lambda cfg, e, fn=fn: binary_math_cycles(cfg, fn, e))
          for fn in BINARY_MATH_WORDS}


@rule(*FUNCTIONS)
def binary_math(low, node, a, b):
    """torch.atan2(a, b) / torch.hypot(a, b) of float tensors broadcast to the output
    shape: one `build_binary_math` stage (16-bit storage in mixed precision)."""
    return binary_math_stage(low, FUNCTIONS[node.target], a, b, out_shape(node))


def binary_math_stage(low, fn: str, a, b, shape) -> Ref:
    """fn(a, b) (a `build_binary_math` function: "atan2", "hypot", "pow") of float tensors,
    constants or numbers broadcast to `shape`: one stage, a Ref of `shape`."""
    a, b = (_runtime(low, v, fn, shape) for v in (a, b))
    return blockwise_stage(
        low, fn, {"a": a, "b": b}, shape, f"_{fn}",
        lambda m, n: lambda cfg, rect, **fmt: build_binary_math(cfg, rect, m, n, fn, **fmt),
        CYCLES[fn], BINARY_MATH_WORDS[fn])


def _runtime(low, v, fn: str, shape) -> Ref:
    """A float operand as a Ref broadcast to `shape`: a constant (or a number) held on a
    resident tile; UnsupportedOpError for integer and bool operands."""
    v = low.materialized(v)
    if isinstance(v, numbers.Number) and not isinstance(v, bool):
        v = Const(torch.tensor(float(v)))
    if isinstance(v, Ref) and v.dtype.is_floating_point:
        return expand_to(v, shape)
    if isinstance(v, Const) and v.value.is_floating_point():
        return expand_to(constant(low, v), shape)
    what = (f"a {v.dtype} tensor" if isinstance(v, Ref) else
            f"a {v.value.dtype} constant" if isinstance(v, Const) else type(v).__name__)
    raise low.unsupported(f"{fn} of {what} (float tensors)")
