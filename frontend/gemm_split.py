"""How many tiles one GEMM's output columns spread over in pipelined mode.

gemm_summa multicasts its panels on one color per tile row and column
(`summa_tile_colors`), so one SUMMA tile has at most rows + cols = the fabric's program
colors (21 of 24): at most about 10 x 11 PEs, fewer for a GEMM of few rows (TinyGPT's 32
tokens: 3 x 18 at best). Its cycles per PE grow with its block of C's columns, so a wide
GEMM stays slow however many PEs the fabric has spare, and in a pipeline it sets the rate.
Cut into column blocks of C (B's columns, the bias's), each on a tile of its own with
colors of its own (disjoint tiles reuse them), its blocks compute at once: A moves to every
block's tile, the blocks' outputs meet in the consumer's operand as a bmm's batch entries
do.

The split is planned with the kernel's analytic model (`summa_model`) before placement:
`column_parts(config)(m, k, n)` is 1 unless the GEMM's best single tile within its share of
the fabric (1 / `share` of its PEs) is bound by the colors (uses all but one or more),
and then the count of parts, at most `most`, whose best tiles (each within its part of the
share) are fastest, the fewest within `slack` of the fastest. Only parts that save at least
`min_saving` of the single tile's cycles are taken: a split adds moves (A to every part, the
parts' outputs to the consumers).

Example (TinyGPT(d=64) on small(32, 32): the QKV projection, 32 x 64 by 64 x 192):
    >>> column_parts(FabricConfig.small(32, 32))(32, 64, 192)         # doctest: +SKIP
    4
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from fabric.config import FabricConfig
from fabric.kernels import summa_model
from fabric.program import Rect
from frontend.tile_shapes import SUMMA_BANK_AWARE, summa_tile_colors

MOST_PARTS = 4  # tiles one GEMM spreads over at most
SHARE = 4  # one GEMM's PEs, all parts together, at most the fabric's PEs / SHARE
SLACK = 0.10  # the fewest parts whose best tile is within this of the fastest
MIN_SAVING = 0.15  # of the single tile's cycles, for a split to be taken


def best_tile(config: FabricConfig, m: int, k: int, n: int, pes: int
              ) -> tuple[int, int, int] | None:
    """(cycles, rows, cols) of the fastest gemm_summa tile for (m, k) @ (k, n) within `pes`
    PEs and the fabric's program colors, by the kernel's model; None if none fits. Tried:
    every count of rows that gives C's rows a different block size, each with the most
    columns the colors and PEs allow and the count below it that changes the block (the
    fewest columns of each block size: fewer steps and colors for the same block)."""
    colors = len(config.program_colors)
    best = None
    for rows in _block_counts(m, min(m, config.rows, pes, colors)):
        # the columns the colors leave once the rows have theirs (a column of one tile row)
        most = min(n, config.cols, pes // rows, colors - summa_tile_colors(rows, 1))
        widest = _block_counts(n, most)[-2:] if most >= 1 else []
        for cols in widest:
            try:
                cycles = summa_model(config, Rect(0, 0, rows, cols), m, k, n,
                                     bank_aware=SUMMA_BANK_AWARE)
            except ValueError:  # SRAM: a larger tile may still fit
                continue
            if best is None or cycles < best[0]:
                best = (cycles, rows, cols)
    return best


def _block_counts(n: int, most: int) -> list[int]:
    """The counts of parts up to `most` that cut n into blocks of a new size, the fewest
    parts for each size, ascending (1 first)."""
    counts = sorted({math.ceil(n / math.ceil(n / c)) for c in range(1, most + 1)})
    return counts


def column_parts(config: FabricConfig, most: int = MOST_PARTS, share: int = SHARE,
                 slack: float = SLACK, min_saving: float = MIN_SAVING
                 ) -> Callable[[int, int, int], int]:
    """The planner for `config`: (m, k, n) -> how many column blocks (module docstring).
    Cached per shape (a model's layers repeat theirs)."""
    budget = max(1, config.num_pes // share)
    colors = len(config.program_colors)

    @functools.cache
    def parts(m: int, k: int, n: int) -> int:
        single = best_tile(config, m, k, n, budget)
        if single is None or summa_tile_colors(*single[1:]) < colors - 1:
            return 1  # not bound by the colors: a larger tile would do, if it paid
        cycles = {1: single[0]}
        for count in range(2, min(most, n) + 1):
            fit = best_tile(config, m, k, math.ceil(n / count), budget // count)
            if fit is not None:
                cycles[count] = fit[0]
        fastest = min(cycles.values())
        count = min(c for c, cyc in cycles.items() if cyc <= (1 + slack) * fastest)
        return count if cycles[count] <= (1 - min_saving) * single[0] else 1

    return parts
