"""Property-based tests of the engine on random small valid programs (hypothesis).

A program on FabricConfig.small(3, 4) (`CONFIG`): up to four flows, each on its own color,
from a sender PE along an L-shaped route to a destination PE, with receivers on the way
(multicast to the RAMP) and optionally a branch (multicast tree). Each PE runs one tile:
symbols of random sizes, and a sequence of DSD ops (mov, add, sub, mul, fma, max, min) between
strided, 2D or stride-0 views of its symbols, immediates and the fabric: a sender sends its
flow in one to three pieces (FabOut ops, or an element-by-element register loop), a
receiver takes the flow in its own pieces (FabIn ops, loops, stride-0 reductions); random
local ops go in between. Ops are made async where no later op touches what they touch; the
sequence is split over one to three local tasks chained by `activate`, by an async op's
`on_done` activate, or by an async op unblocking a blocked task. Some receivers are sinks: a
tile with one data task per flow (running sum, running max, wavelet count, last payload, a
buffer written through an offset register). Every PE issues its flow ops in flow order, so
every program finishes (the smallest unfinished flow always makes progress).

Properties checked for every generated program:
- conservation, while running (after every stop of a run cut into random short chunks) and
  at the end: injected + forked == consumed + in flight, delivered == consumed + CE-queued
  (`programs.invariants`); at the end nothing is in flight, every sent wavelet arrived
  (injected = sent, delivered = consumed = sent x receivers, forked = sent x (receivers-1)),
  and the per-link and per-router counters equal what the routes imply;
- SRAM: every word outside every allocated symbol, and every word of a symbol that no DSD
  writes, keeps the (random) value it was initialised with;
- a run cut into chunks (`run(chunk_cycles=k)`, random k), a run cut by `max_cycles` and
  a run saved part way (`save`), resumed with `Simulator.load` and run to the end all end in
  a state identical, leaf by leaf, to one straight run, with identical counters;
- the same program run twice ends in identical states;
- every symbol of every PE equals a numpy model of the program (fp32 with flush to zero;
  fma only by powers of two, so fused and unfused agree), the sinks' sums, maxima, counts
  and buffers included, whenever the model stays finite and away from subnormals.

Every program is built with the table floor `FLOOR`, above anything generated, so one
compiled engine serves every example. 100 programs run by default (15 to 20 s on a 2-core
CPU), 400 under `-m long` (about 2 minutes); `--hypothesis-show-statistics` shows what
they covered.

Found on the way and fixed: `Simulator.load` could not resume a session built with a table
floor (checkpoints now record the table rows; tests/fabric/test_checkpoint.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings

from fabric import Program, Simulator
from tests.fabric.programs import (
    DIRECTION,
    invariants,
)
from tests.fabric.random_programs import (
    CONFIG,
    FLOOR,
    MAX_CYCLES,
    Case,
    DsdOp,
    Fab,
    View,
    build_program,
    programs,
    sink_symbols,
)

# ---- the numpy model ----------------------------------------------------------------------
TINY = 2.0 ** -126
ARITHMETIC = {  # (a, b, s) -> fp32, rounded once (b * s is exact: s is a power of two)
    "add": lambda a, b, s: a + b, "sub": lambda a, b, s: a - b, "mul": lambda a, b, s: a * b,
    "fma": lambda a, b, s: a + b * s, "max": lambda a, b, s: np.maximum(a, b),
    "min": lambda a, b, s: np.minimum(a, b),
}


class Model:
    """Runs the ops of every PE in program order, a receive waiting for its flow's values
    (unbounded buffers); fp32 arithmetic with flush to zero."""

    def __init__(self, case: Case, init: dict):
        self.case = case
        self.mem = {key: value.copy() for key, value in init.items()}  # (cell, sym) -> array
        self.exact = True  # no non-finite value and nothing near the subnormal range
        self.sent = {i: [] for i in range(len(case.flows))}

    def _fp(self, x: np.float32) -> np.float32:
        x = np.float32(x)
        if not np.isfinite(x) or 0 < abs(x) < 2.0 ** -120:
            self.exact = False
        return np.float32(0) if abs(x) < TINY else x

    def _apply(self, cell, op: DsdOp, fab_in) -> list:
        def read(x, k):
            if isinstance(x, View):
                return self.mem[cell, x.sym][x.index()[k]]
            if isinstance(x, Fab):
                return fab_in[k]
            return np.float32(x)

        out = []
        for k in range(op.length):
            a = read(op.a, k)
            if op.kind == "mov":
                v = a
            else:
                b = read(op.b, k)
                v = self._fp(ARITHMETIC[op.kind](a, b, np.float32(op.s or 0)))
            if isinstance(op.dst, View):
                self.mem[cell, op.dst.sym][op.dst.index()[k]] = v
            else:
                out.append(v)
        return out

    def run(self) -> None:
        pos = {cell: 0 for cell in self.case.pes}
        taken = {}  # (flow, cell) -> values consumed so far
        moved = True
        with np.errstate(over="ignore", invalid="ignore"):
            while moved:
                moved = False
                for cell, code in self.case.pes.items():
                    while pos[cell] < len(code.ops):
                        op = code.ops[pos[cell]]
                        fab = next((x for x in (op.a, op.b) if isinstance(x, Fab)), None)
                        fab_in = None
                        if fab is not None:
                            got = taken.get((fab.flow, cell), 0)
                            if len(self.sent[fab.flow]) < got + fab.length:
                                break
                            fab_in = self.sent[fab.flow][got:got + fab.length]
                            taken[fab.flow, cell] = got + fab.length
                        out = self._apply(cell, op, fab_in)
                        if isinstance(op.dst, Fab):
                            self.sent[op.dst.flow] += out
                        pos[cell] += 1
                        moved = True
            assert all(pos[c] == len(code.ops) for c, code in self.case.pes.items()), \
                "the model deadlocked: the generator made a program that cannot finish"
            for cell, sink in self.case.sinks.items():
                for i, kinds in sink.kinds.items():
                    values = self.sent[i]
                    for kind in kinds:
                        m = self.mem[cell, f"{kind}{i}"]
                        for k, v in enumerate(values):
                            if kind == "sum":
                                m[0] = self._fp(m[0] + v)
                            elif kind == "max":
                                m[0] = np.maximum(m[0], v)
                            elif kind == "last":
                                m[0] = v
                            elif kind == "buffer":
                                m[k] = v
                        if kind == "count":
                            m[0] = len(values)

    def written(self) -> dict:
        """(cell, sym) -> boolean mask of the words some DSD writes."""
        out = {key: np.zeros(len(v), bool) for key, v in self.mem.items()}
        for cell, code in self.case.pes.items():
            for op in code.ops:
                if isinstance(op.dst, View):
                    out[cell, op.dst.sym][op.dst.index()] = True
        for cell, sink in self.case.sinks.items():
            for i, kinds in sink.kinds.items():
                for kind in kinds:
                    n = self.case.flows[i].n if kind == "buffer" else 1
                    out[cell, f"{kind}{i}"][:n] = True
        return out


# ---- running ------------------------------------------------------------------------------
def initial_values(case: Case) -> dict:
    """(cell, sym) -> initial array: dyadic values k/4, |k| <= 12 (integers for counts)."""
    rng = np.random.default_rng(case.seed)
    out = {}
    for cell, code in sorted(case.pes.items()):
        for name, size in code.symbols.items():
            out[cell, name] = (rng.integers(-12, 13, size) / 4).astype(np.float32)
    for cell, sink in sorted(case.sinks.items()):
        for name, (dtype, size) in sink_symbols(sink, case.flows).items():
            values = rng.integers(-12, 13, size)
            out[cell, name] = (values.astype(np.int32) if dtype == "i32"
                               else (values / 4).astype(np.float32))
    return out


def symbol_words(sim: Simulator) -> np.ndarray:
    """(R, C, W) boolean: the words of some allocated symbol."""
    mask = np.zeros((CONFIG.rows, CONFIG.cols, CONFIG.sram_words), bool)
    for placement, syms in zip(sim.info.placements, sim.info.symbols):
        for s in syms.values():
            for r, c in placement.rect.pes():
                mask[r, c, s.address:s.address + int(np.prod(s.shape))] = True
    return mask


def started(case: Case, program: Program, init: dict, garbage: np.ndarray) -> Simulator:
    """A simulator of the program with SRAM set (random words, the symbols' values), main
    launched."""
    sim = Simulator(CONFIG, program, min_table_rows=FLOOR)
    sram = garbage.copy()
    for (cell, name), values in init.items():
        s = sim.info.symbols[sim.info.placement_index(*cell)][name]
        sram[cell[0], cell[1], s.address:s.address + len(values)] = values.view(np.uint32)
    sim.host_sram()[...] = sram
    sim.launch("main")
    return sim


def read_symbol(sim: Simulator, cell, name) -> np.ndarray:
    s = sim.info.symbols[sim.info.placement_index(*cell)][name]
    words = sim.sram_view()[cell[0], cell[1], s.address:s.address + int(np.prod(s.shape))]
    return words.view(np.int32 if s.dtype == "i32" else np.float32)


def leaves(sim: Simulator) -> dict:
    return {f.name: np.asarray(getattr(sim.state, f.name))
            for f in dataclasses.fields(sim.state)}


def assert_same_run(a: Simulator, b: Simulator, what: str) -> None:
    """Every state leaf and every counter equal, bit for bit (wall and compile times and the
    last call's own length aside)."""
    la, lb = leaves(a), leaves(b)
    for name, value in la.items():
        np.testing.assert_array_equal(value, lb[name], err_msg=f"{what}: state.{name}")
    sa, sb = dataclasses.asdict(a.stats()), dataclasses.asdict(b.stats())
    for key in sa.keys() - {"wall_s", "compile_s", "run_cycles"}:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=f"{what}: stats.{key}")


def check_counters(case: Case, stats) -> None:
    """Every sent wavelet arrived, and the link / router counters follow the routes."""
    flows = case.flows
    assert stats.in_flight == 0, stats.summary()
    assert stats.injected == sum(f.n for f in flows), stats.summary()
    assert stats.delivered == stats.consumed == sum(f.n * len(f.receivers) for f in flows)
    assert stats.forked == sum(f.n * (len(f.receivers) - 1) for f in flows)
    links = np.zeros_like(stats.link_count)
    colors = np.zeros_like(stats.color_count_per_pe)
    for f in flows:
        cells = {f.src}
        for a, b in f.edges:
            links[a[0], a[1], DIRECTION[(b[0] - a[0], b[1] - a[1])]] += f.n
            cells |= {a, b}
        for r, c in cells:
            colors[r, c, f.color] += f.n
    np.testing.assert_array_equal(stats.link_count, links)
    np.testing.assert_array_equal(stats.color_count_per_pe, colors)


def check_program(case: Case, tmp_dir) -> None:
    program = build_program(case)
    init = initial_values(case)
    rng = np.random.default_rng(case.seed + 1)
    garbage = rng.integers(0, 2**32, (CONFIG.rows, CONFIG.cols, CONFIG.sram_words),
                           dtype=np.uint32)

    # one straight run: conservation, counters, SRAM, the model
    whole = started(case, program, init, garbage)
    assert whole.tables.instr.shape[0] == FLOOR[0] and whole.tables.dsd.shape[0] == FLOOR[1]
    stats = whole.run(max_cycles=MAX_CYCLES)
    invariants(whole, stats)
    check_counters(case, stats)
    sram = whole.sram_view()
    outside = ~symbol_words(whole)
    np.testing.assert_array_equal(sram[outside], garbage[outside],
                                  err_msg="a word outside every symbol changed")
    model = Model(case, init)
    model.run()
    for (cell, name), mask in model.written().items():
        got = read_symbol(whole, cell, name)
        np.testing.assert_array_equal(got[~mask], init[cell, name][~mask],
                                      err_msg=f"PE {cell}: {name} changed where no DSD writes")
        if model.exact:
            np.testing.assert_array_equal(got, model.mem[cell, name],
                                          err_msg=f"PE {cell}: {name} differs from the model")
    event("model compared" if model.exact else "model not compared (non-finite or tiny)")

    # the same program again
    again = started(case, program, init, garbage)
    again.run(max_cycles=MAX_CYCLES)
    assert_same_run(again, whole, "run twice")

    # chunked by the host loop
    chunked = started(case, program, init, garbage)
    chunked.run(max_cycles=MAX_CYCLES, chunk_cycles=case.chunk, progress=False)
    assert_same_run(chunked, whole, f"run(chunk_cycles={case.chunk})")

    # cut by max_cycles, conservation checked at every stop
    cut = started(case, program, init, garbage)
    for stop in case.stops:
        s = cut.run(max_cycles=stop, raise_on_limit=False)
        invariants(cut, s)
        assert s.injected <= sum(f.n for f in case.flows)
    cut.run(max_cycles=MAX_CYCLES)
    assert_same_run(cut, whole, f"run cut at {case.stops}")

    # saved part way, resumed in a new session
    half = started(case, program, init, garbage)
    at = max(1, int(case.save_at * stats.cycles))
    half.run(max_cycles=at, raise_on_limit=False)
    event("saved with wavelets in flight" if half.stats().in_flight else
          "saved with nothing in flight")
    path = tmp_dir / "part.ckpt"
    half.save(path)
    resumed = Simulator.load(path, CONFIG, program)  # built with the saved table rows
    assert_same_run(resumed, half, "loaded checkpoint")
    resumed.run(max_cycles=MAX_CYCLES)
    assert_same_run(resumed, whole, f"saved at cycle {at} and resumed")
    # one compiled engine for every run of every program (the first one compiles it)
    assert again.compile_s == chunked.compile_s == cut.compile_s == resumed.compile_s == 0
    event(f"{len(case.flows)} flows")
    event(f"{sum(len(f.receivers) > 1 for f in case.flows) > 0 and 'multicast' or 'unicast'}")
    if any(op.is_async for code in case.pes.values() for op in code.ops):
        event("async ops")
    if case.sinks:
        event("data-task sinks")


SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=100, **SETTINGS)
@given(programs())
def test_random_programs_keep_every_property(tmp_path_factory, case):
    check_program(case, tmp_path_factory.mktemp("ckpt"))


@pytest.mark.long
@settings(max_examples=400, **SETTINGS)
@given(programs())
def test_random_programs_keep_every_property_long(tmp_path_factory, case):
    check_program(case, tmp_path_factory.mktemp("ckpt"))
