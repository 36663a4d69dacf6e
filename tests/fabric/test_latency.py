"""Zero-load hop latency and link throughput against their exact values.

Rule (docs/engine.md): a wavelet a CE sends in cycle t can be consumed by a CE h hops away
at cycle t + h*L + (L + 1) at the earliest (L = hop_latency): it waits L cycles in each of
the h + 1 router buffers on its way and reaches the CE input queue one cycle before it can
be read. A stream of N wavelets then follows at one wavelet per cycle.
"""

import numpy as np
import pytest

from tests.fabric.programs import ROW, ROW_L2, ROW_Q2, pe, run_stepwise, stream_sim

CONFIGS = {"L1": ROW, "L2": ROW_L2, "L1-Q2": ROW_Q2}


def zero_load_latency(h: int, L: int) -> int:
    return h * L + (L + 1)


@pytest.mark.parametrize("name", ["L1", "L2"])
@pytest.mark.parametrize("h", [1, 2, 4, 7])
def test_zero_load_latency_is_exact(name, h):
    """Measured per cycle: the cycle the sender injects vs the cycle the receiver consumes."""
    cfg = CONFIGS[name]
    sent = got = None
    sim = stream_sim(cfg, n=1, hops=h)
    for _ in run_stepwise(sim):
        now = int(sim.state.cycle) - 1  # the cycle that just ran
        if sent is None and int(sim.state.injected[0, 0]) == 1:
            sent = now
        if got is None and int(sim.state.consumed[0, h]) == 1:
            got = now
    # the sender starts its task in cycle 0 and sends in cycle 1
    assert sent == 1
    assert got - sent == zero_load_latency(h, cfg.hop_latency)


@pytest.mark.parametrize("name", ["L1", "L2", "L1-Q2"])
@pytest.mark.parametrize(("h", "n"), [(1, 1), (1, 24), (3, 7), (7, 24)])
def test_stream_completes_at_one_wavelet_per_cycle(name, h, n):
    """Total cycles = last consumption + 2 (the receiver's op ends there; RET next cycle)
    = 1 + (n - 1) + h*L + (L + 1) + 2; data arrive exactly, in order."""
    cfg = CONFIGS[name]
    data = np.random.default_rng(h * 100 + n).standard_normal(n).astype(np.float32)
    sim = stream_sim(cfg, n=n, hops=h, data=data)
    stats = sim.run()
    assert stats.cycles == 1 + (n - 1) + zero_load_latency(h, cfg.hop_latency) + 2
    np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(0, h))[0, 0], data)
    # every link on the way carried each wavelet once, no other link was used
    east = np.zeros(cfg.cols, np.int64)
    east[:h] = n
    np.testing.assert_array_equal(stats.link_count[0, :, 2], east)
    assert stats.link_count[..., [0, 1, 3]].sum() == 0
    assert stats.injected == stats.delivered == stats.consumed == n
    assert stats.forked == 0 and stats.in_flight == 0
    # the receiver only waited for data; the sender never waited (zero load)
    assert stats.stall[0, 0] == 0
    assert stats.busy[0, 0] == n + 2


def test_color_count_counts_each_router_on_the_path():
    sim = stream_sim(ROW, n=5, hops=3, color=7)
    stats = sim.run()
    per_pe = stats.color_count_per_pe[0, :, 7]
    np.testing.assert_array_equal(per_pe, [5, 5, 5, 5, 0, 0, 0, 0])
    assert stats.color_count[7] == 20 and stats.color_count.sum() == 20
