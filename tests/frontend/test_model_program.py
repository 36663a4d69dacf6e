"""A pipelined model as one fabric program (`frontend.model_program`): every stage's kernel
and every move merged with the graph's colors, built, and a call run in it, which gives
the words the parts give run apart, bit for bit, each part in about the cycles it takes
alone (exactly for these kernels; a move's flows sharing a link take turns in the order of
their renamed colors)."""

import dataclasses
import re

import numpy as np
import pytest
import torch

import frontend
from fabric import DeadlockError, FabricConfig, PartMap, Simulator, engine
from fabric.window import bounding_box
from frontend.errors import FrontendError, PlacementError, StageRunError
from frontend.model_program import ModelProgram, part_descriptions
from frontend.program_run import host_link, run_stream
from tests.frontend.models import CONFIG, MLP, LeNet, TinyGPT

# small enough that the pipelined placement's tiles, and so the moves' flows crossing a PE,
# fit the 21 program colors with room to spare (the test MLP needs 17 here, 21 on 6 x 6 and
# 24 on CONFIG's 12 x 12, as the spare PEs widen its tiles)
SMALL = FabricConfig.small(5, 5)


class Residual(torch.nn.Module):
    """Two branches from one input meeting in an add: a stage with two incoming moves."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.a(x)) + self.b(x)


@pytest.mark.parametrize("model", [MLP, Residual], ids=["mlp", "residual"])
def test_one_program_gives_the_parts_words_and_cycles(model):
    torch.manual_seed(0)
    x = torch.randn(3, 16)
    cm = frontend.compile(model().eval(), (x,), SMALL, mode="pipelined")
    cm(x)  # every part simulated apart
    run = cm.one_program(x)
    program = cm.model_program()
    cycles = run.part_cycles()
    assert len(cycles) == len(program.order)
    spans = sorted(run.spans.values())
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # one part at a time
    assert [n for (n, _), _ in sorted(run.spans.items(), key=lambda kv: kv[1])] == program.order
    for p, result in zip(cm.prepared, cm.last.results):
        for k, w in run.words[0][p.stage.name].items():
            np.testing.assert_array_equal(w, cm.last.words[p.stage.name][k],
                                          err_msg=f"stage {p.stage.name}, symbol {k}")
        assert cycles[program.stages[p.stage.name]] == result.kernel_cycles, p.stage.name
        # a move's flows that share a link take turns in the order of their colors, which
        # the graph's assignment renames: the same words, cycles within a few per cent
        moved = [m for m in program.moves if m.consumer == p.stage.name]
        in_program = sum(cycles[r] for m in moved for r in m.rounds)
        assert in_program == pytest.approx(result.move_cycles, rel=0.10), p.stage.name
    assert len(program.merged.parts) == len(program.order)  # every part in one program


def test_weights_are_loaded_once_per_model_program():
    torch.manual_seed(0)
    x, y = torch.randn(3, 16), torch.randn(3, 16)
    cm = frontend.compile(MLP().eval(), (x,), SMALL, mode="pipelined")
    cm.one_program(x)
    loads = []
    for p in cm.prepared:  # count every kernel load from here on
        p.kernel.load = (lambda sim, values, load=p.kernel.load:
                         (loads.append(1), load(sim, values))[1])
    second = cm.one_program(y)
    assert loads == []  # the second call starts from the memory the first one loaded
    cm(y)  # the parts apart, on y: the second call's words bit for bit
    for p in cm.prepared:
        for k, w in second.words[0][p.stage.name].items():
            np.testing.assert_array_equal(w, cm.last.words[p.stage.name][k],
                                          err_msg=f"stage {p.stage.name}, symbol {k}")


def _longest_path(program, cycles: dict[str, int]) -> int:
    finish: dict[str, int] = {}
    for name in program.order:  # graph order: every part after those it reads
        finish[name] = cycles[name] + max((finish[a] for a in program.after[name]), default=0)
    return max(finish.values())


def test_independent_parts_overlap_inside_the_program():
    """The residual block's two branches start together and each part as soon as those it
    reads have finished: the same words bit for bit, fewer cycles than one part at a time,
    and no fewer than the longest chain of parts run alone (parts running at once can only
    slow each other)."""
    torch.manual_seed(0)
    x = torch.randn(3, 16)
    cm = frontend.compile(Residual().eval(), (x,), SMALL, mode="pipelined")
    alone = cm.one_program(x)
    together = cm.one_program(x, overlap=True)
    program = cm.model_program()
    spans = {name: span for (name, _), span in together.spans.items()}
    firsts = [n for n in program.order if not program.after[n]]
    assert len(firsts) >= 2 and all(spans[n][0] == 0 for n in firsts)  # both branches
    for name in program.order:
        # started at the poll that saw the last of its inputs end
        assert spans[name][0] == max((spans[a][1] for a in program.after[name]), default=0)
    for stage, words in alone.words[0].items():
        for k, w in words.items():
            np.testing.assert_array_equal(together.words[0][stage][k], w)
    assert _longest_path(program, alone.part_cycles()) <= together.cycles < alone.cycles


def test_a_part_starts_on_each_pe_once_its_inputs_are_done_there():
    """Started PE by PE (start "pe"): a move's receivers start at once, and a kernel
    starts on a PE once the rounds that deliver there are done there, before they are
    done everywhere; the words are those of one part at a time, bit for bit."""
    torch.manual_seed(0)
    x = torch.randn(3, 16)
    cm = frontend.compile(MLP().eval(), (x,), SMALL, mode="pipelined")
    alone = cm.one_program(x)
    run = cm.one_program_stream([(x,)], start="pe")
    program = cm.model_program()
    for stage, words in alone.words[0].items():
        for k, w in words.items():
            np.testing.assert_array_equal(run.words[0][stage][k], w)
    early = 0
    for name in program.order:
        starts = run.starts[(name, 0)]
        assert set(starts) == set(program.entries(name))  # every entry PE started
        for pe, cycle in starts.items():
            for a in program.after[name]:  # after the parts delivering there started
                if pe in program.entries(a):
                    assert run.starts[(a, 0)][pe] < cycle, (name, a, pe)
        inputs_done = max((run.spans[(a, 0)][1] for a in program.after[name]), default=0)
        early += name in program.stages.values() and min(starts.values()) < inputs_done
    assert early  # a kernel began on some PEs before its inputs were in everywhere
    with pytest.raises(ValueError, match="start must be one of"):
        cm.one_program_stream([(x,)], start="eager")


class Fan(torch.nn.Module):
    """A relu whose output feeds two GEMMs and a product: its outgoing moves outlast its
    incoming one, so a sample's data reaches the GEMMs before they are put back for it."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.c = torch.nn.Linear(16, 16)

    def forward(self, x):
        y = torch.relu(self.a(x))
        return self.b(y) + self.c(y) * y


@pytest.mark.parametrize("model", [Residual, Fan], ids=["residual", "fan"])
def test_kernels_are_started_by_their_data(model):
    """Start "data": the program with gates, where the last of a PE's counts (each
    delivery into it, and the host's arm of the kernel for the sample) starts the kernel's
    entry tasks there: the last delivery in the fabric, the host only where its arm came
    last (the add of the residual block waits for both of its incoming moves; in the fan,
    the next sample's data reaches its GEMMs while the relu's output still moves out, so
    their arm comes last). The words are those of one part at a time, bit for bit, for
    one sample and for three streamed (the host puts each gate back once its kernel has
    finished a sample)."""
    torch.manual_seed(0)
    xs = [torch.randn(3, 16) for _ in range(3)]
    cm = frontend.compile(model().eval(), (xs[0],), SMALL, mode="pipelined")
    alone = [cm.one_program(x) for x in xs]
    events = []  # ("launch", {PE: tasks}) and ("arm", kernel, PEs its arm opened), in order
    launch_each, arm_gate = Simulator.launch_each, ModelProgram.arm_gate

    def launched(self, starts):
        events.append(("launch", starts))
        return launch_each(self, starts)

    def armed(self, sim, kernel, pes=None):
        opened, later = arm_gate(self, sim, kernel, pes)
        events.append(("arm", kernel, opened))
        return opened, later

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Simulator, "launch_each", launched)
        patch.setattr(ModelProgram, "arm_gate", armed)
        one = cm.one_program_stream([(xs[0],)], start="data")
        stream = cm.one_program_stream([(x,) for x in xs], start="data")
    program = cm.model_program(gated=True)
    fed = {k for k in program.stages.values() if program.after[k]}
    assert fed and set(program.gates) == fed
    if model is Residual:
        add = program.stages[next(m.consumer for m in program.moves
                                  if sum(n.consumer == m.consumer for n in program.moves) == 2)]
        assert max(program.gates[add].waits.values()) >= 2  # a chain of each incoming move
    opened = {k: set() for k in fed}  # PEs where the host's arm was the last count, unused
    by_host = 0
    for event in events:
        if event[0] == "arm":
            opened[event[1]] |= event[2]
            continue
        for pe, tasks in event[1].items():
            for k in fed:
                if pe in program.gates[k].waits and set(tasks) & set(program.entries(k)[pe]):
                    assert pe in opened[k], (k, pe)  # the host starts it: its arm was last
                    opened[k].discard(pe)
                    by_host += 1
    assert not any(opened.values())  # every PE the host's arm opened, it started
    assert (by_host > 0) == (model is Fan)
    assert one.same_words(0, alone[0].words[0]) and alone[0].same_words(0, one.words[0])
    for s, call in enumerate(alone):
        assert stream.same_words(s, call.words[0]) and call.same_words(0, stream.words[s])
    with pytest.raises(ValueError, match='start "data" needs a model program built with '
                                         "gates"):
        run_stream(cm.model_program(), [cm._inputs((xs[0],))], 10_000, start="data")


def test_the_host_arms_a_gate_only_where_no_task_runs():
    """A delivering chain reads, decrements and writes its gate's word within one
    activation; a count the host took between its read and its write was lost (the chain
    wrote its own decrement back over it) and the kernel never started there (a SUMMA tile
    run transposed hit it, tests/frontend/test_gemv_lowering.py). The host leaves a PE
    whose CE runs a task for a later look."""
    torch.manual_seed(0)
    cm = frontend.compile(Residual().eval(), (torch.randn(3, 16),), SMALL, mode="pipelined")
    program = cm.model_program(gated=True)
    kernel, gate = next(iter(program.gates.items()))
    sim = program.simulator()
    busy = next(iter(gate.addresses))
    st = sim.state
    sim.state = engine.replace(st, task=st.task.at[busy].set(0))  # a task runs there
    before = {pe: int(sim.sram_view()[(*pe, a)]) for pe, a in gate.addresses.items()}
    opened, later = program.arm_gate(sim, kernel)
    after = {pe: int(sim.sram_view()[(*pe, a)]) for pe, a in gate.addresses.items()}
    assert later == {busy} and after[busy] == before[busy]
    assert all(after[pe] == before[pe] - 1 for pe in gate.addresses if pe != busy)
    assert opened == {pe for pe in gate.addresses if pe != busy and after[pe] == 0}
    st = sim.state
    sim.state = engine.replace(st, task=st.task.at[busy].set(-1))  # idle: the host counts
    opened, later = program.arm_gate(sim, kernel, later)
    assert not later and int(sim.sram_view()[(*busy, gate.addresses[busy])]) == before[busy] - 1


def test_samples_stream_through_the_one_program():
    """Four samples through the test MLP's one program: each sample's words bit for bit
    those of a call on it alone; consecutive samples overlap (a part starts on the next
    sample once it and what it overwrites are done), so the stream takes less than four
    calls, and the steady state's cycles per sample are within 10 % of its slowest part's
    cycles alone (the rate of the slowest stage, as the pipelined timeline predicts)."""
    torch.manual_seed(0)
    xs = [torch.randn(3, 16) for _ in range(4)]
    cm = frontend.compile(MLP().eval(), (xs[0],), SMALL, mode="pipelined")
    alone = [cm.one_program(x) for x in xs]
    stream = cm.one_program_stream([(x,) for x in xs])
    program = cm.model_program()
    for s, one in enumerate(alone):
        for stage, words in one.words[0].items():
            for k, w in words.items():
                np.testing.assert_array_equal(stream.words[s][stage][k], w,
                                              err_msg=f"sample {s}, stage {stage}")
    for name in program.order:  # a part's samples in order, one at a time
        ends = [stream.spans[(name, s)] for s in range(4)]
        assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:])), name
    assert stream.latency < stream.cycles < sum(one.cycles for one in alone)
    slowest = max(alone[0].part_cycles().values())
    assert stream.period == pytest.approx(slowest, rel=0.10)
    with pytest.raises(FrontendError, match="no samples given"):
        cm.one_program_stream([])


def test_host_io_takes_the_host_links_cycles_in_a_stream():
    """Three samples through the test MLP's one program, started by their data, with the
    host link's transfers: the same words as with them apart. Each user input has a second
    buffer (its hold and relay on the kernel's PEs), which the host writes once the relay
    has carried the previous sample on, so a write overlaps the kernel's work on the sample
    before; each direction carries one transfer at a time, each in the cycles a call run
    apart charges (`fabric.host_io_cycles`); an output is read after its kernel's sample
    and before its next one (the stage would overwrite it); the fabric waits on the link
    where nothing else can move (its receivers started, its first input still being
    written: no deadlock) and a sample ends with its last output read."""
    torch.manual_seed(0)
    # 8 rows: the first input's packed write (85 cycles) outlasts the deadlock window (64)
    xs = [torch.randn(8, 16) for _ in range(3)]
    cm = frontend.compile(MLP().eval(), (xs[0],), SMALL, mode="pipelined", colors="fit")
    apart = cm.one_program_stream([(x,) for x in xs], start="data")
    waits, wait = [], Simulator.wait
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Simulator, "wait", lambda sim, n: waits.append(n) or wait(sim, n))
        run = cm.one_program_stream([(x,) for x in xs], start="data", host_io=True)
    assert not apart.host and waits  # the first input's write outlasts the deadlock window
    for s in range(3):
        assert run.same_words(s, apart.words[s]) and apart.same_words(s, run.words[s])
    program = cm.model_program(gated=True, input_buffers=True)
    cm(xs[0])
    host_written = {r.name: sum(t.link_cycles for t in r.transfers if t.host)
                    for r in cm.last.results}
    assert program.inputs and set(program.writers) == {b.relay for b in program.inputs}
    named = part_descriptions(program.prepared, program.moves, program.stages, program.inputs)
    for b in program.inputs:  # a report on a stuck stream names the buffer's parts
        assert named[b.relay] == (f"input {b.tensor!r} -> {b.consumer!r} operand "
                                  f"{b.operand!r}, relay of its buffer")
        assert named[b.hold].endswith(", its buffer")
    written = {b.relay: host_written[b.consumer] for b in program.inputs}
    read = {program.stages[k]: v for k, v in cm.output_reads.items()}
    assert all(written.values()) and read
    for kind, charged in (("write", written), ("read", read)):
        spans = sorted(span for (_, _, k), span in run.host.items() if k == kind)
        assert len(spans) == 3 * len(charged)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # one at a time
        for (part, _, k), (first, end) in run.host.items():
            if k == kind:
                assert end - first == charged[part]
    overlaps = 0
    for (part, s, kind), (first, end) in run.host.items():
        span = run.spans[(part, s)]
        if kind == "write":
            assert end <= span[0]
            assert s == 0 or run.spans[(part, s - 1)][1] <= first
            kernel = program.stages[next(b.consumer for b in program.inputs
                                         if b.relay == part)]
            overlaps += s > 0 and first < run.spans[(kernel, s - 1)][1]
        else:
            assert span[1] <= first
            assert s == 2 or end <= run.spans[(part, s + 1)][0]
    assert overlaps  # a write while the kernel works on the sample before
    ends = run.ends()
    assert ends[0] == run.latency == max(end for (_, s, _), (_, end) in run.host.items()
                                         if s == 0)
    assert run.latency > apart.latency and run.cycles >= max(ends)
    # the buffers carry the same words when the host starts every part, link or not
    by_parts = cm.one_program_stream([(x,) for x in xs], start="part", host_io=True)
    serial = run_stream(cm.model_program(input_buffers=True), [cm._inputs((x,)) for x in xs],
                        cm.max_cycles, start="serial")
    for s in range(3):
        assert by_parts.same_words(s, apart.words[s]) and serial.same_words(s, apart.words[s])


def test_the_host_skips_only_the_looks_that_find_nothing_new():
    """Three samples of the test MLP through its one program, in every start policy and
    with the host link's transfers in the stream: a host that runs the engine on through
    the looks that would find what the last one found (`fabric.PartMap.advance`) takes
    the same decisions at the same cycles as one reading every look (`every_look=True`):
    the same spans, host transfers, cycles and words, in a fraction of the looks."""
    torch.manual_seed(0)
    xs = [torch.randn(8, 16) for _ in range(3)]
    cm = frontend.compile(MLP().eval(), (xs[0],), SMALL, mode="pipelined", colors="fit")
    samples = [cm._inputs((x,)) for x in xs]
    advance = PartMap.advance
    for start, host_io in (("part", False), ("pe", False), ("data", False), ("data", True)):
        program = cm.model_program(gated=start == "data", input_buffers=host_io)
        host = host_link(program, cm.output_reads) if host_io else None
        runs, looks = [], []
        for every_look in (False, True):
            calls = []
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(PartMap, "advance",
                              lambda *a, calls=calls, **k: calls.append(1) or advance(*a, **k))
                runs.append(run_stream(program, samples, cm.max_cycles, start=start,
                                       host=host, every_look=every_look))
            looks.append(len(calls))
        skipping, every = runs
        assert (skipping.spans, skipping.host, skipping.cycles) == \
            (every.spans, every.host, every.cycles), (start, host_io)
        assert all(skipping.same_words(s, every.words[s]) for s in range(3))
        assert looks[0] < looks[1] / 2, (start, host_io, looks)


def test_inputs_without_room_for_a_second_buffer_are_written_into_their_operands():
    """Where the PEs' SRAM does not hold the input buffers (their build refused), the
    stream with the host link uses the program without them: each input written into
    its kernel's operand once the kernel is done with the sample before (one buffer),
    the same words."""
    torch.manual_seed(0)
    xs = [torch.randn(3, 16) for _ in range(3)]
    cm = frontend.compile(MLP().eval(), (xs[0],), SMALL, mode="pipelined")
    build = frontend.compiled.build_model_program

    def no_room(*args, input_buffers=False, **kwargs):
        if input_buffers:
            raise PlacementError("SRAM: no room for the input buffers")
        return build(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frontend.compiled, "build_model_program", no_room)
        run = cm.one_program_stream([(x,) for x in xs], start="data", host_io=True)
        program = cm.model_program(gated=True, input_buffers=True)
    assert program is cm.model_program(gated=True) and not program.inputs
    assert set(program.writers) <= set(program.stages.values())
    writes = [(part, s, span) for (part, s, kind), span in run.host.items() if kind == "write"]
    assert len(writes) == 3 * len(program.writers)
    for part, s, (first, end) in writes:
        assert end <= run.spans[(part, s)][0]  # the kernel armed once its input is in
        assert s == 0 or run.spans[(part, s - 1)][1] <= first  # its operand free first
    apart = cm.one_program_stream([(x,) for x in xs], start="data")
    assert all(run.same_words(s, apart.words[s]) for s in range(3))


def test_one_program_needs_a_pipelined_model():
    x = torch.randn(3, 16)
    cm = frontend.compile(MLP().eval(), (x,), CONFIG, mode="sequential")
    with pytest.raises(FrontendError, match="one fabric program holds a pipelined model"):
        cm.one_program(x)


def test_a_model_over_a_pes_registers_is_refused_naming_the_parts():
    """With 14 registers a PE, each kernel still fits its tile (SUMMA takes 14), but a tile
    with a move's counter beside its kernel's does not, even with the moves' counters in
    memory (their one scratch register): the error names the resource and the stage and
    move whose code shares the PE. (LeNet's convolution: a chain of several ops beside the
    SUMMA; a chain of one op has no counter.)"""
    # the scenario's tiles (a move's chain beside the convolution's SUMMA) are those the
    # balance takes where the fmas run async
    config = dataclasses.replace(SMALL, num_registers=14, async_memory_ops=True)
    x = torch.randn(2, 1, 8, 8)
    cm = frontend.compile(LeNet().eval(), (x,), config, mode="pipelined")
    with pytest.raises(PlacementError, match=r"does not fit one fabric program: .*registers"
                                             r"(.|\n)*parts: s\d+ = stage "):
        cm.one_program(x)


def test_a_model_short_of_colors_is_refused_with_the_shortfall():
    x = torch.randn(3, 16)
    few = CONFIG.replace(reserved_colors=tuple(range(6, 24)))  # it needs 10 here
    cm = frontend.compile(MLP().eval(), (x,), few, mode="pipelined", colors="report")
    assert not cm.colors.assignment.ok
    with pytest.raises(PlacementError, match=r"does not fit one fabric program: the parts "
                                             r"need at least \d+ colors and small\(12,12\) "
                                             r"has 6 colors"):
        cm.one_program(x)


@pytest.mark.long
def test_per_call_gathers_are_refused():
    idx = torch.randint(0, 32, (2, 4))
    cm = frontend.compile(TinyGPT().eval(), (idx,), CONFIG, mode="pipelined",
                          colors="report")
    with pytest.raises(PlacementError, match="gathers operand .* by each call's indices"):
        cm.one_program(idx)


def test_a_stuck_call_names_the_move_and_its_pes():
    """A move whose receivers never start (its "recv" chain left out): its wavelets fill the
    routes and input queues and stop, and the deadlock is reported by part, the move named
    by its ends with the PEs where its wavelets wait, before the engine's own report."""
    torch.manual_seed(0)
    x = torch.randn(3, 16)
    cm = frontend.compile(MLP().eval(), (x,), SMALL, mode="pipelined")
    cm.one_program(x)
    program = cm.model_program()
    move = program.moves[0]
    first = move.rounds[0]
    assert "recv" in program.round_tasks[first]
    program.round_tasks[first] = tuple(t for t in program.round_tasks[first] if t != "recv")
    with pytest.raises(StageRunError) as info:
        cm.one_program(x)
    text = str(info.value)
    assert isinstance(info.value.__cause__, DeadlockError)
    assert f"parts running: {first} = move {move.tensor!r} -> {move.consumer!r}" in text
    stuck = re.search(r"stuck in:\n  move (.*) at PEs? (.*)\n", text)
    assert stuck and stuck.group(1).startswith(f"{move.tensor!r} -> {move.consumer!r}")
    waiting = {tuple(map(int, pe)) for pe in re.findall(r"\((\d+), (\d+)\)", stuck.group(2))}
    consumer = cm.placement.rects[move.consumer]
    window = bounding_box(cm.placement.rects[move.tensor], consumer)
    assert all(window.contains(*pe) for pe in waiting)  # on the move's routes
    assert any(consumer.contains(*pe) for pe in waiting)  # at receivers that never took them
    assert "deadlock at cycle" in text and "CE input queues holding" in text  # the engine's


def test_a_call_past_the_cycle_limit_names_the_running_stage():
    torch.manual_seed(0)
    x = torch.randn(3, 16)
    cm = frontend.compile(MLP().eval(), (x,), SMALL, mode="pipelined", max_cycles=50)
    with pytest.raises(StageRunError, match=r"parts running: s0 = stage 'addmm' \(FX node "
                                            r"'addmm'.*\n(.|\n)*cycle limit reached"):
        cm.one_program(x)
    # in a stream, each part with the sample it was on
    with pytest.raises(StageRunError, match=r"parts running: s0 \(sample 0\) = stage 'addmm' "
                                            r"\(FX node 'addmm'"):
        cm.one_program_stream([(x,), (x,)])


def test_a_stream_that_cannot_go_on_stops_instead_of_hanging():
    """A plan whose first part waits for the last (a cycle in `after`): nothing can start,
    and the stream says so instead of looking at a quiet fabric forever."""
    torch.manual_seed(0)
    x = torch.randn(3, 16)
    cm = frontend.compile(MLP().eval(), (x,), SMALL, mode="pipelined")
    cm.one_program(x)
    program = cm.model_program()
    first, last = program.order[0], program.order[-1]
    program.after[first] = frozenset([last])
    with pytest.raises(StageRunError, match=r"stopped at cycle 0 with nothing running and "
                                            rf"parts not done: \[\('{first}', 0\)"):
        cm.one_program(x, overlap=True)


@pytest.mark.long
def test_moves_that_overfill_a_pes_registers_count_in_memory():
    """The zoo's ELECTRA (its embedding projection's output moves to the three attention
    GEMMs and the residual's add): with a register per move chain, the projection's PEs
    would need 17 registers beside its SUMMA's 14. Those moves count their chains'
    activations in memory and share one scratch register there
    (`fabric.kernels.SHARED_COUNTER`), so the model builds as one program, and a sample
    started by its data gives the words of its parts run apart, bit for bit."""
    from fabric.kernels import SHARED_COUNTER
    from frontend.architectures import build, fabric_config

    model, inputs = build("electra")
    cm = frontend.compile(model, inputs, config=fabric_config("electra"), mode="pipelined",
                          colors="fit", lookups="onehot")
    program = cm.model_program(gated=True)
    placements = program.merged.program.placements
    assert any(SHARED_COUNTER in p.tile.registers for p in placements)
    assert max(len(p.tile.registers) for p in placements) <= cm.config.num_registers
    cm(*inputs)
    run = cm.one_program_stream([tuple(inputs)], start="data")
    assert run.same_words(0, cm.last.words)
