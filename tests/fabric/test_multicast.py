"""Multicast: one color forwarded to several ports delivers every wavelet to every target
exactly once (the extra copies are counted as forks), and a multicast moves only when every
target has room."""

import numpy as np

from fabric import Port, Program, Simulator, router
from tests.fabric.programs import (
    GRID4,
    GRID6,
    ROW,
    Flow,
    Routes,
    flows_program,
    invariants,
    l_path,
    pe,
    receiver_tile,
    row_path,
    run_stepwise,
    sender_tile,
    slow_receiver_tile,
)


def test_row_multicast_reaches_every_receiver_once():
    """PE (0, 0) sends 12 wavelets east; PEs 2, 4 and 7 take a copy on the way."""
    n = 12
    receivers = [(0, 2), (0, 4), (0, 7)]
    flow = Flow(5, (0, 0), row_path(0, 0, 7), receivers, n)
    sim = Simulator(ROW, flows_program(ROW, [flow]))
    data = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    sim.memcpy_h2d("x", data, pe(0, 0))
    sim.launch("main")
    stats = sim.run()
    for r in receivers:
        np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(*r))[0, 0], data)
    # one extra copy per wavelet at each of the two forking routers (PEs 2 and 4)
    assert stats.forked == 2 * n
    assert stats.injected == n
    assert stats.delivered == stats.consumed == 3 * n
    np.testing.assert_array_equal(stats.link_count[0, :, Port.EAST], [n] * 7 + [0])
    # zero load: the multicast costs no time over a unicast to the farthest receiver
    assert stats.cycles == 1 + (n - 1) + 7 + 2 + 2
    invariants(sim, stats)


def test_tree_multicast_from_the_centre_of_a_grid():
    """PE (1, 1) fans color 3 out to N, S, E and W; two branches go one hop further and
    also deliver on the way (6 receivers, forks at three routers)."""
    n = 9
    src = (1, 1)
    branches = [[src, (0, 1)], [src, (2, 1), (3, 1)], [src, (1, 2), (1, 3)], [src, (1, 0)]]
    routes = Routes()
    receivers = []
    for cells in branches:
        routes.add_path(3, cells, receivers=cells[1:])
        receivers += cells[1:]
    prog = Program(GRID4)
    prog.place(sender_tile(3, n), pe(*src))
    for i, cell in enumerate(receivers):
        prog.place(receiver_tile(3, n, f"recv{i}"), pe(*cell))
    routes.apply(prog)
    sim = Simulator(GRID4, prog)
    data = np.arange(n, dtype=np.float32) * 1.5 - 3
    sim.memcpy_h2d("x", data)
    sim.launch("main")
    stats = sim.run()
    for cell in receivers:
        np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(*cell))[0, 0], data)
    # (1, 1) makes 4 copies (3 extra), (2, 1) and (1, 2) make 2 each (1 extra)
    assert stats.forked == 5 * n
    assert stats.delivered == stats.consumed == 6 * n
    assert stats.link_count.sum() == 6 * n
    link = stats.link_count
    assert link[1, 1, Port.NORTH] == link[1, 1, Port.SOUTH] == n
    assert link[1, 1, Port.EAST] == link[1, 1, Port.WEST] == n
    assert link[2, 1, Port.SOUTH] == link[1, 2, Port.EAST] == n
    invariants(sim, stats)


def test_multicast_waits_for_room_on_every_branch():
    """PE (0, 3) multicasts east to a fast receiver and west to a slow one. A wavelet
    leaves the fork only when both branches have room, so the fast receiver can run ahead
    of the slow one by at most what the slow branch buffers (router buffer + CE queue)."""
    n, q = 24, ROW.queue_depth
    prog = Program(ROW)
    prog.place(sender_tile(2, n), pe(0, 3))
    prog.place(receiver_tile(2, n, "fast"), pe(0, 4))
    prog.place(slow_receiver_tile(2, n, "slow"), pe(0, 2))
    prog.route(pe(0, 3), 2, Port.RAMP, [Port.EAST, Port.WEST])
    prog.route(pe(0, 4), 2, Port.WEST, Port.RAMP)
    prog.route(pe(0, 2), 2, Port.EAST, Port.RAMP)
    sim = Simulator(ROW, prog)
    data = np.arange(1, n + 1, dtype=np.float32)
    sim.memcpy_h2d("x", data)
    sim.launch("main")
    lead = []
    fast_done = None
    for stats in run_stepwise(sim):
        fast, slow = int(sim.state.consumed[0, 4]), int(sim.state.consumed[0, 2])
        lead.append(fast - slow)
        if fast == n and fast_done is None:
            fast_done = stats.cycles
        invariants(sim, stats)
    assert max(lead) == 2 * q  # the slow branch's buffers hold exactly 2q wavelets
    assert fast_done > 10 * (n - 2 * q)  # throttled to the slow receiver's pace
    np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(0, 4))[0, 0], data)
    np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(0, 2))[0, 0], data)
    assert stats.forked == n and stats.consumed == 2 * n


def test_a_multicast_that_loses_a_port_is_offered_again_and_delivers_once():
    """Two multicast colors (1 and 9) and a unicast (4) contend for the same output ports on
    GRID6: in some cycles a multicast wins one of its ports and loses another, so the router
    re-arbitrates without it (the second pass). Every receiver still gets its flow's words
    exactly once and in order, and every copy is accounted for."""
    flows = [Flow(1, (2, 0), row_path(2, 0, 5), [(2, 3), (2, 5)], 18),
             Flow(4, (0, 3), l_path((0, 3), (2, 4), row_first=False), [(2, 4)], 14),
             Flow(9, (4, 1), l_path((4, 1), (2, 2), row_first=True), [(2, 2)], 9)]
    sim = Simulator(GRID6, flows_program(GRID6, flows))
    rng = np.random.default_rng(7)
    sent = []
    for f in flows:
        sent.append(rng.standard_normal(f.n).astype(np.float32))
        sim.memcpy_h2d("x", sent[-1], pe(*f.src))
    sim.launch("main")
    lost_a_port = 0
    for stats in run_stepwise(sim):
        lost_a_port += int((np.asarray(router._decide(GRID6, sim.tables, sim.state)[-1])
                            != 0).any())
        invariants(sim, stats)
    assert lost_a_port > 0  # the second arbitration pass ran
    for f, data in zip(flows, sent):
        for r in f.receivers:
            np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(*r))[0, 0], data)
    total = sim.stats()
    assert total.consumed == sum(f.n * len(f.receivers) for f in flows) and \
        total.in_flight == 0
