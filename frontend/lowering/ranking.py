"""Ranking ops of mixture-of-experts routers: topk (values and indices) and sort / argsort
along one dimension (the ranked dimension is a row, the other dimensions are the rows).

topk: k passes over the rows, each pass the row max and the first index of it:

    top   = max over the row of x'                       (`reduce_rows`, exact)
    hit   = (x' == top) * alive                          (`relation` eq: exact, inf == inf)
    score = hit * (r - j),  best = max over the row of score,  index = r - best
    x'    = where(score == best, -inf, x'),  alive -= (score == best)   (`build_select`)

so each pass picks the first remaining maximum; `alive` keeps a picked -inf from being picked
again when the rest of the row is -inf too. largest=False ranks -x.

sort (a router's expert ids sorted to group the tokens by expert): a fixed number of stages
for any row length n, each element's place counted from the row's n x n comparisons:

    place[t]  = #{s: x[s] < x[t]} + #{s < t: x[s] == x[t]}     (descending: >)
    lands[p, t] = (place[t] == p)                               (a one-hot of the places)
    values[p] = max over t of where(lands[p, t], x[t], -inf),  indices[p] = sum of t lands[p, t]

Integers rank as their fp32 numbers, exact below 2^24. Exact values and indices for rows
without NaN, with these differences from eager:

- ties: the first index first. eager's sort keeps ties in index order with stable=True,
  and on a CPU up to 16 elements without it (the same order; longer rows' ties it leaves
  in an order it does not specify, so a model's node of them may differ); eager's topk orders
  tied values as its CPU partial sort leaves them (topk([1, 3, 3, 0, 3], 3) gives indices
  2, 4, 1), an order it does not specify: tests use distinct values there.
- NaN is not ordered here (eager ranks it largest): a call whose row holds NaN raises
  RankingNaNError after it has run, naming the node (`frontend.nan_rankings`).
- topk's value is its pass's row max: where -0 and +0 tie, its sign of zero may differ
  (sort's is the element itself).

topk with sorted=False (DeepSeek-V3's router; an order eager leaves unspecified, on a CPU
the order its partial sort leaves) returns the sorted order, which is one of the
orders it allows: a model whose result depends on the order gets eager's unspecified
answer either way, and per-node validation shows where the orders differ. topk with k
above `MAX_PASSES` (the passes are stages of their own) and sorts of rows longer than
`MAX_SORTED` are refused.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx

from frontend.lowering.common import binary, map_, negated, reduce_rows
from frontend.lowering.core import rule
from frontend.lowering.elementwise import numbers_of_int_words
from frontend.lowering.embedding import one_hot
from frontend.lowering.masks import not_, relation, select
from frontend.values import Const, Ref

aten = torch.ops.aten

MAX_PASSES = 16  # elements topk ranks per row (its k)
MAX_SORTED = 128  # elements sort ranks per row: n x n comparisons per row


# the rankings whose indices lie within their dimension: op -> position of its dim argument
# (max.dim and min.dim: Phi-3.5-MoE's router takes its first expert as max's index)
DIM_ARGUMENT = {aten.topk.default: 2, aten.sort.default: 1, aten.sort.stable: None,
                aten.argmax.default: 1, aten.max.dim: 1, aten.min.dim: 1}
SORTS = (aten.sort.default, aten.sort.stable)


def ranked_by(index) -> tuple[torch.fx.Node, int] | None:
    """(the ranking's node, the size of the dimension it ranks) where the graph value
    `index` is the indices of a topk or sort, or an argmax, max or min along one dimension:
    each in [0, that size) by construction. None for anything else."""
    if not isinstance(index, torch.fx.Node):
        return None
    source = index.args[0] if index.target is operator.getitem and index.args[1] == 1 \
        else index
    if not isinstance(source, torch.fx.Node) or source.target not in DIM_ARGUMENT:
        return None
    at = DIM_ARGUMENT[source.target]
    dim = source.kwargs.get("dim", source.args[at] if at is not None and len(source.args) > at
                            else -1)
    ranked = source.args[0].meta["val"]
    if dim is None or not ranked.dim():  # argmax over every element: a flat index
        return None
    return source, ranked.shape[dim]


def ranked_last(low, x: Ref, dim: int) -> tuple[Ref, torch.Tensor, int]:
    """(x, its index map with the ranked dimension last, that dimension): an integer
    input's words first read as numbers; a 0-d x as one element."""
    if low.int_words(x):
        x = numbers_of_int_words(low, x)
    nd = len(x.shape)
    dim = dim % nd if nd else 0
    return x, (x.index.movedim(dim, -1) if nd else x.index.reshape(1)), dim


def rank(low, x: Ref, dim: int, k: int, largest: bool) -> tuple[Ref, Ref]:
    """The k largest (smallest) elements of x along `dim` in order, and their indices (the
    module docstring's passes): Refs of x's shape with `dim` of size k, values of x's
    dtype and int64 indices."""
    x, moved, dim = ranked_last(low, x, dim)
    nd = len(x.shape)
    r = moved.shape[-1]
    m = moved.numel() // max(1, r)
    rows = Ref(moved.reshape(m, r))
    if not largest:
        rows = negated(low, rows, (m, r))
    ranks = torch.arange(r, 0, -1, dtype=torch.float32).expand(m, r)
    alive, values, bests = None, [], []
    for p in range(k):
        top = reduce_rows(low, rows.index, "max")
        hit = relation(low, rows, Ref(top.index[:, None].expand(m, r)), "eq")
        if alive is not None:
            hit = binary(low, hit, alive, "mul", (m, r))
        score = binary(low, hit, Const(ranks), "mul", (m, r))
        best = reduce_rows(low, score.index, "max")
        values.append(top)
        bests.append(best)
        if p < k - 1:
            picked = relation(low, score, Ref(best.index[:, None].expand(m, r)), "eq")
            alive = not_(low, picked) if alive is None else binary(low, alive, picked, "sub",
                                                                   (m, r))
            rows = select(low, picked, {"b": rows}, {"a": -math.inf}, rows.shape)

    def out(parts):
        index = torch.stack([p.index for p in parts], -1).reshape(*moved.shape[:-1], k)
        return Ref(index.movedim(-1, dim) if nd else index.reshape(()))

    # index = r - best and -(-x)'s values: one map each over all passes
    shape = out(bests).shape
    indices = map_(low, map_(low, out(bests), "mul", -1.0, shape), "add", float(r), shape)
    values = out(values) if largest else negated(low, out(values), shape)
    return Ref(values.index, x.dtype), Ref(indices.index, torch.int64)


def count_places(low, rows: torch.Tensor, descending: bool = False) -> Ref:
    """Every element's place in its row of the index map `rows` (m, n), counted from the
    row's n x n comparisons: the elements before it by value or, tied, by index (module
    docstring, "sort"). A Ref of shape (m n,), row by row."""
    m, n = rows.shape
    pairs = (m, n, n)
    mine, other = Ref(rows[:, :, None].expand(pairs)), Ref(rows[:, None, :].expand(pairs))
    # [i, t, s]: x[i, s] goes before x[i, t], by value or, tied, by index (s < t)
    ahead = relation(low, other, mine, "gt" if descending else "lt")
    ties = relation(low, other, mine, "eq")
    earlier = Const(torch.ones(n, n).tril(-1).expand(pairs))
    before = binary(low, ahead, binary(low, ties, earlier, "mul", pairs), "add", pairs)
    return reduce_rows(low, before.index.reshape(m * n, n), "sum")


def sort_by_counts(low, x: Ref, dim: int, descending: bool) -> tuple[Ref, Ref]:
    """x sorted along `dim` and the indices (module docstring, "sort"): each element's place
    counted from the n x n comparisons of its row, the element at each place picked by a
    masked row max. Refs of x's shape, values of x's dtype and int64 indices."""
    x, moved, dim = ranked_last(low, x, dim)
    nd = len(x.shape)
    n = moved.shape[-1]
    m = moved.numel() // max(1, n)
    rows = moved.reshape(m, n)
    pairs = (m, n, n)
    other = Ref(rows[:, None, :].expand(pairs))
    place = count_places(low, rows, descending)  # (m n,): x[i, t]'s
    # [i, p, t]: x[i, t] lands at place p
    lands = Ref(one_hot(low, place.index, n).index.reshape(pairs).transpose(1, 2))
    picked = select(low, lands, {"a": other}, {"b": -math.inf}, pairs)
    values = reduce_rows(low, picked.index.reshape(m * n, n), "max")
    which = binary(low, lands, Const(torch.arange(n, dtype=torch.float32).expand(pairs)),
                   "mul", pairs)
    indices = reduce_rows(low, which.index.reshape(m * n, n), "sum")

    def back(ref):
        index = ref.index.reshape(moved.shape)
        return index.movedim(-1, dim) if nd else index.reshape(())

    return Ref(back(values), x.dtype), Ref(back(indices), torch.int64)


def check_ranked(low, x, r: int, what: str, most: float = MAX_PASSES,
                 each: str = "one pass each") -> None:
    """Refuse a ranking of anything but a runtime float or integer tensor, or of rows of
    more than `most` elements."""
    if not isinstance(x, Ref) or x.dtype == torch.bool:
        kind = type(x).__name__ if not isinstance(x, Ref) else f"a {x.dtype} tensor"
        raise low.unsupported(f"{what} of {kind} (a runtime float or integer tensor)")
    if r > most:
        raise low.unsupported(f"{what} of {r} elements per row (at most {most}: {each})")


@rule(aten.topk.default)
def topk(low, node, x, k, dim=-1, largest=True, sorted=True):
    """The k largest (largest=False: smallest) along `dim`, in order (module docstring);
    sorted=False (any order, eager's unspecified) gets the same order."""
    check_ranked(low, x, k, "topk")
    if k == 0:
        raise low.unsupported("topk with k=0")
    return rank(low, x, dim, k, largest)


@rule(aten.sort.default)
def sort(low, node, x, dim=-1, descending=False):
    """sort (argsort: its indices) along `dim`, ties in index order (stable, as eager's)."""
    nd = len(x.shape) if isinstance(x, Ref) else 0
    r = x.shape[dim] if nd else 1
    check_ranked(low, x, r, "sort", MAX_SORTED, "n x n comparisons each")
    return sort_by_counts(low, x, dim, descending)


@rule(aten.sort.stable)
def sort_stable(low, node, x, *, stable=None, dim=-1, descending=False):
    return sort(low, node, x, dim, descending)
