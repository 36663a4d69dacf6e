"""Where a collective runs: the lines of PEs (rows or columns of a rectangle, indexed from
their root end), their routes, the checks of its arguments, and how many colors it needs.

Example:
    >>> Lines(Rect(0, 0, 4, 8), "row", "west").slab(0)     # the root column
    Rect(row=0, col=0, rows=4, cols=1)
    >>> colors_needed("allreduce", Rect(0, 0, 4, 8), "row", "tree")
    4
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fabric.isa import OPPOSITE, Port
from fabric.program import Program, Rect

ALGOS = ("chain", "tree")
ROOTS = {"row": ("west", "east"), "col": ("north", "south")}
_PORT = {"west": Port.WEST, "east": Port.EAST, "north": Port.NORTH, "south": Port.SOUTH}
IDLE = -1  # register value of a PE of the domain outside the collective's rectangle


def line_colors(algo: str, length: int) -> int:
    """Colors of a reduction along lines of `length` PEs: 2 (chain), ceil(log2 length)
    (tree)."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
    return 2 if algo == "chain" else (length - 1).bit_length()


def colors_needed(kind: str, rect: Rect, along: str = "row", algo: str = "chain") -> int:
    """Colors a collective of `kind` ("broadcast", "reduce", "allreduce", "gather",
    "scatter") routes on for `rect`."""
    if kind == "broadcast":
        return 1
    if kind in ("gather", "scatter"):
        return 2
    if kind not in ("reduce", "allreduce"):
        raise ValueError(f"unknown collective {kind!r}")
    if along == "rect":
        n = line_colors(algo, rect.cols) + line_colors(algo, rect.rows)
    elif along in ROOTS:
        n = line_colors(algo, rect.cols if along == "row" else rect.rows)
    else:
        raise ValueError(f"along must be 'row', 'col' or 'rect', got {along!r}")
    return n + (kind == "allreduce")


@dataclasses.dataclass(frozen=True)
class Lines:
    """The parallel lines of a collective: every row (axis "row") or column of `rect`, each
    indexed from its root end (index 0) outward."""

    rect: Rect
    axis: str
    root: str

    def __post_init__(self):
        if self.axis not in ROOTS:
            raise ValueError(f"along must be 'row' or 'col', got {self.axis!r}")
        if self.root not in ROOTS[self.axis]:
            raise ValueError(f"a {self.axis} collective has its root at "
                             f"{' or '.join(ROOTS[self.axis])}, got {self.root!r}")

    @property
    def length(self) -> int:
        return self.rect.cols if self.axis == "row" else self.rect.rows

    @property
    def toward(self) -> Port:
        """The port of a PE that leads to the root."""
        return _PORT[self.root]

    @property
    def away(self) -> Port:
        return OPPOSITE[self.toward]

    def index(self, r: int, c: int) -> int:
        rect = self.rect
        pos, start, end = (c, rect.col, rect.col_end) if self.axis == "row" else (
            r, rect.row, rect.row_end)
        return pos - start if self.root in ("west", "north") else end - 1 - pos

    def slab(self, i: int) -> Rect:
        """The PEs at index i of every line (a column of rect for rows, a row for columns)."""
        rect = self.rect
        if self.axis == "row":
            col = rect.col + i if self.root == "west" else rect.col_end - 1 - i
            return Rect(rect.row, col, rect.rows, 1)
        row = rect.row + i if self.root == "north" else rect.row_end - 1 - i
        return Rect(row, rect.col, 1, rect.cols)

    def index_grid(self, domain: Rect) -> np.ndarray:
        """Line index of every PE of `domain` (IDLE outside rect)."""
        grid = np.full((domain.rows, domain.cols), IDLE, np.int64)
        for r, c in self.rect.pes():
            grid[r - domain.row, c - domain.col] = self.index(r, c)
        return grid

    def line_cells(self, domain: Rect) -> list[list[tuple[int, int]]]:
        """For every line, the domain-relative (row, col) of its PEs by index."""
        rect, out = self.rect, []
        starts = range(rect.row, rect.row_end) if self.axis == "row" else range(
            rect.col, rect.col_end)
        for s in starts:
            cells = [None] * self.length
            pes = [(s, c) for c in range(rect.col, rect.col_end)] if self.axis == "row" else [
                (r, s) for r in range(rect.row, rect.row_end)]
            for r, c in pes:
                cells[self.index(r, c)] = (r - domain.row, c - domain.col)
            out.append(cells)
        return out


def _route_slab(prog: Program, lines: Lines, i: int, color: int, rx: Port, tx) -> None:
    prog.route(lines.slab(i), color, rx, tx)


def _check_along(along: str, rect_ok: bool) -> None:
    allowed = ("row", "col", "rect") if rect_ok else ("row", "col")
    if along not in allowed:
        raise ValueError(f"along must be one of {allowed}, got {along!r}")


def _check_domain(rect: Rect, domain: Rect | None) -> Rect:
    domain = rect if domain is None else domain
    inside = domain.contains(rect.row, rect.col) and domain.contains(rect.row_end - 1,
                                                                     rect.col_end - 1)
    if not inside:
        raise ValueError(f"the collective's {rect} is not inside its domain {domain}")
    return domain
