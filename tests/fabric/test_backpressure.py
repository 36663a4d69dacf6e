"""Backpressure: bounded buffers fill, the sender stalls, nothing is lost or reordered, and
a congested color does not block another color on the same links."""

import numpy as np
import pytest

from fabric import Port, Program, Simulator, Tile
from fabric import instructions as ins
from tests.fabric.programs import (
    ROW,
    ROW_Q2,
    SLOW_WORK,
    Flow,
    flows_program,
    invariants,
    pe,
    row_path,
    run_stepwise,
    sender_tile,
    slow_receiver_tile,
    two_colors_into,
)


@pytest.mark.parametrize("config", [ROW, ROW_Q2], ids=["Q4", "Q2"])
def test_slow_consumer_loses_nothing_and_keeps_order(config):
    n, q = 30, config.queue_depth
    prog = Program(config)
    prog.place(sender_tile(0, n), pe(0, 0))
    prog.place(slow_receiver_tile(0, n), pe(0, 1))
    prog.route(pe(0, 0), 0, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 0, Port.WEST, Port.RAMP)
    sim = Simulator(config, prog)
    data = np.random.default_rng(q).standard_normal(n).astype(np.float32)
    sim.memcpy_h2d("x", data)
    sim.launch("main")
    for stats in run_stepwise(sim, chunk=3):
        invariants(sim, stats)  # includes 0 <= every buffer <= q
    np.testing.assert_array_equal(sim.memcpy_d2h("y")[0, 0], data)
    assert stats.injected == stats.delivered == stats.consumed == n
    assert stats.in_flight == 0
    # the 3q buffered places on the way (two router buffers and the receiver's CE queue)
    # filled up, so the sender had to wait
    assert stats.stall[0, 0] > 0
    # the consumer sets the pace: start + set_reg + n iterations + RET, plus the two
    # cycles its first read waits for the first wavelet (zero-load latency 3 from cycle 1)
    per_iteration = 1 + SLOW_WORK + 2
    assert stats.cycles == 1 + 1 + n * per_iteration + 1 + 2


def test_congested_color_does_not_block_another_color():
    """Colors 1 and 2 share the links 1->2->3. The receiver reads all of color 2 before any
    of color 1, so color 1 backs up into full buffers along the row, while color 2 keeps
    flowing past it."""
    n = 24
    recv = Tile("recv")
    y1 = recv.symbol("y1", "f32", n)
    y2 = recv.symbol("y2", "f32", n)
    recv.local_task("main", [ins.mov(y2.dsd(), ins.FabIn(2, n)),
                             ins.mov(y1.dsd(), ins.FabIn(1, n))])
    d1 = np.arange(n, dtype=np.float32)
    d2 = -np.arange(n, dtype=np.float32)
    sim = two_colors_into(recv, n, d1, d2)
    saw_full = False
    for stats in run_stepwise(sim, chunk=2):
        saw_full |= bool((np.asarray(sim.state.rq_count)[0, :3, 1] == ROW.queue_depth).all())
        invariants(sim, stats)
    assert saw_full  # color 1 really was backed up along its whole path
    np.testing.assert_array_equal(sim.memcpy_d2h("y1")[0, 0], d1)
    np.testing.assert_array_equal(sim.memcpy_d2h("y2")[0, 0], d2)


def test_cycle_limit_run_can_be_continued():
    """Stopping at a cycle limit (raise_on_limit=False) and running on gives the same
    result and cycle count as one run."""
    flow = Flow(4, (0, 0), row_path(0, 0, 5), [(0, 5)], 20)
    results = []
    for chunks in ([10_000], [7, 5, 10_000]):
        sim = Simulator(ROW, flows_program(ROW, [flow]))
        sim.memcpy_h2d("x", np.arange(20, dtype=np.float32), pe(0, 0))
        sim.launch("main")
        for chunk in chunks[:-1]:
            partial = sim.run(max_cycles=chunk, raise_on_limit=False)
            assert partial.run_cycles == chunk
        stats = sim.run(max_cycles=chunks[-1])
        results.append((stats.cycles, sim.memcpy_d2h("y", pe(0, 5)).tolist()))
    assert results[0] == results[1]
