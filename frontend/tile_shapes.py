"""A stage's tile shapes and their fit: which shapes its kernel takes, the kernel model's
cycles on each (cached per stage and shape) and the best shape within a PE budget. What
both placement objectives (`frontend.placement`, `frontend.balance`) build on, with the
packing of tiles onto the grid (`frontend.skyline`)."""

from __future__ import annotations

import math

from fabric.config import FabricConfig
from fabric.program import Rect
from frontend.build_keys import alike
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
    (its ValueError's message: SRAM, colors). Cached per stage, config and shape, and
    shared by the stages that build alike in one compile (`Stage.build_key`)."""
    cache = stage.__dict__.setdefault("_model_cache", {})
    key = (config, tuple(shape))
    if key not in cache:
        def fit() -> int | str:
            try:
                return stage.build(config, Rect(0, 0, *shape)).model_cycles
            except ValueError as e:
                return str(e)

        cache[key] = alike("fits", stage.build_key, key, fit)
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
