"""Tiles sized for a pipelined run: every stage resident and samples streamed through them
all at once, so the rate is set by the slowest stage. The objective is min-max: the largest
predicted kernel cycles (`kernel_fit`, the kernel's `model_cycles`; `stage_cycles` for a
resident tile) over all stages.

Greedy: every stage starts on the best tile for its smallest share (`tile_shape` at
`min_pes`), then the slowest stage moves, one step at a time, to a tile that its model
predicts faster and that still packs (`pack`: a skyline in graph order, so producer and
consumer tiles stay close) within `period_share` (60 %) of the fabric's PEs, until the
slowest stage cannot get faster there. Until then a stage that is never the slowest keeps
its small tile, and one whose kernel does not get faster with more PEs stays where it is.
Then, with `spare`, the other stages move into the PEs left over, the step that saves the
most cycles per added PE of all stages' first: the rate stays (or rises, where a step of
the slowest stage is among the best), the latency through the pipeline (about the sum of
the stages' cycles) drops as far as the PEs left allow. A
resident tile (a table, gathered rows) weighs the words it holds over its PEs
(`stage_cycles`): it computes nothing, but all it holds passes through its PEs.

The share bounds a trade: a step of the slowest stage lowers the period only to the next
slowest, so the last steps take many PEs for a few per cent of rate, PEs that the spare
phase turns into latency. TinyGPT d=64 on small(32, 32), its GEMMs split
(`frontend.gemm_split`), one sample (latency / period, cycles): the period set within 50 %
of the fabric 44,160 / 5,330, 60 % 43,755 / 5,330, 70 % 46,711 / 5,306, 80 % or the whole
fabric 50,133 / 4,930 (the GEMMs on 810 PEs, 12 PEs left spare). Before the skyline, on
shelves (a row of tiles as tall as its tallest; 104 PEs lost under short tiles) and the
whole fabric: 60,612 with the slowest of the other stages served first, 53,150 by cycles
saved per PE, 51,025 with resident tiles weighed (the token table on 15 PEs instead of
one). Measured worse, on shelves: a node's side-by-side stages (batch entries, column
blocks) counted only through their slowest (56,806), or moved together (54,247).

Spare steps must be measurable: each must save at least `min_saving` (0.75 %) of the
period. A stage's growth then ends where its savings fall below that, whatever the
fabric's size (its savings add up to its cycles at most), so a fixed model's tiles, and
its compile time (moves planned per PE, probes and table sizes per program), stop growing
with the fabric. Any saving counted before: GPT-2 of width 32 spent 128 PEs of small(64,
64) on an elementwise stage to go from 4 cycles to 3, and 3,012 PEs in all, 878 now on
small(64, 64) and larger. The threshold from measurements (latency of one sample;
period and utilization unchanged at each): TinyGPT d=64 on small(32, 32) 67,081 cycles
with any saving, 68,713 at 0.5 %, 68,038 at 0.75 %, 72,204 at 1 %; GPT-2 of width 32 on
small(64, 64) 23,010, 23,245, 24,229, 24,285 on 3,012, 1,062, 878, 821 PEs. Savings that
small are also within what the kernel models leave out: the moves into and out of a tile,
which a smaller tile slows.

A step grows the tile's rows, its columns or both, or reshapes it (more rows and fewer
columns, or the reverse: out of a thin start, and along gemm_summa's colors, one per tile
row and column), to the next count that gives each PE a different block of the stage's
tensor (more PEs within a block size only add communication), looking at most `lookahead`
counts ahead in each direction: a few kernel builds per step, not every shape of the fabric.
Deterministic: ties go to the stage first in graph order.
"""

from __future__ import annotations

import heapq
import math

from fabric.config import FabricConfig
from frontend.companions import Groups
from frontend.errors import PlacementError
from frontend.stages import Stage
from frontend.tile_shapes import candidates, min_pes, model_cycles, summa_colors, tile_shape

LOOKAHEAD = 2  # counts tried past a step that saves too few cycles, per direction
MIN_SAVING = 0.0075  # of the period: what a step of the spare phase must save (docstring)
PERIOD_SHARE = 0.6  # of the fabric's PEs: what the tiles may take while the period is set


def next_split(n: int, parts: int, most: int) -> int | None:
    """The fewest parts, more than `parts` and at most `most`, that cut `n` elements into
    smaller blocks than `parts` does; None if there are none.

    >>> next_split(32, 11, 32)  # 11 parts: blocks of 3; 16 parts: blocks of 2
    16
    """
    block = math.ceil(n / parts)
    if block <= 1:
        return None
    fewer = math.ceil(n / (block - 1))  # the first count with blocks of at most block - 1
    return fewer if fewer <= most else None


def previous_split(n: int, parts: int) -> int | None:
    """The fewest parts, fewer than `parts`, that cut `n` elements into blocks of the size
    the count just below `parts` gives; None for one part.

    >>> previous_split(192, 20)  # 19 parts: blocks of 11, as from 18 parts on
    18
    """
    if parts <= 1:
        return None
    return math.ceil(n / math.ceil(n / (parts - 1)))


# the directions a tile grows or reshapes in: rows, columns, both, taller, wider; a
# reshape walks along the colors gemm_summa allows (rows + cols) and out of a thin tile
_DIRECTIONS = ((1, 0), (0, 1), (1, 1), (1, -1), (-1, 1))


def _steps(stage: Stage, shape: tuple[int, int], config: FabricConfig,
           lookahead: int) -> list[list[tuple[int, int]]]:
    """Per direction (`_DIRECTIONS`), the next `lookahead` tiles in it that the stage's
    kernel accepts (its limits, gemm_summa's colors), nearest first."""
    lim = stage.limits
    most_rows = min(lim.rows, config.rows)
    most_cols = min(lim.cols, config.cols)

    def move(n, parts, most, way):
        return parts if way == 0 else (next_split(n, parts, most) if way > 0
                                       else previous_split(n, parts))
    steps = []
    for way_r, way_c in _DIRECTIONS:
        if lim.cols_fixed and way_c:
            continue
        ahead, (r, c) = [], shape
        while len(ahead) < lookahead:
            r, c = move(lim.rows, r, most_rows, way_r), move(lim.cols, c, most_cols, way_c)
            if r is None or c is None or (stage.kind == "gemm_summa" and summa_colors(
                    stage, r, c) > len(config.program_colors)):
                break
            ahead.append((r, c))
        steps.append(ahead)
    return steps


def _grow(i: int, stages: list[Stage], shapes: list[tuple[int, int]], cycles: list[int],
          config: FabricConfig, lookahead: int, least: int = 1, most_pes: int | None = None,
          groups: Groups | None = None) -> tuple[tuple[int, int], int] | None:
    """Stage i's next tile and its cycles: of the first tile in each direction that still
    packs (its riders below it, `groups`), keeps all tiles within `most_pes` PEs (None: the
    fabric) and saves at least `least` cycles, one with no more PEs if any (the fastest),
    else the one that saves the most cycles per added PE; None if none saves that many (or
    stage i is a rider, which follows its root)."""
    groups = groups or Groups(stages, config)
    tiles = groups.weight(i)
    if tiles == 0:
        return None
    stage, (r0, c0) = stages[i], shapes[i]
    others = used(shapes) - tiles * r0 * c0
    best = None
    for ahead in _steps(stage, shapes[i], config, lookahead):
        for shape in ahead:
            fit = stage_cycles(stage, shape, config)
            if fit is None:  # SRAM, colors or blocks: further on in this way, likely too
                break
            if fit > cycles[i] - least:
                continue
            if most_pes is not None and others + tiles * shape[0] * shape[1] > most_pes:
                continue
            if not groups.packs(shapes[:i] + [shape] + shapes[i + 1:]):
                break
            added, saved = tiles * (shape[0] * shape[1] - r0 * c0), cycles[i] - fit
            score = (1, saved, -added) if added <= 0 else (0, saved / added, -added)
            if best is None or score > best[0]:
                best = (score, shape, fit)
            break
    return None if best is None else best[1:]


def balance_cycles(stages: list[Stage], config: FabricConfig, lookahead: int = LOOKAHEAD,
                   spare: bool = True, min_saving: float = MIN_SAVING,
                   period_share: float = PERIOD_SHARE, groups: Groups | None = None
                   ) -> list[tuple[int, int]] | None:
    """Tile shapes (rows, cols) for `stages`, in their order, that lower the largest
    predicted cycles as far as growing the slowest stage within `period_share` of the
    fabric allows; None if even the starting tiles do not pack onto `config`.

    lookahead: block counts tried per direction past one that saves too few cycles.
    spare: once the slowest stage is as fast as it gets, keep moving the stages, the step
        that saves the most cycles per added PE first, while they get measurably faster
        and still pack (see the module's docstring): the rate stays or rises, the latency
        drops, and the larger tiles have more SRAM for buffers. False: the slowest stage
        alone grows.
    min_saving: the fraction of the period (the slowest stage's predicted cycles once it
        is as fast as it gets) that a step of the spare phase must save (module
        docstring); 0 lets any saving count.
    period_share: the fraction of the fabric's PEs the tiles may take while the period is
        set (module docstring; the starting tiles may take more); 1 lets the period take
        the whole fabric.
    groups: elementwise stages tied to their producers' tiles (`frontend.companions`):
        each takes its root's shape and moves with it, the tiles packed as `groups.rects`
        packs them (the result is None when even the starting tiles do not pack that
        way); None: every stage on its own tile.

    >>> shapes = balance_cycles(compiled.lowered.stages, FabricConfig.small(32, 32))
    """
    try:
        shapes = [_start(s, config) for s in stages]
    except PlacementError:  # a stage fits no tile of the fabric
        return None
    groups = groups or Groups(stages, config)
    shapes = groups.tie(shapes)
    if not groups.packs(shapes):
        shapes = flatter_starts(stages, shapes, config, groups)
        if shapes is None:
            return None
    cycles = [stage_cycles(s, shape, config) or 0 for s, shape in zip(stages, shapes)]
    slowest = [(-c, i) for i, c in enumerate(cycles)]  # a max-heap; ties: graph order
    heapq.heapify(slowest)
    while slowest and slowest[0][0] < 0:
        _, i = slowest[0]
        step = _grow(i, stages, shapes, cycles, config, lookahead,
                     most_pes=max(used(shapes), int(period_share * config.num_pes)),
                     groups=groups)
        if step is None:  # the slowest is as fast as it gets: the period is set
            if spare:
                _spend_spare(stages, shapes, cycles, config, lookahead,
                             spare_saving(cycles[i], min_saving), groups)
            break
        shapes[i], cycles[i] = step
        heapq.heapreplace(slowest, (-cycles[i], i))
        _follow(i, stages, shapes, cycles, config, groups)
    return shapes


def _follow(i: int, stages: list[Stage], shapes: list[tuple[int, int]], cycles: list[int],
            config: FabricConfig, groups: Groups) -> None:
    """Stage i's riders (in place) on its new shape, with their cycles there."""
    for rider, root in groups.roots.items():
        if root == i:
            shapes[rider] = shapes[i]
            cycles[rider] = stage_cycles(stages[rider], shapes[i], config) or 0


def _spend_spare(stages: list[Stage], shapes: list[tuple[int, int]], cycles: list[int],
                 config: FabricConfig, lookahead: int, least: int, groups: Groups) -> None:
    """The spare phase (in place): while any stage's next tile packs and saves at least
    `least` cycles, take the step that saves the most cycles per added PE of all stages'
    (a step adding none first). The latency through the pipeline is about the sum of its
    stages' cycles, so the PEs left go where they save the most of it: a layer norm starved
    to three PEs gains thousands of cycles from a few dozen, a GEMM a few hundred from as
    many. Lazy: a stage's step is recomputed when it comes up, as others' growth may have
    taken the room it needed."""
    def next_step(i: int):
        """(cycles saved per added PE, the step) of stage i's next step; None if it has
        none."""
        step = _grow(i, stages, shapes, cycles, config, lookahead, least, groups=groups)
        if step is None:
            return None
        (r, c), fit = step
        added = groups.weight(i) * (r * c - shapes[i][0] * shapes[i][1])
        return (math.inf if added <= 0 else (cycles[i] - fit) / added), step

    best: list[tuple[float, int]] = []  # a max-heap of (-score, stage); ties: graph order
    for i in range(len(stages)):
        if (found := next_step(i)) is not None:
            best.append((-found[0], i))
    heapq.heapify(best)
    while best:
        negative, i = heapq.heappop(best)
        found = next_step(i)
        if found is None:
            continue
        if -found[0] > negative:  # worse than when it was queued: queue it again
            heapq.heappush(best, (-found[0], i))
            continue
        shapes[i], cycles[i] = found[1]
        _follow(i, stages, shapes, cycles, config, groups)
        if (found := next_step(i)) is not None:
            heapq.heappush(best, (-found[0], i))


def used(shapes: list[tuple[int, int]]) -> int:
    """PEs of tiles of `shapes` (rows, cols)."""
    return sum(r * c for r, c in shapes)


def stage_cycles(stage: Stage, shape: tuple[int, int], config: FabricConfig) -> int | None:
    """The cycles the balance weighs for `stage` on a tile of `shape`: its kernel's model
    (None where it cannot run there); for a resident tile, which computes nothing, the
    words it holds over its PEs: all it holds passes through their ramps, about a word per
    cycle each (a gather's rows out of an embedding table, the gathered rows on to their
    consumer), so a table on one PE holds up every call by its size. TinyGPT d=64 on
    small(32, 32): the token table and its gathered rows each on one PE took 2,159 and
    2,061 cycles of the latency."""
    if stage.kind == "resident":
        return math.ceil(stage.tensor.numel / (shape[0] * shape[1]))
    return model_cycles(stage, shape, config)


def spare_saving(period: int, min_saving: float = MIN_SAVING) -> int:
    """The cycles a step of the spare phase must save: `min_saving` of the period, at least
    one.

    >>> spare_saving(12_151)  # a period of 12,151 cycles: steps of 92 cycles or more
    92
    """
    return max(1, math.ceil(min_saving * period))


def flatter_starts(stages: list[Stage], shapes: list[tuple[int, int]], config: FabricConfig,
                    groups: Groups) -> list[tuple[int, int]] | None:
    """Starting tiles that pack where `shapes` do not: the tallest tile (most rows; ties
    graph order) of a stage that is no rider moves to the fastest of at most its PEs with
    fewer rows that its kernel takes, one at a time, until they pack; None if none is left
    to lower. A skyline in graph order fills a short fabric unevenly, and a tall tile late
    in the graph finds no room where a flat one of as many PEs does (MobileNet-v2's last
    1 x 1 convolution at one pixel, a GEMV of 1,280 x 80 starting on 10 x 1 PEs: on 5 x 2
    its tiles pack on small(24, 16))."""
    shapes = list(shapes)
    fixed: set[int] = set(groups.roots)
    while not groups.packs(shapes):
        tall = [(-shapes[i][0], i) for i in range(len(stages))
                if i not in fixed and shapes[i][0] > 1]
        if not tall:
            return None
        _, i = min(tall)
        rows, cols = shapes[i]
        fits = [(cycles, r * c, (r, c)) for r, c in candidates(stages[i], rows * cols, config)
                if r < rows and (cycles := model_cycles(stages[i], (r, c), config)) is not None]
        if not fits:
            fixed.add(i)
            continue
        shapes[i] = min(fits)[2]
        shapes = groups.tie(shapes)
    return shapes


def _start(stage: Stage, config: FabricConfig) -> tuple[int, int]:
    """The best tile for the stage's smallest share: `min_pes`, doubled until its kernel
    fits (SRAM)."""
    pes, total = min_pes(stage, config), config.num_pes
    while True:
        try:
            return tile_shape(stage, pes, config)
        except PlacementError:
            if pes >= total:
                raise
            pes = min(total, 2 * pes)
