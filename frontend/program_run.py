"""Calls of a model program (`frontend.model_program`): one sample, or samples streamed
through it, in one simulator.

The host starts the parts: a stage's kernel or a round of a move, each for one sample (a
"token", (part, sample)). A token may start when
- the parts it reads have finished for its sample (`ModelProgram.after`),
- the part has finished the previous sample,
- and whatever it overwrites is no longer needed by the previous sample
  (`ModelProgram.reuses`): a move round writes its consumer's operand, so that kernel
  must be done with the previous sample; a kernel writes its output, so the rounds
  reading it must be done with it.
The host writes a sample's user inputs into a kernel's operands just before starting that
kernel on it, and reads every kernel's output words for a sample as soon as it has
finished (before anything can overwrite them).

serial: one token at a time, in sample then graph order, each run until the fabric is
quiet (each part in the cycles it takes alone). Otherwise every token starts as soon as it
may: the host looks every `poll` cycles for parts with no work left (`fabric.PartMap`), so
independent parts, and the parts of consecutive samples, run at once and contend for PEs
and links as the engine simulates them; a token starts at most `poll` - 1 cycles after the
last of its conditions is met.

Figures (`ProgramStream`): `latency`, the first sample's last part's end; `period`, the
cycles between the ends of the first and last samples over the samples between (the
steady state's cycles per sample when the stream is long enough to fill the pipeline).
Cycles are the fabric's, from the first start; the host's transfers are apart.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from fabric import PartMap, RunError
from frontend.errors import StageRunError
from frontend.model_program import ModelProgram

POLL_CYCLES = 8  # how often the host looks for parts that have finished


@dataclasses.dataclass
class ProgramStream:
    """Samples through a model program: `words[s]` {stage: its output's words} of sample
    s; `spans` {(part, sample): (the cycle the host started it, the cycle it was seen
    finished)}; `cycles` until the fabric was quiet after the last."""

    words: list[dict[str, dict[str, np.ndarray]]]
    spans: dict[tuple[str, int], tuple[int, int]]
    cycles: int

    def ends(self) -> list[int]:
        """The cycle each sample's last part ended."""
        ends = [0] * len(self.words)
        for (_, s), (_, end) in self.spans.items():
            ends[s] = max(ends[s], end)
        return ends

    @property
    def latency(self) -> int:
        return self.ends()[0]

    @property
    def period(self) -> float:
        """Cycles per sample between the first sample's end and the last's (the latency
        for one sample)."""
        ends = self.ends()
        return (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else float(ends[0])

    def part_cycles(self, sample: int = 0) -> dict[str, int]:
        """{part: the cycles from its start to its end} for `sample`: alone when run
        serially, else beside the parts running at once, to the poll that saw it end."""
        return {p: end - start for (p, s), (start, end) in self.spans.items() if s == sample}


def run_stream(program: ModelProgram, samples: list[dict[str, torch.Tensor]],
               max_cycles: int, serial: bool = False, poll: int = POLL_CYCLES
               ) -> ProgramStream:
    """`samples` (each the user inputs by graph name) through `program` (module docstring).

    Raises StageRunError when the stream does not finish (a deadlock, or `max_cycles`
    cycles in all), naming the parts running and those stuck."""
    if not samples:
        raise ValueError("run_stream: no samples given")
    sim = program.simulator()
    kernels = set(program.stages.values())
    reuses = program.reuses()
    parts = None if serial else PartMap(program.merged)
    tokens = [(name, s) for s in range(len(samples)) for name in program.order]
    begin = int(sim.state.cycle)
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    running: dict[tuple[str, int], int] = {}  # token -> its start
    words: list[dict] = [{} for _ in samples]
    by_kernel = {part: stage for stage, part in program.stages.items()}

    def may_start(name: str, s: int) -> bool:
        return ((name, s) not in spans and (name, s) not in running
                and all((a, s) in spans for a in program.after[name])
                and (s == 0 or all((b, s - 1) in spans for b in reuses[name] | {name})))

    while len(spans) < len(tokens):
        ready = [t for t in tokens if may_start(*t)]
        for name, s in ready[:1] if serial else ready:
            if s:  # the part ran the previous sample: put it back as loaded
                program.rearm(sim, name)
            if name in kernels:
                program.write_inputs(sim, name, samples[s])
            program.launch(sim, name)
            running[(name, s)] = int(sim.state.cycle) - begin
        left = max_cycles - (int(sim.state.cycle) - begin)
        try:
            sim.run(max_cycles=left if serial else min(poll, left), progress=False,
                    raise_on_limit=serial or left <= poll)
        except RunError as exc:
            started = [f"{n} (sample {s})" if len(samples) > 1 else n for n, s in running]
            raise StageRunError(program.failure(sim, started, exc)) from exc
        now = int(sim.state.cycle) - begin
        busy = {} if serial else parts.at_work(sim)
        for name, s in [t for t in running if t[0] not in busy]:
            spans[(name, s)] = (running.pop((name, s)), now)
            if name in kernels:  # read before the next sample can overwrite it
                words[s][by_kernel[name]] = program.read_output(sim, name)
    return ProgramStream(words, spans, int(sim.state.cycle) - begin)
