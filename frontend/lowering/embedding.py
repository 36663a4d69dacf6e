"""Embedding: table[indices].

- Indices of a user input (token ids), lookups "gather" (`frontend.compile`'s default):
  the table is resident on its own tile; on every call the rows the indices pick move over
  the fabric to the embedding's output tile (the routes depend on the indices, so the
  movement is planned per call; the engine does not recompile). Lookups "onehot": their
  numbers (`itof`) go through the one-hot product below, static, so one fabric program
  holds the model (`frontend.model_program`). Either way an index outside the table raises
  IndexError before the call runs (`IndexRange`).
- Indices computed on the fabric (RoBERTa's position ids, a cumulative sum of the token
  mask): no host sees them, so the lookup is arithmetic, a one-hot product

      onehot[t, v] = (ids[t] - v == 0)            (tokens, vocab): a subtraction, `eq` mask
      [rows | hits] = onehot @ [table | 1]        (tokens, dim + 1): one GEMM

  exact in fp32: each output sums one product table[v, d] * 1 and zeros (ids are integers
  carried as fp32 words, exact up to 2^24; a vocabulary above that is refused). An index
  outside [0, vocab) (or not an integer) matches no row: its hit count is 0, and its row
  becomes -inf ((hits - 1) * 3e38 * 4 added to it: -0 for a hit, which leaves the row as
  it is), so a bad index shows in the output instead of reading as a zero row.
  Its cost is tokens x vocab x (dim + 1) multiply-adds: fine for position tables.

`Lowering.int_words` says which runtime values hold int32 words (an integer user input, as
the host writes it) rather than fp32 ones (everything a kernel computes)."""

from __future__ import annotations

import torch

from fabric.kernels import build_compare
from frontend.lowering.common import (
    as2d,
    binary,
    column_blocks,
    constant,
    gather_rows,
    gemm,
    index_source,
    map_,
    reduce_rows,
    resident,
)
from frontend.lowering.core import INT_WORDS_AS_NUMBERS, rule
from frontend.stages import Limits
from frontend.values import Const, IndexRange, Ref

aten = torch.ops.aten

EXACT_INTEGERS = 2 ** 24  # fp32 holds every integer of magnitude up to this exactly
# single-PE cycles per element of compare's eq (sub, mul, 2 max at width 1 or 2, mul, min,
# mul, add): sizes its tile
EQ_CYCLES_PER_ELEMENT = 7


def compare_mask(low, x: Ref, value: float, shape, from_int32: bool = False,
                 op: str = "eq") -> Ref:
    """1.0 where x op value else 0.0 (`build_compare`, op "eq" | "ne" | "gt" | ...) for a
    Ref x of `shape`; from_int32: x holds int32 words (an integer input). A Ref of
    `shape`."""
    m, n = as2d(shape)
    if from_int32:  # the int32 words are read as such: fp32 storage whatever the format
        def build(cfg, rect, **fmt):
            return build_compare(cfg, rect, m, n, op, value, from_int32=True)
    else:
        def build(cfg, rect, **fmt):
            return build_compare(cfg, rect, m, n, op, value,
                                 **({"dtype": fmt["dtype"]} if "dtype" in fmt else {}))
    ref = low.stage("compare", (m, n), build, [low.operand("x", Ref(x.index.reshape(shape)),
                                                           (m, n), int_words=from_int32)],
                    m * n * EQ_CYCLES_PER_ELEMENT, Limits(m, n), words_per_element=3,
                    suffix=f"_{op}")
    return Ref(ref.index.reshape(shape))


def one_hot_lookup(low, table, vocab: int, dim: int, indices: Ref) -> Ref:
    """table[indices] for indices computed on the fabric (fp32 words), as the module
    docstring's one-hot product; table a Const or Ref (vocab, dim). A Ref of shape
    (*indices.shape, dim)."""
    if vocab > EXACT_INTEGERS:
        raise low.unsupported(f"a lookup by computed indices into {vocab} rows (fp32 carries "
                              f"integers exactly up to {EXACT_INTEGERS})")
    tokens = indices.index.numel()
    onehot = one_hot(low, indices.index, vocab)
    ones = Const(torch.ones(vocab, 1))
    if isinstance(table, Const):
        extended = Const(torch.cat([table.value.to(torch.float32), ones.value], 1))
    else:
        extended = Ref(torch.cat([table.index, constant(low, ones, "_ones").index], 1))
    rows = gemm(low, onehot, extended, suffix="_onehot")  # (tokens, dim + 1)
    poison = _poison(low, Ref(rows.index[:, dim]), tokens)
    if column_blocks(low, [rows], (tokens, dim + 1)) is None:
        out = binary(low, Ref(rows.index[:, :dim]), Ref(poison.index[:, None]), "add",
                     (tokens, dim))
    else:  # the product cut into column blocks: the add over all of them, the hit counts
        # too (then dropped), so that each block's add reads its GEMM's whole output and
        # rides below it
        out = Ref(binary(low, rows, Ref(poison.index[:, None]), "add",
                         (tokens, dim + 1)).index[:, :dim])
    return Ref(out.index.reshape(*indices.shape, dim))


def one_hot(low, ids: torch.Tensor, width: int) -> Ref:
    """onehot[t, v] = (ids[t] - v == 0) for the n elements of the index map `ids` (fp32
    words holding integers): a subtraction and an `eq` mask, a Ref (n, width)."""
    n = ids.numel()
    columns = Const(torch.arange(width, dtype=torch.float32).expand(n, width))
    diff = binary(low, Ref(ids.reshape(n, 1).expand(n, width)), columns, "sub", (n, width))
    return compare_mask(low, diff, 0.0, (n, width))


def _poison(low, hits: Ref, n: int) -> Ref:
    """(hits - 1) * 3e38 * 4 for the n hit counts of one-hot rows: -0 for a hit, -inf for
    none (an index outside the rows), to be added to what the row picked."""
    return map_(low, map_(low, map_(low, hits, "add", -1.0, (n,)), "mul", 3e38, (n,)),
                "mul", 4.0, (n,))


def checked_numbers(low, indices: Ref, limit: int) -> Ref:
    """An integer input's `indices` as fp32 numbers on the fabric (`itof`; their shape),
    the host checking them against [0, limit) before every call (`IndexRange`: eager's
    IndexError)."""
    source = index_source(low, indices)
    low.index_ranges.append(IndexRange(source.name, indices.index - source.base, limit))
    return Ref(INT_WORDS_AS_NUMBERS[0](low, indices).index)


def lookup(low, table, vocab: int, dim: int, indices: Ref) -> Ref:
    """table[indices] for a (vocab, dim) Const or Ref table and runtime indices: the
    one-hot product when they are computed; when they are an integer input's elements, a
    per-call gather from a resident copy of the table (`gather_rows`, lookups "gather") or
    the one-hot product of their numbers (lookups "onehot"), the host checking them against
    the table's rows before every call either way (`IndexRange`)."""
    if not low.int_words(indices):
        return one_hot_lookup(low, table, vocab, dim, indices)
    if low.lookups == "onehot":
        return one_hot_lookup(low, table, vocab, dim, checked_numbers(low, indices, vocab))
    table_base = int(resident(low, table, (vocab, dim), "_table").index.reshape(-1)[0])
    return gather_rows(low, table_base, vocab, dim, indices)


@rule(aten.embedding.default)
def embedding(low, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
              sparse=False):
    if not isinstance(indices, Ref):
        raise low.unsupported("embedding indices that are not a runtime tensor")
    if not isinstance(weight, Const):
        raise low.unsupported("an embedding table computed at run time")
    vocab, dim = weight.value.shape
    return lookup(low, weight, vocab, dim, indices)



def _constant_by_computed_indices(low, node, x, dim, index, sparse_grad=False) -> bool:
    """gather from a constant by indices computed on the fabric (the other gathers, of a
    runtime tensor by class indices: `losses.gather`)."""
    return isinstance(x, Const) and isinstance(index, Ref) and not low.int_words(index)


@rule(aten.gather.default, case=_constant_by_computed_indices)
def gather_constant(low, node, x, dim, index, sparse_grad=False):
    """out[..., j, ...] = x[..., index[..., j, ...], ...] along `dim` for a constant x whose
    lines along `dim` are all one vector c (RoBERTa's token type buffer, expanded over the
    batch): a `one_hot_lookup` of index in c seen as a (len(c), 1) table."""
    d = dim % x.value.dim()
    lines = x.value.movedim(d, -1).reshape(-1, x.value.shape[d])
    if not bool((lines == lines[:1]).all()):
        raise low.unsupported("gather from a constant whose lines along the dimension differ "
                              "by computed indices")
    table = Const(lines[0].to(torch.float32).reshape(-1, 1))
    moved = Ref(index.index.movedim(d, -1))
    out = one_hot_lookup(low, table, lines.shape[1], 1, moved)
    return Ref(out.index[..., 0].movedim(-1, d), node.meta["val"].dtype)


def _runtime_by_computed_indices(low, node, x, dim, index, sparse_grad=False) -> bool:
    """gather from a runtime tensor by indices computed on the fabric (by an integer
    input's elements: `losses.gather`)."""
    return isinstance(x, Ref) and isinstance(index, Ref) and not low.int_words(index)


@rule(aten.gather.default, case=_runtime_by_computed_indices)
def gather_runtime(low, node, x, dim, index, sparse_grad=False):
    """out[..., j, ...] = x[..., index[..., j, ...], ...] along `dim` for a runtime x by
    indices computed on the fabric (mBART's decoder start token: the ids' last one before
    the padding, picked by a count of them). No host sees them, so each output element is
    the one-hot row of its index against the line of x it reads:

        onehot[j, t] = (index[j] - t == 0)        (J, T): a subtraction, an `eq` mask
        out[j] = sum_t onehot[j, t] * line_j[t]   a product, a row sum

    exact for finite x (one nonzero term); an index outside [0, T) hits nothing and gives
    -inf, as the one-hot lookup does. A 0-d x (dim 0 or -1) is a line of one element."""
    if not x.shape:
        out = gather_runtime(low, node, Ref(x.index.reshape(1), x.dtype), 0,
                             Ref(index.index.reshape(-1), index.dtype))
        return Ref(out.index.reshape(index.shape), out.dtype)
    d = dim % len(x.shape)
    t = x.shape[d]
    if t > EXACT_INTEGERS:
        raise low.unsupported(f"a gather by computed indices along {t} elements (fp32 "
                              f"carries integers exactly up to {EXACT_INTEGERS})")
    picks = index.index.movedim(d, -1)  # (*other, k): the index's lines along dim
    other, k = picks.shape[:-1], picks.shape[-1]
    lines = x.index.movedim(d, -1)[tuple(slice(0, s) for s in other)]  # (*other, t)
    n = picks.numel()
    rows = Ref(lines.unsqueeze(-2).expand(*other, k, t).reshape(n, t))
    onehot = one_hot(low, picks, t)
    picked = reduce_rows(low, binary(low, onehot, rows, "mul", (n, t)).index, "sum")
    hits = reduce_rows(low, onehot.index, "sum")
    out = binary(low, picked, _poison(low, hits, n), "add", (n,))
    return Ref(out.index.reshape(picks.shape).movedim(-1, d), node.meta["val"].dtype)
