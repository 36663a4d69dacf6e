"""A stage's tile shapes and their fit: which shapes its kernel takes, the kernel model's
cycles on each (cached per stage and shape), the best shape within a PE budget, and the
packing of tiles onto the grid (`pack`: a skyline in graph order, so producer and consumer
tiles stay close). What both placement objectives (`frontend.placement`, `frontend.balance`)
build on."""

from __future__ import annotations

import math

from fabric.config import FabricConfig
from fabric.program import Rect
from frontend.errors import PlacementError
from frontend.stages import Stage

# The SRAM layout of the model's SUMMA tiles: the accumulator one word apart from A's bank
# pairs (`build_gemm_summa(..., bank_aware=True)`, the SDK's advice), so that the inner
# op's two reads never wait on the read-pair rule, as a compiler lays them out; the
# kernel's own default keeps the declared layout (the fidelity benchmark's).
SUMMA_BANK_AWARE = True


def min_pes(stage: Stage, config: FabricConfig) -> int:
    """A first share of PEs for sizing (from `words_per_element`, an estimate per kernel);
    not a bound: see `data_bytes` and `smallest_tile` for what a stage needs at least."""
    words = stage.words_per_element * stage.tensor.numel
    return max(1, math.ceil(words / (0.8 * config.sram_words)))


def summa_colors(stage: Stage, rows: int, cols: int) -> int:
    """Colors the stage's gemm_summa takes on a rows x cols tile (`summa_tile_colors`)."""
    return summa_tile_colors(rows, cols, half=stage.dtype != "f32")


def summa_tile_colors(rows: int, cols: int, half: bool = False) -> int:
    """Colors gemm_summa takes on a rows x cols tile: one per owner column and row (a side
    of one PE needs none), one more for a 16-bit dtype's B scalars (`half`)."""
    return (cols if cols > 1 else 0) + (rows if rows > 1 else 0) + half


def candidates(stage: Stage, pes: int, config: FabricConfig):
    lim = stage.limits
    if lim.cols_fixed:
        for rows in range(1, max(1, min(lim.rows, pes)) + 1):
            yield rows, lim.cols_fixed
        return
    for rows in range(1, max(1, min(lim.rows, pes, config.rows)) + 1):
        widest = max(1, min(lim.cols, pes // rows))
        # and the fabric's width: a GEMM of one row (a 1x1 convolution at 1x1 pixels) would
        # otherwise try only widths past the fabric's and 1
        for cols in {widest, max(1, widest // 2), 1, min(widest, config.cols)}:
            if stage.kind == "gemm_summa" and \
                    summa_colors(stage, rows, cols) > len(config.program_colors):
                continue
            yield rows, cols


def kernel_fit(stage: Stage, shape: tuple[int, int], config: FabricConfig) -> int | str:
    """The stage's kernel's analytic cycles on a tile of `shape`, or why it cannot run there
    (its ValueError's message: SRAM, colors). Cached per stage, config and shape."""
    cache = stage.__dict__.setdefault("_model_cache", {})
    key = (config, tuple(shape))
    if key not in cache:
        try:
            cache[key] = stage.build(config, Rect(0, 0, *shape)).model_cycles
        except ValueError as e:
            cache[key] = str(e)
    return cache[key]


def model_cycles(stage: Stage, shape: tuple[int, int], config: FabricConfig) -> int | None:
    """The stage's kernel's analytic cycles on a tile of `shape`; None if it cannot run
    there (SRAM, colors)."""
    fit = kernel_fit(stage, shape, config)
    return None if isinstance(fit, str) else fit


def tile_shape(stage: Stage, pes: int, config: FabricConfig) -> tuple[int, int]:
    """The tile of at most `pes` PEs (at least one) on which the stage's kernel model
    predicts the fewest cycles; the smaller tile on ties. More PEs are not always faster:
    a small GEMM spread thin spends its time in per-step broadcasts."""
    best = None
    for shape in candidates(stage, pes, config):
        cycles = model_cycles(stage, shape, config)
        if cycles is None:
            continue
        score = (cycles, shape[0] * shape[1])
        if best is None or score < best[0]:
            best = (score, shape)
    if best is None:
        raise PlacementError(f"stage {stage.name!r} ({stage.kind}) fits no tile of at most "
                             f"{pes} PEs on {config.name}")
    return best[1]


def pack(shapes: list[tuple[int, int]], config: FabricConfig) -> list[Rect] | None:
    """Tiles of `shapes` (rows, cols), in their order, on the grid; None if one does not
    fit.

    A skyline: every column's filled height; each tile goes where its top is lowest (the
    leftmost of those), on the highest column beneath it. In graph order, so a stage sits
    beside or below the ones before it. Against shelves (a row of tiles as tall as its
    tallest), the room under a short tile in a tall row is not lost: TinyGPT d=64 on
    small(32, 32) left 104 PEs in such gaps, and its layer norm and two batch entries of
    a bmm on 6 and 8 PEs.

    >>> pack([(2, 3), (1, 3), (1, 3)], FabricConfig.small(4, 6))  # the third under the second
    [Rect(row=0, col=0, rows=2, cols=3), Rect(row=0, col=3, rows=1, cols=3),
     Rect(row=1, col=3, rows=1, cols=3)]
    """
    # the skyline: (first col, end col, rows filled) of runs of equal height, left to right
    skyline = [(0, config.cols, 0)]
    rects = []
    for r, c in shapes:
        if c > config.cols:
            return None
        # the lowest top over the tile's columns is at a run's first column (moving left
        # within a run lowers no top), the leftmost of the lowest taken
        row, col, at = config.rows, None, 0
        for i, (start, _, height) in enumerate(skyline):
            if start + c > config.cols:
                break
            top, j = height, i + 1
            while top < row and j < len(skyline) and skyline[j][0] < start + c:
                top, j = max(top, skyline[j][2]), j + 1
            if top < row:
                row, col, at = top, start, i
        if col is None or row + r > config.rows:  # None: every top at the grid's last row
            return None
        rects.append(Rect(row, col, r, c))
        # the tile's run replaces the runs under it; what sticks out on the right stays
        end, height, last = col + c, row + r, at
        while last + 1 < len(skyline) and skyline[last + 1][0] < end:
            last += 1
        runs = [(col, end, height)]
        if skyline[last][1] > end:
            runs.append((end, skyline[last][1], skyline[last][2]))
        skyline[at:last + 1] = runs
        # neighbours of equal height make one run
        if at + 1 < len(skyline) and skyline[at + 1][2] == height:
            skyline[at:at + 2] = [(col, skyline[at + 1][1], height)]
        if at > 0 and skyline[at - 1][2] == height:
            skyline[at - 1:at + 1] = [(skyline[at - 1][0], skyline[at][1], height)]
    return rects
