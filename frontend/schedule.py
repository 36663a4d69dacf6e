"""When each part of a call runs: the execution modes' timelines over simulated parts.

A call of a compiled model is simulated in parts (`frontend.runtime.Execution`): every
stage's kernel on its tile, every move of a tensor from the tile that produced it into the
layout of a consuming kernel (a redistribution program), every host write of a user input,
each with its exact cycles. A mode says how those parts follow one another in time:

- "sequential": one part at a time, in graph order (a stage's moves, then its kernel), one
  sample after another; the rest of the fabric idle.
- "pipelined" (`DEFAULT_MODE`): every stage resident on its tile at once, each part
  starting as soon as the dataflow allows it, and the next sample entering while earlier
  ones are in flight. Each
  tile holds one sample's operands and one output (the layout its kernel has, single
  buffered, or as many times as its free SRAM holds), so for sample b:
  * a move of tensor t into stage s starts when t's producer has finished b and s has
    finished b - d, d the operand's buffers (the words it overwrites are read); a kernel
    reads sample b's operand from buffer b mod d. An operand (or the output) gets d - 1
    more buffers from the SRAM its tile leaves free (`sram_bytes` less the stage's use),
    shared evenly by the stage's operands and output: a skip connection (a residual added
    many stages later) then holds several samples in flight instead of stalling every
    stage between its two ends;
  * stage s starts when all its operands for b are in and its output of b - e has been
    taken by every consumer (moved out, or read by the host), e its output's buffers
    (more than one where the free SRAM holds them, as for operands: the kernel then
    writes sample b + 1 while sample b's output is still moving out);
  * the host's writes of user inputs go one at a time over the host link, each when its
    stage's operand is free (a packed write's unpacking on the PEs after it,
    `frontend.host_writes`, off the link); the host's reads of the outputs likewise, on
    the other direction of the link;
  * resident inputs (weights the tiles hold) are there from the start; their load happens
    once, before the first sample, and counts apart.
  What the timeline does not simulate: parts that overlap in time are simulated apart, so
  a move whose path crosses another tile while that tile's kernel runs, or two moves
  sharing a link, are not slowed by each other (kernels never share links: tiles are
  disjoint and a kernel's routes stay in its tile).

Figures: latency (time zero to the first sample's last output word read by the host),
period (cycles per sample in steady state: between the last outputs of consecutive
samples, averaged over the stream), and per stage its rate: the cycles a sample holds its
tile when its neighbours keep up (its kernel plus the longer of its incoming and outgoing
transfers: its incoming ones only where an operand is single buffered); the slowest
rate, or the host link's, bounds the period, unless a path between a skip connection's
ends takes longer than its buffers cover.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from frontend.runtime import StageResult

MODES = ("sequential", "pipelined")
DEFAULT_MODE = "pipelined"  # what a wafer runs: every stage resident, samples overlapping
HOST = "host link"  # the bottleneck's name when the host's transfers bound the period


def check_mode(mode: str, what: str = "mode") -> str:
    """`mode` if it is one of `MODES`; else a ValueError naming `what` (the setting that
    gave it: "mode" of `frontend.compile`, "backend execution" of a training run) and the
    accepted names."""
    if mode not in MODES:
        raise ValueError(f"{what} must be one of {list(MODES)}, got {mode!r}")
    return mode


@dataclasses.dataclass(frozen=True)
class Span:
    start: int
    end: int


@dataclasses.dataclass
class StageSpans:
    """One stage's parts for one sample: its incoming transfers (in the order of
    `StageResult.transfers`), its kernel run, and when its output was taken."""

    transfers: list[Span]
    run: Span
    taken: int


@dataclasses.dataclass
class Timeline:
    mode: str
    spans: list[dict[str, StageSpans]]  # per sample: stage name -> its spans
    outputs_read: list[Span]  # per sample: the host's reads of the model's outputs
    rates: dict[str, int]  # stage -> cycles per sample it holds its tile
    host_rate: int  # cycles per sample of the host link's busier direction
    buffers: dict[str, list[int]]  # stage -> buffers of each transfer's operand, then output
    # (consumer, tensor, its buffers) -> cycles moves of `tensor` waited, ready, for the
    # consumer to free a buffer (pipelined); the largest names what holds the period above
    # the bound
    buffer_waits: dict[tuple[str, str, int], int] = dataclasses.field(default_factory=dict)

    @property
    def buffer_stall(self) -> tuple[str, str, int] | None:
        """(consumer, tensor, buffers) of the operand whose moves waited longest for a free
        buffer; None if none waited."""
        waits = {k: v for k, v in self.buffer_waits.items() if v > 0}
        return max(waits, key=waits.get) if waits else None

    @property
    def samples(self) -> int:
        return len(self.spans)

    @property
    def latency(self) -> int:
        """Cycles from the first sample's first input word to its last output word read."""
        return self.outputs_read[0].end

    @property
    def makespan(self) -> int:
        return self.outputs_read[-1].end

    @property
    def period(self) -> float:
        """Steady-state cycles per sample: measured between consecutive samples' last
        output words over the stream; with one sample, the bound of the slowest rate.
        Sequential: the whole call, sample after sample."""
        if self.mode == "sequential":
            return self.makespan / self.samples
        if self.samples < 2:
            return float(self.bound)
        first, last = self.outputs_read[0].end, self.outputs_read[-1].end
        return (last - first) / (self.samples - 1)

    @property
    def bound(self) -> int:
        """The slowest stage's rate, or the host link's: what bounds the period."""
        return max([self.host_rate, *self.rates.values()])

    @property
    def bottleneck(self) -> str:
        """The stage (or the host link) whose rate is the bound."""
        name = max(self.rates, key=self.rates.get, default=HOST)
        return HOST if self.host_rate > self.rates.get(name, 0) else name


def timeline(mode: str, calls: Sequence[Sequence[StageResult]],
             read_cycles: Mapping[str, int], sram_bytes: int = 0) -> Timeline:
    """The timeline of `calls` (one list of stage results per sample, in graph order) in
    `mode`. read_cycles: {stage: host cycles to read its output} for every stage that
    produces a model output. sram_bytes: a PE's SRAM (0: every operand single buffered)."""
    check_mode(mode)
    if not calls:
        raise ValueError("a timeline needs at least one sample")
    # more buffers than samples change nothing; but one call's rates (its period's bound)
    # are those of the buffers a stream would have
    most = max(2, len(calls))
    buffers = {r.name: stage_buffers(r, sram_bytes, most) for r in calls[-1]}
    if mode == "sequential":
        (spans, reads), waits = _sequential(calls, read_cycles), {}
    else:
        spans, reads, waits = _pipelined(calls, read_cycles, buffers)
    return Timeline(mode, spans, reads, _rates(calls[-1], read_cycles, buffers),
                    _host_rate(calls[-1], read_cycles), buffers, waits)


def stage_buffers(r: StageResult, sram_bytes: int, most: int) -> list[int]:
    """Buffers of each of the stage's transfers' operands, then of its output: one, and as
    many more as its share of the SRAM the stage leaves free holds (shares even over its
    operands and output), at most `most` (the samples of the stream)."""
    free = max(0, sram_bytes - r.sram_bytes) // (len(r.transfers) + 1)
    return [max(1, min(most, 1 + free // (4 * words))) if words else 1
            for words in [*(t.words for t in r.transfers), r.out_words]]


def _sequential(calls, read_cycles):
    """Every part after the previous one."""
    now, out, reads = 0, [], []
    for results in calls:
        spans = {}
        for r in results:
            transfers = []
            for t in r.transfers:
                transfers.append(Span(now, now + t.cycles))
                now += t.cycles
            spans[r.name] = StageSpans(transfers, Span(now, now + r.kernel_cycles), 0)
            now += r.kernel_cycles
        start = now
        for name, cycles in read_cycles.items():
            now += cycles
            spans[name].taken = now
        for s in spans.values():
            s.taken = max(s.taken, s.run.end)
        reads.append(Span(start, now))
        out.append(spans)
    return out, reads


def _pipelined(calls, read_cycles, buffers):
    """Every part as soon as its inputs are ready and its buffers free (module docstring).
    Also the cycles each move waited, its tensor ready, for its consumer's buffer."""
    out, reads, waits = [], [], {}
    write_free = read_free = 0  # the host link's two directions
    for b, results in enumerate(calls):
        spans: dict[str, StageSpans] = {}
        for r in results:
            before = out[b - 1].get(r.name) if b else None
            # the output buffer it writes held sample b - e, taken by then
            e = buffers[r.name][-1]
            output_free = out[b - e][r.name].taken if b >= e else 0
            transfers = []
            for t, depth in zip(r.transfers, buffers[r.name]):
                # the buffer it fills held sample b - depth, read by that sample's run
                operands_free = out[b - depth][r.name].run.end if b >= depth else 0
                if t.host:  # the link is free again once the PEs unpack its words
                    start = max(write_free, operands_free)
                    write_free = start + t.link_cycles
                elif t.tensor in spans:  # a stage's output of this sample
                    producer = spans[t.tensor]
                    start = max(producer.run.end, operands_free)
                    key = (r.name, t.tensor, depth)  # the producer waits on this consumer
                    waits[key] = waits.get(key, 0) + start - producer.run.end
                    producer.taken = max(producer.taken, start + t.cycles)
                else:  # a resident input: in PE memory from the start
                    start = operands_free
                transfers.append(Span(start, start + t.cycles))
            start = max([before.run.end if before else 0, output_free,
                         *(s.end for s in transfers)])
            run = Span(start, start + r.kernel_cycles)
            spans[r.name] = StageSpans(transfers, run, run.end)
        first = None
        for name, cycles in read_cycles.items():
            start = max(read_free, spans[name].run.end)
            read_free = start + cycles
            first = start if first is None else first
            spans[name].taken = max(spans[name].taken, read_free)
        reads.append(Span(first if first is not None else read_free, read_free))
        out.append(spans)
    return out, reads, waits


def _rates(results: Sequence[StageResult], read_cycles: Mapping[str, int],
           buffers: Mapping[str, list[int]]) -> dict[str, int]:
    """Cycles per sample each stage holds its tile when its neighbours keep up: its kernel
    and the longer of its outgoing transfers (moves out of it and the host's read of its
    output run at once, after its kernel) and its incoming single-buffered ones (its next
    sample's operands come in meanwhile); an operand with more buffers comes in during
    the kernel, and so does a multi-buffered output go out, so only their own lengths
    bound the rate."""
    outgoing: dict[str, int] = {r.name: read_cycles.get(r.name, 0) for r in results}
    for r in results:
        for t in r.transfers:
            if not t.host and t.tensor in outgoing:
                outgoing[t.tensor] = max(outgoing[t.tensor], t.cycles)
    rates = {}
    for r in results:
        *ins, out_buffers = buffers[r.name]
        single = [t.cycles for t, d in zip(r.transfers, ins) if d == 1]
        multi = [t.cycles for t, d in zip(r.transfers, ins) if d > 1]
        if out_buffers == 1:
            rates[r.name] = max([r.kernel_cycles + max([outgoing[r.name], *single]), *multi])
        else:  # its outputs move out while it computes the next sample
            rates[r.name] = max([r.kernel_cycles + max([0, *single]), outgoing[r.name],
                                 *multi])
    return rates


def _host_rate(results: Sequence[StageResult], read_cycles: Mapping[str, int]) -> int:
    writes = sum(t.link_cycles for r in results for t in r.transfers if t.host)
    return max(writes, sum(read_cycles.values()))
