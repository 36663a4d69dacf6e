"""Flows and their static routes: L-shaped paths, multicast route trees, link loads, the cut
(bisection) bound, and the greedy coloring that keeps flows sharing a PE on distinct colors.

Used by `fabric.kernels.traffic`, which turns flows into fabric programs.

Example:
    >>> path = l_path((0, 0), (2, 3), order=XY)   # row first, then the column
    >>> path[0], path[-1]
    ((0, 0), (2, 3))
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from fabric.isa import OPPOSITE, Port

XY, YX = "xy", "yx"

Cell = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Flow:
    """`n` words from the PE `src` to every PE of `dsts` (rectangle-relative (row, col)),
    routed along an L: "xy" (row first, then column) or "yx"."""

    name: str
    src: Cell
    dsts: tuple[Cell, ...]
    n: int
    order: str = XY

    def __post_init__(self):
        if self.order not in (XY, YX):
            raise ValueError(f"flow {self.name!r}: order must be 'xy' or 'yx', got {self.order!r}")
        if self.n < 1:
            raise ValueError(f"flow {self.name!r}: n must be >= 1, got {self.n}")
        if not self.dsts:
            raise ValueError(f"flow {self.name!r} has no destination")
        if tuple(self.src) in {tuple(d) for d in self.dsts}:
            raise ValueError(f"flow {self.name!r} sends to its own PE {tuple(self.src)}")

    @property
    def hops(self) -> int:
        """Hops to the farthest destination (L routes are minimal)."""
        return max(abs(d[0] - self.src[0]) + abs(d[1] - self.src[1]) for d in self.dsts)


def l_path(src: Cell, dst: Cell, order: str = XY) -> list[Cell]:
    """PEs from src to dst along an L: the row first ("xy") or the column first ("yx").

    >>> l_path((0, 0), (1, 2))
    [(0, 0), (0, 1), (0, 2), (1, 2)]
    """
    cells = [tuple(src)]
    r, c = src
    for axis in (("c", "r") if order == XY else ("r", "c")):
        target = dst[1] if axis == "c" else dst[0]
        while (c if axis == "c" else r) != target:
            if axis == "c":
                c += 1 if target > c else -1
            else:
                r += 1 if target > r else -1
            cells.append((r, c))
    return cells


def route_tree(flow: Flow) -> Mapping[Cell, tuple[Port, frozenset]]:
    """cell -> (rx port, tx ports) of the flow's route; the union of its L paths is a tree
    (one rx port per PE: the first legs run along the source's row or column, each second
    leg along a line of its own), delivering to the RAMP of every destination. PEs in the
    order the paths first reach them, destination after destination. Read-only: a tree
    depends on the source, the destinations and the order alone, and is computed once for
    them (a plan asks for each move's tree while coloring, programming and loading links)."""
    return _tree(tuple(flow.src), tuple(tuple(d) for d in flow.dsts), flow.order)


def clear_tree_cache() -> None:
    """Forget the route trees computed so far (`route_tree`)."""
    _tree.cache_clear()


# the port a step leaves by: (axis (0 rows, 1 columns), direction) -> port
_PORT = {(1, 1): Port.EAST, (1, -1): Port.WEST, (0, 1): Port.SOUTH, (0, -1): Port.NORTH}


@functools.lru_cache(maxsize=1 << 14)  # a plan's moves, both orders: a few thousand trees
def _tree(src: Cell, dsts: tuple[Cell, ...], order: str
          ) -> Mapping[Cell, tuple[Port, frozenset]]:
    # Built leg by leg rather than path by path: a path's PEs that an earlier path reached
    # are skipped by remembering how far each leg already goes (a multicast's paths share
    # most of their PEs: the sum of their lengths is many times the tree's size).
    first = 1 if order == XY else 0  # the axis the first leg runs along (columns for "xy")
    second = 1 - first
    rx: dict[Cell, Port] = {src: Port.RAMP}
    tx: dict[Cell, set] = {src: set()}
    reached: dict[tuple, int] = {}  # (leg's start, axis, direction) -> steps it runs

    def leg(start: Cell, axis: int, steps: int) -> None:
        """The PEs `steps` from `start` along `axis` (its sign the direction), those no
        earlier leg reached."""
        way = 1 if steps > 0 else -1
        key, steps = (start, axis, way), abs(steps)
        done = reached.get(key, 0)
        if steps <= done:
            return
        reached[key] = steps
        out, back = _PORT[(axis, way)], OPPOSITE[_PORT[(axis, way)]]
        cell = list(start)
        cell[axis] += done * way
        prev = tuple(cell)
        for _ in range(done, steps):
            cell[axis] += way
            here = tuple(cell)
            tx[prev].add(out)
            rx[here] = back
            tx[here] = set()
            prev = here

    for dst in dsts:
        corner = list(src)
        corner[first] = dst[first]
        leg(src, first, dst[first] - src[first])
        leg(tuple(corner), second, dst[second] - src[second])
        tx[dst].add(Port.RAMP)
    return MappingProxyType({cell: _hop(rx[cell], frozenset(tx[cell])) for cell in rx})


@functools.cache
def _hop(rx: Port, tx: frozenset) -> tuple[Port, frozenset]:
    """One PE's (rx, tx) of a route tree, shared by every tree: a few dozen of them over
    the hundreds of thousands of PEs a model's cached trees route, each of which the
    cyclic garbage collector would otherwise walk at every full collection."""
    return rx, tx


def link_loads(flows: Sequence[Flow]) -> dict[tuple[int, int, Port], int]:
    """(row, col, port) -> wavelets sent through that port (links N/S/E/W, and RAMP =
    delivered to the CE), over all flows."""
    loads: dict[tuple[int, int, Port], int] = {}
    for f in flows:
        for (r, c), (_, tx) in route_tree(f).items():
            for port in tx:
                loads[(r, c, port)] = loads.get((r, c, port), 0) + f.n
    return loads


def cut_bound(flows: Sequence[Flow], rows: int, cols: int) -> dict:
    """The largest cut bound: over every vertical and horizontal cut of a rows x cols
    rectangle and each direction, wavelets that must cross / links crossing (one wavelet per
    cycle per link). Multicast flows count once per cut they must cross.

    Returns {"cycles": bound, "cut": description, "wavelets": w, "links": l}.
    """
    best = {"cycles": 0.0, "cut": "none", "wavelets": 0, "links": 1}
    cuts = [("col", k, rows) for k in range(1, cols)] + [("row", k, cols) for k in range(1, rows)]
    for axis, k, links in cuts:
        i = 1 if axis == "col" else 0
        for sign in (1, -1):
            w = sum(f.n for f in flows
                    if (f.src[i] < k) == (sign > 0)
                    and any((d[i] < k) != (f.src[i] < k) for d in f.dsts))
            if w / links > best["cycles"]:
                side = ("east" if sign > 0 else "west") if axis == "col" else (
                    "south" if sign > 0 else "north")
                best = {"cycles": w / links, "cut": f"{axis} {k}, {side}bound",
                        "wavelets": w, "links": links}
    return best


def conflicts(flows: Sequence[Flow]) -> list[set[int]]:
    """Per flow, the indices of the flows whose routes share a PE with it."""
    cells = [set(route_tree(f)) for f in flows]
    return [{j for j in range(len(flows)) if j != i and cells[i] & cells[j]}
            for i in range(len(flows))]


def assign_colors(flows: Sequence[Flow], palette: Sequence[int]) -> list[int]:
    """Greedy coloring: flows sharing any PE get different colors (largest route first,
    then flow order; each takes the lowest free color of `palette`).

    Raises:
        ValueError: naming a flow that finds no free color and the flows holding them all.
    """
    near = conflicts(flows)
    size = [len(route_tree(f)) for f in flows]
    color: dict[int, int] = {}
    for i in sorted(range(len(flows)), key=lambda i: (-size[i], i)):
        taken = {color[j] for j in near[i] if j in color}
        free = [c for c in palette if c not in taken]
        if not free:
            holders = sorted(flows[j].name for j in near[i] if j in color)
            raise ValueError(
                f"flow {flows[i].name!r} finds no free color: it shares PEs with flows "
                f"{holders}, which hold all {len(palette)} colors {sorted(palette)}; use fewer "
                "or shorter flows, or more colors")
        color[i] = free[0]
    return [color[i] for i in range(len(flows))]


def transpose_orders(k: int) -> dict[Cell, str]:
    """L-route orders for the k x k transpose that minimise the busiest link's load.

    A flow (i, j) -> (j, i) turns at a diagonal PE: at (i, i) going "xy", at (j, j) going
    "yx". Below the diagonal (i > j) an "xy" flow enters (i, i) from the west and leaves
    north, a "yx" flow enters (j, j) from the south and leaves east; the links next to the
    diagonal carry the most, one unit per flow turning there. So the flows of each half are
    assigned to turning ports {row port of i, column port of j} with the least capacity per
    port that admits all of them: a bipartite b-matching, solved by augmenting paths for
    capacity 1, 2, ... (the two halves use disjoint links and are solved apart).

    Returns {(i, j): "xy" | "yx"} for every i != j.
    """
    orders: dict[Cell, str] = {}
    for half in ([(i, j) for i in range(k) for j in range(i)],
                 [(i, j) for i in range(k) for j in range(i + 1, k)]):
        ports = {f: (("row", f[0]), ("col", f[1])) for f in half}
        cap = 1
        while (assignment := _b_matching(half, ports, cap)) is None:
            cap += 1
        for f, port in assignment.items():
            orders[f] = XY if port[0] == "row" else YX
    return orders


def _b_matching(items, options, cap):
    """Assign each item to one of its two options, at most `cap` items per option, by
    augmenting paths; None when impossible."""
    holders: dict = {}
    assigned: dict = {}

    def place(item, seen):
        for port in options[item]:
            if port in seen:
                continue
            seen.add(port)
            users = holders.setdefault(port, [])
            if len(users) < cap:
                users.append(item)
                assigned[item] = port
                return True
            for other in list(users):
                if place(other, seen):
                    users.remove(other)
                    users.append(item)
                    assigned[item] = port
                    return True
        return False

    for item in items:
        if not place(item, set()):
            return None
    return assigned
