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

import torch

from fabric.kernels import build_modulo, modulo_cycles, modulo_words
from frontend.lowering.common import (
    blockwise_stage,
    cycles_per_element,
    expand_to,
    num,
    out_shape,
    scalar,
)
from frontend.lowering.core import rule
from frontend.values import Const, Ref

aten = torch.ops.aten
FMODS = (aten.fmod.Scalar, aten.fmod.Tensor)
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
        divisor, operands = num(y), {"x": Ref(x.index.expand(shape))}
    else:
        if scalar(x):
            x = Const(torch.tensor(num(x), dtype=torch.float32))
        divisor, operands = None, {"x": expand_to(x, shape), "d": expand_to(y, shape)}
    out = blockwise_stage(
        low, op, operands, shape, f"_{op}",
        lambda m, n: lambda cfg, rect, **fmt: build_modulo(cfg, rect, m, n, op, divisor,
                                                           **fmt),
        cycles_per_element(lambda cfg, e: modulo_cycles(cfg, op, e, divisor)),
        modulo_words(divisor))
    return Ref(out.index, dtype if not dtype.is_floating_point else torch.float32)

