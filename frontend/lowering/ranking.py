"""Ranking ops of mixture-of-experts routers: topk (values and indices) and sort / argsort
along one dimension, as k passes over the rows (the ranked dimension is a row, the other
dimensions are the rows), each pass the row max and the first index of it:

    top   = max over the row of x'                       (`reduce_rows`, exact)
    hit   = (x' == top) * alive                          (`relation` eq: exact, inf == inf)
    score = hit * (r - j),  best = max over the row of score,  index = r - best
    x'    = where(score == best, -inf, x'),  alive -= (score == best)   (`build_select`)

so each pass picks the first remaining maximum; `alive` keeps a picked -inf from being picked
again when the rest of the row is -inf too. Ascending order (sort, topk largest=False)
ranks -x; integers (a router's expert ids, sorted to group the tokens by expert) rank as
their fp32 numbers, exact below 2^24. Exact values and indices for rows without NaN, with
these differences from eager:

- ties: the first index first. sort is stable in eager (the same order); eager's topk orders
  tied values as its CPU partial sort leaves them (topk([1, 3, 3, 0, 3], 3) gives indices
  2, 4, 1), an order it does not specify: tests use distinct values there.
- NaN is not ordered here (eager ranks it largest): a row holding NaN gives a wrong result.
- a value is its pass's row max: where -0 and +0 tie, its sign of zero may differ.

topk with sorted=False (DeepSeek-V3's router; an order eager leaves unspecified, on a CPU
the order its partial sort leaves) returns the sorted order, which is one of the
orders it allows: a model whose result depends on the order gets eager's unspecified
answer either way, and per-node validation shows where the orders differ. Rankings of more
than `MAX_PASSES` elements are refused (the passes are stages of their own).
"""

from __future__ import annotations

import math

import torch

from fabric.kernels import build_select
from frontend.lowering.common import as2d, binary, map_, negated, reduce_rows
from frontend.lowering.core import rule
from frontend.lowering.elementwise import numbers_of_int_words
from frontend.lowering.masks import CYCLES, not_, relation
from frontend.stages import Limits
from frontend.values import Const, Ref

aten = torch.ops.aten

MAX_PASSES = 16  # elements ranked per row (k of topk, the row length of sort)


def _drop(low, picked: Ref, x: Ref) -> Ref:
    """where(picked, -inf, x) (`build_select`, exact), a Ref of x's shape."""
    m, n = as2d(x.shape)
    operands = [low.operand("c", picked, (m, n), int_words=True),
                low.operand("b", x, (m, n))]
    ref = low.stage("select", (m, n),
                    lambda cfg, rect, **fmt: build_select(cfg, rect, m, n, a=-math.inf,
                                                          dtype=fmt.get("dtype", "f32")),
                    operands, m * n * CYCLES["select"], Limits(m, n), words_per_element=5,
                    suffix="_select")
    return Ref(ref.index.reshape(x.shape))


def rank(low, x: Ref, dim: int, k: int, largest: bool) -> tuple[Ref, Ref]:
    """The k largest (smallest) elements of x along `dim` in order, and their indices (the
    module docstring's passes): Refs of x's shape with `dim` of size k, values of x's
    dtype and int64 indices."""
    if low.int_words(x):  # an integer input's words: ranked as numbers
        x = numbers_of_int_words(low, x)
    nd = len(x.shape)
    dim = dim % nd if nd else 0
    moved = x.index.movedim(dim, -1) if nd else x.index.reshape(1)
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
            rows = _drop(low, picked, rows)

    def out(parts):
        index = torch.stack([p.index for p in parts], -1).reshape(*moved.shape[:-1], k)
        return Ref(index.movedim(-1, dim) if nd else index.reshape(()))

    # index = r - best and -(-x)'s values: one map each over all passes
    shape = out(bests).shape
    indices = map_(low, map_(low, out(bests), "mul", -1.0, shape), "add", float(r), shape)
    values = out(values) if largest else negated(low, out(values), shape)
    return Ref(values.index, x.dtype), Ref(indices.index, torch.int64)


def _check(low, x, r: int, what: str) -> None:
    if not isinstance(x, Ref) or x.dtype == torch.bool:
        kind = type(x).__name__ if not isinstance(x, Ref) else f"a {x.dtype} tensor"
        raise low.unsupported(f"{what} of {kind} (a runtime float or integer tensor)")
    if r > MAX_PASSES:
        raise low.unsupported(f"{what} of {r} elements per row (at most {MAX_PASSES}: one "
                              "pass each)")


@rule(aten.topk.default)
def topk(low, node, x, k, dim=-1, largest=True, sorted=True):
    """The k largest (largest=False: smallest) along `dim`, in order (module docstring);
    sorted=False (any order, eager's unspecified) gets the same order."""
    _check(low, x, k, "topk")
    if k == 0:
        raise low.unsupported("topk with k=0")
    return rank(low, x, dim, k, largest)


@rule(aten.sort.default)
def sort(low, node, x, dim=-1, descending=False):
    """sort (argsort: its indices) along `dim`, ties in index order (stable, as eager's)."""
    nd = len(x.shape) if isinstance(x, Ref) else 0
    r = x.shape[dim] if nd else 1
    _check(low, x, r, "sort")
    values, indices = rank(low, x, dim, r, descending)
    return values, indices


@rule(aten.sort.stable)
def sort_stable(low, node, x, *, stable=None, dim=-1, descending=False):
    return sort(low, node, x, dim, descending)
