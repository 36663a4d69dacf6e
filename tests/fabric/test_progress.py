"""Chunked runs: `run` in chunks (with or without a tqdm bar) ends in the same state, with
the same counters and the same errors, as one engine call; chunks are sized to a wall time
(a short run makes one call and, without a terminal or with progress=False, draws nothing);
Ctrl-C stops a run between chunks, and `run` again resumes it to the same final state."""

import dataclasses
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import numpy as np
import pytest

from fabric import CycleLimitError, DeadlockError, Port, Program, Simulator, host
from tests.fabric.programs import ROW, pe, receiver_tile, sender_tile, slow_receiver_tile

ROOT = Path(__file__).resolve().parents[2]

N = 20  # wavelets; the slow receiver takes about 19 cycles each, so a run is ~385 cycles


def slow_stream() -> Simulator:
    """PE (0, 0) streams N wavelets to a slow receiver at PE (0, 1); launched."""
    prog = Program(ROW)
    prog.place(sender_tile(0, N), pe(0, 0))
    prog.place(slow_receiver_tile(0, N), pe(0, 1))
    prog.route(pe(0, 0), 0, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 0, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.memcpy_h2d("x", np.arange(N, dtype=np.float32), pe(0, 0))
    sim.launch("main")
    return sim


def starved() -> Simulator:
    """A receiver waiting for color 5, which nobody sends: a deadlock; launched."""
    prog = Program(ROW)
    prog.place(receiver_tile(5, 4), pe(0, 3))
    prog.route(pe(0, 3), 5, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.launch("main")
    return sim


@pytest.fixture
def engine_calls(monkeypatch):
    """Counts calls of the engine executable made by `Simulator.run`."""
    calls = []
    compiled = host.compiled_run

    def counting(*args):
        exe, seconds = compiled(*args)
        return (lambda *a: calls.append(1) or exe(*a)), seconds

    monkeypatch.setattr(host, "compiled_run", counting)
    return calls


def outcome(sim, **run_args):
    """(what run returned or raised, every state leaf)."""
    try:
        result = dataclasses.asdict(sim.run(**run_args))
        for key in ("wall_s", "compile_s"):
            result.pop(key)
    except (DeadlockError, CycleLimitError) as err:
        result = (type(err), str(err))
    return result, {f.name: np.asarray(getattr(sim.state, f.name))
                    for f in dataclasses.fields(sim.state)}


def assert_same(a, b):
    (ra, sa), (rb, sb) = a, b
    if isinstance(ra, dict):
        for key in ra:
            np.testing.assert_array_equal(ra[key], rb[key], err_msg=key)
    else:
        assert ra == rb
    for name in sa:
        np.testing.assert_array_equal(sa[name], sb[name], err_msg=name)


def test_chunks_stop_once_the_fabric_is_quiet(engine_calls):
    single = outcome(slow_stream(), chunk_cycles=1000)
    assert len(engine_calls) == 1
    chunked = outcome(slow_stream(), chunk_cycles=7)
    assert_same(chunked, single)
    # 385 cycles = 55 chunks of 7; the fabric turns quiet at the end of the 55th, and one
    # more call, which steps nothing, finds it so
    assert single[0]["run_cycles"] == 385
    assert len(engine_calls) == 1 + 55 + 1


@pytest.mark.parametrize("raise_on_limit", [False, True])
def test_chunks_keep_the_cycle_limit_relative_to_the_run(raise_on_limit):
    runs = []
    for chunk in (None, 7):
        sim = slow_stream()
        sim.run(max_cycles=30, raise_on_limit=False)
        runs.append(outcome(sim, max_cycles=100, raise_on_limit=raise_on_limit,
                            chunk_cycles=chunk))
    assert_same(runs[1], runs[0])
    if raise_on_limit:
        assert runs[0][0][0] is CycleLimitError and "now at cycle 130" in runs[0][0][1]
    else:
        assert runs[0][0]["cycles"] == 130


def test_chunks_raise_the_same_deadlock():
    single = outcome(starved())
    chunked = outcome(starved(), chunk_cycles=5)
    assert single[0][0] is DeadlockError
    assert_same(chunked, single)


def test_progress_bar_shows_pe_cycles_per_second(capsys):
    single = outcome(slow_stream(), progress=False)
    assert capsys.readouterr().err == ""
    shown = outcome(slow_stream(), progress=True)
    err = capsys.readouterr().err
    assert "PE-cycles/s" in err and f"{single[0]['run_cycles']}/1000000" in err, err
    assert_same(shown, single)


def test_a_short_run_is_one_engine_call_and_no_terminal_no_bar(capsys, engine_calls):
    slow_stream().run()  # pytest's captured stderr is not a terminal
    assert len(engine_calls) == 1
    assert capsys.readouterr().err == ""


def test_chunks_are_sized_to_a_wall_time(monkeypatch, engine_calls):
    """On a clock where a cycle takes 2**-10 s, chunks aimed at 2**-3 s grow from the first
    one (8 cycles here) by at most 8x a call to 128 cycles, which the next run starts with;
    the result is the same as one call's."""
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(host, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    monkeypatch.setattr(host, "CHUNK_S", 2**-3)
    monkeypatch.setattr(host, "MAX_FIRST_CHUNK", 8)
    monkeypatch.setattr(host, "_CHUNK_CYCLES", {})
    chunks = []
    compiled = host.compiled_run

    def timed(*args):
        exe, seconds = compiled(*args)

        def call(tables, state, end):
            start = int(state.cycle)
            chunks.append(int(end) - start)
            state = exe(tables, state, end)
            clock.now += (int(state.cycle) - start) * 2**-10
            return state
        return call, seconds

    monkeypatch.setattr(host, "compiled_run", timed)
    single = outcome(slow_stream(), chunk_cycles=1000)
    chunks.clear()
    sized = outcome(slow_stream())
    assert_same(sized, single)
    assert chunks == [8, 64, 128, 128, 128]  # 8 + 64 + 128 + 128 + 57 = 385 cycles
    chunks.clear()
    slow_stream().run(max_cycles=100, raise_on_limit=False)
    assert chunks == [100]


@pytest.fixture
def ctrl_c_raises():
    """SIGINT with Python's own handler (KeyboardInterrupt) for the test: a run held back
    from it only where that handler is in place (`fabric.interrupts`), and a test process
    started in the background by a shell without job control inherits SIGINT ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def interrupted_at_call(n: int):
    """A `compiled_run` whose executable's n-th call gets a SIGINT as it returns, as if
    Ctrl-C came while the engine ran."""
    compiled = host.compiled_run
    calls = []

    def interrupting(*args):
        exe, seconds = compiled(*args)

        def call(*a):
            state = exe(*a)
            calls.append(1)
            if len(calls) == n:
                signal.raise_signal(signal.SIGINT)
            return state
        return call, seconds
    return interrupting


def test_an_interrupted_run_resumes_to_the_same_state(monkeypatch, ctrl_c_raises):
    single = outcome(slow_stream(), chunk_cycles=7)
    monkeypatch.setattr(host, "compiled_run", interrupted_at_call(3))
    sim = slow_stream()
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        sim.run(chunk_cycles=7)
    assert signal.getsignal(signal.SIGINT) is handler
    # the state and figures of the three chunks that ran
    assert int(sim.state.cycle) == sim.last_run_cycles == sim.stats().cycles == 21
    resumed = outcome(sim, chunk_cycles=7)
    assert resumed[0].pop("run_cycles") == single[0].pop("run_cycles") - 21
    assert_same(resumed, single)


def test_an_interrupted_recording_leaves_the_last_whole_chunk(monkeypatch, ctrl_c_raises):
    """Simulator.record holds Ctrl-C as run does: the interrupt lands between chunks, with
    the state of the chunks recorded so far, and run goes on to the uninterrupted end."""
    from fabric import trace

    single = outcome(slow_stream(), chunk_cycles=7)
    compiled, calls = trace._compiled, []

    def interrupting(*args):
        exe, seconds = compiled(*args)

        def call(*a):
            out = exe(*a)
            calls.append(1)
            if len(calls) == 2:
                signal.raise_signal(signal.SIGINT)
            return out
        return call, seconds

    monkeypatch.setattr(trace, "_compiled", interrupting)
    sim = slow_stream()
    with pytest.raises(KeyboardInterrupt):
        sim.record(chunk_cycles=16)
    assert int(sim.state.cycle) == sim.last_run_cycles == 32  # two chunks of 16
    resumed = outcome(sim, chunk_cycles=7)
    assert resumed[0].pop("run_cycles") == single[0].pop("run_cycles") - 32
    assert_same(resumed, single)


# A PE that loops forever: a run that ends only at its cycle limit or on Ctrl-C.
SPINNING = textwrap.dedent("""
    import signal
    import time
    from fabric import Program, Simulator, Tile
    from fabric import instructions as ins
    from tests.fabric.programs import ROW, pe

    spin = Tile("spin")
    z = spin.symbol("z", "f32", 16)
    spin.local_task("main", [ins.set_reg("i", 0), ins.label("loop"),
                             ins.fma(z.dsd(), z.dsd(), z.dsd(), 1.0),
                             ins.branch_if_less("i", 1, "loop")])
    prog = Program(ROW)
    prog.place(spin, pe(0, 0))
    sim = Simulator(ROW, prog)
    sim.launch("main")
    # Python's own handler, as in a terminal: a process started by this test's may have
    # SIGINT ignored (a background job of a shell without job control), and so this one
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sim.run(max_cycles=1, raise_on_limit=False)  # compiled before the timed part
    print("running", flush=True)
    try:
        sim.run(max_cycles=10**9)
    except KeyboardInterrupt:
        assert sim.last_run_cycles == int(sim.state.cycle) - 1 > 0
        print("stopped at cycle", int(sim.state.cycle), flush=True)
        raise
""")


def test_ctrl_c_stops_a_long_run_without_a_terminal():
    """SIGINT to a process whose output is piped stops its long run within about a second:
    KeyboardInterrupt, with the simulator at the last whole chunk."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", SPINNING], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready and proc.stdout.readline() == "running\n", proc.stderr.read()
        time.sleep(0.5)  # into the run: past the first chunks, sized by then
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        latency = time.perf_counter() - sent
    finally:
        proc.kill()
        proc.wait()
    assert "KeyboardInterrupt" in err and "stopped at cycle" in out, err
    assert proc.returncode == -signal.SIGINT  # how Python exits on an uncaught Ctrl-C
    assert latency < 3, f"{latency:.1f} s from SIGINT to exit"


def test_advance_in_steps_ends_where_run_ends():
    """`advance` (a host looking every few cycles): steps of 8 cycles end in the state one
    `run` ends in, bit for bit; a step past the quiet fabric stops there; a deadlock and a
    cycle limit raise as in `run`."""
    whole, stepped = slow_stream(), slow_stream()
    whole.run(progress=False)
    while bool(host._pending(stepped.tables, stepped.state)):
        before = int(stepped.state.cycle)
        stepped.advance(8, raise_on_limit=False)
        assert int(stepped.state.cycle) - before == stepped.last_run_cycles <= 8
    for name in ("cycle", "sram", "busy", "link_count", "pc", "activated"):
        np.testing.assert_array_equal(np.asarray(getattr(stepped.state, name)),
                                      np.asarray(getattr(whole.state, name)), err_msg=name)
    assert stepped.stats().cycles == whole.stats().cycles
    with pytest.raises(CycleLimitError, match="cycle limit reached: 8 cycles ran"):
        slow_stream().advance(8)
    stuck = starved()
    with pytest.raises(DeadlockError, match="nothing moved for"):
        for _ in range(100):
            stuck.advance(8, raise_on_limit=False)
