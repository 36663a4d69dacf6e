"""Layout-matched tiles for a pipelined placement: an elementwise stage on its producer's
tile shape, right below it.

An elementwise kernel (relu, add, mul, a unary function: `LAYOUT_FREE`) lays its tensor out
in blocks over its tile the way a GEMM or another elementwise kernel of the same tile shape
lays out its output: rows split over the tile's rows, columns over its columns
(`fabric.kernels.base.split`). Given its producer's shape and placed directly below it, the
move between the two is a translation: every PE sends its block to the PE one tile height
below, on paths that do not cross, so the move takes one color. A tile of another shape
takes one per flow that crosses a PE: the demo MLP (two linear layers, a relu, a residual
add) on small(12, 12) needs 45 colors with balanced tiles and 10 with each elementwise
stage below its producer. A stage rides with a producer when one of its runtime operands
is that producer's whole output in the producer's element order (`hosts_of`) and the
producer is a GEMM or rides one (`companion_groups`): chains stack (a relu under a GEMM, a
scale under the relu); a residual add rides the branch that ends in a GEMM.

The balance (`frontend.balance`) sizes a root and its riders together (`Groups`): a
rider has its root's shape, a step of the root moves its riders too, and the root and its
riders pack as one block (`pack_groups`). When even the starting tiles do not pack that
way, the balance places every stage on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fabric.config import FabricConfig
from fabric.kernels import UNARY_WORDS
from fabric.program import Rect
from frontend.skyline import Skyline
from frontend.stages import Stage
from frontend.tile_shapes import kernel_fit

# kernels whose output element i depends on input element i alone, in blocks over the tile
# (`Blocks.of`): maps, binary ops, affine and clamp, gelu, the unary functions, maximum /
# minimum / leaky_relu, the binary functions atan2 / hypot and fmod / remainder
LAYOUT_FREE = frozenset({"map", "elementwise", "affine", "clamp", "gelu", "gelu_erf",
                         *UNARY_WORDS, "maximum", "minimum", "leaky_relu", "elu", "pow",
                         "atan2", "hypot", "fmod", "remainder"})
# kernels whose output blocks a rider's match: rows over the tile's rows, columns over its
# columns (a chain rooted at an elementwise stage fed by a relayout gains no matched move)
ROOT_KINDS = frozenset({"gemm_summa"})


def _by_base(producers: dict[str, Stage]) -> dict[int, list[tuple[str, Stage]]]:
    """The producers by their output's first global id (an operand in some producer's
    element order starts with that id: one lookup instead of a pass over them all)."""
    by_base: dict[int, list[tuple[str, Stage]]] = {}
    for name, producer in producers.items():
        by_base.setdefault(producer.tensor.base, []).append((name, producer))
    return by_base


def hosts_of(stage: Stage, by_base: dict[int, list[tuple[str, Stage]]]) -> list[str]:
    """The producers (`by_base`: by their outputs' first ids, `_by_base`) whose whole
    output, in their own element order, is one of `stage`'s runtime operands, in operand
    order; none when `stage` is not elementwise."""
    if stage.kind not in LAYOUT_FREE:
        return []
    found = []
    for operand in stage.operands:
        if operand.index is None or not operand.index.numel():
            continue
        for name, producer in by_base.get(int(operand.index.reshape(-1)[0]), ()):
            if name not in found and producer.tensor.in_order(operand.index):
                found.append(name)
    return found


def riders(stages: Sequence[Stage]) -> dict[str, list[str]]:
    """{stage: the producers it could ride below} for every elementwise stage that reads
    some producer's whole output."""
    by_base = _by_base({s.name: s for s in stages if s.kind != "resident"})
    return {s.name: hosts for s in stages if (hosts := hosts_of(s, by_base))}


@dataclasses.dataclass
class Groups:
    """The stages' tiles as the balance sees them: every rider (`roots`: its index -> its
    root's index) on its root's shape, stacked below it in one block (`pack_groups`). With
    no riders, the tiles of `frontend.tile_shapes.pack`."""

    stages: Sequence[Stage]
    config: FabricConfig
    roots: dict[int, int] = dataclasses.field(default_factory=dict)

    def tie(self, shapes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """`shapes` with every rider on its root's shape."""
        out = list(shapes)
        for rider, root in self.roots.items():
            out[rider] = shapes[root]
        return out

    def weight(self, i: int) -> int:
        """Tiles of stage i's shape: itself and its riders (0 for a rider, which follows
        its root)."""
        if i in self.roots:
            return 0
        return 1 + sum(1 for root in self.roots.values() if root == i)

    def __post_init__(self):
        # one skyline for all the packings the balance asks of these stages
        self._skyline = Skyline(self.config)
        self._riders: dict[int, list[int]] = {}  # root -> its riders
        for rider, root in self.roots.items():
            self._riders.setdefault(root, []).append(rider)
        self._fit: dict[tuple[int, tuple[int, int]], bool] = {}  # (root, shape) -> riders fit
        self._stacks = _stacks(self.stages, self._names())  # the blocks packed

    def rects(self, shapes: Sequence[tuple[int, int]]) -> list[Rect] | None:
        """The tiles of `shapes` (riders tied to their roots); None if they do not pack or
        a rider's kernel does not take its root's shape."""
        if not self.roots:
            return self._skyline.rects(shapes)
        tied = self.tie(shapes)
        if not self._riders_fit(tied):
            return None
        return pack_groups(self.stages, tied, self._names(), self.config, self._skyline)

    def packs(self, shapes: Sequence[tuple[int, int]]) -> bool:
        """Whether `rects(shapes)` has tiles (no rectangles built: the balance asks after
        every step it tries)."""
        if not self.roots:
            return self._skyline.corners(shapes) is not None
        if not self._riders_fit(shapes):
            return False
        return self._skyline.corners(_blocks(shapes, self._stacks)) is not None

    def _riders_fit(self, shapes: Sequence[tuple[int, int]]) -> bool:
        """Whether every rider's kernel takes its root's shape (cached per root and shape:
        the balance moves one root at a time)."""
        for root, riders in self._riders.items():
            key = (root, tuple(shapes[root]))
            if key not in self._fit:
                self._fit[key] = all(
                    isinstance(kernel_fit(self.stages[r], shapes[root], self.config), int)
                    for r in riders)
            if not self._fit[key]:
                return False
        return True

    def _names(self) -> dict[str, str]:
        """rider -> root, by stage name."""
        return {self.stages[r].name: self.stages[root].name for r, root in self.roots.items()}


def companion_groups(stages: Sequence[Stage], config: FabricConfig,
                     apart: frozenset[str] = frozenset()) -> Groups:
    """Every rider of `stages` tied to a root: in graph order, an elementwise stage rides
    the first of its hosts (`riders`) that is a GEMM or rides one, joining its group.
    `apart`: stages that ride nothing (nor do the stages that would ride them alone)."""
    index = {s.name: i for i, s in enumerate(stages)}
    hosts = riders(stages)
    root_of: dict[str, str] = {}  # a group's members -> its root (a root: itself)
    roots = {}
    for s in stages:
        if s.kind in ROOT_KINDS:
            root_of[s.name] = s.name
            continue
        if s.name in apart:
            continue
        host = next((h for h in hosts.get(s.name, ()) if h in root_of), None)
        if host is not None:
            root_of[s.name] = root_of[host]
            roots[index[s.name]] = index[root_of[host]]
    return Groups(stages, config, roots)


def pack_groups(stages: Sequence[Stage], shapes: Sequence[tuple[int, int]],
                roots: dict[str, str], config: FabricConfig, skyline: Skyline | None = None
                ) -> list[Rect] | None:
    """Tiles for `shapes` where every root and its riders (`roots`: rider -> root, all of
    one shape) pack as one block, at the root's place in graph order, the riders stacked
    below the root in graph order; None if the blocks do not fit. `skyline`: the one to
    pack on (its last packing's first blocks kept), a new one by default."""
    stacks = _stacks(stages, roots)
    placed = (skyline or Skyline(config)).rects(_blocks(shapes, stacks))
    if placed is None:
        return None
    rects: list[Rect | None] = [None] * len(stages)
    for (i, members), block in zip(stacks, placed):
        rows = shapes[i][0]
        for k, j in enumerate(members):
            rects[j] = Rect(block.row + k * rows, block.col, rows, block.cols)
    return rects


def _stacks(stages: Sequence[Stage], roots: dict[str, str]) -> list[tuple[int, list[int]]]:
    """(a root's or lone stage's index, its members: itself and its riders) per block, the
    blocks and members in graph order."""
    members: dict[str, list[int]] = {}
    for i, s in enumerate(stages):
        members.setdefault(roots.get(s.name, s.name), []).append(i)
    return [(i, members[s.name]) for i, s in enumerate(stages) if s.name not in roots]


def _blocks(shapes: Sequence[tuple[int, int]], stacks: list[tuple[int, list[int]]]
            ) -> list[tuple[int, int]]:
    """The (rows, cols) of each block of `stacks`: its members stacked on its root's shape."""
    return [(shapes[i][0] * len(members), shapes[i][1]) for i, members in stacks]
