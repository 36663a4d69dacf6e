"""Recording (`Simulator.record`): the trace-event JSON has the documented fields, its events
match the run's counters PE by PE, chunk boundaries do not split events, and recording
changes neither the results nor the cycle counts."""

import dataclasses
import json
import math

import numpy as np
import pytest

from fabric import DeadlockError, Port, Program, Rect, Simulator, Tile, engine
from fabric import instructions as ins
from fabric.demo import reference, row_reduce_program
from fabric.isa import LINK_PORTS
from tests.fabric.programs import GRID4, GRID4_ASYNC, assert_fma_equal, pe, receiver_tile

N = 8  # fp32 values per PE of the demo program
RECT = Rect(1, 1, 2, 3)  # rows 1-2, columns 1-3 of the 4x4 grid
CHUNK = 16  # cycles per engine call: a run of ~50 cycles spans several chunks
SLOTS = GRID4.num_async_slots + 1


def demo_sim():
    """The `wafer run` demo on GRID4 (row broadcast, multiply, chain reduction); launched."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4, N), dtype=np.float32)
    v = rng.standard_normal((4, N), dtype=np.float32)
    sim = Simulator(GRID4, row_reduce_program(GRID4, N))
    for col in range(4):
        sim.memcpy_h2d("a", a[:, col:col + 1], rect=Rect(0, col, 4, 1))
    sim.memcpy_h2d("v", v[:, None, :], rect=Rect(0, 0, 4, 1))
    sim.launch("main")
    return sim, reference(a, v)


def leaves(sim):
    return {f.name: np.asarray(getattr(sim.state, f.name)) for f in dataclasses.fields(sim.state)}


@pytest.fixture(scope="module")
def runs():
    """(plain run: sim, stats), (recorded run: sim, trace, JSON reloaded), reference y."""
    plain, expected = demo_sim()
    stats = plain.run()
    recorded, _ = demo_sim()
    trace = recorded.record(rect=RECT, links=True, chunk_cycles=CHUNK)
    return (plain, stats), (recorded, trace, json.loads(json.dumps(trace.to_json()))), expected


def timed(doc, cat=None):
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and cat in (None, e["cat"])]


def pe_of(event):
    """(row, col) of an event's PE: pid = 1 + row * cols + col."""
    return divmod(event["pid"] - 1, GRID4.cols)


def test_recording_changes_neither_results_nor_cycles(runs):
    (plain, stats), (recorded, trace, _), expected = runs
    assert trace.stats.cycles == stats.cycles == trace.end_cycle
    assert stats.cycles > 2 * CHUNK  # several chunks were recorded
    for name, value in leaves(plain).items():  # SRAM, counters, buffers: bit for bit
        np.testing.assert_array_equal(leaves(recorded)[name], value, err_msg=name)
    y = recorded.memcpy_d2h("w", rect=Rect(0, 0, 4, 1))[:, 0]
    np.testing.assert_array_equal(y, expected)  # same operation order: exact


def test_json_has_the_documented_fields(runs, tmp_path):
    _, (_, trace, doc), _ = runs
    path = trace.save(tmp_path / "sub" / "trace.json")
    assert json.loads(path.read_text()) == doc
    assert doc["otherData"]["rect"] == [1, 1, 2, 3] and doc["otherData"]["links"] is True
    for e in timed(doc):
        assert set(e) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}, e
        assert e["cat"] in ("task", "activity", "op", "link") and e["dur"] >= 1
        assert RECT.contains(*pe_of(e))  # only the recorded PEs
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(names) == sorted(1 + r * 4 + c for r, c in RECT.pes())
    assert names[1 + 1 * 4 + 2] == "PE (1, 2) col2"
    threads = {(e["pid"], e["tid"]) for e in doc["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads == {(e["pid"], e["tid"]) for e in timed(doc)}


def test_busy_stall_and_link_events_match_the_counters(runs):
    (_, stats), (_, trace, doc), _ = runs
    window = (slice(RECT.row, RECT.row_end), slice(RECT.col, RECT.col_end))
    busy = np.zeros((4, 4), np.int64)
    stall = np.zeros((4, 4), np.int64)
    links = np.zeros((4, 4, 4), np.int64)
    for e in timed(doc, "activity"):
        (busy if e["name"] == "busy" else stall)[pe_of(e)] += e["dur"]
    for e in timed(doc, "link"):
        assert e["dur"] == 1  # one wavelet per cycle per link
        links[(*pe_of(e), LINK_PORTS.index(Port[e["args"]["port"]]))] += 1
    np.testing.assert_array_equal(busy[window], stats.busy[window])
    np.testing.assert_array_equal(stall[window], stats.stall[window])
    np.testing.assert_array_equal(links[window], stats.link_count[window])
    np.testing.assert_array_equal(trace.cycles_per_pe("busy"), stats.busy[window])
    assert busy[window].sum() > 0 and stall[window].sum() > 0 and links.sum() > 0


def test_tasks_and_ops_follow_the_program(runs):
    (_, stats), (_, _, doc), _ = runs
    tasks = timed(doc, "task")
    ops = timed(doc, "op")
    # each PE runs `main` once: one event, even across chunk boundaries
    assert sorted(pe_of(e) for e in tasks) == sorted(RECT.pes())
    assert {e["name"] for e in tasks} == {"main"}
    for r, c in RECT.pes():
        (task,) = [e for e in tasks if pe_of(e) == (r, c)]
        mine = sorted((e for e in ops if pe_of(e) == (r, c)), key=lambda e: e["ts"])
        # the demo's code per column: mul (a * v), add of the east neighbour's partial sum
        # (all but the last column), mov west (all but column 0); all synchronous
        expected = ["mul"] + (["add"] if c < 3 else []) + ["mov"]
        assert [e["name"] for e in mine] == expected
        assert all(e["tid"] == 2 and e["args"]["slot"] == 0 for e in mine)
        # start takes one cycle, each op is issued when the previous one ends, the
        # implicit ret takes one cycle
        assert mine[0]["ts"] == task["ts"] + 1
        for before, after in zip(mine, mine[1:]):
            assert after["ts"] == before["ts"] + before["dur"]
        assert task["ts"] + task["dur"] == mine[-1]["ts"] + mine[-1]["dur"] + 1
        # fabric ops move one element per cycle: at least N cycles each
        assert all(e["dur"] >= math.ceil(N / 1) for e in mine)
        # the task's cycles are its busy and stalled cycles (the PE runs nothing else)
        assert task["dur"] == stats.busy[r, c] + stats.stall[r, c]


def test_async_op_and_fma_rounding_under_recording():
    """An async fma (slot 1) then a sync mul (slot 0) on every PE: the mul waits for the
    memory-only fma to release the datapath; fma results are bit-identical either way."""
    n, s = 24, 0.3
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((4, 4, n), dtype=np.float32) for _ in range(2))

    def sim():
        tile = Tile("fma")
        x, y, z, w = (tile.symbol(name, "f32", n) for name in "xyzw")
        tile.local_task("main", [ins.fma(z.dsd(), x.dsd(), y.dsd(), s, is_async=True),
                                 ins.mul(w.dsd(), x.dsd(), y.dsd())])
        prog = Program(GRID4_ASYNC)
        prog.place(tile, Rect(0, 0, 4, 4))
        sim = Simulator(GRID4_ASYNC, prog)
        sim.memcpy_h2d("x", a)
        sim.memcpy_h2d("y", b)
        sim.launch("main")
        return sim

    plain, recorded = sim(), sim()
    stats = plain.run()
    trace = recorded.record(rect=RECT, links=True, chunk_cycles=CHUNK)
    assert trace.stats.cycles == stats.cycles
    for name, value in leaves(plain).items():
        np.testing.assert_array_equal(leaves(recorded)[name], value, err_msg=name)
    assert_fma_equal(recorded.memcpy_d2h("z"), a, b, s)
    doc = trace.to_json()
    fma_cycles = math.ceil(n / GRID4.simd_width("fma"))
    mul_cycles = math.ceil(n / GRID4.simd_width("mul"))
    for r, c in RECT.pes():
        (task,) = [e for e in timed(doc, "task") if pe_of(e) == (r, c)]
        ops = {e["name"]: e for e in timed(doc, "op") if pe_of(e) == (r, c)}
        fma, mul = ops["fma"], ops["mul"]
        assert (fma["tid"], fma["args"]["slot"], mul["tid"]) == (3, 1, 2)
        assert (fma["ts"], fma["dur"]) == (task["ts"] + 1, fma_cycles)
        assert mul["ts"] == task["ts"] + 2
        assert mul["ts"] + mul["dur"] == fma["ts"] + fma["dur"] + mul_cycles
        assert task["ts"] + task["dur"] == mul["ts"] + mul["dur"] + 1


def test_runs_are_maximal_across_chunks(runs):
    _, (_, _, doc), _ = runs
    by_track = {}
    for e in timed(doc, "activity"):
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for events in by_track.values():
        events.sort(key=lambda e: e["ts"])
        for before, after in zip(events, events[1:]):
            touching = before["ts"] + before["dur"] == after["ts"]
            assert not (touching and before["name"] == after["name"]), (before, after)


def test_plain_run_does_not_record(runs):
    # the recorded path is its own executable: `run` is neither retraced nor changed
    before = dict(engine.TRACE_COUNT)
    sim, _ = demo_sim()
    sim.run()
    sim2, _ = demo_sim()
    sim2.record(rect=RECT, links=True, chunk_cycles=CHUNK)
    assert engine.TRACE_COUNT == before


def test_a_deadlock_carries_the_trace_up_to_it():
    prog = Program(GRID4)
    prog.place(receiver_tile(5, 4), pe(1, 1))  # waits for color 5, which nobody sends
    prog.route(pe(1, 1), 5, Port.WEST, Port.RAMP)
    sim = Simulator(GRID4, prog)
    sim.launch("main")
    with pytest.raises(DeadlockError) as info:
        sim.record(rect=RECT, links=True, chunk_cycles=CHUNK)
    trace = info.value.trace
    assert trace.stats is None and trace.end_cycle == int(sim.state.cycle)
    (task,) = timed(trace.to_json(), "task")
    (op,) = timed(trace.to_json(), "op")
    # the task and its mov are still open when the run stops: they end at the last cycle
    assert (task["name"], op["name"]) == ("main", "mov")
    assert task["ts"] + task["dur"] == op["ts"] + op["dur"] == trace.end_cycle


def test_bad_rect_names_the_rect_and_the_grid():
    sim, _ = demo_sim()
    with pytest.raises(ValueError, match=r"Rect\(row=3, col=0, rows=2.*4 x 4"):
        sim.record(rect=Rect(3, 0, 2, 1))
