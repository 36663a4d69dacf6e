"""A pipelined model as one fabric program: every stage's kernel and every move between
stages merged (`fabric.merge_programs`) with the colors assigned over the whole graph
(`frontend.graph_colors`), and a call run in it.

Parts: stage i's kernel is part "s<i>" (its program on the whole fabric at its tile); round
k of the j-th move is part "m<j>r<k>" (its program on the move's window, placed at the
window's corner). A move reads its producer's output and writes its consumer's operand in
place: the words its programs hold for its source are the producer part's symbols and
those for its destination the consumer part's (`Redistribution.end_symbols`,
`Part.shared`), so no copy happens outside the fabric program.

Building the program checks what one program per model needs beyond the colors: each PE's
merged tile (its kernel's symbols plus those of every move round crossing it) within its
SRAM, registers and task ids; a model that does not fit is refused with a PlacementError
naming the stage or move and the resource.

Running (`ModelProgram.run`): one simulator holds the whole call. Weights and constants are
loaded once per model program (each kernel loaded as on its own, its memory copied in; every
call starts from that memory, `loaded_memory`), the host writes the
inputs into the operands they feed, then the parts are started by the host in the graph's
order, each run until the fabric is quiet: a stage's incoming moves, then its kernel. Every
part therefore computes what it computes alone, in about its cycles alone (flows sharing
a link take turns in the order of their colors, renamed by the graph's assignment), which
`ModelProgram.run` returns per part; `overlap=True` starts each part as soon as the parts
it reads have finished instead (the host looks every POLL_CYCLES cycles for parts with no
work left, `fabric.PartMap`), independent parts at once. Kernels started by the data that
reaches them,
and samples streamed through the program, are the next steps; the pipelined timeline
(`frontend.schedule`) places these parts' cycles in time meanwhile. A call that does not
finish raises StageRunError naming the parts running and those stuck, with their PEs
(`fabric.stuck_parts`), stages by FX node and moves by their ends.

Not in the program: an embedding's per-call gathers (their moves follow each call's
indices) and moves from resident inputs; a model with them is refused.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from fabric import (
    BuildError,
    MergedProgram,
    Part,
    PartMap,
    RunError,
    Simulator,
    merge_programs,
    stuck_parts,
)
from fabric import build as build_tables
from fabric.kernels import WordMap, read_words, write_words
from frontend.errors import PlacementError, StageRunError
from frontend.graph_colors import GraphColors, move_label, stage_label
from frontend.runtime import PreparedStage, input_words
from frontend.sources import describe

POLL_CYCLES = 8  # how often a call with overlap looks for parts that have finished


@dataclasses.dataclass(frozen=True)
class MovePart:
    """The rounds (part names, in order) of one move: `tensor` into operand `operand` of
    stage `consumer`, from `source` of that operand's sources."""

    consumer: str
    operand: str
    source: int
    tensor: str
    rounds: tuple[str, ...]


@dataclasses.dataclass
class ProgramRun:
    """One call of a model program: `words` {stage: its output's words}; `spans` {part:
    (the cycle the host started it, the cycle it was seen finished)}, cycles counted from
    the call's start; `cycles` until the fabric was quiet after the last part."""

    words: dict[str, dict[str, np.ndarray]]
    spans: dict[str, tuple[int, int]]
    cycles: int

    @property
    def part_cycles(self) -> dict[str, int]:
        """{part: the cycles from its start to its end}: alone with `overlap=False`; with
        `overlap=True` beside the parts running at once, and to the poll that saw it end."""
        return {name: end - start for name, (start, end) in self.spans.items()}


@dataclasses.dataclass
class ModelProgram:
    """One program for a pipelined model's call (module docstring).

    order: every part in graph order (a stage's incoming moves' rounds, then its kernel);
    after: {part: the parts whose results it reads} (a move's first round its producer's
        kernel, a later round the one before, a kernel its incoming moves' last rounds).
    """

    merged: MergedProgram
    stages: dict[str, str]  # stage name -> its kernel's part name
    moves: list[MovePart]
    prepared: list[PreparedStage]
    order: list[str]
    after: dict[str, frozenset]
    round_tasks: dict[str, tuple[str, ...]]  # a move round's part -> the tasks it launches
    _loaded: np.ndarray | None = dataclasses.field(default=None, repr=False)

    @property
    def program(self):
        return self.merged.program

    def loaded_memory(self) -> np.ndarray:
        """SRAM (rows, cols, words) with the weights and constants in place: loaded on the
        first call, every call starts from it (weights are loaded once per model)."""
        if self._loaded is None:
            self._loaded = _load_weights(self)
        return self._loaded

    def run(self, inputs: dict[str, torch.Tensor], max_cycles: int,
            overlap: bool = False, poll: int = POLL_CYCLES) -> ProgramRun:
        """One call on `inputs` (the user inputs by graph name, as `runtime.Execution`
        takes them). overlap False: one part at a time in graph order, each run until the
        fabric is quiet; True: every part started as soon as the parts it reads have
        finished (`after`), the host looking every `poll` cycles for parts with no work
        left (`fabric.PartMap.at_work`), so independent parts run at once and contend for
        PEs and links, and a part starts at most `poll` - 1 cycles after its inputs are
        complete.

        Raises StageRunError when the call does not finish (a deadlock, or `max_cycles`
        cycles in all), naming the parts running and those stuck."""
        sim = Simulator(self.merged.program.config, self.merged.program)
        sim.host_sram()[...] = self.loaded_memory()
        for p in self.prepared:  # the host writes the user inputs where they are read
            mine = self.merged.part(self.stages[p.stage.name])
            for src in (s for sources in p.sources.values() for s in sources):
                if src.plan is None:
                    write_words(sim, _renamed(src.dst, mine),
                                {mine.local(k): w
                                 for k, w in input_words(src, inputs).items()},
                                mapped_only=True)
        kernels = {self.stages[p.stage.name]: p.kernel for p in self.prepared}
        parts = PartMap(self.merged) if overlap else None
        begin = int(sim.state.cycle)
        spans: dict[str, tuple[int, int]] = {}
        running: dict[str, int] = {}  # part -> its start
        while len(spans) < len(self.order):
            ready = [n for n in self.order if n not in spans and n not in running
                     and self.after[n] <= spans.keys()]
            for name in ready if overlap else ready[:1]:
                view = self.merged.view(sim, name)
                if name in kernels:
                    kernels[name].launch(view)
                else:
                    for task in self.round_tasks[name]:
                        view.launch(task)
                running[name] = int(sim.state.cycle) - begin
            left = max_cycles - (int(sim.state.cycle) - begin)
            try:
                sim.run(max_cycles=min(poll, left) if overlap else left, progress=False,
                        raise_on_limit=not overlap or left <= poll)
            except RunError as exc:
                raise StageRunError(self._failure(sim, list(running), exc)) from exc
            now = int(sim.state.cycle) - begin
            busy = parts.at_work(sim) if overlap else {}
            for name in [n for n in running if n not in busy]:
                spans[name] = (running.pop(name), now)
        words = {}
        for p in self.prepared:
            mine = self.merged.part(self.stages[p.stage.name])
            got = read_words(sim, _renamed(p.out_map, mine))
            words[p.stage.name] = {k: got[mine.local(k)] for k in p.out_map.symbols}
        return ProgramRun(words, spans, int(sim.state.cycle) - begin)

    def _failure(self, sim: Simulator, started: list[str], exc: RunError) -> str:
        """The engine's message on a stopped call, led by the parts it ran (stages by FX
        node and source line, moves by their ends) and those stuck, with their PEs."""
        what = part_descriptions(self.prepared, self.moves, self.stages)
        lines = ["the model program did not finish; parts running: "
                 + "; ".join(f"{n} = {what[n]}" for n in started)]
        stuck = stuck_parts(self.merged, sim)
        if stuck:
            lines.append("stuck in:")
            lines += [f"  {what.get(n, n)} at PE{'s' if len(pes) > 1 else ''} "
                      + ", ".join(map(str, pes[:8])) + (" ..." if len(pes) > 8 else "")
                      for n, pes in stuck.items()]
        return "\n".join(lines + [str(exc)])


def _load_weights(program: ModelProgram) -> np.ndarray:
    """The program's SRAM (rows, cols, words) with every kernel's weights and constants
    loaded: each kernel loaded alone (its `load`, runtime operands as zeros), its memory
    copied into the merged program's."""
    config = program.merged.program.config
    sim = Simulator(config, program.merged.program)
    for p in program.prepared:
        alone = Simulator(config, p.kernel.program)
        zeros = {op.name: np.zeros(op.shape, np.float32) for op in p.stage.operands
                 if op.const is None}
        p.kernel.load(alone, {**zeros, **p.consts})
        program.merged.copy_memory(program.stages[p.stage.name], alone, sim)
    return sim.host_sram().copy()


def _renamed(wmap: WordMap, part: Part) -> WordMap:
    """`wmap` (absolute, over a kernel's own symbol names) over the part's merged names."""
    return WordMap(wmap.shape, wmap.rect, {part.local(k): a for k, a in wmap.symbols.items()},
                   {part.local(k): v for k, v in (wmap.dtypes or {}).items()})


def build_model_program(prepared: list[PreparedStage], colors: GraphColors
                        ) -> ModelProgram:
    """Merge every part of a pipelined model into one program on its fabric and build it.

    Raises PlacementError when a part is not static (an embedding's per-call gather, a
    move from a resident input), when the graph's colors fall short (a model compiled
    with colors="report"), or when the merged program does not build (a PE's SRAM,
    registers or task ids), naming the stages and moves."""
    config = colors.assignment.config
    for p in prepared:
        gathers = [op.name for op in p.stage.operands if op.gather is not None]
        if gathers:
            raise PlacementError(f"{describe(p.stage.node)}: stage {p.stage.name!r} gathers "
                                 f"operand {gathers[0]!r} by each call's indices, which one "
                                 "fabric program cannot hold (its moves follow the indices)")
    if not colors.assignment.ok:
        raise PlacementError("the pipelined model does not fit one fabric program: "
                             + colors.assignment.shortfall())
    by_stage = {p.stage.name: p for p in prepared}
    stages = {p.stage.name: f"s{i}" for i, p in enumerate(prepared)}
    kernels = {p.stage.name: Part(stages[p.stage.name], p.kernel.program,
                                  colors=colors.assignment.colors_of(stage_label(p)))
               for p in prepared}
    parts = list(kernels.values())
    moves: list[MovePart] = []
    order: list[str] = []
    after: dict[str, frozenset] = {}
    round_tasks: dict[str, tuple[str, ...]] = {}
    for p in prepared:
        incoming = []
        for operand, sources in p.sources.items():  # the order of graph_colors.graph_parts
            for i, src in enumerate(sources):
                if src.plan is None:
                    continue
                producer = by_stage.get(src.tensor.name)
                if producer is None:
                    raise PlacementError(f"{describe(p.stage.node)}: operand {operand!r} of "
                                         f"stage {p.stage.name!r} comes from resident input "
                                         f"{src.tensor.name!r}, which no stage of the program "
                                         "holds")
                label = move_label(src.tensor.name, by_stage, p, operand)
                ends = {"src": kernels[producer.stage.name], "dst": kernels[p.stage.name]}
                shared = {sym: ends[end].local(name)
                          for sym, (end, name) in src.plan.end_symbols.items()}
                names = []
                for k, rnd in enumerate(src.plan.rounds):
                    names.append(f"m{len(moves)}r{k}")
                    order.append(names[-1])
                    after[names[-1]] = frozenset(
                        [names[-2] if k else kernels[producer.stage.name].name])
                    round_tasks[names[-1]] = tuple(rnd.tasks)
                    round_label = label + (f", round {k}" if len(src.plan.rounds) > 1 else "")
                    parts.append(Part(names[-1], rnd.program, src.plan.window.corner,
                                      colors.assignment.colors_of(round_label), shared))
                moves.append(MovePart(p.stage.name, operand, i, src.tensor.name, tuple(names)))
                incoming += names[-1:]
        order.append(stages[p.stage.name])
        after[stages[p.stage.name]] = frozenset(incoming)
    try:
        merged = merge_programs(config, parts)
        build_tables(config, merged.program)
    except BuildError as exc:
        raise PlacementError("the pipelined model does not fit one fabric program: "
                             f"{_named(exc, prepared, moves, stages)}") from exc
    return ModelProgram(merged, stages, moves, prepared, order, after, round_tasks)


def _named(exc: BuildError, prepared: list[PreparedStage], moves: list[MovePart],
           stages: dict[str, str]) -> str:
    """The build's message with the parts it names (s3, m2r0) given as stages and moves."""
    text = str(exc)
    found = [f"{part} = {what}"
             for part, what in part_descriptions(prepared, moves, stages).items()
             if f"{part}." in text]
    return text + ("\nparts: " + "; ".join(found) if found else "")


def part_descriptions(prepared: list[PreparedStage], moves: list[MovePart],
                      stages: dict[str, str]) -> dict[str, str]:
    """{part name (s3, m2r0): "stage 'addmm' (FX node ..., line ...)" or "move 'a' -> 'b'
    operand 'x' round 1"}."""
    names = {part: f"stage {name!r} ({describe(p.stage.node)})"
             for (name, part), p in zip(stages.items(), prepared)}
    for m in moves:
        for k, part in enumerate(m.rounds):
            names[part] = (f"move {m.tensor!r} -> {m.consumer!r} operand {m.operand!r}"
                           + (f" round {k}" if len(m.rounds) > 1 else ""))
    return names
