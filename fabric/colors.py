"""Colors for programs that are to share one fabric: each part's colors mapped onto the
fabric's, different wherever two parts' routes meet in a router.

Parts built apart (kernels on their tiles, the rounds of the moves between them) each pick
their colors from the lowest of `config.program_colors`. To coexist in one fabric program,
two routes that cross one PE's router need different colors (a router has one routing
entry per color); a color may serve several parts whose PEs are disjoint; the colors the
host's memcpy reserves (`config.reserved_colors`) are never given.

Nodes: one per (part, color the part uses). A node's footprint is every PE of the parent
fabric where the part uses that color: its routes of the color, and the PEs of its tiles
that bind a data task to it or read or write it through a fabric DSD (`tile_colors`). Two
nodes whose footprints share a PE conflict and get different colors.

Assignment: DSatur (Brelaz, 1979), a greedy that colors the most constrained node first
(most distinct colors among its neighbours, then most neighbours, then the first part),
each with the lowest color free among its neighbours' (`config.program_colors` in
ascending order). It runs with as many colors as it takes, so `needed` says how many the
greedy wants when the fabric has too few; the nodes it gives a color beyond the palette are
left without one (`uncolored`).

Lower bound: the nodes present on one PE pairwise conflict, so no assignment uses fewer
colors than the most nodes on any PE (`lower_bound`, at `busiest_pe`).

Cost: footprints are painted once into an (R, C, W) grid of bitsets over the nodes (8 R C W
bytes: 256 KiB for 500 nodes on 64 x 64 PEs), and a node's neighbours are the OR of the
bitsets under its footprint; the greedy is N steps of O(N) array work. 500 nodes on a
64 x 64 fabric take about 30 ms in all.

Axis letters: R, C = the parent fabric's rows, cols; N = nodes; W = 64-node words.

Example:
    >>> parts = [ColorPart("gemm", gemm.program),                      # doctest: +SKIP
    ...          ColorPart("move", rnd.program, offset=(4, 0))]
    >>> a = assign_part_colors(config, parts)                         # doctest: +SKIP
    >>> a.ok, a.assigned[("move", 0)], a.lower_bound, a.busiest_pe     # doctest: +SKIP
    (True, 3, 4, (4, 2))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from fabric.build import tile_colors
from fabric.config import FabricConfig
from fabric.program import Program, Rect

LISTED = 12  # parts an error names at most in one list (the rest are counted)


@dataclasses.dataclass(frozen=True)
class ColorPart:
    """A program that is to share the parent fabric: `program` (on its own config: the
    parent, or a window of it) whose PE (0, 0) is PE `offset` (row, col) of the parent.
    `label` names it in reports and errors, once among the parts."""

    label: str
    program: Program
    offset: tuple[int, int] = (0, 0)


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: compared by identity (a mask)
class ColorNode:
    """Color `color` of part `part` (its index; `label` its label): its footprint is the
    True PEs of `mask` (box.rows, box.cols), `box` a rectangle of the parent fabric."""

    part: int
    label: str
    color: int
    box: Rect
    mask: np.ndarray

    def covers(self, row: int, col: int) -> bool:
        return (self.box.contains(row, col)
                and bool(self.mask[row - self.box.row, col - self.box.col]))


@dataclasses.dataclass(frozen=True, eq=False)
class ColorAssignment:
    """Colors of every node (see the module docstring).

    assigned: {(part label, its color): a color of `config.program_colors`}, every node
        but the `uncolored` ones, no two conflicting nodes alike.
    needed: colors the greedy takes for every node (more than `available` when it fails).
    lower_bound: the most nodes on one PE, `busiest_pe` (None without nodes).
    """

    config: FabricConfig
    parts: tuple[ColorPart, ...]
    nodes: tuple[ColorNode, ...]
    assigned: dict[tuple[str, int], int]
    needed: int
    lower_bound: int
    busiest_pe: tuple[int, int] | None
    uncolored: tuple[ColorNode, ...]

    @property
    def available(self) -> int:
        return len(self.config.program_colors)

    @property
    def ok(self) -> bool:
        """Every node has a color."""
        return not self.uncolored

    @property
    def used(self) -> int:
        """Distinct colors given."""
        return len(set(self.assigned.values()))

    def at(self, row: int, col: int) -> list[ColorNode]:
        """The nodes whose footprints cover PE (row, col)."""
        return [n for n in self.nodes if n.covers(row, col)]

    def colors_of(self, label: str) -> dict[int, int]:
        """{the part's color: its assigned color} of the part `label` (colored nodes)."""
        return {c: a for (lab, c), a in self.assigned.items() if lab == label}

    def shortfall(self) -> str | None:
        """Why the parts cannot share the fabric, or None when every node has a color: the
        colors needed against those available, the busiest PE and the parts crossing it,
        and the parts left without a color."""
        if self.ok:
            return None
        cfg, (r, c) = self.config, self.busiest_pe
        here = self.at(r, c)
        crossing = _by_part(here)
        if self.lower_bound > self.available:
            head = (f"the parts need at least {self.lower_bound} colors and {cfg.name} has "
                    f"{cfg.palette_text()}: PE ({r}, {c}) is crossed by {self.lower_bound} "
                    f"color-using routes or tasks of {len(crossing)} parts, which all need "
                    f"colors of their own (the greedy assignment needs {self.needed})")
        else:
            head = (f"the greedy assignment (DSatur) needs {self.needed} colors and "
                    f"{cfg.name} has {cfg.palette_text()}; the busiest PE, ({r}, {c}), is "
                    f"crossed by {self.lower_bound} color-using routes or tasks of "
                    f"{len(crossing)} parts, within the colors available, so another "
                    "assignment may fit where this greedy does not")
        lines = [head, f"parts crossing PE ({r}, {c}):", *_listed(crossing),
                 f"parts left without a color ({len(_by_part(self.uncolored))}):",
                 *_listed(_by_part(self.uncolored))]
        return "\n".join(lines)


def _by_part(nodes: Sequence[ColorNode]) -> dict[str, list[int]]:
    """{part label: its colors among `nodes`}, parts in their order."""
    out: dict[str, list[int]] = {}
    for n in sorted(nodes, key=lambda n: (n.part, n.color)):
        out.setdefault(n.label, []).append(n.color)
    return out


def _listed(parts: dict[str, list[int]]) -> list[str]:
    lines = [f"  {label} (its color{'s' if len(cs) > 1 else ''} {', '.join(map(str, cs))})"
             for label, cs in list(parts.items())[:LISTED]]
    if len(parts) > LISTED:
        lines.append(f"  and {len(parts) - LISTED} more")
    return lines


# ---- footprints ------------------------------------------------------------------------------
def footprints(config: FabricConfig, part: ColorPart
               ) -> dict[int, list[tuple[int, int, int, int]]]:
    """{color: rectangles (row, col, rows, cols) of the parent `config`} where `part` uses
    each color: its routes of the color and its tiles that use it (`tile_colors`), moved
    by its offset. Tuples, not Rects: a model's moves route a few hundred thousand PEs.

    Raises ValueError when the part's grid does not lie on the parent."""
    pc, (r0, c0) = part.program.config, part.offset
    if r0 < 0 or c0 < 0 or r0 + pc.rows > config.rows or c0 + pc.cols > config.cols:
        raise ValueError(f"part {part.label!r}: its {pc.rows} x {pc.cols} grid at PE ({r0}, "
                         f"{c0}) does not lie on the {config.rows} x {config.cols} fabric "
                         f"{config.name}")
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    for route in part.program.routes:
        r = route.rect
        out.setdefault(route.color, []).append((r.row + r0, r.col + c0, r.rows, r.cols))
    for placement in part.program.placements:
        r = placement.rect
        for color in tile_colors(placement.tile):
            out.setdefault(color, []).append((r.row + r0, r.col + c0, r.rows, r.cols))
    return out


def _node(index: int, part: ColorPart, color: int,
          extents: list[tuple[int, int, int, int]]) -> ColorNode:
    a = np.asarray(extents, np.int64)  # (n, 4): row, col, rows, cols
    top, left = int(a[:, 0].min()), int(a[:, 1].min())
    box = Rect(top, left, int((a[:, 0] + a[:, 2]).max()) - top,
               int((a[:, 1] + a[:, 3]).max()) - left)
    mask = np.zeros((box.rows, box.cols), bool)
    one = (a[:, 2] == 1) & (a[:, 3] == 1)  # a route's PE: painted all at once
    mask[a[one, 0] - top, a[one, 1] - left] = True
    for row, col, rows, cols in a[~one].tolist():
        mask[row - top:row - top + rows, col - left:col - left + cols] = True
    return ColorNode(index, part.label, color, box, mask)


def color_nodes(config: FabricConfig, parts: Sequence[ColorPart]) -> list[ColorNode]:
    """One node per (part, color it uses), in part order then color order."""
    labels = [p.label for p in parts]
    twice = sorted({lab for lab in labels if labels.count(lab) > 1})
    if twice:
        raise ValueError(f"part labels must differ; given more than once: {twice}")
    return [_node(i, part, color, rects) for i, part in enumerate(parts)
            for color, rects in sorted(footprints(config, part).items())]


# ---- conflicts and the greedy ----------------------------------------------------------------
def _slices(box: Rect) -> tuple[slice, slice]:
    return slice(box.row, box.row_end), slice(box.col, box.col_end)


def conflicts(config: FabricConfig, nodes: Sequence[ColorNode]) -> tuple[np.ndarray, np.ndarray]:
    """(N, N) bool: footprints i and j share a PE (i != j); and the (R, C) count of nodes on
    each PE."""
    n = len(nodes)
    words = max(1, -(-n // 64))
    # bit i % 64 of word i // 64: node i covers the PE (little-endian words, so that the
    # bytes unpack in node order)
    present = np.zeros((config.rows, config.cols, words), np.dtype("<u8"))
    count = np.zeros((config.rows, config.cols), np.int32)
    for i, node in enumerate(nodes):
        sl = _slices(node.box)
        present[sl][node.mask, i // 64] |= np.uint64(1) << np.uint64(i % 64)
        count[sl] += node.mask
    neighbours = np.zeros((n, words), np.dtype("<u8"))
    for i, node in enumerate(nodes):
        neighbours[i] = np.bitwise_or.reduce(present[_slices(node.box)][node.mask], axis=0)
    adjacent = np.unpackbits(neighbours.view(np.uint8), axis=1, bitorder="little")[:, :n]
    adjacent = adjacent.astype(bool)
    np.fill_diagonal(adjacent, False)
    return adjacent, count


def dsatur(adjacent: np.ndarray) -> np.ndarray:
    """Color index (0, 1, ...) per node of the conflict graph `adjacent` (N, N): the
    uncolored node with the most distinct colors among its neighbours next (then the most
    neighbours, then the lowest index), the lowest index its neighbours leave free."""
    n = len(adjacent)
    degree = adjacent.sum(axis=1)
    index = np.full(n, -1)
    taken = np.zeros((n, n + 1), bool)  # node, color index: a neighbour has it
    saturation = np.zeros(n, np.int64)
    for _ in range(n):
        key = np.where(index < 0, saturation * (n + 1) + degree, -1)
        v = int(np.argmax(key))  # the first of the largest: the lowest index on ties
        k = int(np.argmin(taken[v]))  # the first free index
        index[v] = k
        fresh = adjacent[v] & ~taken[:, k]
        saturation[fresh] += 1
        taken[adjacent[v], k] = True
    return index


def assign_part_colors(config: FabricConfig, parts: Sequence[ColorPart]) -> ColorAssignment:
    """Colors of `config.program_colors` for every (part, color) node of `parts`, different
    wherever two footprints share a PE (see the module docstring).

    Raises ValueError for labels given twice or a part that does not lie on `config`."""
    nodes = color_nodes(config, parts)
    adjacent, count = conflicts(config, nodes)
    index = dsatur(adjacent)
    palette = config.program_colors
    assigned = {(n.label, n.color): palette[k] for n, k in zip(nodes, index)
                if k < len(palette)}
    uncolored = tuple(n for n, k in zip(nodes, index) if k >= len(palette))
    busiest = np.unravel_index(int(np.argmax(count)), count.shape) if nodes else None
    return ColorAssignment(
        config, tuple(parts), tuple(nodes), assigned,
        needed=int(index.max()) + 1 if nodes else 0,
        lower_bound=int(count.max()) if nodes else 0,
        busiest_pe=(int(busiest[0]), int(busiest[1])) if busiest is not None else None,
        uncolored=uncolored)
