"""Elementwise math of two tensors: atan2(y, x) and hypot(x, y), with PyTorch broadcasting,
as one stage of `build_binary_math` (the sequences of `fabric.kernels.mathlib_binary`:
atan2 within 2 ulps, hypot within 1, torch's special values).

Both operands are broadcast to the output shape; a constant operand (a tensor the model
holds, a 0-d tensor) is held on a resident tile (`common.constant`), so that the kernel
reads two runtime tensors in one layout. Integer and bool operands are refused (eager
promotes them to float; the fabric would need their words converted first)."""

from __future__ import annotations

import math
import numbers

import torch

from fabric.config import FabricConfig
from fabric.kernels import BINARY_MATH_WORDS, binary_math_cycles, build_binary_math
from frontend.lowering.common import as2d, constant, expand_to, out_shape, per_column_block
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Const, Ref

aten = torch.ops.aten

FUNCTIONS = {aten.atan2.default: "atan2", aten.hypot.default: "hypot"}
# single-PE cycles per element (WSE-2, from the kernels' cycle model over 1000 elements,
# rounded up): what sizes their tiles
_E = 1000
CYCLES = {fn: math.ceil(binary_math_cycles(FabricConfig.small(1, 1), fn, _E) / _E)
          for fn in FUNCTIONS.values()}


@rule(*FUNCTIONS)
def binary_math(low, node, a, b):
    """torch.atan2(a, b) / torch.hypot(a, b) of float tensors broadcast to the output
    shape: one `build_binary_math` stage (16-bit storage in mixed precision)."""
    fn = FUNCTIONS[node.target]
    shape = out_shape(node)
    a, b = (_runtime(low, v, fn, shape) for v in (a, b))
    return binary_math_stage(low, fn, a, b, shape)


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


def binary_math_stage(low, fn: str, a: Ref, b: Ref, shape) -> Ref:
    """fn(a, b) for Refs a and b of `shape`, seen as the matrix as2d(shape) = (m, n); one
    stage per block where an operand is side-by-side stages' outputs (`column_blocks`).
    A Ref of `shape`."""
    split = per_column_block(low, [a, b], shape,
                             lambda ab, bb, s: binary_math_stage(low, fn, ab, bb, s))
    if split is not None:
        return split
    m, n = as2d(shape)
    ref = low.stage(fn, (m, n),
                    lambda cfg, rect, **fmt: build_binary_math(cfg, rect, m, n, fn, **fmt),
                    [low.operand("a", a, (m, n)), low.operand("b", b, (m, n))],
                    m * n * CYCLES[fn], Limits(m, n), words_per_element=BINARY_MATH_WORDS[fn],
                    suffix=f"_{fn}")
    return Ref(ref.index.reshape(shape))
