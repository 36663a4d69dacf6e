"""The guard that decomposed scaled-dot-product attention puts after its softmax:

    where(logical_not(any(logical_not(eq(s, -inf)), dim=-1, keepdim)), 0, softmax(s))

sets rows whose scores are all -inf to 0. Its predicates are symbolic values here; the
`where` of that exact pattern lowers to the softmax itself. A row of all -inf scores needs
a fully masked row of the mask (scores are finite products plus the mask), which
`check_mask` rejects at compile time, so the guard never changes a result.
"""

from __future__ import annotations

import dataclasses

import torch

from frontend.lowering.core import rule
from frontend.values import Const, Ref, Symbolic

aten = torch.ops.aten


@dataclasses.dataclass
class Pred(Symbolic):
    kind: str  # "isneginf" | "not" | "any"
    arg: object
    dim: int | None = None


@rule(aten.eq.Scalar)
def eq(low, node, x, value):
    if not (isinstance(x, Ref) and value == float("-inf")):
        raise low.unsupported("eq on a runtime tensor (only the attention mask guard)")
    return Pred("isneginf", x)


@rule(aten.logical_not.default)
def logical_not(low, node, x):
    if not isinstance(x, Pred):
        raise low.unsupported("logical_not on a runtime tensor")
    return Pred("not", x)


@rule(aten.any.dim)
def any_(low, node, x, dim, keepdim=False):
    if not isinstance(x, Pred):
        raise low.unsupported("any on a runtime tensor")
    return Pred("any", x, dim)


@rule(aten.full_like.default)
def full_like(low, node, x, value, **kwargs):
    return Const(torch.full(x.shape, value, dtype=torch.float32))


@rule(aten.where.self)
def where(low, node, cond, a, b):
    if (isinstance(cond, Pred) and cond.kind == "not" and cond.arg.kind == "any"
            and cond.arg.arg.kind == "not" and cond.arg.arg.arg.kind == "isneginf"
            and isinstance(a, Const) and bool((a.value == 0).all()) and isinstance(b, Ref)):
        return b
    raise low.unsupported("where on runtime tensors (only the attention mask guard)")


def check_mask(mask: torch.Tensor) -> None:
    """A ValueError if an additive attention mask has a row of only -inf."""
    full = torch.isneginf(mask).all(dim=-1)
    if bool(full.any()):
        raise ValueError("the attention mask hides every key of some query row")
