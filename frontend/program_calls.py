"""Calls of a pipelined model simulated as its one fabric program
(`frontend.compile(..., simulate="program")`).

How a pipelined call is simulated (`simulate=`):
- "parts" (the default): every part of a call (each stage's kernel, each move, each host
  write) simulated on its own with exact cycles, and their overlap scheduled from those
  cycles (`frontend.schedule`): contention between parts that overlap in time is not
  counted.
- "program": the model's one fabric program (`frontend.model_program`, built when the
  model is compiled, with gates and input buffers where its PEs hold them), and a call or
  a stream of samples is one engine run of it (`frontend.program_run`, start "data"): the
  weights loaded once, each kernel started in the fabric by the last delivery of its data,
  parts of consecutive samples running at once and contending for PEs and links, the
  host link's writes of the inputs and reads of the outputs in the stream. The outputs,
  every node's value (`cm.validate`, read from the words where they lie) and the figures
  (`cm.latency`, `cm.period`, `cm.utilization`, `cm.report()`) are that run's. An input
  made resident (`cm.make_resident`) is a part of the program at its home, its words
  placed there before the run. A model the one program cannot hold (its colors short,
  an embedding's per-call gathers, a PE's SRAM, registers or task ids) is refused when
  compiled, naming what is short.

The outputs are the same in both, bit for bit: every sample's words in the program are
those of its parts run apart (`tests/frontend/test_program_calls.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch

from frontend.errors import PlacementError
from frontend.graph_colors import GraphColors
from frontend.model_program import ModelProgram, part_descriptions
from frontend.program_run import ProgramStream, host_link, run_stream
from frontend.runtime import ResidentTensor, tensor_value
from frontend.values import Tensor

SIMULATIONS = ("parts", "program")
DEFAULT_SIMULATION = "parts"


def check_simulation(simulate: str, mode: str) -> str:
    """`simulate` checked against `mode`: ValueError naming what is wrong."""
    if simulate not in SIMULATIONS:
        raise ValueError(f"simulate must be one of {list(SIMULATIONS)}, got {simulate!r}")
    if simulate == "program" and mode != "pipelined":
        raise ValueError(f"simulate 'program' runs a pipelined model's one fabric program; "
                         f"mode {mode!r} runs one stage at a time (use mode 'pipelined')")
    return simulate


@dataclasses.dataclass
class ProgramCall:
    """Sample `sample` of a stream through the one program, read as a call: `inputs` the
    user inputs by graph name, `words` every stage's output words, and the cycles of its
    parts in the stream (beside the other samples' parts)."""

    stream: ProgramStream
    sample: int
    program: ModelProgram
    tensors: dict[str, Tensor]
    inputs: dict[str, torch.Tensor]
    resident: dict[str, ResidentTensor] = dataclasses.field(default_factory=dict)

    @property
    def words(self) -> dict[str, dict[str, np.ndarray]]:
        """Every stage's output words and every resident input's, by name."""
        return {**{k: r.words for k, r in self.resident.items()},
                **self.stream.words[self.sample]}

    def value(self, gids: torch.Tensor) -> torch.Tensor:
        """The tensor whose elements are the global ids `gids` (-1: zero)."""
        maps = {**{k: r.map for k, r in self.resident.items()},
                **{p.stage.name: p.out_map for p in self.program.prepared}}
        return tensor_value(self.tensors, maps, self.words, self.inputs, gids)

    def part_cycles(self, part: str) -> int:
        """The part's cycles on this sample (`active_cycles`; 0: not run)."""
        return active_cycles(self.program, self.stream, part, self.sample)

    def stage_figures(self) -> dict[str, tuple[int, int, int]]:
        """{stage: (its kernel's cycles, its incoming moves' and input buffers' cycles,
        max SRAM bytes per PE of its tile in the merged program)}."""
        incoming: dict[str, list[str]] = {}
        for m in self.program.moves:
            incoming.setdefault(m.consumer, []).extend([*m.rounds, *m.relays])
        for b in self.program.inputs:
            incoming.setdefault(b.consumer, []).append(b.relay)
        sram = self.stream.sram_bytes
        out = {}
        for p in self.program.prepared:
            name, r = p.stage.name, p.rect
            out[name] = (self.part_cycles(self.program.stages[name]),
                         sum(self.part_cycles(part) for part in incoming.get(name, ())),
                         int(sram[r.row:r.row_end, r.col:r.col_end].max()))
        return out


def call_program(model_program: Callable[..., ModelProgram], colors: GraphColors
                 ) -> ModelProgram:
    """The program calls run in: `model_program(gated=True, input_buffers=True)`
    (`CompiledModel.model_program`). PlacementError naming what one program cannot hold,
    and where the colors fall short what places the model so that they fit."""
    try:
        return model_program(gated=True, input_buffers=True)
    except PlacementError as exc:
        hint = ("; compile with colors='fit' to place it on smaller tiles whose colors fit"
                if not colors.assignment.ok else "")
        first, _, rest = str(exc).partition("\n")  # the hint on the first line
        raise PlacementError(f"simulate='program': {first}{hint}" + (f"\n{rest}" if rest
                                                                     else "")) from exc


def run_calls(program: ModelProgram, samples: list[dict[str, torch.Tensor]],
              tensors: dict[str, Tensor], output_reads: dict[str, int], max_cycles: int,
              resident: dict[str, ResidentTensor] | None = None) -> list[ProgramCall]:
    """`samples` (user inputs by graph name) streamed through `program` in one engine run,
    kernels started by their data, the host link in the stream, the `resident` inputs'
    words in their homes: a call per sample."""
    resident = dict(resident or {})
    stream = run_stream(program, samples, max_cycles, start="data",
                        host=host_link(program, output_reads),
                        resident={k: r.words for k, r in resident.items()})
    return [ProgramCall(stream, s, program, tensors, inputs, resident)
            for s, inputs in enumerate(samples)]


def active_cycles(program: ModelProgram, stream: ProgramStream, part: str,
                  sample: int) -> int:
    """A part's cycles on `sample`: a kernel's from its first PE's start (its data there)
    to its end; a move's or a relay's from its last PE's start to its end (its receivers
    start at once and wait; its senders once the producer is done on their PE). 0: not
    run."""
    if (part, sample) not in stream.spans:
        return 0
    starts = stream.starts.get((part, sample)) or {None: stream.spans[(part, sample)][0]}
    begin = min(starts.values()) if part in program.stages.values() else max(starts.values())
    return stream.spans[(part, sample)][1] - begin


def period(program: ModelProgram, stream: ProgramStream) -> float:
    """Cycles per sample: between consecutive samples' ends over a stream of several;
    of one sample, its longest part's cycles (`active_cycles`: the rate a stream
    approaches at best)."""
    if len(stream.words) > 1:
        return stream.period
    return float(longest_part(program, stream)[1])


def longest_part(program: ModelProgram, stream: ProgramStream) -> tuple[str, float]:
    """(what the part is, its mean cycles per sample, `active_cycles`) of the part that
    held its PEs the longest per sample: a stage by its name, or a move by its ends."""
    totals: dict[str, int] = {}
    for part, s in stream.spans:
        totals[part] = totals.get(part, 0) + active_cycles(program, stream, part, s)
    part = max(totals, key=totals.get)
    stage = {kernel: name for name, kernel in program.stages.items()}.get(part)
    what = f"stage {stage!r}" if stage else part_descriptions(
        program.prepared, program.moves, program.stages, program.inputs).get(part, part)
    return what, totals[part] / len(stream.words)


def host_cycles(stream: ProgramStream, sample: int = 0) -> int:
    """The host link's cycles of one sample: its inputs' writes and outputs' reads."""
    return sum(end - start for (_, s, _), (start, end) in stream.host.items() if s == sample)
