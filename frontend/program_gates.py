"""Gates of a model program: kernels started by their data, in the fabric
(`frontend.model_program.build_model_program(..., gated=True)`, start "data" of
`frontend.program_run`).

A kernel that moves deliver to is started by its data, in the fabric. Every PE of it that a
move writes holds a word (the kernel's gate part "g<i>", one u32 "wait") loaded with the
chains writing there per sample, over the rounds of all its incoming moves (receives and
local moves, `fabric.kernels.deliveries`), and one count more, the host's arm of the
kernel for the sample (`HOST_ARM`). Each such chain ends by counting itself off
(`fabric.kernels.round_programs`) and the one that brings the word to zero activates the
kernel's entry tasks on that PE (`Part.tasks` names them across parts), then writes the
zero; the host sees a zero as "started" (the activation comes before it). The host puts
the word back (`ModelProgram.reset_gate`) as soon as the kernel has finished a sample, so the next
sample's data may flow in while the kernel's output still moves out, and counts its own
arm off (`ModelProgram.arm_gate`) when it has put the kernel back as loaded for that sample; where
that count is the last (the data was in first) the host starts the kernel there. The host
counts on a PE only while its CE runs no task: a chain's read, decrement and write of the
word are one activation, and a count between them would be lost. A
move's senders still start when the host sees the producer done on their PE: a kernel's
code has no "done" signal of its own to chain them to.
"""

from __future__ import annotations

import dataclasses

from fabric import Part, Program, Rect, Tile
from fabric.kernels import deliveries
from frontend.runtime import PreparedStage

# a gate's count beyond its deliveries: the host's arm of its kernel for the sample (the
# kernel put back as loaded), so that data arriving before it does not start the kernel
HOST_ARM = 1


def launched(part: Part, launch) -> dict[tuple[int, int], tuple[str, ...]]:
    """{PE of the merged fabric: the merged names of the tasks `launch(view)` starts there}
    for `part`, recorded instead of started."""
    record = _LaunchRecord(part)
    launch(record)
    return {pe: tuple(tasks) for pe, tasks in record.tasks.items()}


class _LaunchRecord:
    """A part's view that records what its launch starts instead of starting it:
    `tasks` {PE of the merged fabric: the merged task names}."""

    def __init__(self, part: Part):
        self.part = part
        self.tasks: dict[tuple[int, int], list[str]] = {}

    def launch(self, task: str, rect: Rect | None = None) -> None:
        for placement in self.part.program.placements:
            if task not in placement.tile.tasks:
                continue
            for r, c in placement.rect.pes():
                if rect is None or rect.contains(r, c):
                    pe = (r + self.part.corner[0], c + self.part.corner[1])
                    self.tasks.setdefault(pe, []).append(self.part.task(task))


@dataclasses.dataclass(frozen=True)
class Gate:
    """A kernel started by its data: on each PE of `waits` a word ("wait" of gate part
    `part`) holding the deliveries the PE waits for per sample (chains of its incoming
    moves' rounds that write there), plus `HOST_ARM` for the host's arm of the kernel; each
    chain counts itself off when done and the last one activates the kernel's entry tasks
    there (`fabric.kernels.round_programs`), unless the host's arm comes last
    (`ModelProgram.arm_gate`)."""

    part: str
    waits: dict[tuple[int, int], int]
    # {PE: the word address of its wait count} in the merged program (set once it is built)
    addresses: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)

    def placed(self, info) -> Gate:
        """The gate with the addresses of its words in a built program (`info`: its
        `fabric.build` ProgramInfo)."""
        name = f"{self.part}.wait"
        return dataclasses.replace(self, addresses={
            pe: info.symbols[info.placement_index(*pe)][name].address for pe in self.waits})


def kernel_gates(prepared: list[PreparedStage], kernels: dict[str, Part], held: dict
           ) -> tuple[dict[str, Gate], dict[str, dict[tuple[int, int], tuple[str, ...]]]]:
    """({kernel part: its gate}, {kernel part: {PE: its entry tasks' merged names}}) for
    every kernel some planned move delivers to: a PE waits for each chain of those moves
    that writes there (`fabric.kernels.deliveries`; of a held move, its last relay's; of
    a user input with a buffer, its relay's)."""
    gates, entries = {}, {}
    for p in prepared:
        waits: dict[tuple[int, int], int] = {}
        for operand, sources in p.sources.items():
            for i, src in enumerate(sources):
                hold = held.get((p.stage.name, operand, i))
                if src.plan is None and hold is None:
                    continue
                plan = hold.relays[-1] if hold else src.plan
                for pe, n in deliveries(plan).items():
                    waits[pe] = waits.get(pe, 0) + n
        if not waits:
            continue
        kernel = kernels[p.stage.name]
        entries[kernel.name] = launched(kernel, p.kernel.launch)
        # a PE delivered to but without an entry task of the kernel (it only holds data
        # there) waits for nothing: the kernel's work elsewhere reads it when it runs
        waits = {pe: n for pe, n in waits.items() if pe in entries[kernel.name]}
        gates[kernel.name] = Gate(f"g{kernel.name[1:]}", waits)
    return gates, entries


def gate_program(config, kernel: Part) -> Program:
    """The gate part of `kernel`: one u32 word "wait" on every PE of its tiles."""
    tile = Tile("gate")
    tile.symbol("wait", "u32", 1)
    program = Program(config)
    for placement in kernel.program.placements:
        program.place(tile, kernel.rect(placement.rect))
    return program
