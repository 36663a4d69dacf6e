"""The program model: what a user writes, as plain Python data.

A `Program` places `Tile`s (tile programs) on rectangles of PEs, sets routes per color, and
carries per-PE parameters. A `Tile` declares SRAM symbols, named registers and tasks; a task is
a list of instructions built with the constructors in `fabric.instructions`.

Example:
    >>> from fabric import FabricConfig, Program, Tile, Port, Rect
    >>> from fabric import instructions as ins
    >>> tile = Tile("double")
    >>> x = tile.symbol("x", "f32", (8,))
    >>> tile.local_task("main", [ins.add(x.dsd(), x.dsd(), x.dsd())])
    >>> prog = Program(FabricConfig.small(2, 2))
    >>> prog.place(tile, Rect(0, 0, 2, 2))
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from fabric import instructions as ins
from fabric.bank_layout import bank_aware_addresses, natural_addresses
from fabric.isa import Port
from fabric.numerics.formats import HALF_DTYPES
from fabric.numerics.packing import words_for

DTYPES = {"f32": np.float32, "i32": np.int32, "u32": np.uint32}  # one 32-bit word each
# every symbol dtype: the 32-bit ones and the 16-bit formats, two to a word
SYMBOL_DTYPES = (*DTYPES, *HALF_DTYPES)


@dataclasses.dataclass(frozen=True)
class Rect:
    """A rectangle of PEs: top-left corner (row, col) and its size (rows x cols)."""

    row: int
    col: int
    rows: int
    cols: int

    def __post_init__(self):
        if self.rows < 1 or self.cols < 1:
            raise ValueError(f"{self} must have at least one row and one column")

    @property
    def row_end(self) -> int:
        return self.row + self.rows

    @property
    def col_end(self) -> int:
        return self.col + self.cols

    def contains(self, row: int, col: int) -> bool:
        return self.row <= row < self.row_end and self.col <= col < self.col_end

    def pes(self) -> Iterable[tuple[int, int]]:
        for r in range(self.row, self.row_end):
            for c in range(self.col, self.col_end):
                yield r, c

    def __str__(self) -> str:
        return f"Rect(row={self.row}, col={self.col}, rows={self.rows}, cols={self.cols})"


@dataclasses.dataclass(frozen=True)
class Symbol:
    """A named SRAM array of one tile, allocated on every PE that runs the tile."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @functools.cached_property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @functools.cached_property
    def words(self) -> int:
        """32-bit SRAM words the symbol occupies (16-bit dtypes: two elements per word)."""
        return words_for(self.dtype, self.size)

    @property
    def nbytes(self) -> int:
        return 4 * self.words

    def dsd(self, offset=0, length=None, stride=1, row_length=None, row_stride=None,
            offset_reg=None, length_reg=None):
        """A memory DSD over this symbol (see `fabric.instructions.Mem`)."""
        from fabric.instructions import Mem

        return Mem(self.name, offset, length, stride, row_length, row_stride, offset_reg,
                   length_reg)


@dataclasses.dataclass(frozen=True)
class Task:
    """A task of a tile: `kind` is "data" (bound to `color`, triggered by a wavelet of that
    color reaching the CE) or "local" (activated by code or by the host)."""

    name: str
    kind: str
    code: tuple
    color: int | None = None
    blocked: bool = False


class Tile:
    """A tile program: symbols, registers and tasks shared by every PE of a rectangle.

    bank_aware: lay the symbols out so that ops reading two of them meet the bank read-pair
    rule as little as a one-word move of each can make them (`fabric.bank_layout`); False
    keeps them one after the other in declaration order (a layout given exactly, as a
    kernel that places its own pads needs)."""

    def __init__(self, name: str, bank_aware: bool = True):
        self.name = name
        self.bank_aware = bank_aware
        self._layout = None  # (key, addresses) of the last `addresses` call
        self.symbols: dict[str, Symbol] = {}
        self.tasks: dict[str, Task] = {}
        self.registers: list[str] = []

    def symbol(self, name: str, dtype: str, shape: int | Sequence[int]) -> Symbol:
        if name in self.symbols:
            raise ValueError(f"tile {self.name!r}: symbol {name!r} is declared twice")
        if dtype not in SYMBOL_DTYPES:
            raise ValueError(f"tile {self.name!r}: symbol {name!r} has dtype {dtype!r}; "
                             f"supported: {list(SYMBOL_DTYPES)}")
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        if any(s < 1 for s in shape):
            raise ValueError(f"tile {self.name!r}: symbol {name!r} has shape {shape}")
        sym = Symbol(name, dtype, shape)
        self.symbols[name] = sym
        return sym

    def addresses(self, sram_words: int | None = None) -> dict[str, int]:
        """Word address of each symbol on every PE of the tile: in declaration order from
        word 0; with `bank_aware`, a symbol moved by one word where that keeps the two
        memory sources of the tile's ops in different bank pairs (`fabric.bank_layout`;
        the natural layout where the pads would pass `sram_words`)."""
        if not self.bank_aware:
            return natural_addresses(self.symbols)
        # symbols and tasks are immutable and only ever added: their identities key the
        # layout, which cycle models ask for again and again
        key = (tuple(map(id, self.symbols.values())), tuple(map(id, self.tasks.values())),
               sram_words)
        if self._layout is None or self._layout[0] != key:
            code = [item for task in self.tasks.values() for item in task.code]
            self._layout = (key, bank_aware_addresses(self.symbols, code, sram_words))
        return dict(self._layout[1])

    def register(self, *names: str) -> None:
        """Declare named registers (also declared implicitly by first use)."""
        for name in names:
            if name not in self.registers:
                self.registers.append(name)

    def used_registers(self) -> list[str]:
        """The registers the tile declares, then those its code names first, in order
        (each a register of every PE of the tile when built)."""
        names = list(self.registers)
        for task in self.tasks.values():
            for item in task.code:
                for reg in getattr(item, "registers", ()):
                    if reg not in names:
                        names.append(reg)
        return names

    def data_task(self, name: str, color: int, code: Sequence, blocked: bool = False) -> None:
        self._add(Task(name, "data", tuple(code), color=int(color), blocked=blocked))

    def local_task(self, name: str, code: Sequence, blocked: bool = False) -> None:
        self._add(Task(name, "local", tuple(code), blocked=blocked))

    def _add(self, task: Task) -> None:
        if task.name in self.tasks:
            raise ValueError(f"tile {self.name!r}: task {task.name!r} is declared twice")
        self.tasks[task.name] = task

    def __repr__(self) -> str:
        return f"Tile({self.name!r}, symbols={list(self.symbols)}, tasks={list(self.tasks)})"


@dataclasses.dataclass(frozen=True)
class Placement:
    tile: Tile
    rect: Rect
    params: Mapping[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Route:
    rect: Rect
    color: int
    rx: Port
    tx: frozenset


class Program:
    """A whole-fabric program: tiles placed on rectangles plus routes per color.

    Later routes on an overlapping rectangle override earlier ones for the same color.
    """

    def __init__(self, config):
        self.config = config
        self.placements: list[Placement] = []
        self._extents: list[tuple[int, int, int, int]] = []  # each placement's rows, cols
        self.routes: list[Route] = []
        # names of the programs `fabric.merge_programs` made this one of (each checked on
        # its own for routed colors); empty for a program written as one
        self.merged_from: tuple[str, ...] = ()

    def place(self, tile: Tile, rect: Rect, params: Mapping[str, object] | None = None) -> None:
        """Run `tile` on every PE of `rect`. `params` maps a register name to its initial
        value: a scalar for every PE, or an array of shape (rect.rows, rect.cols)."""
        self._check_rect(rect, f"tile {tile.name!r}")
        if not self.config.async_memory_ops:
            _check_async_ops(tile, self.config)
        r0, r1, c0, c1 = rect.row, rect.row_end, rect.col, rect.col_end
        for i, (o0, o1, p0, p1) in enumerate(self._extents):  # rows and columns taken
            if o0 < r1 and r0 < o1 and p0 < c1 and c0 < p1:
                other = self.placements[i]
                raise ValueError(f"tile {tile.name!r} at {rect} overlaps tile "
                                 f"{other.tile.name!r} at {other.rect}")
        arrays = {}
        for name, value in (params or {}).items():
            arr = np.asarray(value)
            if arr.ndim == 0:
                arr = np.full((rect.rows, rect.cols), arr)
            if arr.shape != (rect.rows, rect.cols):
                raise ValueError(f"tile {tile.name!r}: param {name!r} has shape {arr.shape}, "
                                 f"expected a scalar or {(rect.rows, rect.cols)}")
            tile.register(name)
            arrays[name] = arr
        self.placements.append(Placement(tile, rect, arrays))
        self._extents.append((r0, r1, c0, c1))

    def route(self, rect: Rect, color: int, rx: Port, tx: Port | Iterable[Port]) -> None:
        """On every PE of `rect`, accept `color` from port `rx` and forward it to `tx`
        (several ports = multicast)."""
        self._check_rect(rect, f"route of color {color}")
        self._check_color(color, rect)
        self.routes.append(Route(rect, int(color), Port(rx), self._tx(color, rect, tx)))

    def route_cells(self, color: int, cells: Mapping[tuple[int, int], tuple]) -> None:
        """`route` on single PEs, one color: cells {(row, col): (rx, tx)}, as a flow's
        route tree gives them (`fabric.kernels.traffic_routes.route_tree`). The color is
        checked once: a model's moves route tens of thousands of PEs."""
        if not cells:
            return
        rows, cols = self.config.rows, self.config.cols
        self._check_color(color, Rect(*next(iter(cells)), 1, 1))
        color = int(color)
        for (r, c), (rx, tx) in cells.items():
            if not (0 <= r < rows and 0 <= c < cols):
                self._check_rect(Rect(r, c, 1, 1), f"route of color {color}")
            self.routes.append(_cell_route(r, c, color, rx, tx))

    def _check_color(self, color: int, rect: Rect) -> None:
        if not 0 <= color < self.config.num_colors:
            raise ValueError(f"route of color {color} on {rect}: colors are "
                             f"0..{self.config.num_colors - 1} on {self.config.name}")
        if (why := self.config.reserved_color_error(color)) is not None:
            raise ValueError(f"route of color {color} on {rect} (PE ({rect.row}, {rect.col}) "
                             f"first): {why}")

    @staticmethod
    def _tx(color: int, rect: Rect, tx) -> frozenset:
        tx_set = _ports((tx,) if isinstance(tx, (int, Port)) else tuple(tx))
        if not tx_set:
            raise ValueError(f"route of color {color} on {rect}: tx is empty; a color must "
                             "leave the router somewhere")
        return tx_set

    def _check_rect(self, rect: Rect, what: str) -> None:
        cfg = self.config
        if rect.row < 0 or rect.col < 0 or rect.row_end > cfg.rows or rect.col_end > cfg.cols:
            raise ValueError(f"{what}: {rect} lies outside the {cfg.rows}x{cfg.cols} fabric")

    def tile_at(self, row: int, col: int) -> Placement | None:
        for p in self.placements:
            if p.rect.contains(row, col):
                return p
        return None


def _check_async_ops(tile: Tile, config) -> None:
    """Refuse an asynchronous DSD op none of whose operands is a fabric DSD
    (`FabricConfig.async_memory_ops` False: the SDK's rule)."""
    for task in tile.tasks.values():
        for i, item in enumerate(task.code):
            if not (isinstance(item, ins.Instr) and item.is_async):
                continue
            if not any(isinstance(x, (ins.FabIn, ins.FabOut)) for x in (item.dst, item.a,
                                                                         item.b)):
                raise ValueError(
                    f"tile {tile.name!r}, task {task.name!r}, instruction {i} "
                    f"({item.op.name.lower()}): an asynchronous DSD op needs a fabric "
                    f"operand on {config.name} (async_memory_ops=False, the SDK's rule: "
                    "\"Asynchronous DSD operations must have at least one fabric DSD "
                    "operand\"); issue it synchronously")


def clear_route_cache() -> None:
    """Forget the one-PE routes shared so far (`Program.route_cells`)."""
    _cell_route.cache_clear()


@functools.lru_cache(maxsize=1 << 16)
def _cell_route(row: int, col: int, color: int, rx: Port, tx: frozenset) -> Route:
    """The route of one PE (`Program.route_cells`), shared by the moves that route it
    alike: a model's moves route hundreds of thousands of PEs, each one a Route and a Rect
    that the cyclic garbage collector walks at every full collection."""
    rect = Rect(row, col, 1, 1)
    return Route(rect, color, Port(rx), Program._tx(color, rect, tx))


@functools.cache
def _ports(ports: tuple) -> frozenset:
    """The Ports of `ports` (Ports or their ints) as a set; cached: a move's program routes
    every PE of its flows, a few hundred thousand routes over a handful of port sets."""
    return frozenset(Port(p) for p in ports)
