"""`Simulator.wait`: cycles that pass while the host holds back what the fabric waits for.
Nothing moving is then no deadlock; the clock and the counters go on as if the engine ran
those cycles, and the fabric goes on from where it was once the work comes."""

import numpy as np
import pytest

from fabric import DeadlockError, Port, Program, Simulator
from tests.fabric.programs import ROW, pe, receiver_tile, sender_tile

N = 4  # wavelets sent and received


def _waiting_receiver() -> Simulator:
    """A receiver at PE (0, 3) waiting for color 5 from PE (0, 2)'s sender, which the host
    has not started."""
    prog = Program(ROW)
    prog.place(sender_tile(5, N), pe(0, 2))
    prog.place(receiver_tile(5, N), pe(0, 3))
    prog.route(pe(0, 2), 5, Port.RAMP, Port.EAST)
    prog.route(pe(0, 3), 5, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.memcpy_h2d("x", np.arange(N, dtype=np.float32))
    sim.launch("main", pe(0, 3))
    return sim


def test_a_fabric_waiting_on_the_host_lets_the_cycles_pass():
    """The receiver stalls through 500 waited cycles, far past the deadlock window (a run
    would raise after 64), then takes the words once the host starts the sender: the
    same words as without the wait, and the cycle count 500 on."""
    sim = _waiting_receiver()
    sim.run(max_cycles=10, raise_on_limit=False)
    before = sim.stats()
    waited = sim.wait(500)
    assert waited.cycles == before.cycles + 500
    # every waited cycle a stall of the receiver's mov, nothing else moves or works
    assert waited.stall[0, 3] - before.stall[0, 3] == 500
    assert (waited.busy == before.busy).all()
    assert waited.link_count.sum() == before.link_count.sum()
    with pytest.raises(DeadlockError, match="waits for input on color 5"):
        sim.run(max_cycles=1_000)  # still nothing to move: a run finds the deadlock
    stuck_at = int(sim.state.cycle)
    sim.wait(10)
    sim.launch("main", pe(0, 2))
    end = sim.run(max_cycles=1_000)
    np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(0, 3)).reshape(-1),
                                  np.arange(N, dtype=np.float32))
    fresh = _waiting_receiver()
    fresh.launch("main", pe(0, 2))
    alone = fresh.run(max_cycles=1_000)
    # the sender's words reach the receiver in the cycles they take with no wait before
    assert end.cycles - (stuck_at + 10) == alone.cycles


def test_a_quiet_fabric_only_lets_the_clock_go_on():
    sim = Simulator(ROW, Program(ROW))
    stats = sim.wait(50)
    assert stats.cycles == 50 and stats.stall.sum() == 0 and stats.busy.sum() == 0
    assert sim.wait(0).cycles == 50
