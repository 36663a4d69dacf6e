"""Windows: a program whose routes and tasks lie inside a box of PEs runs the same on any
fabric that holds the box, cycle for cycle and word for word (a PE's step depends on its
own state and its neighbours' only, and the PEs outside the box stay idle). The engine's
cost per cycle grows with the grid it steps, so such a program is cheaper to simulate on a
window of the fabric: a smaller grid (`FabricConfig.tile`) that covers the box.

Every distinct grid is a compiled engine of its own, so windows come in few sizes: each
side max(`MIN_SIDE`, the next power of two of the box's side), cut to the fabric. Sides
are bucketed apart, not as squares: a stage's tile is often a strip (4 x 17 PEs), whose
square would be the whole wafer. A window of more than `MAX_SHARE` of the fabric's PEs
saves too little to pay for an engine of its own: the fabric itself runs the program.

Host transfers are charged as on the whole fabric: a `Simulator` given `parent=` and
`corner=` (`Window.simulator_args`) costs them by where the rectangle lies on the parent.

Example:
    >>> w = window_for(FabricConfig.small(32, 32), Rect(28, 3, 3, 3))
    >>> w.rect, w.inner(Rect(28, 3, 3, 3))
    (Rect(row=24, col=3, rows=8, cols=8), Rect(row=4, col=0, rows=3, cols=3))
"""

from __future__ import annotations

import dataclasses

from fabric.config import FabricConfig
from fabric.program import Rect

MIN_SIDE = 8  # below it, a smaller grid saves little: the engine's fixed cost per cycle
MAX_SHARE = 0.5  # measured: 8 x 8 steps a cycle in 0.6x the time of 12 x 12, 8 x 12 in 0.75x


@dataclasses.dataclass(frozen=True)
class Window:
    """`rect`: the window's PEs on the fabric `parent` (the whole of it when `whole`)."""

    parent: FabricConfig
    rect: Rect

    @property
    def whole(self) -> bool:
        return (self.rect.rows, self.rect.cols) == (self.parent.rows, self.parent.cols)

    @property
    def config(self) -> FabricConfig:
        """The fabric simulated: the parent itself, or a tile of it of the window's size
        (equal for equal sizes, so windows of one size share a compiled engine)."""
        return self.parent if self.whole else self.parent.tile(self.rect.rows, self.rect.cols)

    @property
    def corner(self) -> tuple[int, int]:
        return self.rect.row, self.rect.col

    def inner(self, rect: Rect) -> Rect:
        """`rect` of the parent in the window's own coordinates."""
        if not (self.rect.contains(rect.row, rect.col)
                and self.rect.contains(rect.row_end - 1, rect.col_end - 1)):
            raise ValueError(f"{rect} does not lie in the window {self.rect}")
        return Rect(rect.row - self.rect.row, rect.col - self.rect.col, rect.rows, rect.cols)

    def outer(self, rect: Rect) -> Rect:
        """`rect` of the window in the parent's coordinates."""
        return Rect(rect.row + self.rect.row, rect.col + self.rect.col, rect.rows, rect.cols)

    def simulator_args(self) -> dict:
        """Keywords of a `Simulator` on `config` that charge host transfers as the parent
        does (none for the whole fabric)."""
        return {} if self.whole else {"parent": self.parent, "corner": self.corner}


def bounding_box(*rects: Rect) -> Rect:
    """The smallest rectangle holding every one of `rects`."""
    r0, c0 = min(r.row for r in rects), min(r.col for r in rects)
    r1, c1 = max(r.row_end for r in rects), max(r.col_end for r in rects)
    return Rect(r0, c0, r1 - r0, c1 - c0)


def window_for(config: FabricConfig, box: Rect, min_side: int = MIN_SIDE,
               max_share: float = MAX_SHARE) -> Window:
    """The window of `config` for a program inside `box` (a rectangle of `config`): each
    side max(min_side, next power of two of the box's side), cut to the fabric, the window
    moved as little as needed to stay on it; the whole fabric when the window would hold
    more than `max_share` of its PEs."""
    if box.row < 0 or box.col < 0 or box.row_end > config.rows or box.col_end > config.cols:
        raise ValueError(f"{box} lies outside the {config.rows}x{config.cols} fabric "
                         f"{config.name}")
    rows = min(config.rows, max(min_side, 1 << (box.rows - 1).bit_length()))
    cols = min(config.cols, max(min_side, 1 << (box.cols - 1).bit_length()))
    if rows * cols > max_share * config.num_pes:
        return whole_fabric(config)
    return Window(config, Rect(min(box.row, config.rows - rows), min(box.col, config.cols - cols),
                               rows, cols))


def whole_fabric(config: FabricConfig) -> Window:
    """The window that is the whole of `config`."""
    return Window(config, Rect(0, 0, config.rows, config.cols))
