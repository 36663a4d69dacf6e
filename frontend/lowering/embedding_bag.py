"""Embedding bags (nn.EmbeddingBag, F.embedding_bag): every bag's rows looked up and
pooled, bag by bag, by sum, mean or max.

The bags must be known when the model is compiled: a 2-D input (each row a bag, the
offsets then a constant arange) or offsets fixed in the model. Then the pooling is static:

    rows = lookup(table, indices)                 (n, dim): `embedding.lookup`, a per-call
                                                  gather of an integer input's ids
    rows *= per_sample_weights[:, None]           sum mode only, when given
    out[b, d] = pool(rows[s_b:e_b, d])            one `reduce_rows` of (bags * dim) rows of
                                                  the longest bag's width

A shorter bag's row is padded with the id -1 (a zero) for sum and mean, with its first
element again for max (which leaves the max as it is); an empty bag gives 0, as eager.
A mean is the sum times 1 / the bag's size (one rounding more than eager's division, within
an ulp), or the row reduction's own mean where every bag has one size.

Offsets given at run time change the bags on every call; they are refused, as is a
`padding_idx` (which ids drop out of a bag depends on each call's ids)."""

from __future__ import annotations

import torch

from frontend.lowering.common import binary, expand_to, reduce_rows
from frontend.lowering.core import Unavailable, rule
from frontend.lowering.embedding import lookup
from frontend.values import Const, Ref

aten = torch.ops.aten

MODES = {0: "sum", 1: "mean", 2: "max"}  # aten's mode numbers


@rule(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def embedding_bag(low, node, weight, indices, offsets, scale_grad_by_freq=False, mode=0,
                  sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=-1):
    """The pooled bags (module docstring): the node's first output; the others (each id's
    bag, the bags' sizes, max's indices) are not computed."""
    if not isinstance(weight, Const):
        raise low.unsupported("an embedding bag's table computed at run time")
    if not isinstance(indices, Ref) or len(indices.shape) != 1:
        raise low.unsupported("embedding_bag of indices that are not a runtime 1-D tensor")
    if not isinstance(offsets, Const):
        raise low.unsupported(
            "embedding_bag with offsets given at run time (its bags change with every "
            "call); bags known when compiling run: a 2-D input, or offsets fixed in the model")
    if padding_idx is not None and padding_idx >= 0:
        raise low.unsupported("embedding_bag with a padding_idx (which ids drop out of a bag "
                              "depends on each call's ids)")
    vocab, dim = weight.value.shape
    n = indices.shape[0]
    bounds = [int(o) for o in offsets.value.reshape(-1)]
    ends = bounds[1:] + ([] if include_last_offset else [n])
    bags = list(zip(bounds, ends))
    rows = lookup(low, weight, vocab, dim, indices)  # (n, dim)
    if per_sample_weights is not None:
        rows = binary(low, rows, expand_to(_column(per_sample_weights), (n, dim)), "mul",
                      (n, dim))
    op = MODES[int(mode)]
    pooled = _pool(low, rows.index.reshape(n, dim), bags, op)
    return (pooled, Unavailable("embedding_bag's offset2bag"),
            Unavailable("embedding_bag's bag sizes"), Unavailable("embedding_bag's max indices"))


def _column(v):
    """per_sample_weights (n,) as an (n, 1) column."""
    if isinstance(v, Const):
        return Const(v.value.reshape(-1, 1))
    return Ref(v.index.reshape(-1, 1), v.dtype)


def _pool(low, ids: torch.Tensor, bags: list[tuple[int, int]], op: str) -> Ref:
    """op over each bag's rows of the (n, dim) id map `ids`: a (bags, dim) Ref."""
    dim = ids.shape[1]
    sizes = [max(0, e - s) for s, e in bags]
    width = max([1, *sizes])
    table = torch.full((len(bags), dim, width), -1, dtype=ids.dtype)
    for b, (s, size) in enumerate(zip((s for s, _ in bags), sizes)):
        if size:
            seg = ids[s:s + size].T  # (dim, size)
            table[b, :, :size] = seg
            if op == "max":  # the first element again: the max stays the bag's
                table[b, :, size:] = seg[:, :1]
    uniform = len(set(sizes)) == 1 and sizes[0] > 0
    reduce_op = "max" if op == "max" else ("mean" if op == "mean" and uniform else "sum")
    out = reduce_rows(low, table.reshape(-1, width), reduce_op, 1.0 / width)
    out = Ref(out.index.reshape(len(bags), dim))
    if op == "mean" and not uniform:  # the sum times 1 / the bag's size (0 for none)
        factors = torch.tensor([1.0 / s if s else 0.0 for s in sizes], dtype=torch.float32)
        out = binary(low, out, Const(factors.reshape(-1, 1).expand(-1, dim)), "mul",
                     (len(bags), dim))
    return out
