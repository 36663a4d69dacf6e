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

Offsets given at run time (an integer input, as DLRM passes them) change the bags on every
call, so the fabric computes each bag's members, sum and mean modes:

    started[b, i] = (i - offsets[b] >= 0)         (k, n): a subtraction, a `ge` mask
    member = started - started shifted up a row   1 where offsets[b] <= i < offsets[b + 1]
    out = member @ rows                           (bags, dim): one GEMM, exact zeros beside
                                                  each bag's rows
    mean: out * 1 / max(member's row sums, 1)     an empty bag's 0 kept

and the host checks the offsets before every call as eager does (`BagOffsets`: the first 0,
none decreasing, the last within the ids). Max with such offsets is refused, as is a
`padding_idx` (which ids drop out of a bag depends on each call's ids)."""

from __future__ import annotations

import dataclasses

import torch

from frontend.lowering.common import (
    binary,
    expand_to,
    gemm,
    index_source,
    map_,
    reduce_rows,
    shape_of,
)
from frontend.lowering.core import Unavailable, rule
from frontend.lowering.elementwise import numbers_of_int_words, unary_stage
from frontend.lowering.embedding import compare_mask, lookup
from frontend.lowering.losses import read_ints
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
    op = MODES[int(mode)]
    if not isinstance(offsets, (Const, Ref)) or len(shape_of(offsets)) != 1:
        raise low.unsupported("embedding_bag with offsets that are not a 1-D tensor")
    if isinstance(offsets, Ref) and op == "max":
        raise low.unsupported("embedding_bag in max mode with offsets given at run time (sum "
                              "and mean run; max needs the bags when compiling)")
    if padding_idx is not None and padding_idx >= 0:
        raise low.unsupported("embedding_bag with a padding_idx (which ids drop out of a bag "
                              "depends on each call's ids)")
    vocab, dim = weight.value.shape
    n = indices.shape[0]
    rows = lookup(low, weight, vocab, dim, indices)  # (n, dim)
    if per_sample_weights is not None:
        rows = binary(low, rows, expand_to(_column(per_sample_weights), (n, dim)), "mul",
                      (n, dim))
    if isinstance(offsets, Ref):
        pooled = _pool_by_offsets(low, rows, offsets, op, include_last_offset)
    else:
        bounds = [int(o) for o in offsets.value.reshape(-1)]
        ends = bounds[1:] + ([] if include_last_offset else [n])
        pooled = _pool(low, rows.index.reshape(n, dim), list(zip(bounds, ends)), op)
    return (pooled, Unavailable("embedding_bag's offset2bag"),
            Unavailable("embedding_bag's bag sizes"), Unavailable("embedding_bag's max indices"))


@dataclasses.dataclass(frozen=True)
class BagOffsets:
    """Offsets given at run time: input `name` at flat positions `pick`, over `ids` ids;
    the host checks them before every call (`verify`), raising eager's RuntimeError."""

    name: str
    pick: torch.Tensor
    ids: int

    def verify(self, inputs: dict[str, torch.Tensor]) -> None:
        offsets = read_ints(inputs, self.name, self.pick)
        if not offsets.numel():
            return
        if int(offsets[0]) != 0:
            raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the "
                               "mini-batch has to start from position 0. However, got "
                               f"{int(offsets[0])}")
        if int(offsets[-1]) > self.ids:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length "
                               f"{self.ids} but got offsets[-1] of {int(offsets[-1])}")
        if bool((offsets[1:] < offsets[:-1]).any()):
            raise RuntimeError(f"embedding_bag: offsets in input {self.name!r} must not "
                               f"decrease, got {offsets.tolist()}")


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


def _pool_by_offsets(low, rows: Ref, offsets: Ref, op: str, include_last: bool) -> Ref:
    """Sum or mean of the bags that offsets given at run time delimit (module docstring):
    a (bags, dim) Ref."""
    n, dim = rows.shape
    source = index_source(low, offsets)
    low.input_assertions.append(BagOffsets(source.name, offsets.index - source.base, n))
    k = shape_of(offsets)[0]
    starts = numbers_of_int_words(low, offsets) if low.int_words(offsets) else offsets
    positions = Const(torch.arange(n, dtype=torch.float32).expand(k, n))
    diff = binary(low, positions, Ref(starts.index.reshape(k, 1).expand(k, n)), "sub", (k, n))
    started = compare_mask(low, diff, 0.0, (k, n), op="ge")
    # the next bag's start row (-1, a zero, after the last): the bag is started - next
    following = torch.cat([started.index[1:], torch.full((1, n), -1, dtype=started.index.dtype)])
    member = binary(low, started, Ref(following), "sub", (k, n))
    bags = k - 1 if include_last else k
    member = Ref(member.index[:bags])
    out = gemm(low, member, rows)  # (bags, dim)
    if op == "mean":
        sizes = map_(low, reduce_rows(low, member.index, "sum"), "max", 1.0, (bags,))
        scale = unary_stage(low, sizes, "reciprocal")
        out = binary(low, out, Ref(scale.index.reshape(bags, 1).expand(bags, dim)), "mul",
                     (bags, dim))
    return out
