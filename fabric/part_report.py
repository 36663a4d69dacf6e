"""Where a merged program (`fabric.merge_programs`) is stuck, by part. The engine's reports
(`fabric.report`) name PEs, tiles and tasks; a program made of many parts (a model's stages
and the moves between them) is read by its parts.

A PE is stuck in a part when a task of the part runs there (waiting on a synchronous op),
when an asynchronous op there waits on one of the part's colors (for input that does not
come, or for room to send), when wavelets of one of its colors wait there (in the router's
buffer or the CE's input queue, for a receiver that does not take them), or when a task of
the part is activated there but blocked. A task's part is its name's prefix; a color's, at
a PE, the part whose routes or tiles use it there (one part per color per PE, as merging
requires).

Example:
    >>> try:                                                    # doctest: +SKIP
    ...     sim.run()
    ... except DeadlockError:
    ...     stuck_parts(merged, sim)
    {'m0r0': [(0, 3), (0, 4)], 's1': [(1, 2)]}
"""

from __future__ import annotations

import numpy as np

from fabric.colors import ColorPart, footprints
from fabric.merge import SEPARATOR, MergedProgram
from fabric.state import CLS_FABIN, CLS_FABOUT, O_CLS, O_COLOR, S_A, S_B, S_DST


def stuck_parts(merged: MergedProgram, sim) -> dict[str, list[tuple[int, int]]]:
    """{part name: the PEs (row, col) where it is stuck} of `sim` (a simulator of
    `merged.program`, stopped), parts in the order of `merged.parts`."""
    st, info = sim.state, sim.info
    pc, task = np.asarray(st.pc), np.asarray(st.task)
    active, slots = np.asarray(st.slot_active), np.asarray(st.slots)
    waiting = np.asarray(st.activated) & np.asarray(st.blocked)
    found: dict[str, set[tuple[int, int]]] = {}

    def add(part: str | None, r: int, c: int) -> None:
        if part is not None:
            found.setdefault(part, set()).add((int(r), int(c)))

    for r, c in np.argwhere(pc >= 0):
        add(_part_of(info.task_name(r, c, int(task[r, c]))), r, c)
    owners = None

    def add_color(r: int, c: int, color: int) -> None:
        nonlocal owners
        owners = _color_owners(merged) if owners is None else owners
        add(owners.get((int(r), int(c), int(color))), r, c)

    for r, c, s in np.argwhere(active != 0):
        for start in (S_DST, S_A, S_B):
            if slots[r, c, s, start + O_CLS] in (CLS_FABIN, CLS_FABOUT):
                add_color(r, c, slots[r, c, s, start + O_COLOR])
    for held in (np.asarray(st.rq_count), np.asarray(st.iq_count)):  # (R, C, colors)
        for r, c, color in np.argwhere(held > 0):
            add_color(r, c, color)
    for r, c in np.argwhere(waiting != 0):
        for t in range(32):
            if (int(waiting[r, c]) >> t) & 1:
                add(_part_of(info.task_name(r, c, t)), r, c)
    order = [p.name for p in merged.parts]
    return {name: sorted(found[name]) for name in order if name in found}


def _part_of(task_name: str) -> str | None:
    return task_name.split(SEPARATOR)[0] if SEPARATOR in task_name else None


def _color_owners(merged: MergedProgram) -> dict[tuple[int, int, int], str]:
    """{(row, col, merged color): the part using that color at that PE}."""
    config = merged.program.config
    owners = {}
    for part in merged.parts:
        used = footprints(config, ColorPart(part.name, part.program, part.corner))
        for color, rects in used.items():
            for rect in rects:
                for r, c in rect.pes():
                    owners[(r, c, part.color(color))] = part.name
    return owners
