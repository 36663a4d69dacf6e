"""Fan-out relays: a copy of a stage's output on a tile of its own, from which some of its
consumers take it, so that the routes out of the producer leave from two places.

In pipelined mode every move is on the fabric at once, and every flow crossing a PE needs a
color of its own there. A producer on a small tile that sends a slice of its output to each
of many consumers (a GRU's input GEMM to each step's gate adds; Swin's Q and K projections
to each batched attention product) starts one route per consumer on its PEs: more than the
fabric's colors, however small the tiles. A relay is a stage (a `map` multiplying by 1,
exact in every format, so every word it passes on is the producer's) that takes the whole
output in one move; the later half of the producer's consumers in graph order read the
relay instead, so each place starts about half the routes. It costs one move, the relay's
kernel (one op per element) and its SRAM, and it lies on those consumers' path in every
mode, like any stage: the report lists it under the producer's FX node.

`colors="fit"` adds relays only for a model whose starting tiles need more colors than the
fabric has, or more local tasks at a PE than it has task ids (`crowded_pe`;
`frontend.color_fit`), one at a time, each for the producer whose moves to the most
consumers cross the busiest (or the crowded) PE, while that producer has at least
`MIN_FAN_OUT` of them there.

Example:
    >>> producer = busiest_fan_out(colors)                            # doctest: +SKIP
    >>> stages, tensors, relay = add_relay(stages, tensors, producer) # doctest: +SKIP
    >>> [s.name for s in stages if s.name.startswith(producer)]      # doctest: +SKIP
    ['addmm', 'addmm_relay']
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from fabric import ColorAssignment, tile_colors
from fabric.kernels import build_map
from frontend.graph_colors import GraphColors
from frontend.lowering.common import CYCLES_PER_ELEMENT, as2d
from frontend.stages import Limits, Operand, Stage
from frontend.values import Tensor

# a producer gets a relay only where its moves to at least this many consumers cross the
# busiest PE (fewer: the colors there are the kernels' and the routes passing through)
MIN_FAN_OUT = 4
LISTED = 12  # parts a task shortfall names at most (the rest are counted)


def stage_edges(stages: list[Stage], tensors: dict[str, Tensor]) -> list[tuple[str, str]]:
    """(producer stage, consumer stage) for every runtime operand, sorted."""
    owners = [t for t in tensors.values() if t.kind == "stage"]
    edges = set()
    for s in stages:
        for op in s.operands:
            if op.index is None:
                continue
            gids = op.index.reshape(-1)
            edges.update((t.name, s.name) for t in owners if bool(t.owns(gids).any()))
    return sorted(edges)


def busiest_fan_out(colors: GraphColors, pe: tuple[int, int] | None = None,
                    minimum: int = MIN_FAN_OUT) -> str | None:
    """The producer stage whose moves to the most consumers cross PE `pe` (default: the
    assignment's busiest), if at least `minimum` of them do there; None otherwise (or
    without a busiest PE)."""
    a = colors.assignment
    pe = pe or a.busiest_pe
    if pe is None:
        return None
    crossing = {n.label for n in a.at(*pe)}
    fan: dict[str, int] = {}
    for (producer, _), labels in colors.moves.items():
        if crossing.intersection(labels):
            fan[producer] = fan.get(producer, 0) + 1
    best = max(fan, key=lambda p: (fan[p], p), default=None)
    return best if best is not None and fan[best] >= minimum else None


def crowded_pe(assignment: ColorAssignment) -> tuple[int, int] | None:
    """The PE whose tiles, all parts' together, have the most local tasks beyond the task
    ids left to them (`_task_ids`), or None where no PE is so. A sending PE runs one local
    task per move round leaving it, so a producer sending to many consumers can run out
    of ids where its colors still fit."""
    return _most_over(*_task_ids(assignment))


def task_shortfall(assignment: ColorAssignment) -> str | None:
    """Why the parts cannot share the fabric's task ids, or None where `crowded_pe` finds
    no PE short: the PE, its local tasks against the ids left, and the parts with tiles
    there with their local tasks."""
    local, left = _task_ids(assignment)
    pe = _most_over(local, left)
    if pe is None:
        return None
    config, (row, col) = assignment.config, pe
    here = []
    for part in assignment.parts:
        n = sum(t.kind != "data" for placed in part.program.placements
                if _covers(placed.rect, part.offset, row, col)
                for t in placed.tile.tasks.values())
        if n:
            here.append(f"  {part.label}: {n} local task{'s' * (n > 1)}")
    if config.task_binding == "queue":
        ids = (f"{config.num_task_ids} ids, the first {config.num_input_queues} bound to the "
               "input queues")
    else:
        reserved = len(config.reserved_colors)
        ids = (f"{config.num_task_ids} ids, less {reserved} reserved colors and the "
               f"{config.num_task_ids - reserved - left[row, col]} colors its tiles bind, "
               "read or write")
    listed = here[:LISTED] + ([f"  and {len(here) - LISTED} more"] if len(here) > LISTED
                              else [])
    return (f"PE ({row}, {col}) runs {local[row, col]} local tasks of {len(here)} parts but "
            f"has at most {left[row, col]} task ids for them ({ids}; a sending PE runs a "
            "local task per move round leaving it):\n" + "\n".join(listed))


def _most_over(local: np.ndarray, left: np.ndarray) -> tuple[int, int] | None:
    """The PE of the most local tasks beyond the ids left (R, C grids), None if none is."""
    over = local - left
    if over.max(initial=0) <= 0:
        return None
    row, col = np.unravel_index(int(over.argmax()), over.shape)
    return int(row), int(col)


def _task_ids(assignment: ColorAssignment) -> tuple[np.ndarray, np.ndarray]:
    """(local tasks, task ids left for them) per PE of the parent fabric (R, C), all
    parts' tiles together. The ids left, by the generation's binding (`fabric.build`):
    "color" (WSE-2) `num_task_ids` less the reserved colors and each color the tiles there
    bind, read or write (`tile_colors`), an upper bound (the build gives local tasks only
    the ids above the colors and the free colors above the tile's highest data task's),
    so a PE short here is short when built; "queue" (WSE-3) the ids after the input
    queues, whatever the colors."""
    config = assignment.config
    local = np.zeros((config.rows, config.cols), np.int32)
    used = np.zeros((config.rows, config.cols), np.int32)
    for part in assignment.parts:
        r0, c0 = part.offset
        for placed in part.program.placements:
            rect = placed.rect
            window = (slice(r0 + rect.row, r0 + rect.row + rect.rows),
                      slice(c0 + rect.col, c0 + rect.col + rect.cols))
            local[window] += sum(t.kind != "data" for t in placed.tile.tasks.values())
            used[window] += len(tile_colors(placed.tile))
    if config.task_binding == "queue":
        return local, np.full_like(local, config.num_task_ids - config.num_input_queues)
    return local, config.num_task_ids - len(config.reserved_colors) - used


def _covers(rect, offset: tuple[int, int], row: int, col: int) -> bool:
    return (rect.row <= row - offset[0] < rect.row + rect.rows
            and rect.col <= col - offset[1] < rect.col + rect.cols)


def add_relay(stages: list[Stage], tensors: dict[str, Tensor], producer: str
              ) -> tuple[list[Stage], dict[str, Tensor], str]:
    """New stage and tensor lists (the given ones are left as they are) with a relay of
    stage `producer`'s output right after it in graph order, the later half of its
    consumers (at least one) reading the relay instead, and the relay's name."""
    by_name = {s.name: s for s in stages}
    source, out = by_name[producer], tensors[producer]
    users = [s.name for s in stages if s.name != producer
             and any(op.index is not None and bool(out.owns(op.index).any())
                     for op in s.operands)]
    if not users:
        raise ValueError(f"stage {producer!r} has no consumer to relay to")
    moved = set(users[len(users) // 2:])
    relay = _relay_stage(source, out, _free_name(f"{producer}_relay", tensors),
                         _next_base(tensors))
    shift = relay.tensor.base - out.base
    new_stages = []
    for s in stages:
        if s.name in moved:
            s = dataclasses.replace(s, operands=[_redirect(op, out, shift) for op in s.operands])
        new_stages.append(s)
        if s.name == producer:
            new_stages.append(relay)
    return new_stages, {**tensors, relay.name: relay.tensor}, relay.name


def _relay_stage(source: Stage, out: Tensor, name: str, base: int) -> Stage:
    """A `map` (x * 1) of `out` in the producer's format, sized as the lowering sizes one
    (`lowering.common.map_`: the matrix `as2d`, its work per element), on the producer's
    FX node."""
    tensor = Tensor(name, base, out.shape, "stage")
    m, n = as2d(out.shape)
    fmt = {} if source.dtype == "f32" else {"dtype": source.dtype, "acc_dtype": "f32"}
    index = out.ref().index.reshape(m, n)
    return Stage(name, source.node, "map", tensor,
                 lambda cfg, rect: build_map(cfg, rect, m, n, "mul", 1.0, **fmt),
                 [Operand("x", (m, n), index=index)], m * n * CYCLES_PER_ELEMENT["map"],
                 Limits(m, n), words_per_element=2, dtype=source.dtype)


def _redirect(op: Operand, out: Tensor, shift: int) -> Operand:
    """`op` with its ids of `out`'s elements moved by `shift` (to the relay's)."""
    if op.index is None:
        return op
    return dataclasses.replace(op, index=torch.where(out.owns(op.index), op.index + shift,
                                                     op.index))


def _next_base(tensors: dict[str, Tensor]) -> int:
    return max((t.base + t.numel for t in tensors.values()), default=0)


def _free_name(name: str, tensors: dict[str, Tensor]) -> str:
    candidate, i = name, 1
    while candidate in tensors:
        candidate, i = f"{name}_{i}", i + 1
    return candidate
