"""The one place that decides how large the engine's tables are for the frontend's runs.

The engine compiles once per (fabric config, table size bucket). Every Simulator the
frontend builds, a model's stages and their data movement, the optimizers' and the loss
scaler's kernels, gets at least `MIN_TABLE_ROWS` (instruction, DSD) table rows, so models of
common sizes, their training steps and their optimizers share one compiled engine per
config. Larger tables cost nothing per cycle: they are indexed, not scanned. A program
larger than the floor raises a model's rows for all its programs (`table_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable

from fabric import FabricConfig, Program, program_table_rows

MIN_TABLE_ROWS = (512, 512)


def table_rows(config: FabricConfig, programs: Iterable[Program],
               floor: tuple[int, int] = MIN_TABLE_ROWS) -> tuple[int, int]:
    """The largest (instruction, DSD) table rows of `programs` built for `config` or for a
    window of it (`fabric.window_for`: a program on a window is built on its own grid; the
    rows do not depend on the grid), at least `floor`: built with these rows, they all
    share one compiled engine per grid."""
    rows = [floor]
    for program in programs:
        on = program.config
        if on != config and on != config.tile(on.rows, on.cols):
            raise ValueError(f"table_rows: a program for {on.name} is not for {config.name} "
                             "or a window of it")
        rows.append(program_table_rows(on, program))
    return widest(*rows)


def widest(*rows: tuple[int, int]) -> tuple[int, int]:
    """The element-wise largest of several (instruction, DSD) row pairs."""
    return (max(r[0] for r in rows), max(r[1] for r in rows))
