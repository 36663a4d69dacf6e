"""Wavelet conservation under random routes and traffic (hypothesis).

Random flows, each on its own color: a sender PE streams n wavelets (random 32-bit
patterns) along an L-shaped or straight route; the last PE of the route and optionally
some PEs on the way receive a copy (multicast). Checked while running, every few cycles:
    injected + forked == consumed + in flight (router buffers + CE input queues)
    delivered == consumed + wavelets waiting in CE input queues
and at the end: every receiver holds exactly the sent bits, and the per-link and
per-color counters equal what the routes imply.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric import Simulator
from tests.fabric.programs import (
    DIRECTION,
    GRID6,
    ROW_L2,
    ROW_Q2,
    Flow,
    flows_program,
    invariants,
    l_path,
    pe,
    row_path,
)

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def traffic(draw, rows, cols, max_flows):
    k = draw(st.integers(1, max_flows))
    cell = st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1))
    ends = draw(st.lists(cell, min_size=2 * k, max_size=2 * k, unique=True))
    colors = draw(st.lists(st.integers(0, 23), min_size=k, max_size=k, unique=True))
    used = set(ends)  # a PE runs one tile: endpoints and extra receivers are distinct
    flows = []
    for i in range(k):
        src, dst = ends[2 * i], ends[2 * i + 1]
        cells = l_path(src, dst, row_first=draw(st.booleans()))
        free = [c for c in cells[1:-1] if c not in used]
        extra = draw(st.lists(st.sampled_from(free), unique=True, max_size=2)) if free else []
        used.update(extra)
        flows.append(Flow(colors[i], src, cells, extra + [dst], draw(st.integers(1, 12))))
    chunks = draw(st.lists(st.integers(1, 9), min_size=1, max_size=6))
    seed = draw(st.integers(0, 2**32 - 1))
    return flows, chunks, seed


@st.composite
def row_traffic(draw, cols, max_flows):
    """Flows along one row (east or west), so several may share links in each direction."""
    k = draw(st.integers(1, max_flows))
    ends = draw(st.lists(st.integers(0, cols - 1), min_size=2 * k, max_size=2 * k,
                         unique=True))
    colors = draw(st.lists(st.integers(0, 23), min_size=k, max_size=k, unique=True))
    used = set(ends)
    flows = []
    for i in range(k):
        cells = row_path(0, ends[2 * i], ends[2 * i + 1])
        free = [c for c in cells[1:-1] if c[1] not in used]
        extra = draw(st.lists(st.sampled_from(free), unique=True, max_size=2)) if free else []
        used.update(c[1] for c in extra)
        flows.append(Flow(colors[i], cells[0], cells, extra + [cells[-1]],
                          draw(st.integers(1, 16))))
    chunks = draw(st.lists(st.integers(1, 9), min_size=1, max_size=6))
    seed = draw(st.integers(0, 2**32 - 1))
    return flows, chunks, seed


def check_traffic(config, flows, chunks, seed):
    # the router serves all 24 colors: free the host's reserved ones (a build rule,
    # tests/fabric/test_build.py) so that flows may take any of them
    config = config.replace(reserved_colors=())
    rng = np.random.default_rng(seed)
    sim = Simulator(config, flows_program(config, flows))
    sent = []
    for f in flows:
        bits = rng.integers(0, 2**32, size=f.n, dtype=np.uint32)
        sent.append(bits)
        sim.memcpy_h2d("x", bits.view(np.float32), pe(*f.src))
    sim.launch("main")

    # run in chunks of random length, checking the invariants at each stop
    for chunk in chunks:
        stats = sim.run(max_cycles=chunk, raise_on_limit=False)
        invariants(sim, stats)
        assert stats.injected <= sum(f.n for f in flows)
    stats = sim.run(max_cycles=5_000)
    invariants(sim, stats)

    # every receiver got exactly the sent bits, in order
    for f, bits in zip(flows, sent):
        for r in f.receivers:
            got = sim.memcpy_d2h("y", pe(*r))[0, 0].view(np.uint32)
            np.testing.assert_array_equal(got, bits)

    # counters against the routes
    assert stats.in_flight == 0
    assert stats.injected == sum(f.n for f in flows)
    assert stats.delivered == stats.consumed == sum(f.n * len(f.receivers) for f in flows)
    assert stats.forked == sum(f.n * (len(f.receivers) - 1) for f in flows)
    links = np.zeros_like(stats.link_count)
    colors = np.zeros_like(stats.color_count_per_pe)
    for f in flows:
        for a, b in zip(f.cells, f.cells[1:]):
            links[a[0], a[1], DIRECTION[(b[0] - a[0], b[1] - a[1])]] += f.n
        for r, c in f.cells:
            colors[r, c, f.color] += f.n  # each router on the route moves each wavelet once
    np.testing.assert_array_equal(stats.link_count, links)
    np.testing.assert_array_equal(stats.color_count_per_pe, colors)


@SETTINGS
@given(traffic(GRID6.rows, GRID6.cols, max_flows=5))
def test_random_traffic_on_a_grid_conserves_wavelets(case):
    check_traffic(GRID6, *case)


@SETTINGS
@given(row_traffic(ROW_Q2.cols, max_flows=4), st.sampled_from([ROW_Q2, ROW_L2]))
def test_random_row_traffic_with_shallow_queues_or_slow_hops(case, config):
    check_traffic(config, *case)
