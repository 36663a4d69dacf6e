"""Round-robin fairness: k flows on different colors sharing one link each get 1/k of it,
and together they keep the link busy every cycle.

Set-up on 4x4: the shared link is PE (1, 1) -> (1, 2) (EAST). Up to four flows merge there:
one from (1, 1)'s own CE and one through each of its W, N and S ports; after the link they
split to four different receivers.
"""

import numpy as np
import pytest

from fabric import Port, Simulator
from tests.fabric.programs import GRID4, Flow, flows_program, invariants, pe, run_stepwise

N = 12
FLOWS = [
    Flow(1, (1, 1), [(1, 1), (1, 2)], [(1, 2)], N),
    Flow(2, (1, 0), [(1, 0), (1, 1), (1, 2), (1, 3)], [(1, 3)], N),
    Flow(3, (0, 1), [(0, 1), (1, 1), (1, 2), (0, 2)], [(0, 2)], N),
    Flow(4, (2, 1), [(2, 1), (1, 1), (1, 2), (2, 2)], [(2, 2)], N),
]


@pytest.mark.parametrize("k", [2, 3, 4])
def test_flows_sharing_a_link_get_equal_shares(k):
    flows = FLOWS[:k]
    colors = [f.color for f in flows]
    sim = Simulator(GRID4, flows_program(GRID4, flows))
    for i, f in enumerate(flows):
        sim.memcpy_h2d("x", np.arange(N, dtype=np.float32) + 100 * i, pe(*f.src))
    sim.launch("main")
    crossed, link_busy = [], []
    previous = 0
    for stats in run_stepwise(sim):
        crossed.append(stats.color_count_per_pe[1, 1, colors])  # per color, so far
        link = int(stats.link_count[1, 1, Port.EAST])
        link_busy.append(link - previous)
        previous = link
        invariants(sim, stats)
    crossed = np.array(crossed)  # [cycle, flow]
    link_busy = np.array(link_busy)

    # the link is busy every cycle from its first use until all k*N wavelets crossed
    first = int(np.argmax(link_busy))
    np.testing.assert_array_equal(link_busy[first:first + k * N], 1)
    assert link_busy.sum() == k * N

    # round robin: at every cycle the flows' counts differ by at most one wavelet, and
    # the flows finish within one round (k - 1 cycles) of each other
    assert (crossed.max(axis=1) - crossed.min(axis=1)).max() <= 1
    done = [int(np.argmax(crossed[:, i] == N)) for i in range(k)]
    assert max(done) - min(done) <= k - 1

    for i, f in enumerate(flows):
        got = sim.memcpy_d2h("y", pe(*f.receivers[0]))[0, 0]
        np.testing.assert_array_equal(got, np.arange(N, dtype=np.float32) + 100 * i)
