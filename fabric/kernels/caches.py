"""What compiles share between them, forgotten on demand: a timing of a compile
(`benchmarks/models.py`) clears it before each, so that it sees a first compile's work."""

from __future__ import annotations

from fabric.kernels.gemm_summa import clear_summa_caches
from fabric.kernels.traffic_routes import clear_tree_cache
from fabric.program import clear_route_cache


def clear_model_caches() -> None:
    """Forget the SUMMA cycle model's results, the moves' route trees and their one-PE
    routes."""
    clear_summa_caches()
    clear_tree_cache()
    clear_route_cache()
