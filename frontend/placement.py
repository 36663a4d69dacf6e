"""Layer-pipelined placement: every stage gets its own rectangle of PEs (a tile) and all
stay resident at once.

Sizing: a stage's share of the fabric follows its work (multiply-adds for GEMMs, elements
otherwise), at least what its SRAM need asks for, within what its kernel accepts (every PE
must hold a block; one-column kernels stay one column wide; SUMMA needs a color per tile row
and column). Packing: shelves filled left to right in graph order, so a stage sits next to
the stages it exchanges tensors with (the previous and next ones); when the tiles do not fit,
every share shrinks and the packing starts over, down to the minimum sizes; below those the
model does not fit and `PlacementError` says how many PEs and how much SRAM it needs.
"""

from __future__ import annotations

import dataclasses
import math

from fabric.config import FabricConfig
from fabric.program import Rect
from frontend.errors import PlacementError
from frontend.stages import Stage

SHARE = 0.6  # fraction of the fabric the work-proportional shares add up to at first


@dataclasses.dataclass
class Placement:
    config: FabricConfig
    rects: dict[str, Rect]  # stage name -> tile
    edges: list[tuple[str, str]]  # (producer stage, consumer stage) pairs

    @property
    def pes_used(self) -> int:
        return sum(r.rows * r.cols for r in self.rects.values())


def min_pes(stage: Stage, config: FabricConfig) -> int:
    words = stage.words_per_element * stage.tensor.numel
    return max(1, math.ceil(words / (0.8 * config.sram_words)))


def _candidates(stage: Stage, pes: int, config: FabricConfig):
    lim = stage.limits
    if lim.cols_fixed:
        for rows in range(1, max(1, min(lim.rows, pes)) + 1):
            yield rows, lim.cols_fixed
        return
    for rows in range(1, max(1, min(lim.rows, pes)) + 1):
        widest = max(1, min(lim.cols, pes // rows))
        for cols in {widest, max(1, widest // 2), 1}:
            # SUMMA: a color per tile row and column (16-bit: one more, for B's scalars)
            extra = 0 if stage.dtype == "f32" else 1
            if stage.kind == "gemm_summa" and rows > 1 and cols > 1 \
                    and rows + cols + extra > config.num_colors:
                continue
            yield rows, cols


def model_cycles(stage: Stage, shape: tuple[int, int], config: FabricConfig) -> int | None:
    """The stage's kernel's analytic cycles on a tile of `shape`; None if it cannot run
    there (SRAM, colors). Cached per stage and shape."""
    cache = stage.__dict__.setdefault("_model_cache", {})
    if shape not in cache:
        try:
            cache[shape] = stage.build(config, Rect(0, 0, *shape)).model_cycles
        except ValueError:
            cache[shape] = None
    return cache[shape]


def tile_shape(stage: Stage, pes: int, config: FabricConfig) -> tuple[int, int]:
    """The tile of at most `pes` PEs (at least one) on which the stage's kernel model
    predicts the fewest cycles; the smaller tile on ties. More PEs are not always faster:
    a small GEMM spread thin spends its time in per-step broadcasts."""
    best = None
    for shape in _candidates(stage, pes, config):
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


def _pack(shapes: list[tuple[int, int]], config: FabricConfig) -> list[Rect] | None:
    rects, row, col, shelf = [], 0, 0, 0
    for r, c in shapes:
        if c > config.cols:
            return None
        if col + c > config.cols:
            row, col, shelf = row + shelf, 0, 0
        if row + r > config.rows:
            return None
        rects.append(Rect(row, col, r, c))
        col += c
        shelf = max(shelf, r)
    return rects


def place(stages: list[Stage], config: FabricConfig, edges) -> Placement:
    total = config.rows * config.cols
    if not stages:  # a graph of layout-only ops: nothing to place
        return Placement(config, {}, list(edges))
    floor = [min_pes(s, config) for s in stages]
    work = [max(1, s.work) for s in stages]
    scale = SHARE * total / sum(work)
    while True:
        want = [max(f, int(w * scale)) for f, w in zip(floor, work)]
        try:
            shapes = [tile_shape(s, p, config) for s, p in zip(stages, want)]
        except PlacementError:
            shapes = None
        if shapes is None:
            if all(p >= total for p in want):
                break
            scale /= 0.7  # the minimum shares are too small for some kernel's SRAM
            floor = [min(total, 2 * f) for f in floor]
            continue
        rects = _pack(shapes, config)
        if rects is not None:
            return Placement(config, {s.name: r for s, r in zip(stages, rects)}, list(edges))
        if all(p <= f for p, f in zip(want, floor)):
            break
        scale *= 0.7
    need_pes = sum(floor)
    need_sram = sum(4 * s.words_per_element * s.tensor.numel for s in stages)
    raise PlacementError(
        f"the model does not fit {config.name} ({config.rows} x {config.cols} = {total} PEs, "
        f"{config.sram_bytes} B SRAM each, {total * config.sram_bytes} B in all): its "
        f"{len(stages)} stages need at least {need_pes} PEs and about {need_sram} B of SRAM "
        f"resident at once")
