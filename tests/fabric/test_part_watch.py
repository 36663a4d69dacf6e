"""Watched runs of a merged program (`fabric.part_watch`, `PartMap.advance` and `look`):
what a look reads is what `PartMap.work` reads, and a watched run stops at the cycle where
a host looking every few cycles would first have seen something new."""

import numpy as np
import pytest

from fabric import CycleLimitError, FabricConfig, Part, PartMap, Rect, Simulator, merge_programs
from fabric.kernels import build_gemv

CONFIG = FabricConfig.small(2, 4)
POLL = 8


def _launched():
    """Two GEMVs ("a", "b") of different sizes on the fabric's halves, merged, loaded and
    launched: (merged program, simulator, the word address of a.y's first element)."""
    parts, kernels, inputs = [], [], []
    for name, rect, n in (("a", Rect(0, 0, 2, 2), 6), ("b", Rect(0, 2, 2, 2), 12)):
        gen = np.random.default_rng(len(parts))
        kernel = build_gemv(CONFIG, rect, 2 * rect.rows, n)
        shift = {c: c + 8 * len(parts) for c in {r.color for r in kernel.program.routes}}
        parts.append(Part(name, kernel.program, colors=shift))
        kernels.append(kernel)
        inputs.append({"A": gen.standard_normal((2 * rect.rows, n), np.float32),
                       "x": gen.standard_normal(n, np.float32),
                       "b": gen.standard_normal(2 * rect.rows, np.float32)})
    merged = merge_programs(CONFIG, parts)
    sim = Simulator(CONFIG, merged.program)
    for part, kernel, data in zip(parts, kernels, inputs):
        kernel.load(merged.view(sim, part.name), data)
        kernel.launch(merged.view(sim, part.name))
    return merged, sim, sim.info.symbols[0]["a.y"].address


def _as_sets(work):
    return {part: set(pes) for part, pes in work.items()}


def test_a_look_reads_what_the_part_map_reads():
    """At every few cycles of a run, `look` gives the parts at work on each CE and
    anywhere as `PartMap.work` does, and the watched word as SRAM holds it."""
    merged, sim, y = _launched()
    parts = PartMap(merged)
    parts.watch(sim, [(1, 0, y)])
    seen_work = set()
    while True:
        on_ce, everything = parts.work(sim)
        busy, anywhere, words = parts.look(sim)
        assert busy == _as_sets(on_ce) and anywhere == set(everything)
        assert words[0] == sim.sram_view()[1, 0, y] and not words[1:].any()  # padded: 0
        seen_work.add(tuple(sorted(anywhere)))
        if not anywhere:
            break
        sim.advance(3, raise_on_limit=False)
    assert {("a", "b"), ("b",), ()} <= seen_work  # both at work, then "b" alone, then none


def test_a_watched_run_stops_where_a_look_every_few_cycles_first_differs():
    """One simulator looks after every POLL cycles; the other runs watched. Each watched
    run ends at the first look that differs from the one before it (a part done on a PE,
    the watched output word written), in the same state, until the fabric is quiet."""
    merged, polled, y = _launched()
    _, watched, _ = _launched()
    parts = PartMap(merged)
    parts.watch(polled, [(1, 0, y)])
    stops = []
    last = parts.look(polled)
    while last[1]:
        polled.advance(POLL, raise_on_limit=False)
        now = parts.look(polled)
        if any(_differ(a, b) for a, b in zip(now, last)) or not now[1]:
            got = parts.advance(watched, 10_000, POLL)
            assert int(watched.state.cycle) == int(polled.state.cycle)
            assert not any(_differ(a, b) for a, b in zip(got, now))
            np.testing.assert_array_equal(watched.sram_view(), polled.sram_view())
            stops.append(int(polled.state.cycle))
        last = now
    assert len(stops) >= 3 and all(s % POLL == 0 for s in stops[:-1])


def _differ(a, b) -> bool:
    return not np.array_equal(a, b) if isinstance(a, np.ndarray) else a != b


def test_a_watched_runs_cycle_limit():
    """A watched run stops at its cycle limit when nothing changes before it: it raises
    CycleLimitError there with work left, or returns the look (raise_on_limit=False). A
    part map not yet watching says so."""
    merged, sim, _ = _launched()
    parts = PartMap(merged)
    with pytest.raises(ValueError, match="call it first"):
        parts.look(sim)
    parts.watch(sim)
    parts.advance(sim, 10_000, POLL)  # both GEMVs start: the look changes in one step
    start = int(sim.state.cycle)
    with pytest.raises(CycleLimitError, match="cycle limit reached"):
        parts.advance(sim, 3, POLL)
    assert int(sim.state.cycle) == start + 3
    busy, anywhere, _ = parts.advance(sim, 2, POLL, raise_on_limit=False)
    assert int(sim.state.cycle) == start + 5 and anywhere == {"a", "b"}
