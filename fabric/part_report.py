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

import jax
import numpy as np

from fabric.colors import ColorPart, footprints
from fabric.merge import SEPARATOR, MergedProgram
from fabric.part_watch import look_now, make_watch
from fabric.state import CLS_FABIN, CLS_FABOUT, O_CLS, O_COLOR, S_A, S_B, S_DST, S_TASK


class PartMap:
    """The parts of `merged` by PE and color, to read a simulator's state by part.

    The state is read as arrays: `owners` [R, C, K] the index in `order` of the part whose
    color k is at a PE (-1: none), `task_parts` [R, C, 32] that of the part of each task id
    there (from the built program's task ids, on first use)."""

    def __init__(self, merged: MergedProgram):
        self.order = [p.name for p in merged.parts]
        config = merged.program.config
        self.owners = np.full((config.rows, config.cols, config.num_colors), -1, np.int32)
        for i, part in enumerate(merged.parts):
            used = footprints(config, ColorPart(part.name, part.program, part.corner))
            for color, extents in used.items():
                for row, col, rows, cols in extents:
                    self.owners[row:row + rows, col:col + cols, part.color(color)] = i
        self._task_parts: np.ndarray | None = None
        self._task_defined: np.ndarray | None = None
        self._watch = None  # (Watch, its padded part count): `watch`

    def at_work(self, sim, wavelets: bool = True) -> dict[str, list[tuple[int, int]]]:
        """{part name: the PEs (row, col) where it has work} of `sim` (a simulator of the
        merged program), parts in the order of `merged.parts` (module docstring).
        wavelets False: its CEs' work alone (tasks and ops), not the wavelets of its colors
        held in routers and queues: where it has finished what it does on its own PEs."""
        return self.work(sim)[1 if wavelets else 0]

    def work(self, sim) -> tuple[dict[str, list[tuple[int, int]]],
                                 dict[str, list[tuple[int, int]]]]:
        """`at_work(sim, wavelets=False)` and `at_work(sim)`, from one read of the state."""
        st = sim.state
        task_parts = self._tasks(sim.info)  # [R, C, T]
        # one transfer of the fields read here (a host polling every few cycles reads them
        # on every poll)
        pc, task, active, slots, activated, *held = jax.device_get(
            (st.pc, st.task, st.slot_active, st.slots, st.activated, st.rq_count,
             st.iq_count))
        active = active != 0
        activated = activated & self._defined(sim)
        R, C = pc.shape
        rows, cols = np.indices((R, C))
        found = []  # [R, C] arrays of part indices (-1: none)
        found.append(np.where(pc >= 0, _pick(task_parts, np.maximum(task, 0)), -1))
        bits = (activated[..., None] >> np.arange(task_parts.shape[2], dtype=np.uint32)) & 1
        found += list(np.moveaxis(np.where(bits != 0, task_parts, -1), -1, 0))
        fabric = np.zeros(active.shape, bool)  # [R, C, S]: the op reads or writes a color
        for start in (S_DST, S_A, S_B):
            cls = slots[..., start + O_CLS]
            on = active & ((cls == CLS_FABIN) | (cls == CLS_FABOUT))
            fabric |= on
            color = np.clip(slots[..., start + O_COLOR], 0, self.owners.shape[2] - 1)
            found += [np.where(on[..., s], self.owners[rows, cols, color[..., s]], -1)
                      for s in range(active.shape[2])]
        alone = active & ~fabric  # memory alone: the part of the task that issued it
        issuer = np.clip(slots[..., S_TASK], 0, task_parts.shape[2] - 1)
        found += [np.where(alone[..., s], _pick(task_parts, issuer[..., s]), -1)
                  for s in range(active.shape[2])]
        on_ce = self._listed(found)
        for counts in held:  # [R, C, K]: wavelets held in routers and CE input queues
            found += list(np.moveaxis(np.where(counts > 0, self.owners, -1), -1, 0))
        return on_ce, self._listed(found)

    def watch(self, sim, words=()) -> None:
        """Watch these parts in `sim`, and `words` ((row, col, address) of its SRAM), for
        `advance` and `look` (`fabric.part_watch`)."""
        self._watch = make_watch(self._tasks(sim.info), self.owners, self._defined(sim),
                                 list(words))

    def advance(self, sim, max_cycles: int, poll: int, raise_on_limit: bool = True
                ) -> tuple[dict[str, set[tuple[int, int]]], set[str], np.ndarray]:
        """Run `sim` in steps of `poll` cycles, up to `max_cycles` more, until what `look`
        reads differs from what it read before the run (`Simulator.advance_watched`);
        returns that look. Raises as `Simulator.advance`."""
        watch, parts = self._watching()
        return self._seen(sim.advance_watched(max_cycles, watch, parts, poll, raise_on_limit))

    def look(self, sim) -> tuple[dict[str, set[tuple[int, int]]], set[str], np.ndarray]:
        """({part: the PEs where its CE has work}, {the parts with work anywhere}, uint32
        [W] the watched words) of `sim` now: what `work` reads, as sets, and the words."""
        watch, parts = self._watching()
        return self._seen(jax.device_get(look_now(watch, sim.state, parts)))

    def _watching(self):
        if self._watch is None:
            raise ValueError("PartMap.advance and look read what watch(sim, words) set up; "
                             "call it first")
        return self._watch

    def _seen(self, seen) -> tuple[dict[str, set[tuple[int, int]]], set[str], np.ndarray]:
        on_ce, anywhere, words = seen
        cols = self.owners.shape[1]
        pe, part = np.nonzero(on_ce[:, :len(self.order)])
        busy: dict[str, set[tuple[int, int]]] = {}
        for i, p in zip(pe.tolist(), part.tolist()):
            busy.setdefault(self.order[p], set()).add(divmod(i, cols))
        return (busy, {self.order[p] for p in np.nonzero(anywhere[:len(self.order)])[0]},
                words)

    def _defined(self, sim) -> np.ndarray:
        """[R, C] the task ids each PE's program defines (bits), read once."""
        if self._task_defined is None:
            self._task_defined = np.asarray(sim.tables.task_defined)
        return self._task_defined

    def _tasks(self, info) -> np.ndarray:
        """[R, C, T] the index in `order` of the part of each task id at each PE (-1: no
        task, or one of no part)."""
        if self._task_parts is None:
            R, C, _ = self.owners.shape
            index = {name: i for i, name in enumerate(self.order)}
            parts = np.full((R, C, 32), -1, np.int32)
            for placement, ids in zip(info.placements, info.task_ids):
                rect = placement.rect
                for name, tid in ids.items():
                    part = _part_of(name)
                    if part in index:
                        parts[rect.row:rect.row_end, rect.col:rect.col_end, tid] = index[part]
            self._task_parts = parts
        return self._task_parts

    def _listed(self, found: list[np.ndarray]) -> dict[str, list[tuple[int, int]]]:
        """{part: its PEs, sorted} of [R, C] arrays of part indices, parts in order."""
        stack = np.stack(found)  # [N, R, C]
        n, r, c = np.nonzero(stack >= 0)
        pes: dict[int, set] = {}
        for part, row, col in zip(stack[n, r, c].tolist(), r.tolist(), c.tolist()):
            pes.setdefault(part, set()).add((row, col))
        return {self.order[i]: sorted(pes[i]) for i in sorted(pes)}


def stuck_parts(merged: MergedProgram, sim) -> dict[str, list[tuple[int, int]]]:
    """{part name: the PEs (row, col) where it is stuck} of `sim` (a simulator of
    `merged.program`, stopped by a deadlock or a cycle limit): where each part still has
    work (module docstring), parts in the order of `merged.parts`."""
    return PartMap(merged).at_work(sim)


def _pick(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """table[r, c, index[r, c]] for every PE: [R, C]."""
    return np.take_along_axis(table, index[..., None].astype(np.intp), axis=2)[..., 0]


def _part_of(task_name: str) -> str | None:
    return task_name.split(SEPARATOR)[0] if SEPARATOR in task_name else None
