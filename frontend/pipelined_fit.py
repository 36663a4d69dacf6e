"""A pipelined model's graph lowered and placed so that its colors fit (`frontend.compile`
in mode "pipelined"): its GEMMs split over column blocks where the colors bind a tile
(`frontend.gemm_split`), or unsplit where the split graph does not fit the fabric.

Example:
    >>> lowered, fit = fit_pipelined(lambda parts: lower_graph(captured, formats, parts),
    ...                              config, "report", None, captured)  # doctest: +SKIP
    >>> fit.placement.pes_used, fit.colors.used                         # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

from fabric.config import FabricConfig
from frontend.capture import Captured
from frontend.color_fit import fit_colors
from frontend.errors import PlacementError
from frontend.fan_out import stage_edges
from frontend.gemm_split import column_parts
from frontend.lowering import Lowered, lower, picked_products


def lower_graph(captured: Captured, formats: dict, gemm_parts=None, lookups: str = "gather",
                gemm_orientation: str = "rows", experts: str = "picked") -> Lowered:
    """`captured` lowered (`gemm_parts`: how many column blocks each GEMM takes,
    `frontend.gemm_split`; None: one), its buffer updates refused."""
    lowered = lower(captured, formats, gemm_parts, lookups, gemm_orientation, experts)
    captured.refuse_buffer_updates()
    return lowered


def fit_pipelined(lower_with: Callable[[dict | None], Lowered], config: FabricConfig,
                  colors: str, share: float | None, captured: Captured,
                  experts: str = "picked"):
    """(the lowering, its `fit_colors`) of a pipelined model; `lower_with(gemm_parts)`
    lowers its graph. A GEMM the colors hold to a small tile spreads over several tiles;
    where the graph split so does not fit the fabric (its stages more than the PEs, or its
    moves more than the colors) and the graph unsplit does, the unsplit one (its GEMMs
    slower, on a tile each: Llama 4 cut into 275 stages for small(16, 16)'s 256 PEs). A
    refusal names what the unsplit graph needs (without lowering it again where no GEMM
    was split)."""
    planner, counts = column_parts(config), []

    def parts(m: int, k: int, n: int) -> int:
        counts.append(planner(m, k, n))
        return counts[-1]

    split = lower_with(parts)
    try:
        return split, _fit(split, config, colors, share, captured, experts)
    except PlacementError:
        if max(counts, default=1) == 1:  # nothing was split
            raise
    whole = lower_with(None)
    return whole, _fit(whole, config, colors, share, captured, experts)


def _fit(lowered: Lowered, config: FabricConfig, colors: str, share: float | None,
         captured: Captured, experts: str):
    try:
        return fit_colors(lowered.stages, lowered.tensors, config,
                          stage_edges(lowered.stages, lowered.tensors), colors, share)
    except PlacementError as exc:
        raise PlacementError(experts_hint(str(exc), captured, experts)) from exc


def experts_hint(message: str, captured: Captured, experts: str) -> str:
    """A refusal for colors, with how "dense" expert products would lift it where
    products of picked expert weights run "picked" are among the parts crossing its
    busiest PE."""
    if experts == "dense":
        return message
    names = picked_products(captured.graph, captured.constants)
    if not any(f"(FX node {n!r})" in message for n in names):
        return message
    return (f"{message}\nits products with expert weights picked per token (FX nodes "
            + ", ".join(repr(n) for n in names) + ") each move all to all between two "
            "tiles; compile with experts=\"dense\" to run each as one GEMM, whose moves "
            "need fewer colors")
