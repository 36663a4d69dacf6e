"""Layer-pipelined placement: every stage gets its own rectangle of PEs (a tile) and all
stay resident at once.

Sizing: a stage's share of the fabric follows its work (multiply-adds for GEMMs, elements
otherwise), at least what its SRAM need asks for, within what its kernel accepts (every PE
must hold a block; one-column kernels stay one column wide; SUMMA needs a color per tile row
and column). Packing: a skyline filled in graph order, each tile where its top is lowest, so
a stage sits beside or below the stages it exchanges tensors with (the previous and next
ones); when the tiles do not fit, every share shrinks and the packing starts over, down to
the minimum sizes; below those the model does not fit and `PlacementError` says what it
needs against what the fabric has: PEs, SRAM, and for a stage that fits no tile, the SRAM
per PE its kernel would need.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

from fabric.config import FabricConfig
from fabric.program import Rect
from frontend.balance import PERIOD_SHARE, balance_cycles, flatter_starts, stage_cycles
from frontend.companions import Groups, companion_groups
from frontend.errors import PlacementError
from frontend.move_bounds import critical_path, edge_words, rate_bound, stage_bounds
from frontend.skyline import pack
from frontend.stages import Stage
from frontend.tile_shapes import kernel_fit, min_pes, model_cycles, summa_colors, tile_shape

SHARE = 0.6  # fraction of the fabric the work-proportional shares add up to at first
OBJECTIVES = ("work", "cycles")  # place()'s `balance`: see its docstring
STACKING = ("latency", "rate", "off")  # place()'s `stack`: see its docstring
MAX_APART = 8  # riders left apart, one per balance run, before riders are given up
# how much longer one sample's way through the pipeline riders may make it at an equal
# rate: their one-color moves are what lets a model run as one program (GPT-Neo on
# small(12, 12): 54 colors with its riders, 80 without, for a way 1.1 % shorter)
WAY_SLACK = 0.02


@dataclasses.dataclass
class Placement:
    config: FabricConfig
    rects: dict[str, Rect]  # stage name -> tile
    edges: list[tuple[str, str]]  # (producer stage, consumer stage) pairs
    # stage name -> its kernel's analytic cycles on its tile (`model_cycles`; 0: resident)
    predicted: dict[str, int] = dataclasses.field(default_factory=dict)
    # an elementwise stage on its GEMM's tile shape right below it -> that GEMM
    # (`frontend.companions`; pipelined)
    riders: dict[str, str] = dataclasses.field(default_factory=dict)
    # riders left apart because they made one sample's way longer (`place`'s stack
    # "latency"; "rate" would keep them)
    left_for_way: bool = False

    @property
    def pes_used(self) -> int:
        return sum(r.rows * r.cols for r in self.rects.values())


def data_bytes(stage: Stage) -> int:
    """Bytes of the stage's operands and output, which its tile holds at once whatever its
    kernel's layout: a lower bound of its SRAM (buffers come on top). A resident stage's
    output is its operand, held once; so is an fp32 GEMM's initial accumulator "C0",
    written where its output is summed. 16-bit stages: 2 B per element."""
    shared = "C0" if stage.dtype == "f32" and stage.kind.startswith("gemm") else None
    elements = sum(math.prod(op.shape) for op in stage.operands if op.name != shared)
    if stage.kind != "resident":
        elements += stage.tensor.numel
    return (4 if stage.dtype == "f32" else 2) * elements


def place(stages: list[Stage], config: FabricConfig, edges, balance: str = "work",
          period_share: float = PERIOD_SHARE, spare: bool = True,
          stack: str = "latency") -> Placement:
    """A tile for every stage of `stages` (graph order) on `config`; `edges`: (producer,
    consumer) stage names, kept on the result.

    balance: what the tiles' sizes serve.
        "work": a model run one stage at a time; shares of PEs follow each stage's work and
            add up to `SHARE` of the fabric, shrunk until they pack; where none pack (a
            diffusion U-Net's group norms and convolutions at their minimum tiles), the
            tiles "cycles" finds.
        "cycles": a pipelined run, all stages at once, at the rate of the slowest; tiles
            grow to make the largest predicted cycles as small as the kernels and 60 % of
            the fabric allow (`frontend.balance`); then the others grow into the PEs left over
            by steps that each save a measurable share of that period
            (`frontend.balance.MIN_SAVING`), so a larger fabric hands out no more PEs once
            it holds them. period_share and spare: `balance_cycles`'s (a smaller share and
            no spare PEs give smaller tiles, whose routes need fewer colors).
    stack: riders (pipelined). An elementwise stage that reads its producer's whole output
        takes the producer's tile shape, right below it, so the move between them takes
        one color (`frontend.companions`), where the kernels take it and the tiles still
        pack, judged by
        "latency": the slowest stage, its kernel or the moves into it
            (`frontend.move_bounds`), no slower than without riders, and where it is as
            fast, one sample's way through the pipeline (`critical_path`) at most
            `WAY_SLACK` longer;
        "rate": the slowest stage alone (more riders, so fewer colors: what
            `colors="fit"` tries when the first is short of them);
        "off": no riders.
    Raises ValueError for another `balance` or `stack`, PlacementError when the stages do
    not fit."""
    for setting, value, choices in (("balance", balance, OBJECTIVES),
                                    ("stack", stack, STACKING)):
        if value not in choices:
            raise ValueError(f"{setting} must be one of {', '.join(map(repr, choices))}; "
                             f"got {value!r}")
    if not stages:  # a graph of layout-only ops: nothing to place
        return Placement(config, {}, list(edges))
    groups, longer = Groups(stages, config), False
    if balance == "cycles":
        shapes = balance_cycles(stages, config, period_share=period_share, spare=spare)
        if shapes is not None and stack != "off":
            shapes, groups, longer = _stacked(stages, config, edges, shapes, groups,
                                              dict(period_share=period_share, spare=spare),
                                              stack)
    else:
        shapes = _work_shapes(stages, config)
        if shapes is None:  # no work shares pack (tall minimum tiles): the rate's tiles
            shapes = balance_cycles(stages, config, period_share=period_share, spare=spare)
    if shapes is None:
        raise _does_not_fit(stages, config)
    rects = groups.rects(shapes)
    return Placement(config, {s.name: r for s, r in zip(stages, rects)}, list(edges),
                     {s.name: model_cycles(s, shape, config) or 0
                      for s, shape in zip(stages, shapes)},
                     {stages[r].name: stages[root].name for r, root in groups.roots.items()},
                     longer)


def planned(stages: list[Stage], placement: Placement) -> tuple[int, list[str], int]:
    """(way, stages on it, rate): one sample's way through `placement` in cycles and the
    stages on it, and its slowest stage's cycles per sample, as the placement plans them:
    the kernels' models (`Placement.predicted`) and the moves' bounds
    (`move_bounds.critical_path`, `stage_bounds`), host I/O apart. What the simulation
    then measures is at least about that: the moves take longer than their bounds."""
    words = edge_words(stages, placement.edges)
    way, path = critical_path([s.name for s in stages], placement.predicted,
                              placement.rects, words)
    return way, path, rate_bound(placement.predicted, placement.rects, words)


def _stacked(stages: list[Stage], config: FabricConfig, edges, shapes, groups: Groups,
             balance_args: dict, judge: str = "latency"
             ) -> tuple[list[tuple[int, int]], Groups, bool]:
    """The balance with riders (`companion_groups`) where its rate is no worse than that of
    `shapes` (balanced apart, packed as `groups`) and, under `judge` "latency" and an
    equal rate, one sample's way through it (`move_bounds.critical_path`) at most
    `WAY_SLACK` longer; else `shapes` and `groups`. Riders take PEs their roots' steps must
    pay for; each stage is weighed by its kernel or a move into it, the larger
    (`stage_bounds`: a rider's move is a translation, the same stage on a tile of its own
    may wait on one link). Where the slowest stage is a rider, or a root whose riders' PEs
    held its growth back, the slowest rider of its group is left apart and the balance
    runs again; where the rate holds but the way is longer, the rider on the way whose
    stage (or root) got the most cycles slower; at most `MAX_APART` times in all (the
    tests' TinyGPT: its gelus on their GEMMs' shapes, 2,102 cycles against 2,096 apart;
    without them, the residual adds ride. GPT-J on small(12, 12): its three riders, on
    their GEMMs' shapes, made the way 26,240 cycles against 23,532 apart, the timeline's
    latency 27,625 against 24,955)."""
    words = edge_words(stages, edges)
    plain_bounds, plain_way, _ = _figures(stages, shapes, groups, words)
    plain = max(plain_bounds.values())
    position = {s.name: i for i, s in enumerate(stages)}
    apart: set[str] = set()
    longer = False  # whether riders were left apart for the way alone
    for _ in range(MAX_APART + 1):
        riders = companion_groups(stages, config, frozenset(apart))
        if not riders.roots:
            break
        stacked = balance_cycles(stages, config, groups=riders, **balance_args)
        if stacked is None:
            break
        bounds, way, path = _figures(stages, stacked, riders, words)
        slowest = max(bounds, key=bounds.get)
        if bounds[slowest] <= plain:
            if judge == "rate" or bounds[slowest] < plain:
                return stacked, riders, longer
            if way <= plain_way * (1 + WAY_SLACK):
                return stacked, riders, longer
            longer = True
            # the stage on the way that rides or carries riders and got the most slower:
            # itself if it rides, else the slowest of its riders
            on_way = [position[n] for n in path if _group(riders, position[n])]
            if not on_way:
                break
            worst = max(on_way, key=lambda i: (bounds[stages[i].name]
                                               - plain_bounds[stages[i].name], i))
            leave = (worst if worst in riders.roots
                     else _slowest(_group(riders, worst), stages, bounds))
        else:
            # the slowest stage's group: its root and the riders whose PEs the root pays for
            group = _group(riders, position[slowest])
            if not group:
                break
            leave = _slowest(group, stages, bounds)
        apart.add(stages[leave].name)
    return shapes, groups, longer


def _group(groups: Groups, i: int) -> list[int]:
    """The riders of stage i's group (i a root or a rider; none if i is alone)."""
    root = groups.roots.get(i, i)
    return [j for j, r in groups.roots.items() if r == root]


def _slowest(group: list[int], stages: list[Stage], bounds: dict[str, int]) -> int:
    """The stage of `group` (indices) of the most cycles in `bounds`, the last if tied."""
    return max(group, key=lambda i: (bounds[stages[i].name], i))


def _figures(stages: list[Stage], shapes: list[tuple[int, int]], groups: Groups,
             words: dict[tuple[str, str], int]) -> tuple[dict[str, int], int, list[str]]:
    """On `shapes` packed as `groups` packs them: per stage, its cycles per sample at least
    (the cycles the balance weighs, or a move into it: `stage_bounds`), and one sample's
    way through them, its cycles and stages (`critical_path`), from one packing."""
    names = [s.name for s in stages]
    rects = dict(zip(names, groups.rects(shapes)))
    cycles = {s.name: stage_cycles(s, shape, groups.config) or 0
              for s, shape in zip(stages, shapes)}
    return stage_bounds(cycles, rects, words), *critical_path(names, cycles, rects, words)


def _work_shapes(stages: list[Stage], config: FabricConfig) -> list[tuple[int, int]] | None:
    """Tile shapes from work-proportional shares that pack onto `config`; at the minimum
    shares, their tall tiles made flatter until they pack (`flatter_starts`); None if even
    that does not pack."""
    total = config.rows * config.cols
    floor = [min_pes(s, config) for s in stages]
    work = [max(1, s.work) for s in stages]
    scale = SHARE * total / sum(work)
    while True:
        want = [max(f, int(w * scale)) for f, w in zip(floor, work)]
        try:
            shapes = [tile_shape(s, p, config) for s, p in zip(stages, want)]
        except PlacementError:
            shapes = None
        if shapes is None:
            if all(p >= total for p in want):
                return None
            scale /= 0.7  # the minimum shares are too small for some kernel's SRAM
            floor = [min(total, 2 * f) for f in floor]
            continue
        if pack(shapes, config) is not None:
            return shapes
        if all(p <= f for p, f in zip(want, floor)):
            return flatter_starts(stages, shapes, config, Groups(stages, config))
        scale *= 0.7


# ---- what a model that does not fit needs ----------------------------------------------
MAX_PROBES = 64  # kernel builds per stage when looking for its smallest tile


def _max_cols(stage: Stage, rows: int, config: FabricConfig, fabric_cols: int) -> int:
    """The widest tile of `rows` rows the stage's kernel takes, within `fabric_cols`
    columns; 0 if none."""
    lim = stage.limits
    if lim.cols_fixed:
        return lim.cols_fixed if lim.cols_fixed <= fabric_cols else 0
    cols = min(lim.cols, fabric_cols)
    if stage.kind == "gemm_summa":
        while cols > 0 and summa_colors(stage, rows, cols) > len(config.program_colors):
            cols -= 1
    return cols


def largest_tile(stage: Stage, config: FabricConfig,
                 fabric: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The tile with the most PEs the stage's kernel takes (every PE must hold a block of
    its output; gemm_summa's colors) within `fabric` (rows, cols), default `config`'s grid;
    None if it takes none."""
    fabric_rows, fabric_cols = fabric or (config.rows, config.cols)
    best = None
    for rows in range(1, min(stage.limits.rows, fabric_rows) + 1):
        cols = _max_cols(stage, rows, config, fabric_cols)
        if cols and (best is None or rows * cols > best[0] * best[1]):
            best = (rows, cols)
    return best


def smallest_tile(stage: Stage, config: FabricConfig) -> tuple[int, int] | None:
    """The tile of `config`'s grid with the fewest PEs on which the stage's kernel builds,
    trying tiles in order of PEs from the fewest that can hold its data (`data_bytes`);
    None if none of the first MAX_PROBES does (or none is left)."""
    start = math.ceil(data_bytes(stage) / config.sram_bytes)
    heap = []  # (PEs, rows, cols): for each row count, its next tile by PEs
    for rows in range(1, min(stage.limits.rows, config.rows) + 1):
        widest = _max_cols(stage, rows, config, config.cols)
        cols = stage.limits.cols_fixed or max(1, math.ceil(start / rows))
        if cols <= widest:
            heap.append((rows * cols, rows, cols))
    heapq.heapify(heap)
    for _ in range(MAX_PROBES):
        if not heap:
            return None
        _, rows, cols = heapq.heappop(heap)
        if not isinstance(kernel_fit(stage, (rows, cols), config), str):
            return rows, cols
        if not stage.limits.cols_fixed and cols < _max_cols(stage, rows, config, config.cols):
            heapq.heappush(heap, (rows * (cols + 1), rows, cols + 1))
    return None


def _describe(stage: Stage) -> str:
    shapes = ", ".join(f"{op.name} {'x'.join(map(str, op.shape))}" for op in stage.operands)
    return (f"stage {stage.name!r} ({stage.kind}: {shapes} -> "
            f"{'x'.join(map(str, stage.tensor.shape))})")


def _does_not_fit(stages: list[Stage], config: FabricConfig) -> PlacementError:
    """The error for stages that do not fit `config` together. Its first line: PEs and SRAM
    needed at least against what the fabric has, and the first stage that fits no tile of
    the fabric alone, with the SRAM per PE it would need on the largest tile its kernel
    takes there; then one line per such stage with its kernel's own message."""
    total, sram = config.num_pes, config.sram_bytes
    need_pes, need_bytes, alone = 0, 0, []
    for stage in stages:
        data = data_bytes(stage)
        need_bytes += data
        tile = smallest_tile(stage, config)
        need_pes += tile[0] * tile[1] if tile else max(1, math.ceil(data / sram))
        if tile is None:
            alone.append(stage)
    head = (f"the model does not fit {config.name}: its {len(stages)} stages need at least "
            f"{need_pes} PEs ({total} available) and {need_bytes} B of SRAM "
            f"({total * sram} B available: {total} PEs x {sram} B)")
    if not alone and need_pes <= total:
        head += ("; their tiles do not pack onto the grid (tiles placed in graph order, "
                 "each in one piece)")
    details = []
    for i, stage in enumerate(alone):
        tile = largest_tile(stage, config)
        reason = kernel_fit(stage, tile, config) if tile else None
        if isinstance(reason, str):
            details.append(f"{stage.name} on {tile[0]} x {tile[1]} PEs: {reason}")
        if i == 1:
            head += f"; so do {len(alone) - 1} more stages (below)"
        if i > 0:
            continue
        head += f"; {_describe(stage)} fits no tile of {config.name}"
        if tile is None:
            continue
        data, pes = data_bytes(stage), tile[0] * tile[1]
        head += f": on the largest its kernel takes there, {tile[0]} x {tile[1]} PEs, "
        head += (f"it needs at least {math.ceil(data / pes)} B per PE ({sram} B available)"
                 if data > pes * sram else f"its blocks need more than the {sram} B of a PE")
        # beyond this grid: the kernel's own limits (blocks, colors) bound its tile
        most = largest_tile(stage, config, (stage.limits.rows, stage.limits.cols))
        if most is not None and most[0] * most[1] * sram < data:
            colors = len(config.program_colors)
            head += (f", and no fabric with {sram} B per PE and {colors} program colors "
                     f"holds it: its kernel takes at most {most[0]} x {most[1]} PEs")
    return PlacementError("\n".join([head, *details]))
