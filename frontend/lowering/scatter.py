"""Scatter-adds along one dimension: a graph network's aggregation (messages summed into
their destination nodes), an embedding's gradient, a histogram of counts:

    out = base.index_put([idx], values, accumulate=True)   out[idx[t]] += values[t]
    out = base.index_add(0, idx, values)                   (core ATen: the index_put above)
    out = base.scatter_add(d, index, src)                  out[..., index[i], ...] += src[i]

with base (V, *rest), idx (T,) (any shape: its elements are the tokens) and values
broadcasting to (*idx.shape, *rest); rows of `rest` flatten to D = prod(rest) columns.

- Compile-time indices: a static scatter-add (`common.scatter_add`), a layout when every
  row gets at most one token, else a row reduction over each row's tokens. scatter_add by a
  constant index of any pattern goes there too, element by element, and index_put with
  constant indices on any dimensions (F.fold: patches added into an image).
- Indices of an integer user input, lookups "gather" (`frontend.compile`'s default): a
  scatter-add planned per call (`ScatterRows`): every token's row of values moves into the
  slots of the row its index names, and a row reduction sums them in token order (as
  PyTorch accumulates on the CPU). Lookups "onehot": the indices' numbers (`itof`) make a
  one-hot matrix on the fabric and one GEMM sums the rows

      onehot[t, v] = (idx[t] - v == 0)            (T, V): a subtraction, an `eq` mask
      out = onehot^T @ values                     (V, D)

  static, so one fabric program holds the model (`frontend.model_program`); the sums are
  fp32 in the GEMM's order (a few ulps from eager's token order). Either way the host checks
  the indices against [0, V) before every call (`IndexRange`: eager's IndexError).
- scatter_add by a runtime index is the row scatter above where the index is one index per
  slice (a column of indices expanded over the other dimensions, as graph libraries write
  `index.view(-1, 1).expand_as(src)`); an index that differs along another dimension is
  refused with the reason.
- A non-zero base is added after the scatter (one elementwise add; eager adds into it in
  token order, so the sums round differently by a few ulps).
- Training graphs write the gradient's validity checks around the indices
  (`lowering.backward_embedding`): a `Guarded` value and a `Clamped` index implied by the
  index range are the value and the index themselves; anything else is refused.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from fabric.kernels import build_rowreduce
from frontend.lowering.backward_embedding import Clamped, Guarded, is_index
from frontend.lowering.common import (
    binary,
    constant,
    gemm,
    index_source,
    relayout,
    resident,
    scatter_add,
    shape_of,
)
from frontend.lowering.core import rule
from frontend.lowering.embedding import checked_numbers, one_hot
from frontend.lowering.ranking import SORTS, ranked_by
from frontend.stages import Limits
from frontend.values import Const, Gather, Ref

aten = torch.ops.aten


@rule(aten.index_put.default)
def index_put(low, node, base, indices, values, accumulate=False):
    if not accumulate and _permutation(node, shape_of(base)):
        return _assign_permuted(low, node, base, indices[0], values)
    if not accumulate:
        return _assign(low, base, indices, values)
    if all(i is None or isinstance(i, Const) for i in indices) and (
            len(indices) != 1 or indices[0] is None):
        return _accumulate_at_constant(low, base, indices, values)
    if len(indices) != 1 or indices[0] is None:
        raise low.unsupported("index_put by runtime indices on more than the first "
                              "dimension (one index tensor, on dimension 0, or constant "
                              "indices on any, are supported)")
    if not isinstance(base, (Const, Ref)) or not shape_of(base):
        raise low.unsupported(f"index_put into a {type(base).__name__} of shape "
                              f"{shape_of(base) if isinstance(base, (Const, Ref)) else '?'}")
    return scatter_rows_into(low, base, indices[0], values)


@rule(aten.scatter_add.default)
def scatter_add_rule(low, node, base, dim, index, src):
    shape = shape_of(base)
    if not shape:  # 0-d: as the one element of a vector
        one = [relayout(v, lambda t: t.reshape(1)) if isinstance(v, (Const, Ref)) else v
               for v in (base, index, src)]
        return relayout(scatter_add_rule(low, node, one[0], 0, *one[1:]),
                        lambda t: t.reshape(()))
    d = dim % max(len(shape), 1)
    if isinstance(index, Const):
        return _scatter_by_constant(low, base, d, index.value.to(torch.int64), src)
    if not isinstance(index, Ref):
        raise low.unsupported(f"scatter_add by an index of type {type(index).__name__}")
    idx = slice_index(low, index, src, d, shape, "scatter_add")
    out = scatter_rows_into(low, relayout(base, lambda t: t.movedim(d, 0)), idx,
                            relayout(src, lambda t: t.movedim(d, 0)))
    return relayout(out, lambda t: t.movedim(0, d))


def slice_index(low, index: Ref, src, d: int, shape, what: str) -> Ref:
    """The (T,) indices of a runtime `index` of src's shape that holds one index per slice
    along dimension d (the same along every other dimension, those of the output `shape`:
    an index expanded over them); else UnsupportedOpError."""
    if tuple(index.shape) != shape_of(src):
        raise low.unsupported(f"{what} with an index of shape {tuple(index.shape)} "
                              f"smaller than its source {shape_of(src)}")
    moved = index.index.movedim(d, 0)  # (T, *rest): the ids of the index's words
    first = moved.reshape(moved.shape[0], -1)[:, :1]
    rest_in = tuple(moved.shape[1:])
    rest_out = tuple(torch.empty(shape).movedim(d, 0).shape[1:])
    if rest_in != rest_out or not bool((moved.reshape(moved.shape[0], -1) == first).all()):
        raise low.unsupported(f"{what} by a runtime index that differs along a dimension "
                              f"other than {d} (one index per slice along dimension {d}, "
                              "an index expanded over the others, is supported)")
    return Ref(first.reshape(-1), index.dtype)


def scatter_rows_into(low, base, idx, values) -> Ref:
    """base with values[t] added into row idx[t] for every token t: base a Const or Ref
    (V, *rest); idx a Ref, Const or `Clamped` of any shape (its elements the tokens);
    values a Const, Ref or `Guarded` broadcasting to (*idx.shape, *rest). A Ref (V, *rest)."""
    shape = shape_of(base)
    vocab, rest = shape[0], shape[1:]
    dim = math.prod(rest)
    if isinstance(values, Guarded):
        if not values.pred.implied_by_range(vocab):
            raise low.unsupported(f"an index mask {values.pred.checks} not implied by the "
                                  f"index range [0, {vocab})")
        values = values.value
    if isinstance(idx, Clamped):
        if not (idx.lo <= 0 and idx.hi >= vocab - 1):
            raise low.unsupported(f"indices clamped to [{idx.lo}, {idx.hi}] inside the "
                                  f"range [0, {vocab})")
        idx = idx.index
    if not isinstance(idx, (Ref, Const)):
        raise low.unsupported(f"a scatter-add with indices of type {type(idx).__name__}")
    if isinstance(idx, Const) and idx.value.dtype == torch.bool:  # a mask of rows
        if idx.value.dim() != 1:
            raise low.unsupported(f"index_put by a boolean mask of shape "
                                  f"{tuple(idx.value.shape)} (a mask of the first dimension's "
                                  "rows is supported)")
        idx = Const(idx.value.nonzero()[:, 0])
    if isinstance(idx, Ref) and idx.dtype == torch.bool:
        raise low.unsupported("index_put by a runtime boolean mask (its selected count is "
                              "data dependent)")
    if isinstance(values, Const):
        values = constant(low, values, "_values")
    if not isinstance(values, Ref):
        raise low.unsupported(f"a scatter-add of {type(values).__name__} values")
    idx_shape = tuple(shape_of(idx))
    tokens = math.prod(idx_shape)
    g = Ref(values.index.expand(*idx_shape, *rest).reshape(tokens, dim))  # row t: token t
    if tokens == 0:  # nothing selected: the base as it is
        return base if isinstance(base, Ref) else constant(low, base, "_base")
    if isinstance(idx, Const):
        flat = idx.value.reshape(-1).to(torch.int64)
        if bool((flat < -vocab).any()) or bool((flat >= vocab).any()):
            raise low.unsupported(f"scatter-add indices outside [-{vocab}, {vocab})")
        out = _static_scatter(low, flat % vocab, g, vocab)  # eager wraps negative ones
    elif not is_index(low, idx):
        raise low.unsupported("a scatter-add by indices computed in the model (indices of an "
                              "integer input are supported: the host checks their range)")
    elif low.lookups == "onehot":
        out = _one_hot_scatter(low, idx, g, vocab)
    else:
        out = _runtime_scatter(low, idx, g, vocab)
    return _onto(low, base, Ref(out.index.reshape(shape), values.dtype))


@dataclasses.dataclass
class ScatterRows(Gather):
    """The rows of a scatter-add by runtime indices: element ((v, d), t) of the (vocab dim,
    tokens) operand is table[t, d] where idx[t] == v, else zero (id -1). `table` (tokens,
    dim) is the materialized tensor at `table_base`; `vocab` the output rows."""

    vocab: int = 0

    def resolve(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        idx = self.indices(inputs, self.vocab)
        tokens, dim = idx.numel(), self.row
        ids = self.table_base + torch.arange(tokens * dim).reshape(tokens, dim)
        out = torch.full((self.vocab, dim, tokens), -1, dtype=torch.int64)
        out[idx, :, torch.arange(tokens)] = ids
        return out.reshape(-1)


def _runtime_scatter(low, idx: Ref, g: Ref, vocab: int) -> Ref:
    """out[v] = sum of g[t] over idx[t] == v for an integer input idx: g is materialized
    on a resident tile (tokens, dim); per call, each token's row moves into the rows
    (v, :) of a (vocab dim, tokens) operand that its index names (the other slots hold
    zero), and a row reduction sums every row: a scatter-add in token order."""
    tokens, dim = g.shape
    source = index_source(low, idx)
    table = resident(low, g, (tokens, dim), "_rows")
    rows = ScatterRows(int(table.index.reshape(-1)[0]), tokens, dim, source.name,
                       idx.index.reshape(-1) - source.base, (tokens,), vocab)
    m = vocab * dim
    out = low.stage("rowreduce", (m,),
                    lambda cfg, rect, **fmt: build_rowreduce(cfg, rect, m, tokens, "sum",
                                                             **fmt),
                    [low.operand("x", rows, (m, tokens))], m * tokens,
                    Limits(m, 1, cols_fixed=1), words_per_element=tokens + 1,
                    suffix="_scatter")
    return Ref(out.index.reshape(vocab, dim))


def _one_hot_scatter(low, idx: Ref, g: Ref, vocab: int) -> Ref:
    """out[v] = sum of g[t] over idx[t] == v for an integer input idx, on the fabric: the
    one-hot matrix of the indices' numbers (T, V) transposed times g (T, D), one GEMM; the
    host checks the indices before every call (`IndexRange`)."""
    numbers = checked_numbers(low, Ref(idx.index.reshape(-1), idx.dtype), vocab)  # (T,)
    hot = one_hot(low, numbers.index, vocab)  # (T, V)
    return gemm(low, Ref(hot.index.t()), g, suffix="_scatter")  # (V, D)


def _static_scatter(low, idx: torch.Tensor, g: Ref, vocab: int) -> Ref:
    """out[v] = sum of g[t] over idx[t] == v, idx (tokens,) known at compile time."""
    if bool((idx < 0).any()) or bool((idx >= vocab).any()):
        raise low.unsupported(f"scatter-add indices outside [0, {vocab})")
    dim = g.shape[1]
    target = idx[:, None] * dim + torch.arange(dim)  # (tokens, dim) flat positions
    return Ref(scatter_add(low, g.index, target, vocab * dim).index.reshape(vocab, dim))


def _assign(low, base, indices, values) -> Ref:
    """base with base[indices] = values (index_put without accumulate) for constant
    indices (None for a whole dimension) that name each element once: a layout, the
    elements picked from values' words where assigned, else from base's."""
    if not all(i is None or isinstance(i, Const) for i in indices):
        raise low.unsupported("index_put without accumulate by runtime indices (an "
                              "assignment whose duplicates eager resolves in no stated order)")
    picks = _constant_picks(low, shape_of(base), indices)
    base, values = (constant(low, v, "_assigned") if isinstance(v, Const) else v
                    for v in (base, values))
    if not (isinstance(base, Ref) and isinstance(values, Ref)):
        raise low.unsupported(f"index_put of {type(values).__name__} into "
                              f"{type(base).__name__}")
    positions = torch.arange(base.index.numel()).reshape(base.index.shape)
    landed = aten.index.Tensor(positions, picks).reshape(-1)
    if landed.unique().numel() != landed.numel():
        raise low.unsupported("index_put without accumulate whose indices name an element "
                              "twice (eager resolves the duplicates in no stated order)")
    ids = aten.index_put.default(base.index, picks, values.index)
    return Ref(ids, base.dtype)


def _constant_picks(low, shape, indices) -> list:
    """index_put's constant `indices` (Consts or None, for a base of `shape`) as the
    tensors torch indexes with: integer ones checked against their dimension and wrapped
    where negative (as eager), boolean masks as they are."""
    picks = [None if i is None else i.value for i in indices]
    for k, p in enumerate(picks):
        if p is not None and p.dtype != torch.bool:
            size = shape[k]
            if bool((p < -size).any()) or bool((p >= size).any()):
                raise low.unsupported(f"index_put indices outside [-{size}, {size}) on "
                                      f"dimension {k}")
            picks[k] = p % size  # eager wraps negative ones
    return picks


def _accumulate_at_constant(low, base, indices, values) -> Ref:
    """base.index_put(indices, values, accumulate=True) for constant indices on any
    dimensions (None for a whole one; F.fold's col2im: the patches' elements added into
    the image): torch's own indexing of base's positions says where each element of values
    lands, and a static scatter-add sums those that land together."""
    shape = shape_of(base)
    picks = _constant_picks(low, shape, indices)
    if isinstance(values, Const):
        values = constant(low, values, "_values")
    if not isinstance(values, Ref):
        raise low.unsupported(f"index_put of {type(values).__name__} values")
    positions = torch.arange(math.prod(shape)).reshape(shape)
    target = aten.index.Tensor(positions, picks)  # the landing place of each value
    contrib = values.index.broadcast_to(target.shape)
    out = scatter_add(low, contrib, target, math.prod(shape))
    return _onto(low, base, Ref(out.index.reshape(shape), values.dtype))


def _permutation(node, shape) -> bool:
    """index_put's one index is the indices of a sort of a vector as long as the base's
    first dimension (`ranking.ranked_by`): a permutation, so every row is assigned once (a
    router's inverse order, `inv[perm] = arange(n)`)."""
    indices = node.args[1]
    ranked = ranked_by(indices[0]) if len(indices) == 1 and shape else None
    return (ranked is not None and ranked[0].target in SORTS
            and tuple(ranked[0].args[0].meta["val"].shape) == (shape[0],))


def _assign_permuted(low, node, base, perm: Ref, values) -> Ref:
    """base with base[perm] = values for a permutation perm of its rows (`_permutation`):
    every row is overwritten, out[v] = the values' row t with perm[t] == v, as the one-hot
    matrix of perm's numbers transposed times the values (a sum of one term per row):
    exact for finite values; an inf or NaN among them makes its column NaN in every row
    (0 x inf), as in every one-hot product by computed indices (`embedding.one_hot_lookup`)."""
    shape = shape_of(base)
    rows, dim = shape[0], math.prod(shape[1:])
    values = constant(low, values, "_values") if isinstance(values, Const) else values
    if not isinstance(values, Ref):
        raise low.unsupported(f"index_put of {type(values).__name__} values")
    g = Ref(values.index.expand(*shape).reshape(rows, dim))
    hot = one_hot(low, perm.index.reshape(-1), rows)  # (T, V), T = V
    out = gemm(low, Ref(hot.index.t()), g, suffix="_permuted")  # (V, D)
    return Ref(out.index.reshape(shape), node.meta["val"].dtype)


def _scatter_by_constant(low, base, d: int, index: torch.Tensor, src) -> Ref:
    """base.scatter_add(d, index, src) for a constant index of any pattern: element i of
    src (over index's shape) adds into base at i with coordinate d replaced by index[i]."""
    shape = shape_of(base)
    if bool((index < 0).any()) or bool((index >= shape[d]).any()):
        raise low.unsupported(f"scatter_add indices outside [0, {shape[d]}) on dimension {d}")
    if isinstance(src, Const):
        src = constant(low, src, "_values")
    if not isinstance(src, Ref):
        raise low.unsupported(f"scatter_add of {type(src).__name__} values")
    positions = torch.arange(math.prod(shape)).reshape(shape)
    target = positions.gather(d, index)  # where each used source element lands
    picks = tuple(slice(0, n) for n in index.shape)
    out = scatter_add(low, src.index[picks], target, math.prod(shape))
    return _onto(low, base, Ref(out.index.reshape(shape), src.dtype))


def _onto(low, base, sums: Ref) -> Ref:
    """base + sums, no stage where the base is a constant zero."""
    if isinstance(base, Const) and bool((base.value == 0).all()):
        return sums
    return binary(low, base, sums, "add", sums.shape)
