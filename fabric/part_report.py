"""Where the parts of a merged program (`fabric.merge_programs`) have work, PE by PE. The
engine's reports (`fabric.report`) name PEs, tiles and tasks; a program made of many parts
(a model's stages and the moves between them) is read by its parts: which are still at
work (a host that starts each part once those it reads have finished), and where a
stopped run is stuck.

A part has work at a PE when a task of it runs there or is activated (blocked or not),
when an asynchronous op there reads or writes one of its colors, when wavelets of one of
its colors wait there (in the router's buffer or the CE's input queue), or when an
asynchronous op on memory alone that one of its tasks issued is in flight there (the slot
keeps the issuing task, `fabric.state.S_TASK`). A task's part is its name's prefix; a
color's, at a PE, the part whose routes or tiles use it there (one part per color per PE,
as merging requires).

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
from fabric.state import CLS_FABIN, CLS_FABOUT, O_CLS, O_COLOR, S_A, S_B, S_DST, S_TASK


class PartMap:
    """The parts of `merged` by PE and color, to read a simulator's state by part."""

    def __init__(self, merged: MergedProgram):
        self.order = [p.name for p in merged.parts]
        config = merged.program.config
        self.owners: dict[tuple[int, int, int], str] = {}  # (row, col, color) -> part
        for part in merged.parts:
            used = footprints(config, ColorPart(part.name, part.program, part.corner))
            for color, rects in used.items():
                for rect in rects:
                    for r, c in rect.pes():
                        self.owners[(r, c, part.color(color))] = part.name

    def at_work(self, sim, wavelets: bool = True) -> dict[str, list[tuple[int, int]]]:
        """{part name: the PEs (row, col) where it has work} of `sim` (a simulator of the
        merged program), parts in the order of `merged.parts` (module docstring).
        wavelets False: its CEs' work alone (tasks and ops), not the wavelets of its colors
        held in routers and queues: where it has finished what it does on its own PEs."""
        return self.work(sim)[1 if wavelets else 0]

    def work(self, sim) -> tuple[dict[str, list[tuple[int, int]]],
                                 dict[str, list[tuple[int, int]]]]:
        """`at_work(sim, wavelets=False)` and `at_work(sim)`, from one read of the state."""
        st, info = sim.state, sim.info
        pc, task = np.asarray(st.pc), np.asarray(st.task)
        active, slots = np.asarray(st.slot_active), np.asarray(st.slots)
        activated = np.asarray(st.activated) & np.asarray(sim.tables.task_defined)
        found: dict[str, set[tuple[int, int]]] = {}

        def add(part: str | None, r, c) -> None:
            if part is not None:
                found.setdefault(part, set()).add((int(r), int(c)))

        for r, c in np.argwhere(pc >= 0):
            add(_part_of(info.task_name(r, c, int(task[r, c]))), r, c)
        for r, c in np.argwhere(activated != 0):
            for t in range(32):
                if (int(activated[r, c]) >> t) & 1:
                    add(_part_of(info.task_name(r, c, t)), r, c)
        for r, c, s in np.argwhere(active != 0):
            colors = [int(slots[r, c, s, start + O_COLOR]) for start in (S_DST, S_A, S_B)
                      if slots[r, c, s, start + O_CLS] in (CLS_FABIN, CLS_FABOUT)]
            for color in colors:
                add(self.owners.get((int(r), int(c), color)), r, c)
            if not colors:  # memory alone: the part of the task that issued it
                add(_part_of(info.task_name(r, c, int(slots[r, c, s, S_TASK]))), r, c)
        on_ce = self._listed(found)
        for held in (np.asarray(st.rq_count), np.asarray(st.iq_count)):  # (R, C, colors)
            for r, c, color in np.argwhere(held > 0):
                add(self.owners.get((int(r), int(c), int(color))), r, c)
        return on_ce, self._listed(found)

    def _listed(self, found: dict[str, set]) -> dict[str, list[tuple[int, int]]]:
        return {name: sorted(found[name]) for name in self.order if name in found}


def stuck_parts(merged: MergedProgram, sim) -> dict[str, list[tuple[int, int]]]:
    """{part name: the PEs (row, col) where it is stuck} of `sim` (a simulator of
    `merged.program`, stopped by a deadlock or a cycle limit): where each part still has
    work (module docstring), parts in the order of `merged.parts`."""
    return PartMap(merged).at_work(sim)


def _part_of(task_name: str) -> str | None:
    return task_name.split(SEPARATOR)[0] if SEPARATOR in task_name else None
