"""A part of a merged program (`fabric.merge_programs`) put back as it was loaded, so that it
can run again while the other parts go on: a kernel streamed several samples.

A part's run leaves its registers (counters, addresses), its tasks' blocked bits and its
own symbols (accumulators, scratch, an output computed in place over a loaded bias) as
the run ended; the next run expects them as they were loaded. `restore_part` writes them
back on every PE of the part's tiles, touching nothing of the other parts that share those
PEs: the part's registers from the program's initial values, its tasks' blocked bits
likewise, and its symbols (those named with its prefix, less `keep`: operands another
part has just written for the next run) from a snapshot of SRAM taken after loading. It
takes no cycles: a kernel written for streaming re-arms itself in a few instructions of
its own, which this stands for.

Example:
    >>> loaded = sim.host_sram().copy()                          # doctest: +SKIP
    >>> ...  # the part runs on a sample
    >>> restore_part(sim, merged, "s1", loaded, keep={"s1.x"})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Collection

import jax.numpy as jnp
import numpy as np

from fabric import engine
from fabric.merge import SEPARATOR, MergedProgram


def restore_part(sim, merged: MergedProgram, part: str, loaded: np.ndarray,
                 keep: Collection[str] = ()) -> None:
    """Registers, blocked bits and symbols of part `part` of `merged` in `sim` (a
    simulator of `merged.program`) back to their values after loading; `loaded`: SRAM
    (rows, cols, words) as loaded; `keep`: merged symbol names left as they are.

    Raises KeyError for a part `merged` does not have."""
    merged.part(part)  # the name checked
    prefix = part + SEPARATOR
    info, tables = sim.info, sim.tables
    st = sim.state
    regs, blocked = np.array(st.regs), np.array(st.blocked)
    init_regs, init_blocked = np.asarray(tables.init_regs), np.asarray(tables.init_blocked)
    symbols = []  # (PEs, first word, words)
    for i, placement in enumerate(info.placements):
        r = placement.rect
        pes = (slice(r.row, r.row_end), slice(r.col, r.col_end))
        for name, index in info.registers[i].items():
            if name.startswith(prefix):
                regs[pes + (index,)] = init_regs[pes + (index,)]
        for name, tid in info.task_ids[i].items():
            if name.startswith(prefix):
                bit = np.uint32(1 << tid)
                blocked[pes] = (blocked[pes] & ~bit) | (init_blocked[pes] & bit)
        for name, sym in info.symbols[i].items():
            if name.startswith(prefix) and name not in keep:
                words = placement.tile.symbols[name].words
                symbols.append((pes, sym.address, words))
    sim.state = engine.replace(st, regs=jnp.asarray(regs), blocked=jnp.asarray(blocked))
    sram = sim.host_sram()
    for pes, first, words in symbols:
        span = pes + (slice(first, first + words),)
        sram[span] = loaded[span]
