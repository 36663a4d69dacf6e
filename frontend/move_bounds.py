"""Lower bounds on the moves between placed tiles, from their geometry alone: what a
pipelined placement weighs beside its kernels' models when it chooses between tile layouts
(`frontend.placement.place`), before any move is planned.

A move of W words from tile S to a disjoint tile D (`move_bound`):
  * every PE of D receives its words through its ramp, one per cycle, and every PE of S
    sends through its own: at least W / PEs(D) and W / PEs(S) cycles;
  * every route crosses each line that separates S from D. A route goes along a row, then
    a column, or the reverse (`fabric.kernels.traffic_routes`: "xy" or "yx"), so it
    crosses a vertical line on a row of S or of D, a horizontal one on a column of S or of
    D: one link per such row (column) in the move's direction, W / their count cycles.
Two tiles side by side on one row of PEs (Mixtral's expert weights on 1 x 17 PEs, their
add on 1 x 7 beside them) pass all 8,288 words over one link: 8,288 cycles at least,
8,323 simulated. An elementwise stage right below its GEMM on its tile shape (a rider,
`frontend.companions`) gets each column's words over that column's link: the words of one
PE times the tile's rows.

One sample's way through a placed pipeline, nothing else in flight (`critical_path`): each
stage starts when the moves of all its operands are in and runs its kernel, so the
longest chain of kernels and move bounds through the graph is its latency at least
(the host's transfers apart).
Against the pipelined timeline's latency (this bound / simulated, small(12, 12)): GPT-J
with three riders on its GEMMs' shapes 26,240 / 27,625, without 23,532 / 24,955; RoBERTa
with three 26,995 / 27,812, with one 25,549 / 26,436: the bound moves with what the
simulation measures. It is lower where moves take longer than their words over the links
(ResNet 42,794 / 56,803: a convolution's windows copy elements several times).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import torch

from fabric.program import Rect
from frontend.stages import Stage


def _span(first: int, count: int) -> range:
    return range(first, first + count)


def move_bound(src: Rect, dst: Rect, words: int) -> int:
    """Cycles a move of `words` 32-bit words from tile `src` to the disjoint tile `dst`
    takes at least (module docstring); 0 for no words."""
    if words <= 0:
        return 0
    bound = max(words / (src.rows * src.cols), words / (dst.rows * dst.cols))
    if src.col + src.cols <= dst.col or dst.col + dst.cols <= src.col:  # a vertical line
        rows = set(_span(src.row, src.rows)) | set(_span(dst.row, dst.rows))
        bound = max(bound, words / len(rows))
    if src.row + src.rows <= dst.row or dst.row + dst.rows <= src.row:  # a horizontal one
        cols = set(_span(src.col, src.cols)) | set(_span(dst.col, dst.cols))
        bound = max(bound, words / len(cols))
    return math.ceil(bound)


def edge_words(stages: Iterable[Stage], edges: Iterable[tuple[str, str]]
               ) -> dict[tuple[str, str], int]:
    """{(producer, consumer): the producer's elements the consumer's runtime operands read,
    each counted once}: the fewest words their move carries."""
    by_name = {s.name: s for s in stages}
    out = {}
    for producer, consumer in edges:
        ids = [op.index.reshape(-1) for op in by_name[consumer].operands
               if op.index is not None]
        if not ids:
            continue
        ids = torch.cat(ids)
        out[producer, consumer] = int(torch.unique(ids[by_name[producer].tensor.owns(ids)])
                                      .numel())
    return out


def stage_bounds(predicted: Mapping[str, int], rects: Mapping[str, Rect],
                 words: Mapping[tuple[str, str], int]) -> dict[str, int]:
    """{stage: its cycles per sample at least}: its kernel's `predicted` cycles or the
    bound of a move into it (`move_bound`; `words` from `edge_words`), the larger."""
    rate = dict(predicted)
    for (producer, consumer), n in words.items():
        rate[consumer] = max(rate.get(consumer, 0),
                             move_bound(rects[producer], rects[consumer], n))
    return rate


def rate_bound(predicted: Mapping[str, int], rects: Mapping[str, Rect],
               words: Mapping[tuple[str, str], int]) -> int:
    """The slowest stage's cycles per sample at least (`stage_bounds`)."""
    return max(stage_bounds(predicted, rects, words).values(), default=0)


def critical_path(order: Sequence[str], predicted: Mapping[str, int],
                  rects: Mapping[str, Rect], words: Mapping[tuple[str, str], int]
                  ) -> tuple[int, list[str]]:
    """(cycles, stages): the longest chain of kernels (`predicted`) and the bounds of the
    moves between them (`move_bound`, `words` from `edge_words`) through the stages in
    graph order `order`, and the stages on it, first to last (module docstring)."""
    into: dict[str, list[tuple[str, int]]] = {}
    for (producer, consumer), n in words.items():
        into.setdefault(consumer, []).append((producer, n))
    finish: dict[str, int] = {}
    after: dict[str, str | None] = {}  # a stage -> the producer whose move it waits for
    for name in order:
        start, after[name] = 0, None
        for producer, n in into.get(name, ()):
            if producer in finish:
                ready = finish[producer] + move_bound(rects[producer], rects[name], n)
                if ready > start:
                    start, after[name] = ready, producer
        finish[name] = start + predicted.get(name, 0)
    if not finish:
        return 0, []
    last: str | None = max(finish, key=finish.get)
    cycles, path = finish[last], []
    while last is not None:
        path.append(last)
        last = after[last]
    return cycles, path[::-1]
