"""The datapath changing hands between DSD ops: the op that advances in a cycle is the one
whose record it uses (the engine keeps the record of the slot that advanced last and
fetches another only when the datapath changes slot)."""

import numpy as np

from fabric import Tile
from fabric import instructions as ins
from tests.fabric.programs import invariants, run_stepwise, two_colors_into


def test_two_async_fabric_ops_take_turns_and_each_writes_its_own_array():
    """Colors 1 and 2 share the link into the receiver, which the router serves round-robin,
    so one wavelet of each color arrives every other cycle. The receiver's two async movs
    (one per color) then hand the datapath back and forth: each finds its queue empty in
    the cycle after it moved. Every word must land in its own op's array, in order."""
    n = 20
    recv = Tile("recv")
    y1 = recv.symbol("y1", "f32", n)
    y2 = recv.symbol("y2", "f32", n)
    recv.local_task("main", [ins.mov(y1.dsd(), ins.FabIn(1, n), is_async=True),
                             ins.mov(y2.dsd(), ins.FabIn(2, n), is_async=True)])
    d1 = np.arange(1, n + 1, dtype=np.float32)
    d2 = -np.arange(1, n + 1, dtype=np.float32) * 0.5
    sim = two_colors_into(recv, n, d1, d2)
    owners = []
    for stats in run_stepwise(sim, chunk=1):
        invariants(sim, stats)
        owners.append(int(np.asarray(sim.state.owner)[0, 3]))
    np.testing.assert_array_equal(sim.memcpy_d2h("y1")[0, 0], d1)
    np.testing.assert_array_equal(sim.memcpy_d2h("y2")[0, 0], d2)
    # the async ops sit in slots 1 and 2; the datapath went from one to the other and back
    # many times (a switch in almost every cycle of the interleaved stream)
    held = [o for o in owners if o >= 0]
    switches = sum(a != b for a, b in zip(held, held[1:]))
    assert set(held) == {1, 2}
    assert switches >= n
