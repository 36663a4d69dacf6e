"""The parts of a model program besides its kernels (`frontend.model_program`): what
records a move's and a user input's buffer's parts (`MovePart`, `InputBuffer`), how a
move's rounds become parts on the merged fabric (`round_parts`, with gates and counters),
an input buffer's hold and relay (`input_buffer_parts`), and how parts are named to a user
(`part_descriptions`: stages by FX node, moves by their ends).
"""

from __future__ import annotations

import dataclasses

from fabric import BuildError, Part, Program
from fabric.kernels import GATE, SHARED_COUNTER, WordMap, round_programs
from frontend.program_gates import Gate
from frontend.runtime import PreparedStage, Source
from frontend.skip_holds import map_program
from frontend.sources import describe


@dataclasses.dataclass(frozen=True)
class MovePart:
    """The rounds (part names, in order) of one move: `tensor` into operand `operand` of
    stage `consumer`, from `source` of that operand's sources; with holds, the relays
    after them."""

    consumer: str
    operand: str
    source: int
    tensor: str
    rounds: tuple[str, ...]
    # the relays of its holds (`frontend.skip_holds`), in order: the rounds write hold 1,
    # relay j moves hold j into hold j + 1, the last into the operand
    relays: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class InputBuffer:
    """A second buffer for user input `tensor` into operand `operand` (its source `source`)
    of stage `consumer`: the host writes part `hold` (the operand's words or their packed
    form, `map` over its symbols) and relay part `relay` copies them into the operand once
    the kernel is done with the previous sample (`build_model_program(..., input_buffers=True)`)."""

    consumer: str
    operand: str
    source: int
    tensor: str
    hold: str
    relay: str
    map: WordMap


def resident_program(config, home: WordMap) -> Program:
    """A resident input's part: the symbols of its home map on the home's PEs."""
    return map_program(config, home, "resident")


def input_buffer_parts(hold, src: Source, kernel: Part, prefix: str, config, gates, gate_entries,
                  parts: list[Part], buffers: list[InputBuffer], add_rounds) -> str:
    """The hold part and relay part of a user input's second buffer (`hold`: its one hold
    and relay plan), added to `parts` and `buffers`; returns the relay's part name. The
    relay's chains count into the kernel's gate, as a held move's last relay's do."""
    into = Part(f"{prefix}h1", hold.program(0, config))
    parts.append(into)
    plan = hold.relays[0]
    shared = {sym: (into if end == "src" else kernel).local(name)
              for sym, (end, name) in plan.end_symbols.items()}
    relay = f"{prefix}relay1"
    add_rounds([relay], plan, [{}], shared, gates.get(kernel.name),
               gate_entries.get(kernel.name))
    buffers.append(InputBuffer(hold.consumer, hold.operand, hold.source, src.tensor.name,
                               into.name, relay, hold.maps[0]))
    return relay


def round_parts(names: list[str], plan, colors: list, shared: dict, gate: Gate | None,
                 entries: dict | None, counters: str = "registers") -> list[Part]:
    """The parts of `plan`'s rounds, named `names`, with their colors on the merged fabric
    and the symbols `shared` with the parts at their ends; with `gate`, the chains that
    deliver count into it (`fabric.kernels.round_programs`), the last starting the entry
    tasks `entries` ({PE: merged task names}) of its kernel there. counters "memory": the
    chains count their activations in memory and share one scratch register with every
    other move's on their PEs (`SHARED_COUNTER`), where registers run short."""
    programs = [rnd.program for rnd in plan.rounds]
    tasks: dict[str, str] = {}
    if gate is not None or counters != "registers":
        waits = gate.waits if gate is not None else ()
        programs = round_programs(plan, {pe: entries[pe] for pe in waits}, counters)
    if counters == "memory":
        shared = {**shared, SHARED_COUNTER: SHARED_COUNTER}
    if gate is not None:
        shared = {**shared, GATE: f"{gate.part}.wait"}
        tasks = {t: t for pe in gate.waits for t in entries[pe]}
    if len(programs) != len(names):
        raise AssertionError(f"{len(programs)} rounds for parts {names}")
    return [Part(name, program, plan.window.corner, part_colors, shared, tasks)
            for name, program, part_colors in zip(names, programs, colors)]


def named_parts(exc: BuildError, prepared: list[PreparedStage], moves: list[MovePart],
                stages: dict[str, str], inputs: tuple[InputBuffer, ...] = (),
                resident: dict[str, tuple] | None = None) -> str:
    """The build's message with the parts it names (s3, m2r0) given as stages and moves."""
    text = str(exc)
    found = [f"{part} = {what}"
             for part, what in part_descriptions(prepared, moves, stages, inputs,
                                                 resident).items()
             if f"{part}." in text]
    return text + ("\nparts: " + "; ".join(found) if found else "")


def part_descriptions(prepared: list[PreparedStage], moves: list[MovePart],
                      stages: dict[str, str], inputs: tuple[InputBuffer, ...] = (),
                      resident: dict[str, tuple] | None = None) -> dict[str, str]:
    """{part name (s3, m2r0, i0relay1): "stage 'addmm' (FX node ..., line ...)", "move 'a'
    -> 'b' operand 'x' round 1" or "input 'x' -> 'b' operand 'x', relay of its buffer"}."""
    names = {part: f"stage {name!r} ({describe(p.stage.node)})"
             for (name, part), p in zip(stages.items(), prepared)}
    for m in moves:
        for k, part in enumerate(m.rounds):
            names[part] = (f"move {m.tensor!r} -> {m.consumer!r} operand {m.operand!r}"
                           + (f" round {k}" if len(m.rounds) > 1 else ""))
        for j, part in enumerate(m.relays, 1):
            names[part] = (f"move {m.tensor!r} -> {m.consumer!r} operand {m.operand!r} "
                           f"relay {j} of its holds")
    for name, (part, _) in (resident or {}).items():
        names[part] = f"resident input {name!r} at its home"
    for b in inputs:
        what = f"input {b.tensor!r} -> {b.consumer!r} operand {b.operand!r}"
        names[b.hold] = what + ", its buffer"
        names[b.relay] = what + ", relay of its buffer"
    return names
