"""Embeddings in training graphs: a lookup in a table that is a runtime input (a parameter
being trained), and the table's gradient, the scatter-add

    grad[v, :] = sum over tokens t with idx[t] == v of g[t, :]

that core ATen writes as index_put(zeros, [clamp(idx)], where(not valid(idx), 0, g),
accumulate=True), valid(idx) = (idx >= 0) & (idx < V) & (idx != padding).

- Runtime table, compile-time indices (positions): the picked rows are a layout.
- Runtime table, runtime indices: the host writes it into a resident tile; the rows the
  indices pick move from there per call, as for a constant table (`lowering.embedding`).
- Index checks cast to numbers (RoBERTa's token mask, `ids.ne(pad).int()`): a compare
  mask computed on the fabric from the ids' int32 words (`index_check_as_number`).
- Validity: the index checks on an integer input are symbolic (`IndexPred`); every call
  refuses an index outside [0, V) (`Gather.resolve` raises IndexError), so a predicate
  implied by 0 <= idx < V holds and its `where` is the gradient itself, and a clamp to a
  range holding [0, V) is the index itself. Anything else is refused.
- The scatter-add itself (index_put, accumulate) is `lowering.scatter`'s: per call by
  runtime indices, a one-hot product with lookups "onehot", static for the positions.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from frontend.lowering.common import (
    binary,
    map_,
    out_shape,
)
from frontend.lowering.core import rule
from frontend.lowering.embedding import compare_mask, lookup
from frontend.values import Const, Ref, Symbolic

aten = torch.ops.aten


def is_index(low, x) -> bool:
    """x holds an integer input's int32 words (token ids the host checks); integers
    computed on the fabric (fp32 numbers) are compared and clamped as numbers instead."""
    return isinstance(x, Ref) and not x.dtype.is_floating_point and low.int_words(x)


@dataclasses.dataclass
class IndexPred(Symbolic):
    """A conjunction of (op, scalar) checks on the integer input `source` (negated: its
    complement)."""

    source: Ref
    checks: tuple
    negated: bool = False

    def implied_by_range(self, vocab: int) -> bool:
        """True when 0 <= idx < vocab makes every check true."""
        ok = {"ge": lambda s: s <= 0, "gt": lambda s: s < 0, "lt": lambda s: s >= vocab,
              "le": lambda s: s >= vocab - 1, "ne": lambda s: not 0 <= s < vocab}
        return not self.negated and all(ok[op](s) for op, s in self.checks)


@dataclasses.dataclass
class Guarded(Symbolic):
    """`value` where `pred` holds, else 0 (where(not pred, 0, value))."""

    value: Ref
    pred: IndexPred


@dataclasses.dataclass
class Clamped(Symbolic):
    """clamp(index, lo, hi) of an integer input."""

    index: Ref
    lo: float
    hi: float


def _runtime_table(low, node, weight, *args, **kwargs) -> bool:
    """The table is a runtime input (a constant one: `embedding.embedding`)."""
    return isinstance(weight, Ref)


@rule(aten.embedding.default, case=_runtime_table)
def embedding(low, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
              sparse=False):
    if isinstance(indices, Const):
        return Ref(weight.index[indices.value.to(torch.int64)], weight.dtype)  # a layout
    if not isinstance(indices, Ref):
        raise low.unsupported("embedding indices that are not a runtime tensor")
    # the table written to a resident tile, the picked rows moved from there per call (or
    # the one-hot product of indices computed on the fabric)
    vocab, dim = weight.shape
    return lookup(low, weight, vocab, dim, indices)


# ---- index checks ------------------------------------------------------------------------
def _index_check(low, node, x, other) -> bool:
    """A comparison of an integer input with a number (on floats: `backward`'s compares)."""
    return is_index(low, x) and isinstance(other, (int, float))


def _compare_rule(op):
    def lower_compare(low, node, x, other):
        return IndexPred(x, ((op, other),))

    return lower_compare


for _op in ("ge", "gt", "lt", "le"):
    rule(getattr(aten, _op).Scalar, case=_index_check)(_compare_rule(_op))


@rule(aten.ne.Scalar, case=_index_check)  # other ne: `masks`
def ne(low, node, x, other):
    return IndexPred(x, (("ne", other),))


def _checks_of_one_input(low, node, a, b) -> bool:
    return (isinstance(a, IndexPred) and isinstance(b, IndexPred)
            and not (a.negated or b.negated) and torch.equal(a.source.index, b.source.index))


@rule(aten.bitwise_and.Tensor, aten.logical_and.default, case=_checks_of_one_input)
def both(low, node, a, b):
    """Two checks of one input: one predicate (other ands: `masks`)."""
    return IndexPred(a.source, a.checks + b.checks)


def _of_index_pred(low, node, x, *args, **kwargs) -> bool:
    return isinstance(x, IndexPred)


@rule(aten.logical_not.default, aten.bitwise_not.default, case=_of_index_pred)  # `masks`
def negate(low, node, x):
    return dataclasses.replace(x, negated=not x.negated)


@rule(aten.unsqueeze.default, case=_of_index_pred)  # other unsqueezes: `layout`, `losses`
def unsqueeze(low, node, x, dim):
    return x  # elementwise on the indices: its shape follows `where`


@rule(aten.clamp.default, case=lambda low, node, x, *args, **kwargs: is_index(low, x))
def clamp(low, node, x, lo=None, hi=None):
    """clamp of integer indices: symbolic (a float tensor's clamp: `elementwise.clamp`)."""
    return Clamped(x, float("-inf") if lo is None else lo, float("inf") if hi is None else hi)


COMPLEMENT = {"ge": "lt", "gt": "le", "lt": "ge", "le": "gt", "ne": "eq"}


@rule(aten._to_copy.default, case=_of_index_pred)  # other casts: `layout.to_copy`
def index_check_as_number(low, node, x, dtype=None, **kwargs):
    """An index check cast to a number (RoBERTa's token mask, ids != padding, as int) is
    computed on the fabric: one compare mask per check on the integer input's words, their
    product for the conjunction, 1 - that when negated (a single negated check: the
    complementary compare). A 0/1 Ref of the node's shape (the checks' source shape,
    `unsqueeze` above only reshapes it)."""
    shape = out_shape(node)
    source = x.source
    if math.prod(shape) != source.index.numel():
        raise low.unsupported(f"an index check of shape {source.shape} cast at shape {shape}")
    from_int32 = low.int_words(source)
    checks = x.checks
    negate = x.negated
    if negate and len(checks) == 1:
        checks, negate = ((COMPLEMENT[checks[0][0]], checks[0][1]),), False
    masks = [compare_mask(low, source, float(s), source.shape, from_int32, op) for op, s in checks]
    out = masks[0]
    for m in masks[1:]:
        out = binary(low, out, m, "mul", source.shape)
    if negate:
        out = map_(low, map_(low, out, "mul", -1.0, source.shape), "add", 1.0, source.shape)
    return Ref(out.index.reshape(shape), dtype or torch.float32)


def _zero_or_gradient(low, node, cond, a, b) -> bool:
    """where(c, 0, g) for a runtime g and c a negated index check (the other `where`s:
    `masks`, `backward`, `losses`, and `layout` for a constant condition)."""
    zero_a = isinstance(a, Const) and bool((a.value == 0).all())
    return zero_a and isinstance(b, Ref) and isinstance(cond, IndexPred) and cond.negated


@rule(aten.where.self, case=_zero_or_gradient)
def where(low, node, cond, a, b):
    return Guarded(b, dataclasses.replace(cond, negated=False))
