"""The guard that decomposed scaled-dot-product attention puts after its softmax:

    where(logical_not(any(logical_not(eq(s, -inf)), dim=-1, keepdim)), 0, softmax(s))

sets rows whose scores are all -inf to 0. Its predicates are symbolic values here; the
`where` of that exact pattern lowers to the softmax itself. A row of all -inf scores needs
a fully masked row of the mask (scores are finite products plus the mask), so the guard
does not change a result there; on scores that hold the model's input directly (torch's
_safe_softmax of an input, which may have a row of all -inf) the guard is refused.
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
    """A constant of x's shape, in the node's dtype (bool for isreal, say)."""
    val = node.meta.get("val")
    return Const(torch.full(x.shape, value, dtype=torch.float32 if val is None else val.dtype))


@rule(aten.where.self)
def where(low, node, cond, a, b):
    if (isinstance(cond, Pred) and cond.kind == "not" and cond.arg.kind == "any"
            and cond.arg.arg.kind == "not" and cond.arg.arg.arg.kind == "isneginf"
            and isinstance(a, Const) and bool((a.value == 0).all()) and isinstance(b, Ref)):
        scores = cond.arg.arg.arg.arg
        ids = scores.index[scores.index >= 0].unique().tolist()
        if any(low.owner(int(g)).kind != "stage" for g in ids):
            # a user's input may hold a row of all -inf, which the guard sets to 0 where
            # the fabric's softmax gives NaN (torch's _safe_softmax on a raw input)
            raise low.unsupported("the all -inf row guard of a softmax of the model's input")
        return b
    raise low.unsupported("where on runtime tensors (only the attention mask guard)")


def check_mask(mask: torch.Tensor) -> None:
    """A ValueError if an additive attention mask has a row of only -inf."""
    full = torch.isneginf(mask).all(dim=-1)
    if bool(full.any()):
        raise ValueError("the attention mask hides every key of some query row")
