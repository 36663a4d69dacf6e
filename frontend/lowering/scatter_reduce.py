"""scatter_reduce along one dimension by an index that holds one index per slice (a graph
network's destination nodes, `index.view(-1, 1).expand_as(src)`): out[idx[t]] reduced
with src[t], reduce "sum", "mean", "amax" or "amin", with or without self's values
(include_self). Graph libraries take a scatter-max for max aggregation and to shift a
softmax over each node's edges (GAT).

With base (V, *rest) and src (T, *rest) (the dimension moved first, rest flattened to D
columns), M (T, V) is the membership of token t in row v, one-hot: of an integer input's
indices (their numbers on the fabric, `itof`; the host checks them against [0, V) before
every call as eager does). Then

    sum, mean   S = M^T @ src (V, D), one GEMM; count = the column sums of M (V,)
                mean = (self + S) / (count + 1) with self, S / count without
    amax, amin  R[v, d] = max over t of where(M[t, v], src[t, d], -inf) (V D, T), a row
                reduction (amin as -max(-src)); with self, self is one more column

and without self, the rows no token names keep self's value (where(count > 0, ., self)).
By a constant index of any pattern, each output element's contributions are known: a row
of their ids (self's beside them, -inf's filling the shorter rows for max and min) reduced
once, and a mean divided by a constant count.

Division is a product by the count's reciprocal (within an ulp of eager's quotient); sums
are fp32 in the GEMM's (or the row's) order; max and min are exact. Other reductions
("prod") and runtime indices that differ along another dimension are refused with the
reason.
"""

from __future__ import annotations

import torch

from frontend.lowering.backward_embedding import is_index
from frontend.lowering.common import (
    binary,
    constant,
    gemm,
    map_,
    reduce_rows,
    relayout,
    shape_of,
)
from frontend.lowering.core import rule
from frontend.lowering.elementwise import unary_stage
from frontend.lowering.embedding import checked_numbers, compare_mask, one_hot
from frontend.lowering.masks import select
from frontend.lowering.scatter import slice_index
from frontend.values import Const, Ref

aten = torch.ops.aten

REDUCES = ("sum", "mean", "amax", "amin")


@rule(aten.scatter_reduce.two)
def scatter_reduce(low, node, base, dim, index, src, reduce, include_self=True):
    if reduce not in REDUCES:
        raise low.unsupported(f"scatter_reduce {reduce!r} (sum, mean, amax and amin are)")
    shape = shape_of(base)
    if not shape or not node.meta["val"].dtype.is_floating_point:
        raise low.unsupported("scatter_reduce of a 0-d or integer tensor (float tensors of "
                              "one or more dimensions are)")
    d = dim % len(shape)
    if isinstance(src, Const):
        src = constant(low, src, "_src")
    if isinstance(index, Const):
        return _by_constant_pattern(low, base, d, index.value.to(torch.int64), src, reduce,
                                    include_self)
    if isinstance(index, Ref):
        idx = slice_index(low, index, src, d, shape, "scatter_reduce")
    else:
        raise low.unsupported(f"scatter_reduce by an index of type {type(index).__name__}")
    vocab, rest = shape[d], tuple(torch.empty(shape).movedim(d, 0).shape[1:])
    width = int(torch.tensor(rest).prod()) if rest else 1
    rows = relayout(base, lambda t: t.movedim(d, 0).reshape(vocab, width))
    values = relayout(src, lambda t: t.movedim(d, 0).reshape(-1, width))
    member = _membership(low, idx, vocab)  # (T, V)
    out = _reduced(low, rows, values, member, reduce, include_self)
    return relayout(out, lambda t: t.reshape(vocab, *rest).movedim(0, d))


def _by_constant_pattern(low, base, d: int, index: torch.Tensor, src: Ref, reduce: str,
                         include_self: bool) -> Ref:
    """scatter_reduce by a constant index of any pattern: every output element's
    contributions are known, a row of their ids (self's id beside them with include_self,
    -inf's where a row has fewer, for max and min) reduced once; rows without any keep
    self's value; a mean divides by the count (+ 1 with self), a constant."""
    shape = shape_of(base)
    if bool((index < 0).any()) or bool((index >= shape[d]).any()):
        raise low.unsupported(f"scatter_reduce indices outside [0, {shape[d]})")
    numel = int(torch.tensor(shape).prod())
    target = torch.arange(numel).reshape(shape).gather(d, index).reshape(-1)
    picks = tuple(slice(0, n) for n in index.shape)
    sign = -1.0 if reduce == "amin" else 1.0
    values = src if sign > 0 else map_(low, src, "mul", -1.0, shape_of(src))
    own = _ref(low, base)
    own = own if sign > 0 else map_(low, own, "mul", -1.0, shape)
    contrib = values.index[picks].reshape(-1)
    count = torch.bincount(target, minlength=numel)
    width = max(int(count.max()), 1)
    order = torch.argsort(target, stable=True)  # each element's contributions, in order
    slot = torch.arange(len(order)) - torch.cumsum(count, 0)[target[order]] + count[target[order]]
    fill = -1
    if reduce in ("amax", "amin"):
        fill = int(constant(low, Const(torch.tensor(float("-inf"))), "_floor").index)
    rows = torch.full((numel, width), fill, dtype=torch.int64)
    rows[target[order], slot] = contrib[order]
    if include_self:
        rows = torch.cat([rows, own.index.reshape(numel, 1)], dim=1)
    op = "sum" if reduce in ("sum", "mean") else "max"
    out = reduce_rows(low, rows, op)
    if reduce == "mean":
        divisor = count + 1 if include_self else count.clamp(min=1)
        out = binary(low, out, Const(1.0 / divisor.to(torch.float32)), "mul", (numel,))
    if sign < 0:
        out = map_(low, out, "mul", -1.0, (numel,))
    if not include_self:  # rows no index names keep self's value
        out = Ref(torch.where(count > 0, out.index, _ref(low, base).index.reshape(-1)))
    return Ref(out.index.reshape(shape), src.dtype)


def _membership(low, idx, vocab: int):
    """M (T, V): 1.0 where token t's index is v, computed on the fabric from an integer
    input's indices."""
    if not is_index(low, idx):
        raise low.unsupported("scatter_reduce by indices computed in the model (an integer "
                              "input's indices are supported: the host checks their range)")
    return one_hot(low, checked_numbers(low, idx, vocab).index, vocab)


def _reduced(low, rows, values: Ref, member, reduce: str, include_self: bool) -> Ref:
    """The (V, D) result of the module docstring's formulas: rows (V, D) self's values,
    values (T, D), member M (T, V)."""
    vocab, width = shape_of(rows)
    tokens = shape_of(values)[0]
    count = reduce_rows(low, member.index.t(), "sum")  # (V,)
    if reduce in ("sum", "mean"):
        total = gemm(low, relayout(member, lambda t: t.t()), values, suffix="_scatter")
        if include_self:
            total = binary(low, rows, total, "add", (vocab, width))
            if reduce == "sum":
                return total
            count = _plus_one(low, count)
        elif reduce == "mean":
            total = binary(low, total, _reciprocal(low, count), "mul", (vocab, width))
            return _where_named(low, count, total, rows)
        else:
            return _where_named(low, count, total, rows)
        return binary(low, total, _reciprocal(low, count), "mul", (vocab, width))
    sign = 1.0 if reduce == "amax" else -1.0
    if sign < 0:
        values = map_(low, values, "mul", -1.0, (tokens, width))
    # (V, D, T): src[t, d] where token t names row v, else -inf
    candidates = _where_member(low, member, values, vocab)
    if include_self:
        own = rows if sign > 0 else map_(low, _ref(low, rows), "mul", -1.0, (vocab, width))
        own = _ref(low, own)
        candidates = torch.cat([candidates, own.index[:, :, None]], dim=2)
    best = reduce_rows(low, candidates.reshape(vocab * width, -1), "max")
    best = Ref(best.index.reshape(vocab, width))
    if sign < 0:
        best = map_(low, best, "mul", -1.0, (vocab, width))
    return best if include_self else _where_named(low, count, best, rows)


def _ref(low, v) -> Ref:
    return constant(low, v, "_self") if isinstance(v, Const) else v


def _plus_one(low, count: Ref) -> Ref:
    return map_(low, count, "add", 1.0, count.shape)


def _reciprocal(low, count: Ref) -> Ref:
    """1 / count as a (V, 1) column."""
    return Ref(unary_stage(low, count, "reciprocal").index[:, None])


def _where_member(low, member, values: Ref, vocab: int) -> torch.Tensor:
    """The ids (V, D, T) of where(M[t, v], values[t, d], -inf)."""
    tokens, width = shape_of(values)
    picked = values.index.t()[None].expand(vocab, width, tokens)
    cond = Ref(member.index.t()[:, None, :].expand(vocab, width, tokens))
    return select(low, cond, {"a": Ref(picked)}, {"b": float("-inf")},
                  (vocab, width, tokens)).index


def _where_named(low, count, named, rows) -> Ref:
    """named where count > 0, else rows (self's values): the rows no token names keep
    them. count (V,), named and rows (V, D)."""
    shape = shape_of(named)
    hit = compare_mask(low, count, 0.0, count.shape, op="gt")
    return select(low, Ref(hit.index[:, None].expand(shape)),
                  {"a": named, "b": _ref(low, rows)}, {}, shape)
