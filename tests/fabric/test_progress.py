"""Progress: `run` in chunks (with or without a tqdm bar) ends in the same state, with the
same counters and the same errors, as one engine call; without a terminal or with
progress=False, `run` makes one engine call and draws nothing."""

import dataclasses
import math

import numpy as np
import pytest

from fabric import CycleLimitError, DeadlockError, Port, Program, Simulator, host
from tests.fabric.programs import ROW, pe, receiver_tile, sender_tile, slow_receiver_tile

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


def test_chunks_stop_at_the_first_quiet_chunk(engine_calls):
    single = outcome(slow_stream(), chunk_cycles=None)
    assert len(engine_calls) == 1
    chunked = outcome(slow_stream(), chunk_cycles=7)
    assert_same(chunked, single)
    assert len(engine_calls) == 1 + math.ceil(single[0]["run_cycles"] / 7)


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


def test_no_terminal_means_no_bar_and_one_engine_call(capsys, engine_calls):
    slow_stream().run()  # pytest's captured stderr is not a terminal
    assert len(engine_calls) == 1
    assert capsys.readouterr().err == ""
