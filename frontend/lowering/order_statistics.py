"""Order statistics and running extrema along one dimension: kthvalue, median and nanmedian
(values and indices), cummax and cummin (values and indices) and logcumsumexp. The ranked
dimension is a row, the other dimensions are the rows (as `ranking`'s sort).

kthvalue / median / nanmedian: each element's place in its row, NaN ordered as eager
orders it (after every number, NaNs by index), then the element at the place asked:

    base[t]   = #{s: x[s] < x[t]} + #{s < t: x[s] == x[t]}     (n x n comparisons, sort's)
    place[t]  = base[t] + nan[t] (n - #NaN + #{s < t: nan[s]})  (a NaN after the numbers)
    lands[t]  = (place[t] == p)
    value     = max over t of where(lands[t], x[t], -inf),  index = sum over t of t lands[t]

A NaN compares false with everything, so base[t] of a NaN is 0 and a NaN adds nothing to a
number's base; place is a permutation of 0 .. n - 1 per row. kthvalue(k): p = k - 1.
median: p = (n - 1) // 2, or in a row holding NaN the first NaN's place n - #NaN (eager:
NaN, at the first NaN's index). nanmedian: the lower median of the row's c = n - #NaN
numbers, p = floor(max(c - 1, 0) / 2) (an all-NaN row: NaN, as eager, at its first NaN's
index, where eager's index is one of the NaNs its partial sort leaves there: 2 of 5 on a
CPU). Ties go by index (the place among equal values); eager's kthvalue leaves the index
of a tied value unspecified (on a CPU its partial sort's), so a model's index node of ties
may differ from it, the values not.

cummax / cummin: the running extremum by `fabric.kernels.scan` (NaN kept from where it first
appears, as eager's values). Its index, where a node reads it, is eager's: the last index
holding the running extremum (eager replaces it on x[t] >= its max), or the last NaN:

    index[t] = max over s <= t of s ((x[s] == M[t]) + nan[s])      (n x n comparisons)

(a row whose M[t] is a number holds no NaN up to t; -0 == +0, so ties of signed zeros
count as eager's >= does.)

logcumsumexp: out[t] = M[t] + log(sum over s <= t of exp(x[s] - M[t])), M the running max
(every term at most 1, one of them 1: no overflow, no underflow of the whole sum), and M[t]
itself where it is infinite (eager: +inf from a +inf, -inf while every element is -inf),
NaN from a NaN on. The n x n differences are computed per row (rows of at most `MAX_SORTED`
elements, as sort's).
"""

from __future__ import annotations

import math
import operator

import torch

from frontend.lowering.common import binary, constant, map_, reduce_rows
from frontend.lowering.core import Unavailable, rule
from frontend.lowering.elementwise import numbers_of_int_words, unary_stage
from frontend.lowering.masks import relation, select
from frontend.lowering.ranking import MAX_SORTED, check_ranked, count_places, ranked_last
from frontend.lowering.reductions import scan
from frontend.values import Const, Ref

aten = torch.ops.aten


def _reads_indices(node) -> bool:
    """Whether a node of the graph reads output 1 (the indices) of a (values, indices) op."""
    return any(u.target is operator.getitem and u.args[1] == 1 for u in node.users)


def _rows(low, x, dim, what: str):
    """(x with integer words read as numbers, its index map with `dim` last, dim, rows
    (m, n), m, n) for a ranked op `what`; rows longer than MAX_SORTED refused."""
    nd = len(x.shape) if isinstance(x, Ref) else 0
    check_ranked(low, x, x.shape[dim] if nd else 1, what, MAX_SORTED, "n x n comparisons each")
    x, moved, dim = ranked_last(low, x, dim)
    n = moved.shape[-1]
    m = moved.numel() // max(1, n)
    return x, moved, dim, moved.reshape(m, n), m, n


def _places(low, rows: torch.Tensor, m: int, n: int) -> tuple[Ref, Ref]:
    """(place (m, n): every element's place in its row, NaN after the numbers, ties by
    index (module docstring); the rows' NaN counts (m,))."""
    base = count_places(low, rows)  # a NaN compares false: 0, and nothing to a number
    nan = relation(low, Ref(rows), Ref(rows), "ne")
    nans = reduce_rows(low, nan.index, "sum")
    # a NaN's place past the numbers: n - #NaN + the NaNs before it (an exclusive count)
    nans_before = binary(low, scan(low, nan, 1, "sum", torch.float32), nan, "sub", (m, n))
    past = map_(low, binary(low, nans_before, Ref(nans.index[:, None].expand(m, n)), "sub",
                            (m, n)), "add", float(n), (m, n))
    shift = binary(low, nan, past, "mul", (m, n))
    return binary(low, Ref(base.index.reshape(m, n)), shift, "add", (m, n)), nans


def _pick(low, rows: torch.Tensor, place: Ref, p, m: int, n: int, indices: bool):
    """(values (m,), indices (m,) or None): the element of each row at place p (a number,
    or a Ref (m,) per row)."""
    target = p if not isinstance(p, Ref) else Ref(p.index[:, None].expand(m, n))
    lands = relation(low, place, target, "eq", (m, n))
    picked = select(low, lands, {"a": Ref(rows)}, {"b": -math.inf}, (m, n))
    values = reduce_rows(low, picked.index, "max")
    if not indices:
        return values, None
    at = binary(low, lands, Const(torch.arange(n, dtype=torch.float32).expand(m, n)), "mul",
                (m, n))
    return values, reduce_rows(low, at.index, "sum")


def _reduced(ref: Ref | None, moved: torch.Tensor, dim: int, nd: int, keepdim: bool,
             dtype) -> Ref | None:
    """A per-row result (m,) in the input's shape less `dim` (kept as 1 with keepdim)."""
    if ref is None:
        return None
    index = ref.index.reshape(moved.shape[:-1])
    if nd and keepdim:
        index = index.unsqueeze(dim)
    return Ref(index, dtype)


def _order_statistic(low, x, dim: int, keepdim: bool, what: str, place_of, wanted: bool):
    """values, and indices if `wanted`, at the place `place_of(nans, n)` gives (a number or
    a Ref (m,))."""
    nd = len(x.shape) if isinstance(x, Ref) else 0
    x, moved, dim, rows, m, n = _rows(low, x, dim, what)
    place, nans = _places(low, rows, m, n)
    values, indices = _pick(low, rows, place, place_of(nans, n), m, n, wanted)
    out = _reduced(values, moved, dim, nd, keepdim, x.dtype)
    at = _reduced(indices, moved, dim, nd, keepdim, torch.int64)
    return out, at if at is not None else Unavailable(f"{what}'s indices")


def _median_place(low, nans: Ref, n: int) -> Ref:
    """(n - 1) // 2, or n - #NaN in a row holding NaN (its first NaN)."""
    lower = (n - 1) // 2
    has_nan = relation(low, nans, 0.0, "gt")
    # lower + has_nan (n - #NaN - lower)
    gap = map_(low, map_(low, nans, "mul", -1.0, nans.shape), "add", float(n - lower),
               nans.shape)
    return map_(low, binary(low, has_nan, gap, "mul", nans.shape), "add", float(lower),
                nans.shape)


def _nanmedian_place(low, nans: Ref, n: int) -> Ref:
    """floor(max(c - 1, 0) / 2) for the row's c = n - #NaN numbers."""
    less = map_(low, map_(low, nans, "mul", -1.0, nans.shape), "add", float(n - 1),
                nans.shape)
    half = map_(low, map_(low, less, "relu", 0.0, nans.shape), "mul", 0.5, nans.shape)
    return unary_stage(low, half, "floor")


@rule(aten.kthvalue.default)
def kthvalue(low, node, x, k, dim=-1, keepdim=False):
    """The k-th smallest along `dim` and its index (module docstring)."""
    n = x.shape[dim] if isinstance(x, Ref) and len(x.shape) else 1
    if not 1 <= k <= n:
        raise low.unsupported(f"kthvalue with k={k} of {n} elements (k in 1 .. {n})")
    return _order_statistic(low, x, dim, keepdim, "kthvalue", lambda nans, n: float(k - 1),
                            _reads_indices(node))


@rule(aten.median.dim)
def median_dim(low, node, x, dim, keepdim=False):
    """The lower median along `dim` (NaN where the row holds one) and its index."""
    return _order_statistic(low, x, dim, keepdim, "median",
                            lambda nans, n: _median_place(low, nans, n), _reads_indices(node))


@rule(aten.nanmedian.dim)
def nanmedian_dim(low, node, x, dim, keepdim=False):
    """The lower median of the row's numbers along `dim` and its index."""
    return _order_statistic(low, x, dim, keepdim, "nanmedian",
                            lambda nans, n: _nanmedian_place(low, nans, n), _reads_indices(node))


def _of_all(low, x, what: str, place_of) -> Ref:
    """The statistic over every element (the input flattened to one row): a 0-d value."""
    check_ranked(low, x, 1, what)
    flat = Ref(x.index.reshape(-1), x.dtype)
    values = _order_statistic(low, flat, 0, False, what, place_of, False)[0]
    return Ref(values.index.reshape(()), x.dtype)


@rule(aten.median.default)
def median_all(low, node, x):
    return _of_all(low, x, "median", lambda nans, n: _median_place(low, nans, n))


@rule(aten.nanmedian.default)
def nanmedian_all(low, node, x):
    return _of_all(low, x, "nanmedian", lambda nans, n: _nanmedian_place(low, nans, n))


def _running_extremum(low, node, x, dim: int, op: str):
    """cummax / cummin (op "max" | "min"): values, and indices where a node reads them."""
    what = {"max": "cummax", "min": "cummin"}[op]
    check_ranked(low, x, 1, what)  # a runtime float or integer tensor, any row length
    if low.int_words(x):
        x = numbers_of_int_words(low, x)
    values = scan(low, x, dim, op, x.dtype)
    if not _reads_indices(node):
        return values, Unavailable(f"{what}'s indices")
    nd = len(x.shape)
    x, moved, dim, rows, m, n = _rows(low, x, dim, f"{what}'s indices")
    running = values.index.movedim(dim, -1).reshape(m, n) if nd else values.index.reshape(1, 1)
    pairs = (m, n, n)
    # [i, t, s]: x[i, s] holds the running extremum of t (or is a NaN)
    equal = relation(low, Ref(rows[:, None, :].expand(pairs)),
                     Ref(running[:, :, None].expand(pairs)), "eq")
    nan = relation(low, Ref(rows), Ref(rows), "ne")
    hit = binary(low, equal, Ref(nan.index[:, None, :].expand(pairs)), "add", pairs)
    upto = torch.arange(n, dtype=torch.float32).expand(n, n).tril()  # [t, s] = s for s <= t
    at = binary(low, hit, Const(upto.expand(pairs)), "mul", pairs)
    last = reduce_rows(low, at.index.reshape(m * n, n), "max")
    index = last.index.reshape(moved.shape)
    return values, Ref(index.movedim(-1, dim) if nd else index.reshape(()), torch.int64)


@rule(aten.cummax.default)
def cummax(low, node, x, dim):
    return _running_extremum(low, node, x, dim, "max")


@rule(aten.cummin.default)
def cummin(low, node, x, dim):
    return _running_extremum(low, node, x, dim, "min")


@rule(aten.logcumsumexp.default)
def logcumsumexp(low, node, x, dim):
    """log(cumsum(exp(x))) along `dim` against the running max (module docstring)."""
    nd = len(x.shape) if isinstance(x, Ref) else 0
    x, moved, dim, rows, m, n = _rows(low, x, dim, "logcumsumexp")
    pairs = (m, n, n)
    top = scan(low, Ref(rows), 1, "max", torch.float32)  # (m, n): M[t]
    diff = binary(low, Ref(rows[:, None, :].expand(pairs)),
                  Ref(top.index[:, :, None].expand(pairs)), "sub", pairs)
    # s <= t: a constant mask of n x n words, resident, read by every row
    upto = constant(low, Const(torch.ones(n, n).tril()))
    kept = select(low, Ref(upto.index.expand(pairs)), {"a": diff}, {"b": -math.inf}, pairs)
    total = reduce_rows(low, unary_stage(low, kept, "exp").index.reshape(m * n, n), "sum")
    out = binary(low, top, unary_stage(low, Ref(total.index.reshape(m, n)), "log"), "add",
                 (m, n))
    infinite = relation(low, unary_stage(low, top, "abs"), math.inf, "eq")
    result = select(low, infinite, {"a": top, "b": out}, {}, (m, n))
    index = result.index.reshape(moved.shape)
    return Ref(index.movedim(-1, dim) if nd else index.reshape(()), x.dtype)
