"""Tiles packed onto the grid in graph order: a skyline, every column's filled height;
each tile goes where its top is lowest (the leftmost of those), on the highest column
beneath it, so a stage sits beside or below the ones before it. Against shelves (a row of
tiles as tall as its tallest), the room under a short tile in a tall row is not lost:
TinyGPT d=64 on small(32, 32) left 104 PEs in such gaps, and its layer norm and two batch
entries of a bmm on 6 and 8 PEs.

The balance (`frontend.balance`) asks whether the tiles still pack after every step it
tries, thousands of times per model, each time with one tile changed: a `Skyline` keeps
the skyline after every tile of its last packing and starts the next where the shapes
first differ (the 1-layer GPT-2 on small(64, 64): 7,524 packings of 40 to 67 tiles).
"""

from __future__ import annotations

from collections.abc import Sequence

from fabric.config import FabricConfig
from fabric.program import Rect

Run = tuple[int, int, int]  # (first col, end col, rows filled) of columns of equal height


class Skyline:
    """`pack` for packings of one fabric that share their first tiles.

    >>> sky = Skyline(FabricConfig.small(4, 6))
    >>> sky.corners([(2, 3), (1, 3), (1, 3)])  # the third under the second
    [(0, 0), (0, 3), (1, 3)]
    >>> sky.corners([(2, 3), (1, 3), (3, 3)]) is None  # from the third tile on: 4 rows
    True
    """

    def __init__(self, config: FabricConfig):
        self.rows, self.cols = config.rows, config.cols
        self._shapes: list[tuple[int, int]] = []  # the last packing's tiles placed
        self._corners: list[tuple[int, int]] = []  # their (row, col)
        self._skylines: list[tuple[Run, ...]] = [((0, self.cols, 0),)]  # before each tile

    def corners(self, shapes: Sequence[tuple[int, int]]) -> list[tuple[int, int]] | None:
        """(row, col) of each tile of `shapes` (rows, cols), in their order; None if one
        does not fit."""
        same = 0
        for old, new in zip(self._shapes, shapes):
            if old != new:
                break
            same += 1
        del self._shapes[same:], self._corners[same:], self._skylines[same + 1:]
        skyline = list(self._skylines[same])
        for shape in shapes[same:]:
            corner = self._place(skyline, *shape)
            if corner is None:
                return None
            self._shapes.append(tuple(shape))
            self._corners.append(corner)
            self._skylines.append(tuple(skyline))
        return list(self._corners)

    def rects(self, shapes: Sequence[tuple[int, int]]) -> list[Rect] | None:
        """The tiles of `shapes` as rectangles; None if one does not fit."""
        corners = self.corners(shapes)
        if corners is None:
            return None
        return [Rect(row, col, r, c) for (row, col), (r, c) in zip(corners, shapes)]

    def _place(self, skyline: list[Run], r: int, c: int) -> tuple[int, int] | None:
        """The corner of an r x c tile on `skyline`, which it then raises (in place); None
        if it does not fit."""
        if c > self.cols:
            return None
        # the lowest top over the tile's columns is at a run's first column (moving left
        # within a run lowers no top), the leftmost of the lowest taken
        row, col, at = self.rows, None, 0
        cols, runs = self.cols, len(skyline)
        for i, (start, _, height) in enumerate(skyline):
            end = start + c
            if end > cols:
                break
            top, j = height, i + 1
            while top < row and j < runs and skyline[j][0] < end:
                if skyline[j][2] > top:
                    top = skyline[j][2]
                j += 1
            if top < row:
                row, col, at = top, start, i
        if col is None or row + r > self.rows:  # None: every top at the grid's last row
            return None
        # the tile's run replaces the runs under it; what sticks out on the right stays
        end, height, last = col + c, row + r, at
        while last + 1 < len(skyline) and skyline[last + 1][0] < end:
            last += 1
        runs = [(col, end, height)]
        if skyline[last][1] > end:
            runs.append((end, skyline[last][1], skyline[last][2]))
        skyline[at:last + 1] = runs
        # neighbours of equal height make one run
        if at + 1 < len(skyline) and skyline[at + 1][2] == height:
            skyline[at:at + 2] = [(col, skyline[at + 1][1], height)]
        if at > 0 and skyline[at - 1][2] == height:
            skyline[at - 1:at + 1] = [(skyline[at - 1][0], skyline[at][1], height)]
        return row, col


def pack(shapes: Sequence[tuple[int, int]], config: FabricConfig) -> list[Rect] | None:
    """Tiles of `shapes` (rows, cols), in their order, on the grid (the module docstring);
    None if one does not fit.

    >>> pack([(2, 3), (1, 3), (1, 3)], FabricConfig.small(4, 6))  # the third under the second
    [Rect(row=0, col=0, rows=2, cols=3), Rect(row=0, col=3, rows=1, cols=3),
     Rect(row=1, col=3, rows=1, cols=3)]
    """
    return Skyline(config).rects(shapes)
