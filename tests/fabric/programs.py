"""Shared configs and small program builders for the fabric engine tests.

Every distinct `FabricConfig` (and every table-size bucket) costs one XLA compile of the
engine (6-12 s on a 2-core CPU), so the tests share the few configs below and keep every program
inside the smallest bucket (fewer than `build.MIN_BUCKET` instructions and DSDs).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fabric import FabricConfig, Port, Program, Rect, Simulator, Tile, engine
from fabric import instructions as ins
from fabric.isa import STEP

# ---- the shared configs ----------------------------------------------------------------------
ROW = FabricConfig.small(1, 8)  # one row: compute tests, streams, hop latency (h <= 7)
GRID4 = FabricConfig.small(4, 4)  # merges, fairness, the first real program
GRID6 = FabricConfig.small(6, 6)  # random traffic
ROW_L2 = FabricConfig.small(1, 8, hop_latency=2)  # hop latency 2
ROW_Q2 = FabricConfig.small(1, 8, queue_depth=2)  # shallow buffers: backpressure
ROW_RECT = Rect(0, 0, 1, 8)  # the whole of ROW
# async ops on memory alone allowed (the SDK refuses them; the presets follow it): the
# engine's microthreads under test with the simplest operands
ROW_ASYNC = FabricConfig.small(1, 8, async_memory_ops=True)
GRID4_ASYNC = FabricConfig.small(4, 4, async_memory_ops=True)

DIRECTION = {(-1, 0): Port.NORTH, (1, 0): Port.SOUTH, (0, 1): Port.EAST, (0, -1): Port.WEST}
OPPOSITE = {Port.NORTH: Port.SOUTH, Port.SOUTH: Port.NORTH, Port.EAST: Port.WEST,
            Port.WEST: Port.EAST}
assert all(DIRECTION[d] == p for p, d in STEP.items())


def pe(row: int, col: int) -> Rect:
    """The 1x1 rectangle of PE (row, col)."""
    return Rect(row, col, 1, 1)


# ---- routes ----------------------------------------------------------------------------------
class Routes:
    """Per-PE routes of several colors, built from paths of PEs and applied to a Program.

    `add_path(color, cells, receivers)` routes `color` from the CE of cells[0] along the
    (adjacent) cells, delivering to the RAMP of each cell in `receivers` (default: the last
    one); paths of one color that share a prefix form a multicast tree.
    """

    def __init__(self):
        self.rx: dict[tuple[int, int, int], Port] = {}
        self.tx: dict[tuple[int, int, int], set] = {}

    def _set(self, cell, color, rx, tx):
        key = (*cell, color)
        if self.rx.setdefault(key, rx) != rx:
            raise ValueError(f"color {color} at {cell}: rx {rx!r} vs {self.rx[key]!r}")
        self.tx.setdefault(key, set()).update(tx)

    def add_path(self, color, cells, receivers=None):
        cells = [tuple(c) for c in cells]
        receivers = {cells[-1]} if receivers is None else {tuple(r) for r in receivers}
        rx = Port.RAMP  # the first PE takes the color from its own CE
        for i, cell in enumerate(cells):
            tx = {Port.RAMP} if i > 0 and cell in receivers else set()
            if i + 1 < len(cells):
                nxt = cells[i + 1]
                out = DIRECTION[(nxt[0] - cell[0], nxt[1] - cell[1])]
                tx.add(out)
            self._set(cell, color, rx, tx)
            if i + 1 < len(cells):
                rx = OPPOSITE[out]  # the next PE hears it on the opposite port
        return self

    def apply(self, prog: Program) -> Program:
        for (r, c, color), rx in sorted(self.rx.items()):
            prog.route(pe(r, c), color, rx, sorted(self.tx[(r, c, color)]))
        return prog


def row_path(row: int, c0: int, c1: int):
    """Cells from (row, c0) to (row, c1), inclusive, in either direction."""
    step = 1 if c1 >= c0 else -1
    return [(row, c) for c in range(c0, c1 + step, step)]


def l_path(src, dst, row_first: bool = True):
    """An L-shaped path from src to dst: along the row first (or the column first)."""
    (r0, c0), (r1, c1) = src, dst
    cells = [(r0, c0)]
    order = ("c", "r") if row_first else ("r", "c")
    r, c = r0, c0
    for axis in order:
        if axis == "c":
            while c != c1:
                c += 1 if c1 > c else -1
                cells.append((r, c))
        else:
            while r != r1:
                r += 1 if r1 > r else -1
                cells.append((r, c))
    return cells


# ---- tiles -----------------------------------------------------------------------------------
def sender_tile(color: int, n: int, name: str = "send") -> Tile:
    """Sends its symbol x (n f32) on `color` with one FabOut mov in local task main."""
    t = Tile(name)
    x = t.symbol("x", "f32", n)
    t.local_task("main", [ins.mov(ins.FabOut(color, n), x.dsd())])
    return t


def receiver_tile(color: int, n: int, name: str = "recv") -> Tile:
    """Receives n wavelets of `color` into its symbol y with one FabIn mov."""
    t = Tile(name)
    y = t.symbol("y", "f32", n)
    t.local_task("main", [ins.mov(y.dsd(), ins.FabIn(color, n))])
    return t


SLOW_WORK = 16  # elements of the busy-work fma of `slow_receiver_tile` (16 cycles)


def slow_receiver_tile(color: int, n: int, name: str = "slow", work: int = SLOW_WORK) -> Tile:
    """Receives n wavelets of `color` one at a time into y, doing a `work`-cycle fma on a
    scratch vector between reads. One iteration costs 1 (mov) + work + 2 (iadd, branch)
    cycles when the wavelet is already there."""
    t = Tile(name)
    y = t.symbol("y", "f32", n)
    z = t.symbol("z", "f32", work)
    w = t.symbol("w", "f32", work)  # z's partner: the layout puts them in other bank pairs
    t.local_task("main", [
        ins.set_reg("i", 0),
        ins.label("loop"),
        ins.mov(y.dsd(length=1, offset_reg="i"), ins.FabIn(color, 1)),
        ins.fma(z.dsd(), z.dsd(), w.dsd(), 1.0),
        ins.iadd("i", "i", 1),
        ins.branch_if_less("i", n, "loop"),
    ])
    return t


@dataclasses.dataclass
class Flow:
    """n wavelets of `color` from the CE of `src` along `cells`, delivered to `receivers`."""

    color: int
    src: tuple
    cells: list  # path from src
    receivers: list  # cells whose CE receives the flow
    n: int


def flows_program(config, flows: list[Flow]) -> Program:
    """A sender tile per flow source and a receiver tile per flow receiver (distinct PEs)."""
    prog = Program(config)
    routes = Routes()
    for i, f in enumerate(flows):
        prog.place(sender_tile(f.color, f.n, f"send{i}"), pe(*f.src))
        for j, r in enumerate(f.receivers):
            prog.place(receiver_tile(f.color, f.n, f"recv{i}_{j}"), pe(*r))
        routes.add_path(f.color, f.cells, f.receivers)
    return routes.apply(prog)


def stream_sim(config, n: int, hops: int, color: int = 0, data=None):
    """A simulator with PE (0, 0) streaming n wavelets east to PE (0, hops); launched."""
    flow = Flow(color, (0, 0), row_path(0, 0, hops), [(0, hops)], n)
    sim = Simulator(config, flows_program(config, [flow]))
    if data is None:
        data = np.arange(1, n + 1, dtype=np.float32)
    sim.memcpy_h2d("x", data, pe(0, 0))
    sim.launch("main")
    return sim


def invariants(sim, stats) -> None:
    """Wavelet conservation: every copy made (injected + multicast forks) is consumed or
    buffered, and every copy sent up a RAMP is consumed or waits in a CE input queue.
    Buffers hold between 0 and queue_depth wavelets."""
    rq_count, iq_count = np.asarray(sim.state.rq_count), np.asarray(sim.state.iq_count)
    q = sim.config.queue_depth
    assert 0 <= rq_count.min() and rq_count.max() <= q
    assert 0 <= iq_count.min() and iq_count.max() <= q
    rq, iq = int(rq_count.sum()), int(iq_count.sum())
    assert stats.in_flight == rq + iq
    assert stats.injected + stats.forked == stats.consumed + stats.in_flight, stats.summary()
    assert stats.delivered == stats.consumed + iq, stats.summary()


# ---- running ---------------------------------------------------------------------------------
def two_colors_into(recv: Tile, n: int, d1, d2) -> Simulator:
    """A launched ROW simulator: PE (0, 0) sends d1 (n f32) on color 1 and PE (0, 1) sends
    d2 on color 2, both east along the row into `recv` at PE (0, 3), over the shared links
    1 -> 2 -> 3."""
    prog = Program(ROW)
    prog.place(sender_tile(1, n, "send1"), pe(0, 0))
    prog.place(sender_tile(2, n, "send2"), pe(0, 1))
    prog.place(recv, pe(0, 3))
    for color, start in ((1, 0), (2, 1)):
        for cell in row_path(0, start, 3):
            c = cell[1]
            rx = Port.RAMP if c == start else Port.WEST
            prog.route(pe(*cell), color, rx, Port.RAMP if c == 3 else Port.EAST)
    sim = Simulator(ROW, prog)
    sim.memcpy_h2d("x", d1, pe(0, 0))
    sim.memcpy_h2d("x", d2, pe(0, 1))
    sim.launch("main")
    return sim


def run_stepwise(sim, chunk: int = 1, max_cycles: int = 2_000):
    """Yield the stats after every `chunk` cycles until nothing is pending (a deadlock still
    raises `DeadlockError` from `Simulator.run`, so this never hangs)."""
    start = int(sim.state.cycle)
    while bool(engine.pending(sim.tables, sim.state)):
        assert int(sim.state.cycle) - start < max_cycles, "no quiescence"
        yield sim.run(max_cycles=chunk, raise_on_limit=False)


def run_tile(tile: Tile, data: dict, params=None, rect: Rect = ROW_RECT, config=ROW,
             task: str = "main"):
    """Place `tile` alone on `rect`, write `data` (symbol -> array), launch `task`, run.

    Returns (simulator, stats).
    """
    prog = Program(config)
    prog.place(tile, rect, params=params)
    sim = Simulator(config, prog)
    for name, value in data.items():
        sim.memcpy_h2d(name, value)
    sim.launch(task)
    return sim, sim.run(max_cycles=10_000)


def fma_reference(a, b, s):
    """a + b * s in float32, both with the product rounded separately (two roundings) and
    fused (one rounding; computed in float64, where b * s is exact, then rounded once)."""
    a, b, s = np.asarray(a, np.float32), np.asarray(b, np.float32), np.float32(s)
    separate = a + b * s
    fused = (a.astype(np.float64) + b.astype(np.float64) * np.float64(s)).astype(np.float32)
    return separate, fused


def assert_fma_equal(out, a, b, s):
    """`out` must equal a + b*s in float32 element by element, rounded either way.

    Why not one reference: XLA contracts `a + b * s` into a fused multiply-add on CPU (one
    rounding), while numpy rounds the product first; which one the engine gets depends on
    the backend. Each element must still be bit-exactly one of the two correctly rounded
    results (stricter than an rtol, which cancellation would defeat).
    """
    separate, fused = fma_reference(a, b, s)
    out = np.asarray(out, np.float32)
    ok = (out == separate) | (out == fused)
    assert ok.all(), f"fma mismatch at {np.argwhere(~ok)[:5].tolist()}"
