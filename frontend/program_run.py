"""Calls of a model program (`frontend.model_program`): one sample, or samples streamed
through it, in one simulator.

The host starts the parts: a stage's kernel or a round of a move, each for one sample (a
"token", (part, sample)). A token is armed (the part put back as loaded, `rearm`, and the
sample's user inputs written into a kernel's operands, or an input buffer's hold) once
- the part has finished the previous sample,
- and whatever it overwrites is no longer needed by the previous sample
  (`ModelProgram.reuses`): a move round writes its consumer's operand, so that kernel
  must be done with the previous sample; a kernel writes its output, so the rounds
  reading it must be done with it.
Then its entry tasks start (`ModelProgram.entries`, PE by PE) by `start`:
- "pe": on each PE as soon as the parts it reads (`ModelProgram.after`) are done on that
  PE: a move's receivers at once, its senders where the producer has finished, a kernel
  where the rounds delivering its operands there have finished. A kernel reads only its
  own PE's memory, so its inputs there are all it waits for; kernels run correctly with
  their PEs started at different times (their wavelets wait in queues for a PE's own
  tasks). The host looks every `poll` cycles ("data" puts that start in the fabric). It
  can be slower than "part": a kernel's PE started early waits in a synchronous receive
  for PEs of its that have not started, holding the CE that other parts' chains on that PE
  need (LeNet on small(6, 6), 8 samples: 1,418 cycles per sample against 1,280 by parts;
  benchmarks/one_program.py);
- "data": as "pe", but a kernel's PEs that its moves deliver to are started by the last
  count of their gate (the program with gates, `ModelProgram.gates`): each delivery
  there counts off in the fabric, and so does the host when it arms the kernel for the
  sample; the last delivery starts the kernel in the fabric, or the host where its arm
  comes last (`ModelProgram.arm_gate`; on a PE whose CE runs a task the host counts at a
  later look, since a chain's read, decrement and write of the word are one activation
  and a count between them would be lost). The host puts a gate back as soon as its kernel
  has finished a sample, so the next sample's data may come in while the kernel's output
  still moves out, and counts a PE started when it sees its gate at zero. The gates' own
  code (about ten cycles per delivering chain) is the price of not waiting for a poll;
- "part" (the default): on all its PEs once the parts it reads are done everywhere;
- "serial": one token at a time, in sample then graph order, each run until the fabric
  is quiet (each part in the cycles it takes alone).
Otherwise than serial, the host looks every `poll` cycles at what each part still has to
do (`fabric.PartMap`): independent parts, and the parts of consecutive samples, run at
once and contend for PEs and links as the engine simulates them, and a part starts at
most `poll` - 1 cycles after its condition is met. The engine runs on through the looks
that would find what the last one found (`PartMap.advance`: the parts' work and the
gates' words compared on the device after every `poll` cycles), to the first that differs
or the next end of a host link transfer; after a look where the host started or counted
something it looks again after `poll` cycles. The host so takes the same decisions at the
same cycles as looking every time, at the cost of the looks that change something. The
host reads every kernel's output words for a sample as soon as it has finished (before
anything can overwrite them).

Host I/O (`HostIO`, `host_link(program, output_reads)`): without it the host's transfers
are apart (a sample's inputs appear in their operands when its kernel is armed, outputs
are read at no cost). With it the host link takes its cycles as a call run apart charges
them (`fabric.host_io_cycles`), each direction one transfer at a time, in the order they
become possible: a kernel's user inputs for sample s are written once the kernel is done
with s - 1 (they overwrite its operands), and the kernel is armed when the write has
ended; in a program with input buffers (`build_model_program(..., input_buffers=True)`)
they are written into the buffer once its relay has carried sample s - 1 on, so the write
overlaps the kernel's work on s - 1, and the relay is armed when the write has ended. A
stage's output the model returns is read once the kernel has finished the sample, and the
kernel takes the next sample only when that read has ended (it would overwrite the
words). While nothing in the fabric moves and the host link is busy, the fabric waits for
the link's next end (`Simulator.wait`: not a deadlock). So the host's I/O overlaps the
fabric's work and counts where it is on the critical path, as in the pipelined timeline
(`frontend.schedule`).

Figures (`ProgramStream`): `latency`, the first sample's last part's end (with host I/O,
its last output word read); `period`, the cycles between the ends of the first and last
samples over the samples between (the steady state's cycles per sample when the stream is
long enough to fill the pipeline). Cycles are the fabric's, from the first start (the
first write's, with host I/O).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import torch

from fabric import DeadlockError, PartMap, RunError
from frontend.errors import StageRunError
from frontend.model_program import ModelProgram

POLL_CYCLES = 8  # how often the host looks for parts that have finished
STARTS = ("serial", "part", "pe", "data")  # how the parts start (module docstring)


@dataclasses.dataclass
class ProgramStream:
    """Samples through a model program: `words[s]` {stage: its output's words} of sample
    s; `spans` {(part, sample): (the cycle it first started on a PE, the cycle it was seen
    finished)}; `starts` {(part, sample): {PE: the cycle it started there}}; `cycles`
    until the fabric was quiet after the last."""

    words: list[dict[str, dict[str, np.ndarray]]]
    spans: dict[tuple[str, int], tuple[int, int]]
    starts: dict[tuple[str, int], dict[tuple[int, int], int]]
    cycles: int
    # with host I/O: {(part, sample, "write" or "read"): (first cycle, end)} of the host
    # link's transfers (`HostIO`)
    host: dict[tuple[str, int, str], tuple[int, int]] = dataclasses.field(
        default_factory=dict)
    # (rows, cols) SRAM bytes each PE of the merged program uses
    sram_bytes: np.ndarray | None = None

    def ends(self) -> list[int]:
        """The cycle each sample's last part ended (or its last output read ended)."""
        ends = [0] * len(self.words)
        for (_, s), (_, end) in self.spans.items():
            ends[s] = max(ends[s], end)
        for (_, s, _), (_, end) in self.host.items():
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

    def same_words(self, sample: int, words: dict[str, dict[str, np.ndarray]]) -> bool:
        """Whether sample `sample` left `words` ({stage: {symbol: its words}}, as a call's
        `cm.last.words` holds them), every stage and symbol of them, bit for bit."""
        mine = self.words[sample]
        return all(k in mine.get(stage, {}) and np.array_equal(mine[stage][k], w)
                   for stage, ws in words.items() for k, w in ws.items())

    def part_cycles(self, sample: int = 0) -> dict[str, int]:
        """{part: the cycles from its first start to its end} for `sample`: alone when run
        serially, else beside the parts running at once, to the poll that saw it end."""
        return {p: end - start for (p, s), (start, end) in self.spans.items() if s == sample}


@dataclasses.dataclass(frozen=True)
class HostIO:
    """The host link's cycles per sample: `writes` {part whose arm takes user inputs
    (`ModelProgram.writers`: a kernel, or an input buffer's relay): their writes}, `reads`
    {kernel part: the read of its output, for the stages the model returns}."""

    writes: dict[str, int]
    reads: dict[str, int]


def host_link(program: ModelProgram, output_reads: Mapping[str, int]) -> HostIO:
    """The host link of `program`'s calls: its input writes (`ModelProgram.write_cycles`
    of each of its `writers`) and `output_reads` ({stage: cycles}, as
    `CompiledModel.output_reads` gives them) by kernel part."""
    writes = {part: program.write_cycles(part) for part in program.writers}
    return HostIO({k: v for k, v in writes.items() if v},
                  {program.stages[stage]: v for stage, v in output_reads.items() if v})


def run_stream(program: ModelProgram, samples: list[dict[str, torch.Tensor]],
               max_cycles: int, start: str = "part", poll: int = POLL_CYCLES,
               host: HostIO | None = None, resident: Mapping[str, dict] | None = None,
               every_look: bool = False) -> ProgramStream:
    """`samples` (each the user inputs by graph name) through `program` (module docstring).

    start: "serial", "part", "pe" or "data" (module docstring; "data" needs a program built
    with gates, `build_model_program(..., gated=True)`).
    host: the host link's transfers (module docstring, "Host I/O"); None: apart.
    resident: {resident input: {symbol: its words}} for a program with resident inputs
        (`ModelProgram.place_resident`: in PE memory before the first sample).
    every_look: the host reads every look, `poll` cycles apart, instead of running on
        through those that would find nothing new (the same stream: the reference the
        watched runs are tested against).

    Raises ValueError for another `start`, or "data" on a program without gates;
    StageRunError when the stream does not finish (a deadlock, or `max_cycles` cycles in
    all), naming the parts running and those stuck."""
    if start not in STARTS:
        raise ValueError(f"start must be one of {list(STARTS)}, got {start!r}")
    gates = program.gates if start == "data" else {}
    if start == "data" and not gates and any(program.after[k] for k in program.stages.values()):
        raise ValueError('start "data" needs a model program built with gates '
                         "(build_model_program(..., gated=True))")
    per_pe = start in ("pe", "data")  # the host starts each PE once its inputs are there
    if not samples:
        raise ValueError("run_stream: no samples given")
    serial = start == "serial"
    sim = program.simulator()
    if program.resident:
        program.place_resident(sim, dict(resident or {}))
    kernels = set(program.stages.values())
    reuses = program.reuses()
    parts = None if serial else PartMap(program.merged)
    # the words a look reads besides the parts' work: every gate's, by kernel
    gate_words = program.gate_words() if gates else {}
    watched = [(*pe, address) for words in gate_words.values() for pe, address in words]
    if not serial:
        parts.watch(sim, watched)
    seen = None  # the host's last look (`PartMap.advance`)
    opened_at: dict = {}  # gated kernel -> its PEs whose gate was at zero when last seen
    tokens = [(name, s) for s in range(len(samples)) for name in program.order]
    entries = {name: program.entries(name) for name in program.order}
    begin = int(sim.state.cycle)
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    armed: dict[tuple[str, int], dict] = {}  # token -> {PE: its start}, PEs started so far
    words: list[dict] = [{} for _ in samples]
    by_kernel = {part: stage for stage, part in program.stages.items()}
    host_opens: dict = {}  # gated token -> PEs where the host's arm was the gate's last count
    arms_left: dict = {}  # gated token -> PEs whose CE ran a task when the host would arm

    writes = host.writes if host else {}
    reads = host.reads if host else {}
    link = {"write": 0, "read": 0}  # the cycle each direction of the host link is free
    transfers: dict = {}  # (part, sample, "write" / "read") -> (first cycle, end)

    def on_link(name: str, s: int, kind: str, ready: int, cycles: int) -> int:
        """The host link's `kind` transfer of (part, sample), from `ready` on: its end."""
        if (name, s, kind) not in transfers:
            first = max(link[kind], ready)
            link[kind] = first + cycles
            transfers[(name, s, kind)] = (first, first + cycles)
        return transfers[(name, s, kind)][1]

    def written(name: str, s: int) -> bool:
        """With host I/O, whether the host has written the sample's inputs that the
        token's arm takes (`ModelProgram.writers`): the write goes on the link once the
        part has finished the previous sample (what it writes is then free)."""
        if name not in writes:
            return True
        if s and (name, s - 1) not in spans:
            return False
        return on_link(name, s, "write", now, writes[name]) <= now

    def link_end_after(cycle: int) -> int | None:
        """The first end of a host link transfer after `cycle`, if one is still on."""
        return min((end for _, end in transfers.values() if end > cycle), default=None)

    def until_link(cycle: int, left: int) -> int:
        """The cycles to the first look, every `poll` from `cycle`, at or after the next
        end of a host link transfer (at most `left`): where the host's decisions can
        change with no change in the fabric."""
        end = link_end_after(cycle)
        return left if end is None else min(left, -(-(end - cycle) // poll) * poll)

    def may_arm(name: str, s: int) -> bool:
        """The token's conditions on whole parts (module docstring); "pe" starts its PEs
        apart, each when the parts it reads are done there. (A round into a gated kernel
        needs that kernel done with s - 1, as its operand is free then, which is also when
        the host puts the gate back: its count for s may start before the kernel is put
        back for s.) With host I/O, also the previous sample's output read (and its
        inputs written: `written`)."""
        return ((name, s) not in spans and (name, s) not in armed
                and (per_pe or all((a, s) in spans for a in program.after[name]))
                and (s == 0 or all((b, s - 1) in spans for b in reuses[name] | {name}))
                and (s == 0 or name not in reads or transfers[(name, s - 1, "read")][1] <= now))

    def done_at(name: str, s: int, pe) -> bool:
        """Part `name` has finished sample s at PE `pe`: it has no task there, or it had
        started there when the host last looked and its CE had no work of it left."""
        if (name, s) in spans or pe not in entries[name]:
            return True
        started = armed.get((name, s), {})
        return pe in started and started[pe] < looked and pe not in busy.get(name, ())

    busy: dict = {}  # part -> PEs where its CEs had work when the host last looked
    looked = 0  # the cycle it looked
    starts: dict = {}
    finished = 0  # tokens done when the host last looked
    now = 0
    while len(spans) < len(tokens):
        now = int(sim.state.cycle) - begin
        # whether the host changes something at this look (a count, an arm, a start):
        # then it looks again after `poll` cycles, whatever the fabric shows
        acted = any(arms_left.values())
        for (name, s), pes in [t for t in arms_left.items() if t[1]]:  # busy CEs last look
            opened_now, arms_left[(name, s)] = program.arm_gate(sim, name, pes)
            host_opens[(name, s)] |= opened_now
        arming = [t for t in tokens if written(*t) and may_arm(*t)]
        acted = acted or bool(arming)
        while arming:
            for name, s in arming[:1] if serial else arming:
                if s:  # the part ran the previous sample: put it back as loaded
                    program.rearm(sim, name)
                program.write_inputs(sim, name, samples[s])
                if name in gates:  # the host's count: the last one on PEs whose data is in
                    host_opens[(name, s)], arms_left[(name, s)] = program.arm_gate(sim, name)
                armed[(name, s)] = {}
            # rounds into a gated kernel armed just now may arm in the same look
            arming = [] if serial else [t for t in tokens if written(*t) and may_arm(*t)]
        starting: dict = {}  # PE -> the merged task names started there now
        for (name, s), started in armed.items():
            opened = host_opens.get((name, s), set())  # the gate's last count the host's
            waiting = gates[name].waits.keys() - opened if name in gates else set()
            for pe, tasks in entries[name].items():
                if pe not in started and pe not in waiting and (
                        pe in opened or not per_pe
                        or all(done_at(a, s, pe) for a in program.after[name])):
                    started[pe] = now
                    starting.setdefault(pe, []).extend(tasks)
        sim.launch_each(starting)
        acted = acted or bool(starting) or any(arms_left.values())
        left = max_cycles - now
        try:
            try:
                if serial:  # each token run until the fabric is quiet
                    sim.run(max_cycles=left, progress=False)
                else:  # the host looks again in `poll` cycles, or at the first look
                    # that can find something new (`fabric.part_watch`)
                    steps = min(poll, left) if acted or every_look else until_link(now, left)
                    seen = parts.advance(sim, steps, poll, raise_on_limit=steps == left)
            except DeadlockError:  # nothing moves: waiting on the host link, or stuck
                stuck_at = int(sim.state.cycle) - begin
                link_end = link_end_after(stuck_at)
                if link_end is None:
                    raise
                sim.wait(link_end - stuck_at)
                seen = None
        except RunError as exc:
            running = [(n, s if len(samples) > 1 else None) for n, s in armed]
            raise StageRunError(program.failure(sim, running, exc)) from exc
        moved = int(sim.state.cycle) - begin > now
        now = int(sim.state.cycle) - begin
        busy, everything, values = ({}, set(), ()) if serial else seen or parts.look(sim)
        i = 0
        for name, pes in gate_words.items():  # the gates at zero: every delivery in
            opened_at[name] = {pe for j, (pe, _) in enumerate(pes) if values[i + j] == 0}
            i += len(pes)
        looked = now
        for (name, _), started in armed.items():  # gates the data opened since last time
            if name in gates:
                for pe in opened_at[name] - started.keys():
                    started[pe] = now
        for name, s in [t for t, started in armed.items() if t[0] not in everything
                        and len(started) == len(entries[t[0]])]:
            started = starts[(name, s)] = armed.pop((name, s))
            host_opens.pop((name, s), None)
            arms_left.pop((name, s), None)
            spans[(name, s)] = (min(started.values(), default=now), now)
            if name in kernels:  # read before the next sample can overwrite it
                words[s][by_kernel[name]] = program.read_output(sim, name)
            if name in reads:
                on_link(name, s, "read", now, reads[name])
            if name in gates and s + 1 < len(samples):  # the next sample's data may come
                program.reset_gate(sim, name)
        if not (moved or starting or len(spans) > finished):
            link_end = link_end_after(now)
            if link_end is None:
                waiting = [t for t in tokens if t not in spans][:8]
                raise StageRunError(f"the model program's stream stopped at cycle {now} "
                                    f"with nothing running and parts not done: {waiting}")
            sim.wait(link_end - now)  # quiet: only the host link has work
        finished = len(spans)
    cycles = max([int(sim.state.cycle) - begin,
                  *(end for _, end in transfers.values())])
    return ProgramStream(words, spans, starts, cycles, transfers,
                         4 * np.asarray(sim.info.sram_used_words))
