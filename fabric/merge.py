"""Several programs as one: every part's tiles, routes and tasks on one fabric, in one run.

Each part is a `Program` written on its own (a kernel, a move's round), placed at a corner
of the merged fabric, with its colors renamed (`Part.colors`, e.g. from
`fabric.assign_part_colors`) and its symbols, registers and tasks prefixed with the part's
name, so that parts never see each other's names. Where the tiles of several parts cover
one PE, that PE runs one tile holding all of their symbols and tasks: their SRAM adds up,
their tasks share the CE (local tasks in part order, then declaration order), their
registers share the register file. A symbol a part lists in `Part.shared` takes the name
given there (its own by default), and parts that name one symbol share its memory: a move
writes straight into the symbol its consumer kernel reads. A register listed there is one
register of the PE for every part that names it: scratch that no part keeps from one
activation of a task to the next (tasks run one at a time on a CE), as the moves' chains
share one when their counters are in memory (`fabric.kernels.round_programs`). A shared
symbol is a view: the part that owns the name (declares it without sharing, e.g. the
kernel) gives its declaration, and a view must address only words the owner has (a
move's raw "u32" words, sized for its map's largest PE, write only the slots its map
names); where no owner covers a PE, the largest view is declared. Views and owner must
agree in word format (16-bit elements of one format, or 32-bit words).

Example:
    >>> merged = merge_programs(config, [Part("a", kernel_a.program),              # doctest: +SKIP
    ...                                  Part("b", kernel_b.program, colors={0: 5})])
    >>> sim = Simulator(config, merged.program)                                     # doctest: +SKIP
    >>> kernel_a.load(merged.view(sim, "a"), inputs)                                # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from fabric import instructions as ins
from fabric.build import check_routed_colors
from fabric.config import FabricConfig
from fabric.errors import BuildError
from fabric.isa import Op
from fabric.program import Program, Rect, Tile

SEPARATOR = "."  # part name + SEPARATOR + a name of the part
WORD_DTYPES = ("f32", "i32", "u32")  # one element per 32-bit word


class MergeError(BuildError):
    """Parts that cannot share the fabric: a color two parts route on one PE, a data task
    color two parts bind on one PE, a shared symbol declared differently."""


@dataclasses.dataclass(frozen=True)
class Part:
    """One program of a merged one.

    name: prefix of the part's symbols, registers and tasks (no SEPARATOR in it).
    program: the part as written, on a fabric no larger than the merged one.
    corner: (row, col) of the part's PE (0, 0) on the merged fabric.
    colors: the part's color -> its color on the merged fabric (colors not listed keep
        their number).
    shared: symbols of the part that are views of memory another part owns, and scratch
        registers shared with other parts (see the module docstring): a set of names (kept
        as they are) or a mapping from the part's name to the merged one (e.g. "k.A",
        symbol A of part "k").
    tasks: tasks of other parts this part's code activates, blocks or unblocks: its name
        for each -> the merged name (e.g. a move's gate starting "k.main" of part "k" on
        the PE where the last of the kernel's data arrives).
    """

    name: str
    program: Program
    corner: tuple[int, int] = (0, 0)
    colors: Mapping[int, int] = dataclasses.field(default_factory=dict)
    shared: Mapping[str, str] | frozenset = frozenset()
    tasks: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not self.name or SEPARATOR in self.name:
            raise ValueError(f"part name {self.name!r} must be non-empty and free of "
                             f"{SEPARATOR!r}")

    def color(self, color: int) -> int:
        return int(self.colors.get(color, color))

    def local(self, name: str) -> str:
        """A symbol's or register's name on the merged fabric."""
        if name in self.shared:
            return self.shared[name] if isinstance(self.shared, Mapping) else name
        return f"{self.name}{SEPARATOR}{name}"

    def task(self, name: str) -> str:
        """A task's name on the merged fabric (another part's, through `tasks`)."""
        return self.tasks.get(name) or f"{self.name}{SEPARATOR}{name}"

    def rect(self, rect: Rect) -> Rect:
        return Rect(rect.row + self.corner[0], rect.col + self.corner[1], rect.rows, rect.cols)


@dataclasses.dataclass(frozen=True)
class MergedProgram:
    """The merged `program` and its `parts` (names translate through them)."""

    program: Program
    parts: tuple

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise KeyError(f"no part {name!r}; parts: {[p.name for p in self.parts]}")

    def copy_memory(self, part: str, src_sim, dst_sim) -> None:
        """Every symbol of `part`'s tiles from `src_sim` (a simulator of the part's own
        program) into `dst_sim` (one of the merged program) under its merged name, bit
        for bit: a part loaded on its own (a kernel's `load`) starts from the same memory
        in the merged program."""
        p = self.part(part)
        for placement in p.program.placements:
            for sym in placement.tile.symbols.values():
                values = src_sim.memcpy_d2h(sym.name, placement.rect)
                dst_sim.memcpy_h2d(p.local(sym.name), values, p.rect(placement.rect))

    def view(self, sim, part: str) -> PartView:
        """`sim` as the part sees it: its symbol and task names, its own coordinates."""
        return PartView(sim, self.part(part))


class PartView:
    """The host calls a part's own code makes (`memcpy_h2d`, `memcpy_d2h`, `launch`, `run`)
    on the merged program's simulator, with the part's names and coordinates, so a
    kernel's `load`, `launch` and `read` run unchanged on a merged program."""

    def __init__(self, sim, part: Part):
        self.sim = sim
        self.part = part

    def _rect(self, rect: Rect | None) -> Rect | None:
        return None if rect is None else self.part.rect(rect)

    def memcpy_h2d(self, name: str, data, rect: Rect | None = None) -> None:
        self.sim.memcpy_h2d(self.part.local(name), data, self._rect(rect))

    def memcpy_d2h(self, name: str, rect: Rect | None = None) -> np.ndarray:
        return self.sim.memcpy_d2h(self.part.local(name), self._rect(rect))

    def launch(self, task: str, rect: Rect | None = None) -> None:
        self.sim.launch(self.part.task(task), self._rect(rect))

    def run(self, *args, **kwargs):
        return self.sim.run(*args, **kwargs)


def merge_programs(config: FabricConfig, parts: Sequence[Part]) -> MergedProgram:
    """One program on `config` holding every part (see the module docstring).

    Raises MergeError naming the parts, the PE and the color or symbol when two parts
    route one color through one PE, bind one color's data task on one PE, or declare a
    shared symbol differently; BuildError (from `build`) when a PE's merged tile exceeds
    its SRAM, registers or task ids."""
    names = [p.name for p in parts]
    if len(set(names)) != len(names):
        raise ValueError(f"part names must differ: {names}")
    for p in parts:  # pieces of a part's tile need not route its colors: check it whole
        check_routed_colors(p.program)
    merged = Program(config)
    merged.merged_from = tuple(names)
    for p in parts:
        for route in p.program.routes:
            merged.route(p.rect(route.rect), p.color(route.color), route.rx, route.tx)
    _check_routes(config, parts)
    # every PE: the (part index, placement index) pairs of the tiles covering it
    owners: dict[tuple[int, int], tuple] = {}
    for i, p in enumerate(parts):
        for j, placement in enumerate(p.program.placements):
            for pe in p.rect(placement.rect).pes():
                owners[pe] = (*owners.get(pe, ()), (i, j))
    for rect, key in _regions(owners):
        tile, params = _region_tile(parts, key, rect)
        merged.place(tile, rect, params)
    return MergedProgram(merged, tuple(parts))


def _check_routes(config: FabricConfig, parts: Sequence[Part]) -> None:
    """Two parts may not route one color on one PE (a router has one entry per color)."""
    owner = np.full((config.rows, config.cols, config.num_colors), -1, np.int32)
    for i, p in enumerate(parts):
        mine = np.zeros_like(owner, dtype=bool)
        for route in p.program.routes:
            r = p.rect(route.rect)
            mine[r.row:r.row_end, r.col:r.col_end, p.color(route.color)] = True
        clash = mine & (owner >= 0) & (owner != i)
        if clash.any():
            row, col, color = (int(v[0]) for v in np.nonzero(clash))
            other = parts[int(owner[row, col, color])].name
            raise MergeError(f"parts {other!r} and {p.name!r} both route color {color} "
                             f"through PE ({row}, {col}): give one of them another color "
                             "(Part.colors)")
        owner[mine] = i


def _regions(owners: dict) -> list[tuple[Rect, tuple]]:
    """Rectangles of PEs covered by the same tiles: grown right, then down, from each
    uncovered PE in row-major order."""
    done: set = set()
    out = []
    for pe in sorted(owners):
        if pe in done:
            continue
        key, (r0, c0) = owners[pe], pe
        c1 = c0
        while (r0, c1 + 1) in owners and owners[(r0, c1 + 1)] == key \
                and (r0, c1 + 1) not in done:
            c1 += 1
        r1 = r0
        while all(owners.get((r1 + 1, c)) == key and (r1 + 1, c) not in done
                  for c in range(c0, c1 + 1)):
            r1 += 1
        rect = Rect(r0, c0, r1 - r0 + 1, c1 - c0 + 1)
        done.update(rect.pes())
        out.append((rect, key))
    return out


def _region_tile(parts: Sequence[Part], key: tuple, rect: Rect) -> tuple[Tile, dict]:
    """The tile of the PEs of `rect`: every covering part's tile, renamed, in one."""
    members = [(parts[i], parts[i].program.placements[j]) for i, j in key]
    tile = Tile("+".join(f"{p.name}{SEPARATOR}{pl.tile.name}" for p, pl in members))
    params, data_colors = {}, {}
    views: set[str] = set()  # merged symbols declared so far only by parts sharing them
    for part, placement in members:
        src = placement.tile
        for sym in src.symbols.values():
            name = part.local(sym.name)
            view = sym.name in part.shared
            if name in tile.symbols:
                have = tile.symbols[name]
                if not _one_format(have, sym):
                    raise MergeError(
                        f"shared symbol {name!r} is {have.dtype}{list(have.shape)} in one part "
                        f"and {sym.dtype}{list(sym.shape)} in part {part.name!r} at PE "
                        f"({rect.row}, {rect.col}): 16-bit and 32-bit words cannot be one "
                        "memory")
                # the owner's declaration wins over views of it; of two views, the larger
                owner_after_views = name in views and not view
                larger_view = view and name in views and sym.words > have.words
                if owner_after_views or larger_view:
                    tile.symbols[name] = dataclasses.replace(sym, name=name)
                if not view:
                    views.discard(name)
                continue
            if view:
                views.add(name)
            tile.symbol(name, sym.dtype, sym.shape)
        tile.register(*(part.local(r) for r in src.registers))
        for task in src.tasks.values():
            code = [_renamed(part, item) for item in task.code]
            name = _prefixed(part, task.name)
            if task.kind == "data":
                color = part.color(task.color)
                if color in data_colors:
                    raise MergeError(f"parts {data_colors[color]!r} and {part.name!r} both bind "
                                     f"a data task to color {color} on PE ({rect.row}, "
                                     f"{rect.col})")
                data_colors[color] = part.name
                tile.data_task(name, color, code, blocked=task.blocked)
            else:
                tile.local_task(name, code, blocked=task.blocked)
        home = part.rect(placement.rect)
        rows = slice(rect.row - home.row, rect.row_end - home.row)
        cols = slice(rect.col - home.col, rect.col_end - home.col)
        for reg, values in placement.params.items():
            params[part.local(reg)] = np.asarray(values)[rows, cols]
    return tile, params


def _one_format(a, b) -> bool:
    """Two declarations of one shared symbol can be one memory: both of 16-bit elements of
    one format, or both of 32-bit words (a raw "u32" view of an "f32" array)."""
    return a.dtype == b.dtype or (a.dtype in WORD_DTYPES and b.dtype in WORD_DTYPES)


def _prefixed(part: Part, name: str) -> str:
    return f"{part.name}{SEPARATOR}{name}"


def _renamed(part: Part, item):
    """An instruction or label of `part` with the merged fabric's names and colors."""
    if not isinstance(item, ins.Instr):
        return item  # a label: branch targets stay inside their task
    if item.op in (Op.ACTIVATE, Op.BLOCK, Op.UNBLOCK):
        return dataclasses.replace(item, a=part.task(item.a))
    changes = {role: _operand(part, getattr(item, role)) for role in ("dst", "a", "b", "s")}
    if item.on_done is not None:
        changes["on_done"] = dataclasses.replace(item.on_done,
                                                 task=part.task(item.on_done.task))
    return dataclasses.replace(item, **changes)


def _operand(part: Part, x):
    reg = (lambda name: None if name is None else part.local(name))
    if isinstance(x, ins.Mem):
        return dataclasses.replace(x, symbol=part.local(x.symbol), offset_reg=reg(x.offset_reg),
                                   length_reg=reg(x.length_reg))
    if isinstance(x, (ins.FabIn, ins.FabOut)):
        return dataclasses.replace(x, color=part.color(x.color), length_reg=reg(x.length_reg))
    if isinstance(x, ins.Reg):
        return ins.Reg(part.local(x.name))
    return x  # immediates, the WAVELET, None
