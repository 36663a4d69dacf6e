"""torch.fmod and torch.remainder (Python's %) on float tensors, by a number (one stage of
`build_modulo` with the divisor built in) or elementwise by a tensor, runtime or constant
(both operands broadcast to the output shape, a stage of two inputs): exact, bit for bit
eager's, where |x / y| < FMOD_QUOTIENT_MAX = 2^22, NaN from there on
(`fabric.kernels.mathlib_mod`; docs/numerics.md, "fmod and remainder").

Integer user inputs are refused: their int32 words would be read as fp32 numbers, which
carry integers exactly only up to 2^24, and ids hashed by remainder (CANINE's) go beyond.
Integer values computed on the fabric are fp32 numbers already (exact below 2^24) and go
through the float kernel, the result keeping eager's dtype; a division by zero gives NaN
there where eager raises."""

from __future__ import annotations

import math

import torch

from fabric.config import FabricConfig
from fabric.kernels import build_modulo, modulo_cycles, modulo_words
from frontend.lowering.common import (
    as2d,
    expand_to,
    num,
    out_shape,
    per_column_block,
    scalar,
)
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Const, Ref

aten = torch.ops.aten
FMODS = (aten.fmod.Scalar, aten.fmod.Tensor)
_WSE2_PE = FabricConfig.small(1, 1)
_E = 1000


def _per_element(op: str, divisor: float | None) -> int:
    """Single-PE cycles per element on a WSE-2 PE (the stage's work), rounded up."""
    return math.ceil(modulo_cycles(_WSE2_PE, op, _E, divisor) / _E)


@rule(aten.fmod.Scalar, aten.fmod.Tensor, aten.remainder.Scalar, aten.remainder.Tensor,
      aten.remainder.Scalar_Tensor)
def modulo(low, node, x, y):
    """fmod(x, y) / remainder(x, y): by a number, `build_modulo` with it built in; by a
    tensor, both broadcast to the output shape."""
    op = "fmod" if node.target in FMODS else "remainder"
    shape = out_shape(node)
    dtype = node.meta["val"].dtype
    x, y = (low.materialized(v) for v in (x, y))
    for v in (x, y):
        if isinstance(v, Ref) and low.int_words(v):
            raise low.unsupported(
                f"{op} of an integer input (its int32 words would be read as fp32 numbers, "
                "exact only up to 2^24; integer values computed on the fabric run)")
    if not any(isinstance(v, Ref) for v in (x, y)):
        raise low.unsupported(f"{op} of two constants")
    if scalar(y) and isinstance(x, Ref):
        out = _stage(low, op, [Ref(x.index.expand(shape))], shape, num(y))
    else:
        if scalar(x):
            x = Const(torch.tensor(num(x), dtype=torch.float32))
        out = _stage(low, op, [expand_to(v, shape) for v in (x, y)], shape, None)
    return Ref(out.index, dtype if not dtype.is_floating_point else torch.float32)


def _stage(low, op: str, values, shape, divisor: float | None) -> Ref:
    """One `build_modulo` stage over `values` (x, or x and the divisor tensor, of `shape`)
    seen as the matrix as2d(shape); one per block where a value is side-by-side stages'
    outputs. A Ref of `shape`."""
    split = per_column_block(low, values, shape,
                             lambda *a: _stage(low, op, list(a[:-1]), a[-1], divisor))
    if split is not None:
        return split
    m, n = as2d(shape)
    names = ("x", "d")[:len(values)]
    ref = low.stage(op, (m, n),
                    lambda cfg, rect, **fmt: build_modulo(cfg, rect, m, n, op, divisor, **fmt),
                    [low.operand(name, v, (m, n)) for name, v in zip(names, values)],
                    m * n * _per_element(op, divisor), Limits(m, n),
                    words_per_element=modulo_words(divisor), suffix=f"_{op}")
    return Ref(ref.index.reshape(shape))
