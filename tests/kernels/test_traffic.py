"""Synthetic traffic on static color routes against exact and theoretical values.

Exact: zero-load latency h*L + (L + 1) from send to consume, and a lone stream's
n + h*L + L + 2 cycles (docs/engine.md, `stream_cycles`). Fair sharing: k colors crossing one
link each get 1/k of it within one wavelet and together keep it busy. Every pattern delivers
every word intact and the counters balance (injected, delivered, consumed); contended
patterns finish within 10% of the busiest-resource model.
"""

import numpy as np
import pytest

from fabric import FabricConfig, Port, Rect, Simulator
from fabric.kernels.base import run_kernel
from fabric.kernels.traffic import (
    XY,
    YX,
    Flow,
    assign_colors,
    build_multicast,
    build_neighbour_exchange,
    build_shared_link,
    build_shift,
    build_streams,
    build_traffic,
    build_transpose,
    conflicts,
    cut_bound,
    link_loads,
    route_tree,
    shared_link_trace,
    stream_cycles,
    traffic_inputs,
    traffic_reference,
    transpose_orders,
)

CFG = FabricConfig.small(4, 8)
CFG_L2 = FabricConfig.small(4, 8, hop_latency=2)
CONFIGS = {1: CFG, 2: CFG_L2}
WHOLE = Rect(0, 0, 4, 8)
# destinations h hops from (0, 0): along row 0, then around the corner
DEST = {1: (0, 1), 4: (0, 4), 7: (0, 7), 10: (3, 7)}


def assert_delivered(kernel, result):
    """Every destination holds its flow's words; the counters balance."""
    inputs = traffic_inputs(kernel)
    expected = traffic_reference(kernel, inputs)
    for name, per_dst in expected.items():
        for dst, words in per_dst.items():
            np.testing.assert_array_equal(result.output[name][dst], words, err_msg=name)
    stats = result.stats
    assert stats.injected == kernel.info["injected"]
    assert stats.delivered == stats.consumed == kernel.info["delivered"]
    assert stats.in_flight == 0


def run(kernel):
    result = run_kernel(kernel, traffic_inputs(kernel))
    assert_delivered(kernel, result)
    return result


@pytest.mark.parametrize("L", [1, 2])
@pytest.mark.parametrize("h", sorted(DEST))
def test_single_wavelet_arrives_after_h_hops_exactly(L, h):
    """Cycle by cycle: the cycle the source injects vs the cycle the destination consumes."""
    cfg = CONFIGS[L]
    kernel = build_streams(cfg, WHOLE, [((0, 0), DEST[h])], n=1, order=XY)
    sim = Simulator(cfg, kernel.program)
    kernel.load(sim, traffic_inputs(kernel))
    kernel.launch(sim)
    sent = got = None
    while got is None:
        sim.run(max_cycles=1, raise_on_limit=False)
        now = int(sim.state.cycle) - 1
        if sent is None and int(sim.state.injected[0, 0]) == 1:
            sent = now
        if int(sim.state.consumed[DEST[h]]) == 1:
            got = now
        assert now < 100
    assert got - sent == h * L + (L + 1) == kernel.info["flows"][0]["zero_load_latency"]


@pytest.mark.parametrize("L", [1, 2])
@pytest.mark.parametrize(("h", "n", "order"), [(1, 1, XY), (4, 24, XY), (10, 17, XY),
                                               (10, 17, YX)])
def test_stream_takes_n_plus_h_hops_plus_a_constant_exactly(L, h, n, order):
    cfg = CONFIGS[L]
    kernel = build_streams(cfg, WHOLE, [((0, 0), DEST[h])], n=n, order=order)
    result = run(kernel)
    assert result.cycles == stream_cycles(cfg, n, h) == n + h * L + L + 2
    assert kernel.model_cycles == result.cycles
    # each link of the L route carried every word once, and no other link was used
    loads = link_loads([Flow("s", (0, 0), (DEST[h],), n, order)])
    for (r, c, port), words in loads.items():
        if port != Port.RAMP:
            assert result.stats.link_count[r, c, port] == words
    assert result.stats.link_count.sum() == h * n


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_colors_sharing_a_link_get_equal_shares(k):
    """Per color crossings of the shared link, cycle by cycle: while all k flows are
    present each has crossed as often as every other within one wavelet; the link is busy
    every cycle from its first to its last wavelet."""
    n = 12
    kernel = build_shared_link(CFG, WHOLE, k, n)
    colors = [f["color"] for f in kernel.info["flows"]]
    assert len(set(colors)) == k
    sim = Simulator(CFG, kernel.program)
    inputs = traffic_inputs(kernel)
    kernel.load(sim, inputs)
    kernel.launch(sim)
    crossed, per_cycle = shared_link_trace(kernel, sim, limit=400)  # crossed: [cycle, flow]
    first = int(np.argmax(per_cycle))
    np.testing.assert_array_equal(per_cycle[first:first + k * n], 1)
    assert per_cycle.sum() == k * n
    # the window where every flow has started and none has finished
    started = (crossed > 0).all(axis=1)
    unfinished = (crossed < n).all(axis=1)
    window = crossed[started & unfinished]
    assert len(window) >= n - 1  # the flows overlap for most of their lives
    # from the window's start, at every cycle each flow has crossed as often as every other
    # within one wavelet (round robin), and the link carried one wavelet per cycle
    gained = window - window[0]
    assert (gained.max(axis=1) - gained.min(axis=1)).max() <= 1
    np.testing.assert_array_equal(gained.sum(axis=1), np.arange(len(window)))
    assert abs(gained[-1] - len(window) / k).max() <= 1
    for f in kernel.info["flows"]:
        np.testing.assert_array_equal(kernel.read(sim)[f["name"]][f["dsts"][0]],
                                      inputs[f["name"]])


PATTERNS = {
    "shift1": lambda: build_shift(CFG, Rect(1, 1, 2, 6), n=24, k=1),
    "shift4": lambda: build_shift(CFG, Rect(0, 0, 2, 6), n=16, k=4),
    "transpose4": lambda: build_transpose(CFG, Rect(0, 2, 4, 4), n=32),
    "transpose4_xy": lambda: build_transpose(CFG, Rect(0, 2, 4, 4), n=32, balance=False),
    "transpose3": lambda: build_transpose(CFG, Rect(1, 0, 3, 5), n=20, chunk=6),
    "neighbours": lambda: build_neighbour_exchange(CFG, Rect(1, 2, 2, 3), n=16),
    "multicast": lambda: build_multicast(CFG, WHOLE, n=20, src=(1, 3)),
    "streams": lambda: build_streams(
        CFG, WHOLE, [((0, 0), (3, 5)), ((3, 0), (0, 6)), ((1, 1), (2, 7)), ((2, 6), (0, 1))],
        n=30, order=YX),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_delivers_intact_within_10_percent_of_the_model(name):
    kernel = PATTERNS[name]()
    result = run(kernel)
    assert result.cycles >= kernel.info["cut_bound"]["cycles"]
    assert abs(result.cycles - kernel.model_cycles) <= 0.1 * kernel.model_cycles, (
        result.cycles, kernel.model_cycles)


def test_multicast_costs_what_a_stream_to_the_farthest_receiver_costs():
    """One color to all 31 other PEs: zero load, so the same cycles as a lone stream to the
    farthest (6 hops); a router forwarding to t ports makes t - 1 extra copies."""
    kernel = build_multicast(CFG, WHOLE, n=20, src=(1, 3))
    result = run(kernel)
    assert result.cycles == stream_cycles(CFG, 20, 6) == kernel.model_cycles
    flow = Flow("m", (1, 3), tuple(c for c in WHOLE.pes() if c != (1, 3)), 20)
    copies = sum(len(tx) - 1 for _, tx in route_tree(flow).values())
    assert result.stats.forked == 20 * copies
    assert result.stats.link_count.sum() == 20 * 31  # a spanning tree of 32 PEs


# ---- routes, colors and bounds (no simulation) ---------------------------------------------
def test_flows_sharing_a_pe_get_different_colors():
    kernel = build_transpose(CFG, WHOLE, n=8)
    flows = [Flow(f["name"], f["src"], tuple(f["dsts"]), 8, f["order"])
             for f in kernel.info["flows"]]
    colors = [f["color"] for f in kernel.info["flows"]]
    for i, near in enumerate(conflicts(flows)):
        assert all(colors[i] != colors[j] for j in near)


def test_too_few_colors_is_an_error_naming_the_flows():
    flows = [Flow(f"f{i}", (0, i), ((0, 7),), 4) for i in range(4)]  # all share PE (0, 7)
    assert len(set(assign_colors(flows, range(4)))) == 4
    with pytest.raises(ValueError, match=r"flow 'f3' finds no free color.*'f0', 'f1', 'f2'"):
        assign_colors(flows, [5, 6, 7])
    with pytest.raises(ValueError, match="finds no free color"):
        build_transpose(CFG, WHOLE, n=8, colors=[0, 1, 2])


def test_transpose_routes_reach_the_least_link_load_of_l_routes():
    """Loads on the busiest link: 1, 2, 3 flows for k = 4, 6, 8 (3 is optimal for k = 8:
    19 flows of rows 3..7 and columns 0..3 can only turn at 9 ports)."""
    for k, best in [(4, 1), (6, 2), (8, 3)]:
        orders = transpose_orders(k)
        flows = [Flow(f"{i}{j}", (i, j), ((j, i),), 1, orders[(i, j)])
                 for i in range(k) for j in range(k) if i != j]
        links = [w for (_, _, p), w in link_loads(flows).items() if p != Port.RAMP]
        assert max(links) == best
        all_xy = [Flow(f.name, f.src, f.dsts, 1) for f in flows]
        assert max(w for (_, _, p), w in link_loads(all_xy).items() if p != Port.RAMP) == k - 1


def test_transpose_cut_bound_is_the_bisection_bound():
    for k in (4, 6, 8):
        kernel = build_transpose(FabricConfig.small(8, 8), Rect(0, 0, 8, 8), n=10, k=k)
        assert kernel.info["cut_bound"]["cycles"] == (k // 2) ** 2 * 10 / k
    flows = [Flow("a", (0, 0), ((0, 3),), 5), Flow("b", (1, 1), ((1, 2),), 7)]
    assert cut_bound(flows, 2, 4)["cycles"] == 6.0  # 12 words over 2 links (column cut 2)


@pytest.mark.parametrize(("flows", "match"), [
    ([Flow("a", (0, 0), ((4, 0),), 4)], r"PE \(4, 0\) lies outside the 4x8"),
    ([Flow("a", (0, 0), ((0, 1),), 4), Flow("a", (0, 2), ((0, 1),), 4)], "names repeat"),
    ([Flow("a", (0, 0), ((0, 1),), 7000), Flow("b", (0, 2), ((0, 1),), 7000)],
     r"PE \(0, 1\).*56000 B.*48 KiB"),
])
def test_bad_flows_are_rejected_clearly(flows, match):
    with pytest.raises(ValueError, match=match):
        build_traffic(CFG, WHOLE, flows)


def test_bad_flow_fields_are_rejected_clearly():
    with pytest.raises(ValueError, match="sends to its own PE"):
        Flow("a", (1, 1), ((1, 1),), 4)
    with pytest.raises(ValueError, match="order must be 'xy' or 'yx'"):
        Flow("a", (1, 1), ((1, 2),), 4, "zz")
    with pytest.raises(ValueError, match="need 2k = 10 columns"):
        build_shared_link(CFG, WHOLE, 5, 4)
