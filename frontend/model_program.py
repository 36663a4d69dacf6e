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
naming the stage or move and the resource. Where the moves' chain counters (a register per
chain) would overfill a PE's registers beside its kernel's, the moves with a tile there
count in memory instead and share one scratch register (`fabric.kernels.round_programs`,
counters "memory": two cycles more per activation of a chain).

Running (`frontend.program_run`): one simulator holds a call, or a stream of samples.
Weights and constants are loaded once per model program (each kernel loaded as on its
own, its memory copied in; every call starts from that memory, `loaded_memory`); the host
writes a sample's inputs into the operands they feed (`write_inputs`), starts the parts
(`launch`: a kernel's entry tasks, a move round's chains), reads each kernel's output
(`read_output`) and, before a part takes another sample, puts it back as loaded (`rearm`,
`fabric.restore_part`, less the operands moves have written: `moved_in`). What may start
when is `after` (what a part reads) and `reuses` (what must be done with the previous
sample before a part overwrites it). A call that does not finish raises StageRunError
naming the parts running and those stuck, with their PEs (`failure`,
`fabric.stuck_parts`), stages by FX node and moves by their ends.

Gates (`build_model_program(..., gated=True)`, start "data" of `frontend.program_run`;
`frontend.program_gates`): a kernel that moves deliver to is started by its data, in the
fabric, through a word per PE that the deliveries count down; the host puts it back
(`reset_gate`) and counts its own arm off (`arm_gate`).

Holds (`frontend.skip_holds`, `build_model_program(..., holds=)`): a move that a longer
path from its producer joins (a residual) writes hold 1, a copy of its consumer operand's
words on the consumer's PEs, and relays (local copies) carry the words hold by hold to the
operand, so the move has more samples on its way than its two ends hold.

Input buffers (`build_model_program(..., input_buffers=True)`, `InputBuffer`): each user
input gets a hold on its kernel's PEs (part "i<j>h1": the operand's symbols, or its packed
words where the operand holds an element in several slots of a PE, `frontend.host_writes`)
that the host writes, and a relay (part "i<j>relay1", local copies) that carries the words
into the operand's slots once the kernel is done with the sample before, its chains
counting into the kernel's gate; so the host may write a sample's input while the kernel
computes the one before (the host link in the stream, `frontend.program_run`, "Host I/O").

Resident inputs (`CompiledModel.make_resident`: weights that live in PE memory): each a
part holding its home's symbols, its words placed there before a call
(`place_resident`), its moves reading them as a move reads a producer's output.

Not in the program: an embedding's per-call gathers (their moves follow each call's
indices; `frontend.compile(..., lookups="onehot")` looks the rows up on the fabric
instead); a model with them is refused.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import torch

from fabric import (
    BuildError,
    MergedProgram,
    Part,
    RunError,
    Simulator,
    host_io_cycles,
    merge_programs,
    restore_part,
    stuck_parts,
)
from fabric import build as build_tables
from fabric.kernels import (
    WordMap,
    read_words,
    write_words,
)
from frontend.errors import PlacementError
from frontend.graph_colors import GraphColors, move_label, stage_label
from frontend.program_fit import crowded_registers, lighter_holds, part_pes
from frontend.program_gates import HOST_ARM, Gate, gate_program, kernel_gates, launched
from frontend.program_parts import (
    InputBuffer,
    MovePart,
    input_buffer_parts,
    named_parts,
    part_descriptions,
    resident_program,
    round_parts,
)
from frontend.runtime import PreparedStage, Source, input_words
from frontend.skip_holds import Holds, hold_counts, hold_symbol, make_holds
from frontend.sources import describe


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
    moved_in: frozenset = frozenset()  # merged names of the kernels' symbols moves write
    # a kernel part started by its data -> its gate (module docstring, "Gates")
    gates: dict[str, Gate] = dataclasses.field(default_factory=dict)
    inputs: tuple[InputBuffer, ...] = ()  # the user inputs' second buffers, if built
    # resident input -> (its part, its home map): its words live in PE memory there
    resident: dict[str, tuple[str, WordMap]] = dataclasses.field(default_factory=dict)
    _loaded: np.ndarray | None = dataclasses.field(default=None, repr=False)
    _load_cycles: int = dataclasses.field(default=0, repr=False)

    @property
    def program(self):
        return self.merged.program

    def loaded_memory(self) -> np.ndarray:
        """SRAM (rows, cols, words) with the weights and constants in place: loaded on the
        first call, every call starts from it (weights are loaded once per model)."""
        if self._loaded is None:
            self._loaded, self._load_cycles = _load_weights(self)
        return self._loaded

    def load_cycles(self) -> int:
        """Host cycles of loading every kernel's weights and constants, once per model
        (each kernel's load as a call run apart charges it)."""
        self.loaded_memory()
        return self._load_cycles

    def simulator(self) -> Simulator:
        """A simulator of the program with the weights and constants loaded."""
        sim = Simulator(self.merged.program.config, self.merged.program)
        sim.host_sram()[...] = self.loaded_memory()
        return sim

    @functools.cached_property
    def writers(self) -> dict[str, list[tuple[Part, WordMap, Source, PreparedStage]]]:
        """{part whose arm the host writes user inputs at: [(the part written, its map
        of the words, the input's source, its stage)]}: a kernel, its inputs that have no
        second buffer; an input buffer's relay, its input (into the buffer's hold: the
        operand's symbols under `hold_symbol` names, or the packed ones)."""
        buffered = {(b.consumer, b.operand, b.source): b for b in self.inputs}
        out: dict[str, list] = {}
        for p in self.prepared:
            kernel = self.stages[p.stage.name]
            for operand, sources in p.sources.items():
                for i, src in enumerate(sources):
                    if src.plan is not None:
                        continue
                    b = buffered.get((p.stage.name, operand, i))
                    into, wmap = ((self.merged.part(b.hold), b.map) if b
                                  else (self.merged.part(kernel), src.dst))
                    out.setdefault(b.relay if b else kernel, []).append((into, wmap, src, p))
        return out

    def place_resident(self, sim: Simulator, words: dict[str, dict[str, np.ndarray]]) -> None:
        """Every resident input's words ({input name: {symbol: words}}, as a
        `runtime.ResidentTensor` holds them) into its part at its home: they live in PE
        memory, so no host transfer is charged (as a call run apart reads them there)."""
        missing = sorted(set(self.resident) - set(words))
        if missing:
            raise ValueError(f"resident inputs {missing} need their words")
        for name, (part_name, home) in self.resident.items():
            part = self.merged.part(part_name)
            write_words(sim, _renamed(home, part),
                        {part.local(k): w for k, w in words[name].items()})

    def write_inputs(self, sim: Simulator, name: str, inputs: dict[str, torch.Tensor]
                     ) -> None:
        """The host writes the user inputs (by graph name, as `runtime.Execution` takes
        them) that part `name` of `writers` takes: into a kernel's operands, or an input
        buffer's hold."""
        for into, wmap, src, _ in self.writers.get(name, ()):
            words = input_words(wmap, inputs[src.tensor.name])
            write_words(sim, _renamed(wmap, into),
                        {into.local(k): w for k, w in words.items()}, mapped_only=True)

    def write_cycles(self, name: str) -> int:
        """Host-link cycles of one sample's writes at part `name`'s arm (`writers`),
        `fabric.host_io_cycles` of each input, as a call run apart charges them."""
        config = self.merged.program.config
        return sum(host_io_cycles(config, p.rect, wmap.widest_sram_words)
                   for _, wmap, _, p in self.writers.get(name, ()))

    def rearm(self, sim: Simulator, name: str) -> None:
        """Part `name` back as loaded, to run on another sample (`fabric.restore_part`):
        its registers, blocked bits and symbols, but the operands moves have written (a
        gated kernel's gate apart: `reset_gate`, `arm_gate`)."""
        restore_part(sim, self.merged, name, self.loaded_memory(), keep=self.moved_in)

    def reset_gate(self, sim: Simulator, kernel: str) -> None:
        """Gated kernel `kernel`'s gate back to a whole sample's count (its deliveries and
        the host's arm): once the kernel has finished a sample, before any delivery of the
        next."""
        restore_part(sim, self.merged, self.gates[kernel].part, self.loaded_memory())

    def arm_gate(self, sim: Simulator, kernel: str, pes=None
                 ) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
        """The host's count off gated kernel `kernel`'s gate (on `pes`, default all its
        gated PEs), once it has put the kernel back as loaded for a sample: (the PEs where
        that was the last count, their data all in already, where the host starts the
        kernel itself; the PEs left for a later look). Elsewhere the last delivery starts
        it in the fabric. A PE whose CE runs a task is left: a delivering chain reads,
        decrements and writes the word within one activation, and a count the host took
        between its read and its write would be lost (the chain writing back its own
        decrement over the host's), the kernel never started there."""
        # the state first: reading it hands the host's SRAM copy to the device
        running = np.asarray(sim.state.task)  # (rows, cols): a PE's task, -1 when idle
        sram = sim.host_sram()
        last, later = set(), set()
        for pe, address in self.gates[kernel].addresses.items():
            if pes is not None and pe not in pes:
                continue
            if running[pe] >= 0:
                later.add(pe)
                continue
            sram[(*pe, address)] -= 1
            if sram[(*pe, address)] == 0:
                last.add(pe)
        return last, later

    def gate_words(self) -> dict[str, list[tuple[tuple[int, int], int]]]:
        """{gated kernel: [(PE, the address of its gate's word there)]}: a gate has opened
        on a PE where its word is 0, every delivery in (the kernel's entry tasks activated
        there by the last of them); the host reads them in its looks
        (`fabric.PartMap.watch`), without host I/O cycles (its bookkeeping, not a
        transfer)."""
        return {name: list(gate.addresses.items()) for name, gate in self.gates.items()}

    def launch(self, sim: Simulator, name: str) -> None:
        """Start part `name` on all its PEs: a kernel's entry tasks, a move round's chains."""
        self._start(self.merged.view(sim, name), name)

    def _start(self, view, name: str) -> None:
        stage = self._stage_of.get(name)
        if stage is not None:
            stage.kernel.launch(view)
        else:
            for task in self.round_tasks[name]:
                view.launch(task)

    def entries(self, name: str) -> dict[tuple[int, int], tuple[str, ...]]:
        """{PE (row, col) of the merged fabric: the merged names of the tasks `launch`
        starts there} of part `name`."""
        return launched(self.merged.part(name), lambda view: self._start(view, name))

    def read_output(self, sim: Simulator, kernel: str) -> dict[str, np.ndarray]:
        """{symbol: words} of kernel part `kernel`'s output, as `runtime` reads a stage's."""
        p = self._stage_of[kernel]
        mine = self.merged.part(kernel)
        got = read_words(sim, _renamed(p.out_map, mine))
        return {k: got[mine.local(k)] for k in p.out_map.symbols}

    @functools.cached_property
    def _stage_of(self) -> dict[str, PreparedStage]:
        """{kernel part: its prepared stage}."""
        return {self.stages[p.stage.name]: p for p in self.prepared}

    def reuses(self) -> dict[str, frozenset]:
        """{part: the parts whose previous sample must have finished before it starts on
        the next}, besides itself: a move round writes its consumer's operand, so that
        kernel must be done with it (and the rounds reading the kernel's output, where the
        kernel writes that over the operand: a layer norm in place); a kernel writes its
        output, so every round reading it must be done with it."""
        out: dict[str, set] = {name: set() for name in self.order}
        readers_of = {stage: {r for m in self.moves if m.tensor == stage for r in m.rounds}
                      for stage in self.stages}  # the rounds reading a stage's output
        for m in self.moves:
            producer = self.stages.get(m.tensor)
            # each writer's buffer is read by the next: hold 1 by relay 1, ..., the
            # operand by the consumer
            writers = [m.rounds, *[(relay,) for relay in m.relays]]
            readers = [*m.relays, self.stages[m.consumer]]
            for parts, reader in zip(writers, readers):
                for r in parts:
                    out[r].add(reader)
            # a kernel that writes its output over this operand (in place): the operand's
            # writers wait for the rounds reading that output too
            p = self._stage_of[self.stages[m.consumer]]
            if set(p.sources[m.operand][m.source].dst.symbols) & set(p.out_map.symbols):
                for r in writers[-1]:
                    out[r] |= readers_of[m.consumer]
            for r in m.rounds:
                if producer is not None:
                    out[producer].add(r)
        for b in self.inputs:  # a relay writes the operand: its kernel done with it
            kernel = self.stages[b.consumer]
            out[b.relay].add(kernel)
            p = self._stage_of[kernel]
            if set(p.sources[b.operand][b.source].dst.symbols) & set(p.out_map.symbols):
                out[b.relay] |= readers_of[b.consumer]
        return {name: frozenset(v) for name, v in out.items()}

    def failure(self, sim: Simulator, started: list[tuple[str, int | None]],
                exc: RunError) -> str:
        """The engine's message on a stopped call, led by the parts it ran (`started`:
        (part name, its sample, or None in a call of one sample); stages by FX node and
        source line, moves by their ends) and those stuck, with their PEs."""
        what = part_descriptions(self.prepared, self.moves, self.stages, self.inputs,
                                 self.resident)
        lines = ["the model program did not finish; parts running: "
                 + "; ".join(f"{n}{'' if s is None else f' (sample {s})'} = {what[n]}"
                             for n, s in started)]
        stuck = stuck_parts(self.merged, sim)
        if stuck:
            lines.append("stuck in:")
            lines += [f"  {what.get(n, n)} at PE{'s' if len(pes) > 1 else ''} "
                      + ", ".join(map(str, pes[:8])) + (" ..." if len(pes) > 8 else "")
                      for n, pes in stuck.items()]
        return "\n".join(lines + [str(exc)])


def _load_weights(program: ModelProgram) -> tuple[np.ndarray, int]:
    """(the program's SRAM (rows, cols, words) with every kernel's weights and constants
    loaded, the host cycles of those loads): each kernel loaded alone (its `load`, runtime
    operands as zeros), its memory copied into the merged program's."""
    config = program.merged.program.config
    sim = Simulator(config, program.merged.program)
    cycles = 0
    for p in program.prepared:
        alone = Simulator(config, p.kernel.program)
        cycles += p.load_constants(alone)
        program.merged.copy_memory(program.stages[p.stage.name], alone, sim)
    sram = sim.host_sram()
    for gate in program.gates.values():
        for pe, address in gate.addresses.items():
            sram[(*pe, address)] = gate.waits[pe] + HOST_ARM
    return sram.copy(), cycles


def _renamed(wmap: WordMap, part: Part) -> WordMap:
    """`wmap` (absolute, over a kernel's own symbol names) over the part's merged names."""
    return WordMap(wmap.shape, wmap.rect, {part.local(k): a for k, a in wmap.symbols.items()},
                   {part.local(k): v for k, v in (wmap.dtypes or {}).items()})


def build_model_program(prepared: list[PreparedStage], colors: GraphColors,
                        gated: bool = False, holds: str | dict = "auto",
                        input_buffers: bool = False,
                        resident: dict[str, WordMap] | None = None) -> ModelProgram:
    """Merge every part of a pipelined model into one program on its fabric and build it.
    gated: every kernel with incoming moves gets a gate (module docstring, "Gates"), so that
    its data starts it on each PE (where the host's arm is not its last count).
    holds: the holds of each skip connection's move (`frontend.skip_holds`): "auto" as
    `hold_counts` sizes them, left out where a hold does not fit its operand's PEs beside
    it, and fewer where the merged tiles (kernel, holds, move rounds) overfill a PE's SRAM;
    or {(consumer stage, operand, source index): count} (such a hold refused then,
    PlacementError).
    input_buffers: every user input gets a second buffer (`InputBuffer`, module
    docstring), so the host may write a sample's input while its kernel computes the one
    before (the host link in the stream, `frontend.program_run`).
    resident: {input name: its home map} of the inputs that live in PE memory
    (`CompiledModel.make_resident`): each a part of its own holding the home's symbols
    (part "r<j>"), which its moves read as a move reads its producer's output; its words
    are placed there before a call (`ModelProgram.place_resident`).

    Raises PlacementError when a part is not static (an embedding's per-call gather, a
    move from a resident input without its home in `resident`), when the graph's colors
    fall short (a model compiled with colors="report"), or when the merged program does
    not build (a PE's SRAM, registers or task ids), naming the stages and moves."""
    counts = hold_counts(prepared) if holds == "auto" else dict(holds)
    return _build(prepared, colors, gated, counts, holds == "auto", input_buffers,
                  dict(resident or {}))


def _build(prepared: list[PreparedStage], colors: GraphColors, gated: bool,
           counts: dict, fit_holds: bool, input_buffers: bool,
           resident: dict[str, WordMap]) -> ModelProgram:
    """`build_model_program` with the holds `counts` {(consumer, operand, source): count};
    fit_holds: leave out a hold that does not fit its operand's PEs beside it, and where
    merged tiles overfill a PE's SRAM, build again with fewer holds on that PE
    (`frontend.program_fit.lighter_holds`)
    until none of them is on an overfull PE (then the build's own error, if any)."""
    config = colors.assignment.config
    for p in prepared:
        gathers = [op.name for op in p.stage.operands if op.gather is not None]
        if gathers:
            raise PlacementError(f"{describe(p.stage.node)}: stage {p.stage.name!r} gathers "
                                 f"operand {gathers[0]!r} by each call's indices, which one "
                                 "fabric program cannot hold (its moves follow the indices); "
                                 "compile with lookups=\"onehot\" to look the rows up on the "
                                 "fabric")
    if not colors.assignment.ok:
        raise PlacementError("the pipelined model does not fit one fabric program: "
                             + colors.assignment.shortfall())
    by_stage = {p.stage.name: p for p in prepared}
    stages = {p.stage.name: f"s{i}" for i, p in enumerate(prepared)}
    kernels = {p.stage.name: Part(stages[p.stage.name], p.kernel.program,
                                  colors=colors.assignment.colors_of(stage_label(p)))
               for p in prepared}
    parts = list(kernels.values())
    homes = {name: Part(f"r{j}", resident_program(config, home))
             for j, (name, home) in enumerate(resident.items())}
    parts += homes.values()
    held = {}
    for key, n in counts.items():
        if n > 0:
            try:
                held[key] = make_holds(config, *key,
                                       by_stage[key[0]].sources[key[1]][key[2]].dst, n)
            except PlacementError:
                if not fit_holds:
                    raise
                # the holds the plan chose do not fit beside the operand: the move goes
                # without them (fewer samples on its way, the words the same)
    # a user input's buffer is one hold, which the host writes instead of the move: its
    # packed words, which the relay unpacks (`frontend.host_writes`), or the operand's
    held_inputs = {(p.stage.name, operand, i): (
                       Holds(p.stage.name, operand, i, (src.unpack.src,), (src.unpack,))
                       if src.unpack is not None
                       else make_holds(config, p.stage.name, operand, i, src.dst, 1))
                   for p in prepared for operand, sources in p.sources.items()
                   for i, src in enumerate(sources)
                   if src.plan is None and input_buffers}
    gates, gate_entries = (kernel_gates(prepared, kernels, {**held, **held_inputs}) if gated
                           else ({}, {}))
    buffers: list[InputBuffer] = []
    moves: list[MovePart] = []
    order: list[str] = []
    after: dict[str, frozenset] = {}
    round_tasks: dict[str, tuple[str, ...]] = {}
    moved_in: set[str] = set()
    # (where a move's round parts begin in `parts`, how many, the same with its chains'
    # counters in memory): for the PEs whose registers the moves' counters overfill
    remakes: list[tuple[int, int, Callable[[], list[Part]]]] = []
    hold_parts: dict[tuple, list[Part]] = {}  # the hold parts of each held move

    def add_rounds(*args) -> None:
        made = round_parts(*args)
        remakes.append((len(parts), len(made), functools.partial(round_parts, *args,
                                                                 counters="memory")))
        parts.extend(made)

    for p in prepared:
        incoming = []
        for operand, sources in p.sources.items():  # the order of graph_colors.graph_parts
            for i, src in enumerate(sources):
                if src.plan is None:  # the host writes it: into its buffer, if it has one
                    hold = held_inputs.get((p.stage.name, operand, i))
                    if hold is not None:
                        kernel = kernels[p.stage.name]
                        relay = input_buffer_parts(hold, src, kernel, f"i{len(buffers)}", config,
                                              gates, gate_entries, parts, buffers, add_rounds)
                        # the relay writes the operand: kept when the kernel is put back
                        moved_in |= {kernel.local(name) for end, name
                                     in hold.relays[0].end_symbols.values() if end == "dst"}
                        order.append(relay)
                        after[relay] = frozenset()  # what it reads, the host writes
                        round_tasks[relay] = tuple(hold.relays[0].rounds[0].tasks)
                        incoming.append(relay)
                    continue
                producer = by_stage.get(src.tensor.name)
                if producer is None and src.tensor.name not in homes:
                    raise PlacementError(f"{describe(p.stage.node)}: operand {operand!r} of "
                                         f"stage {p.stage.name!r} comes from resident input "
                                         f"{src.tensor.name!r}, which no stage of the program "
                                         "holds")
                label = move_label(src.tensor.name, by_stage, p, operand)
                hold = held.get((p.stage.name, operand, i))
                # where the move writes: the consumer's operand, or its first hold
                ends = {"src": (kernels[producer.stage.name] if producer is not None
                                else homes[src.tensor.name]), "dst": kernels[p.stage.name]}
                into = [Part(f"m{len(moves)}h{j + 1}", hold.program(j, config))
                        for j in range(len(hold.maps))] if hold else []
                parts += into
                hold_parts[(p.stage.name, operand, i)] = into
                shared = {sym: (into[0].local(hold_symbol(1, name)) if into and end == "dst"
                                else ends[end].local(name))
                          for sym, (end, name) in src.plan.end_symbols.items()}
                # the operand's words, written by the move or by its last relay (one map)
                moved_in |= {ends["dst"].local(name)
                             for end, name in src.plan.end_symbols.values() if end == "dst"}
                gate = gates.get(kernels[p.stage.name].name)
                entries = gate_entries.get(kernels[p.stage.name].name)
                relays = hold.relays if hold else ()
                names = [f"m{len(moves)}r{k}" for k in range(len(src.plan.rounds))]
                labels = [label + (f", round {k}" if len(names) > 1 else "")
                          for k in range(len(names))]
                # the chains delivering into the operand count into its gate: the move's,
                # or its last relay's
                add_rounds(names, src.plan, [colors.assignment.colors_of(x) for x in labels],
                           shared, None if relays else gate, entries)
                relayed = [f"m{len(moves)}relay{j + 1}" for j in range(len(relays))]
                for j, plan in enumerate(relays):
                    last = j == len(relays) - 1
                    dst_part = ends["dst"] if last else into[j + 1]
                    relay_shared = {sym: (into[j] if end == "src" else dst_part).local(name)
                                    for sym, (end, name) in plan.end_symbols.items()}
                    add_rounds(relayed[j:j + 1], plan, [{}], relay_shared,
                               gate if last else None, entries)
                chain = names + relayed
                chain_rounds = [*src.plan.rounds, *(plan.rounds[0] for plan in relays)]
                for k, (name, rnd) in enumerate(zip(chain, chain_rounds)):
                    order.append(name)
                    # a move from a resident input waits for nothing: its words are there
                    after[name] = frozenset([chain[k - 1]] if k else [
                        kernels[producer.stage.name].name] if producer is not None else [])
                    round_tasks[name] = tuple(rnd.tasks)
                moves.append(MovePart(p.stage.name, operand, i, src.tensor.name, tuple(names),
                                      tuple(relayed)))
                incoming += chain[-1:]
        order.append(stages[p.stage.name])
        after[stages[p.stage.name]] = frozenset(incoming)
    by_part = {k.name: k for k in kernels.values()}
    parts += [Part(g.part, gate_program(config, by_part[kernel])) for kernel, g in gates.items()]
    crowded = crowded_registers(config, parts)
    for at, n, remake in remakes:
        if any(pe in crowded for part in parts[at:at + n] for pe in part_pes(part)):
            parts[at:at + n] = remake()
    try:
        merged = merge_programs(config, parts)
        if fit_holds:
            lighter = lighter_holds(config, merged, counts, hold_parts)
            if lighter is not None:
                return _build(prepared, colors, gated, lighter, fit_holds, input_buffers,
                              resident)
        _, info = build_tables(config, merged.program)
    except BuildError as exc:
        named = named_parts(exc, prepared, moves, stages, tuple(buffers),
                            {name: (part.name, None) for name, part in homes.items()})
        raise PlacementError("the pipelined model does not fit one fabric program: "
                             f"{named}") from exc
    return ModelProgram(merged, stages, moves, prepared, order, after, round_tasks,
                        frozenset(moved_in), {k: g.placed(info) for k, g in gates.items()},
                        tuple(buffers), {name: (homes[name].name, home)
                                         for name, home in resident.items()})
