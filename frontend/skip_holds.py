"""Holds on a skip connection of a model program: extra buffers for a move whose consumer
waits for a longer path from the same producer (a residual added after a layer norm, two
GEMMs and a gelu).

In one fabric program a move writes its consumer's operand in place, so the samples on a
move's way are at most two: one in the producer's output, one in the consumer's operand.
A residual's move must hold its samples for as long as the other path into the add takes,
so with two buffers the whole pipeline runs at that path's latency per sample, not at its
slowest stage's rate (the demo's GPT block, its second residual waiting for a layer norm,
two GEMMs and a gelu: 3,019 cycles per sample by parts, 2,169 with the two holds sized
here, against its slowest stage's 1,994 in the timeline). A hold is a copy of the
operand's words on the consumer's PEs (its symbols laid out as the operand's): the move
writes hold 1, a relay (local copies on each PE, no route) moves hold j into hold j + 1
and the last hold into the operand, each when its reader has taken the previous sample.
k holds let k + 2 samples be on the move's way.

`hold_counts` sizes them from the plans: for a move from P to C, L the longest predicted
path from P's end to C's start through other stages (kernel models plus the moves'
estimates), T the predicted period (`color_fit.predicted_period`); ceil(L / T) - 1 holds
(at most `MOST_HOLDS`), none where no other path joins.
"""

from __future__ import annotations

import dataclasses
import math

from fabric import Program, Tile
from fabric.kernels import WordMap, plan_redistribution
from frontend.color_fit import predicted_period
from frontend.errors import PlacementError
from frontend.runtime import PreparedStage

MOST_HOLDS = 4  # holds on one move at most (each as large as the operand it feeds)
HOLD = "hold"  # prefix of a hold's symbols: "hold1_abuf" holds symbol "abuf" of hold 1


@dataclasses.dataclass(frozen=True)
class Holds:
    """The holds of one move into operand `operand` (its source `source`) of stage
    `consumer`: `maps[j]` hold j + 1's words (the operand's layout over its own symbols),
    `relays[j]` the plan moving hold j + 1 into hold j + 2, the last into the operand."""

    consumer: str
    operand: str
    source: int
    maps: tuple[WordMap, ...]
    relays: tuple  # Redistribution per relay

    def program(self, j: int, config) -> Program:
        """Hold j + 1 as a part of its own: its symbols on the consumer's PEs."""
        return map_program(config, self.maps[j], "hold")


def map_program(config, wmap: WordMap, tile: str) -> Program:
    """A program of one tile named `tile` on `wmap`'s PEs declaring its symbols (each
    as long as its slots, in its dtype): a part that only holds words (a hold, a home)."""
    holder = Tile(tile)
    for name, slots in wmap.symbols.items():
        holder.symbol(name, (wmap.dtypes or {}).get(name, "f32"), slots.shape[2])
    program = Program(config)
    program.place(holder, wmap.rect)
    return program


def hold_symbol(j: int, symbol: str) -> str:
    """Hold j's copy of the operand's symbol `symbol` ("hold<j>_<symbol>")."""
    return f"{HOLD}{j}_{symbol}"


def hold_map(dst: WordMap, j: int) -> WordMap:
    """`dst` (an operand's map) over hold j's symbols (`hold_symbol`)."""
    return WordMap(dst.shape, dst.rect,
                   {hold_symbol(j, k): a for k, a in dst.symbols.items()},
                   {hold_symbol(j, k): v for k, v in (dst.dtypes or {}).items()})


def make_holds(config, consumer: str, operand: str, source: int, dst: WordMap, count: int
               ) -> Holds:
    """`count` holds before operand map `dst`, with their relays' plans. Raises
    PlacementError when a hold and the operand do not fit a PE's SRAM together."""
    maps = tuple(hold_map(dst, j) for j in range(1, count + 1))
    ends = (*maps, dst)
    try:
        relays = tuple(plan_redistribution(config, ends[j], ends[j + 1])
                       for j in range(count))
    except ValueError as exc:
        raise PlacementError(f"the pipelined model does not fit one fabric program: a hold "
                             f"of operand {operand!r} of stage {consumer!r} (a copy of its "
                             f"words beside them, for a sample on its way) does not fit its "
                             f"PEs: {exc}") from exc
    return Holds(consumer, operand, source, maps, relays)


def hold_counts(prepared: list[PreparedStage], most: int = MOST_HOLDS
                ) -> dict[tuple[str, str, int], int]:
    """{(consumer stage, operand, source index): holds} for the moves of `prepared` (in
    graph order) that a longer path from their producer joins (module docstring)."""
    index = {p.stage.name: i for i, p in enumerate(prepared)}
    edges = {p.stage.name: [(src.tensor.name, src.plan.estimate_cycles, (op, i))
                            for op, sources in p.sources.items()
                            for i, src in enumerate(sources)
                            if src.plan is not None and src.tensor.name in index]
             for p in prepared}
    period = max(predicted_period(prepared), 1)
    counts = {}
    for p in prepared:
        for producer, _, (operand, i) in edges[p.stage.name]:
            reach = _longest_from(producer, prepared[index[producer]:], edges)
            other = [reach[u] + cycles for u, cycles, key in edges[p.stage.name]
                     if u in reach and key != (operand, i)]
            if other:
                need = math.ceil(max(other) / period) - 1
                if need > 0:
                    counts[(p.stage.name, operand, i)] = min(most, need)
    return counts


def _longest_from(start: str, later: list[PreparedStage], edges) -> dict[str, int]:
    """{stage: the longest predicted path from `start`'s end to that stage's end} over
    `later` (`start` first, graph order), for the stages `start` reaches."""
    reach = {start: 0}
    for p in later[1:]:
        ins = [reach[u] + cycles for u, cycles, _ in edges[p.stage.name] if u in reach]
        if ins:
            reach[p.stage.name] = max(ins) + p.kernel.model_cycles
    return reach
