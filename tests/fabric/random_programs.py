"""Random small valid fabric programs for the property tests (hypothesis): programs as
plain data (`Case`: flows of wavelets along L-shaped routes, the DSD ops of every PE, the
sinks that receive), the strategy that draws them (`programs`) and their translation to a
`fabric.Program` (`build_program`). `tests/fabric/test_properties.py` says what is drawn and
checks the properties."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import note
from hypothesis import strategies as st

from fabric import FabricConfig, Program, Tile
from fabric import instructions as ins
from tests.fabric.programs import (
    Routes,
    l_path,
    pe,
)

# every color routable (no host memcpy reservation), so flows exercise all 24 of them; async
# ops on memory alone allowed, so the generator's async ops exercise the microthreads
CONFIG = FabricConfig.small(3, 4, reserved_colors=(), async_memory_ops=True)
FLOOR = (256, 256)  # instruction and DSD table rows of every program (one bucket)
MAX_CYCLES = 20_000
CELLS = [(r, c) for r in range(CONFIG.rows) for c in range(CONFIG.cols)]
BINARY = ("add", "sub", "mul", "max", "min")
REDUCE = ("add", "sub", "max", "min")
FMA_SCALES = (0.25, 0.5, 1.0, 2.0, -1.0, -0.5)  # powers of two: b * s is exact
SINK_KINDS = ("sum", "max", "count", "last", "buffer")


# ---- programs as plain data --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class View:
    """A memory DSD over symbol `sym`: element k at offset + (k % row_length) * stride +
    (k // row_length) * row_stride (1D when row_length is None)."""

    sym: str
    offset: int
    length: int
    stride: int = 1
    row_length: int | None = None
    row_stride: int | None = None

    def index(self) -> np.ndarray:
        k = np.arange(self.length)
        rl = self.row_length or self.length
        return self.offset + (k % rl) * self.stride + (k // rl) * (self.row_stride or 0)

    def dsd(self) -> ins.Mem:
        return ins.Mem(self.sym, self.offset, self.length, self.stride, self.row_length,
                       self.row_stride)


@dataclasses.dataclass(frozen=True)
class Fab:
    """`length` wavelets of flow `flow`: FabOut as a destination, FabIn as a source."""

    flow: int
    length: int


@dataclasses.dataclass
class DsdOp:
    """dst = kind(a, b) (fma: a + b * s) element by element; sources are views, fabric
    inputs or immediates."""

    kind: str  # mov add sub mul fma max min
    dst: View | Fab
    a: View | Fab | float
    b: View | Fab | float | None = None
    s: float | None = None  # fma's scale
    loop: bool = False  # element by element in a register loop (mov only)
    is_async: bool = False
    on_done: ins.Activate | ins.Unblock | None = None

    @property
    def length(self) -> int:
        return self.dst.length

    def writes(self) -> set:
        return {(self.dst.sym, int(i)) for i in self.dst.index()} if isinstance(
            self.dst, View) else set()

    def reads(self) -> set:
        return {(v.sym, int(i)) for v in (self.a, self.b) if isinstance(v, View)
                for i in v.index()}


@dataclasses.dataclass
class Flow:
    """n wavelets of `color` from the CE of `src` along a route tree to `receivers`."""

    color: int
    src: tuple
    edges: list  # (cell, next cell) of the route tree
    receivers: list  # cells whose CE gets a copy
    n: int


@dataclasses.dataclass
class PeCode:
    """One PE's tile: f32 symbols (name -> size) and its ops, split into chained tasks."""

    symbols: dict
    ops: list
    cuts: list = dataclasses.field(default_factory=list)  # op index where each task starts
    chains: list = dataclasses.field(default_factory=list)  # activate / on_done / unblock


@dataclasses.dataclass
class Sink:
    """A data-task tile: for each flow it receives, the kinds of work per wavelet."""

    kinds: dict  # flow -> tuple of SINK_KINDS


@dataclasses.dataclass
class Case:
    flows: list
    pes: dict  # cell -> PeCode
    sinks: dict  # cell -> Sink
    seed: int
    chunk: int  # run(chunk_cycles=chunk)
    stops: list  # max_cycles of the first calls of a cut run
    save_at: float  # fraction of the run after which it is saved
    paths: list  # per flow: (cells, receivers) of each path of its route tree

    def describe(self) -> str:
        lines = [f"flow {i}: color {f.color} {f.src} -> {f.receivers}, n={f.n}"
                 for i, f in enumerate(self.flows)]
        for cell, code in sorted(self.pes.items()):
            lines.append(f"PE {cell}: {code.symbols} cuts={code.cuts} chains={code.chains}")
            lines.extend(f"    {op}" for op in code.ops)
        lines.extend(f"sink {cell}: {s.kinds}" for cell, s in sorted(self.sinks.items()))
        return "\n".join(lines)


# ---- the strategy ------------------------------------------------------------------------
def _dyadic(draw) -> float:
    return draw(st.integers(-12, 12)) / 4


def draw_view(draw, sizes: dict, length: int, zero_stride: bool = False,
              flat: bool = False) -> View:
    """A view of `length` elements over one of the symbols (name -> size): strided (stride
    0 only when `zero_stride`) or, unless `flat`, 2D."""
    options = []
    for name, size in sizes.items():
        for stride in (1, 2, 0) if zero_stride else (1, 2):
            if (length - 1) * stride + 1 <= size:
                options.append((name, stride, None, 0))
        for rl in range(2, length if not flat else 2):
            if length % rl == 0:
                for gap in (0, 1, 2):
                    if (length // rl - 1) * (rl + gap) + rl <= size:
                        options.append((name, 1, rl, gap))
    name, stride, rl, gap = draw(st.sampled_from(options))
    if rl is None:
        span = (length - 1) * stride + 1
        offset = draw(st.integers(0, sizes[name] - span))
        return View(name, offset, length, stride)
    span = (length // rl - 1) * (rl + gap) + rl
    offset = draw(st.integers(0, sizes[name] - span))
    return View(name, offset, length, 1, rl, rl + gap)


def draw_source(draw, sizes, length, dst, scalar=True):
    """A source operand: a view (whose words are either those of dst, in the same order,
    or disjoint from dst's) or a dyadic immediate."""
    if scalar and draw(st.integers(0, 3)) == 0:
        return _dyadic(draw)
    v = draw_view(draw, sizes, length, zero_stride=True)
    if isinstance(dst, View) and v != dst and v.sym == dst.sym and (
            set(v.index()) & set(dst.index())):
        return dst  # overlapping but not identical: in place instead
    return v


def draw_compute(draw, sizes, dst, fab=None) -> DsdOp:
    """An op writing `dst` (a view or a FabOut); `fab`, when given, is a FabIn source."""
    length = dst.length
    if fab is None:
        kind = draw(st.sampled_from(("mov", *BINARY, "fma")))
    else:
        kind = draw(st.sampled_from(("mov", "mov", *BINARY, "fma")))
    if kind == "mov":
        return DsdOp("mov", dst, fab if fab is not None else draw_source(draw, sizes, length,
                                                                         dst))
    other = draw_source(draw, sizes, length, dst, scalar=kind != "fma")
    a, b = (fab, other) if fab is not None else (draw_source(draw, sizes, length, dst), other)
    if fab is not None and draw(st.booleans()):
        a, b = b, a
    if kind == "fma":
        if not isinstance(a, (View, Fab)):
            a, b = b, a
        return DsdOp("fma", dst, a, b, s=draw(st.sampled_from(FMA_SCALES)))
    return DsdOp(kind, dst, a, b)


def draw_reduce(draw, sizes, length, fab=None) -> DsdOp:
    """dst = dst (op) b over a stride-0 destination word: a running reduction."""
    name = draw(st.sampled_from(sorted(sizes)))
    word = View(name, draw(st.integers(0, sizes[name] - 1)), length, 0)
    b = fab if fab is not None else draw_source(draw, sizes, length, word, scalar=False)
    if isinstance(b, View) and b.sym == name and word.offset in set(b.index()):
        b = _dyadic(draw)
    return DsdOp(draw(st.sampled_from(REDUCE)), word, word, b)


def draw_local(draw, sizes) -> DsdOp:
    length = draw(st.integers(1, 10))
    if draw(st.integers(0, 4)) == 0:
        return draw_reduce(draw, sizes, length)
    return draw_compute(draw, sizes, draw_view(draw, sizes, length))


def draw_pieces(draw, n) -> list:
    """n split into one to three positive lengths."""
    cuts = sorted(draw(st.lists(st.integers(1, n - 1), unique=True, max_size=2))) if n > 1 \
        else []
    bounds = [0, *cuts, n]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def draw_send(draw, sizes, flow, length) -> DsdOp:
    out = Fab(flow, length)
    if draw(st.integers(0, 4)) == 0:
        return DsdOp("mov", out, draw_view(draw, sizes, length, flat=True), loop=True)
    return draw_compute(draw, sizes, out)


def draw_receive(draw, sizes, flow, length) -> DsdOp:
    fab = Fab(flow, length)
    form = draw(st.integers(0, 5))
    if form == 0:
        return DsdOp("mov", draw_view(draw, sizes, length, flat=True), fab, loop=True)
    if form == 1:
        return draw_reduce(draw, sizes, length, fab)
    return draw_compute(draw, sizes, draw_view(draw, sizes, length), fab)


def draw_flow(draw, color):
    src = draw(st.sampled_from(CELLS))
    dst = draw(st.sampled_from([c for c in CELLS if c != src]))
    cells = l_path(src, dst, row_first=draw(st.booleans()))
    tree = set(cells)
    receivers = [dst]
    if len(cells) > 2:
        receivers += draw(st.lists(st.sampled_from(cells[1:-1]), unique=True, max_size=2))
    edges = list(zip(cells, cells[1:]))
    paths = [(cells, list(receivers))]
    free = [c for c in CELLS if c not in tree]
    if free and draw(st.booleans()):
        at = draw(st.integers(0, len(cells) - 1))
        bdst = draw(st.sampled_from(free))
        branch = l_path(cells[at], bdst, row_first=draw(st.booleans()))
        if not set(branch[1:]) & tree:
            receivers.append(bdst)
            edges += list(zip(branch, branch[1:]))
            paths.append((cells[:at] + branch, [bdst]))
    return Flow(color, src, edges, receivers, draw(st.integers(1, 10))), paths


@st.composite
def programs(draw):
    k = draw(st.integers(1, 4))
    colors = draw(st.lists(st.integers(0, CONFIG.num_colors - 1), min_size=k, max_size=k,
                           unique=True))
    flows, paths = [], []
    for color in colors:
        f, p = draw_flow(draw, color)
        flows.append(f)
        paths.append(p)
    senders = {f.src for f in flows}
    receiving = {r for f in flows for r in f.receivers}
    sinks = {}
    for cell in sorted(receiving - senders):
        if draw(st.integers(0, 3)) == 0:
            sinks[cell] = Sink({})
    pes = {}
    for cell in CELLS:
        if cell in sinks:
            continue
        active = cell in senders or cell in receiving
        if not active and not draw(st.integers(0, 2)) == 0:
            continue  # an idle PE, or one with local work only
        sizes = {"v0": draw(st.integers(10, 24))}
        for j in range(draw(st.integers(0, 2))):
            sizes[f"v{j + 1}"] = draw(st.integers(1, 16))
        ops = []
        for i, f in enumerate(flows):
            if draw(st.integers(0, 3)) == 0:
                ops.append(draw_local(draw, sizes))
            if cell == f.src:
                ops += [draw_send(draw, sizes, i, n) for n in draw_pieces(draw, f.n)]
            if cell in f.receivers:
                ops += [draw_receive(draw, sizes, i, n) for n in draw_pieces(draw, f.n)]
        ops += [draw_local(draw, sizes) for _ in range(draw(st.integers(0 if active else 1, 2)))]
        pes[cell] = PeCode(sizes, ops)
    for cell, sink in sinks.items():
        for i, f in enumerate(flows):
            if cell in f.receivers:
                sink.kinds[i] = tuple(draw(st.lists(st.sampled_from(SINK_KINDS), min_size=1,
                                                    max_size=3, unique=True)))
    for code in pes.values():
        mark_async(draw, code)
        split_tasks(draw, code)
    case = Case(flows, pes, sinks, seed=draw(st.integers(0, 2**32 - 1)),
                chunk=draw(st.integers(1, 40)),
                stops=draw(st.lists(st.integers(1, 25), min_size=1, max_size=5)),
                save_at=draw(st.floats(0.0, 1.0)), paths=paths)
    note(case.describe())
    return case


def mark_async(draw, code: PeCode) -> None:
    """Make ops async where no later op reads or writes what they write, or writes what they
    read (then their timing cannot change any result)."""
    later_w, later_r = set(), set()
    for op in reversed(code.ops):
        w, r = op.writes(), op.reads()
        free = not (w & (later_w | later_r)) and not (r & later_w)
        if free and not op.loop and draw(st.integers(0, 2)) == 0:
            op.is_async = True
        later_w |= w
        later_r |= r


def split_tasks(draw, code: PeCode) -> None:
    """Cut the ops into consecutive tasks; each task hands over to the next by activating it
    at its end, by its last (async) op's on_done, or by that op unblocking it."""
    n = len(code.ops)
    cuts = sorted(draw(st.lists(st.integers(1, n - 1), unique=True, max_size=2))) if n > 1 \
        else []
    code.cuts = cuts
    for cut in cuts:
        last = code.ops[cut - 1]
        chain = draw(st.sampled_from(("activate", "on_done", "unblock")))
        if not last.is_async:
            chain = "activate"
        code.chains.append(chain)


# ---- building -----------------------------------------------------------------------------
TASKS = ("main", "t1", "t2")


def operand(x, flows, out=False):
    if isinstance(x, View):
        return x.dsd()
    if isinstance(x, Fab):
        color = flows[x.flow].color
        return ins.FabOut(color, x.length) if out else ins.FabIn(color, x.length)
    return x


def op_code(op: DsdOp, flows, label: str) -> list:
    if op.loop:  # one element per iteration, addressed by register i
        view = op.dst if isinstance(op.dst, View) else op.a
        elem = ins.Mem(view.sym, 0, 1, offset_reg="i")
        color = flows[(op.a if isinstance(op.a, Fab) else op.dst).flow].color
        body = (ins.mov(elem, ins.FabIn(color, 1)) if isinstance(op.a, Fab)
                else ins.mov(ins.FabOut(color, 1), elem))
        end = view.offset + view.length * view.stride
        return [ins.set_reg("i", view.offset), ins.label(label), body,
                ins.iadd("i", "i", view.stride), ins.branch_if_less("i", end, label)]
    make = {"mov": ins.mov, "add": ins.add, "sub": ins.sub, "mul": ins.mul, "fma": ins.fma,
            "max": ins.max_, "min": ins.min_}[op.kind]
    args = [operand(op.dst, flows, out=True), operand(op.a, flows)]
    if op.kind != "mov":
        args.append(operand(op.b, flows))
    if op.kind == "fma":
        args.append(op.s)
    return [make(*args, is_async=op.is_async, on_done=op.on_done)]


def pe_tile(cell, code: PeCode, flows) -> Tile:
    tile = Tile(f"pe{cell[0]}{cell[1]}")
    for name, size in code.symbols.items():
        tile.symbol(name, "f32", size)
    bounds = [0, *code.cuts, len(code.ops)]
    tasks = []
    for t, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        body = []
        for j in range(lo, hi):
            op = code.ops[j]
            if j == hi - 1 and t + 1 < len(bounds) - 1:
                chain = code.chains[t]
                nxt = TASKS[t + 1]
                if chain == "on_done":
                    op = dataclasses.replace(op, on_done=ins.Activate(nxt))
                elif chain == "unblock":
                    body.insert(0, ins.activate(nxt))  # ready, but blocked until the op ends
                    op = dataclasses.replace(op, on_done=ins.Unblock(nxt))
            body += op_code(op, flows, f"loop{j}")
        if t + 1 < len(bounds) - 1 and code.chains[t] == "activate":
            body.append(ins.activate(TASKS[t + 1]))
        tasks.append(body)
    for t, body in enumerate(tasks):
        blocked = t > 0 and code.chains[t - 1] == "unblock"
        tile.local_task(TASKS[t], body, blocked=blocked)
    return tile


def sink_symbols(sink: Sink, flows) -> dict:
    """name -> (dtype, size) of a sink's symbols."""
    out = {}
    for i, kinds in sink.kinds.items():
        for kind in kinds:
            size = flows[i].n + 2 if kind == "buffer" else 1
            out[f"{kind}{i}"] = ("i32" if kind == "count" else "f32", size)
    return out


def sink_tile(cell, sink: Sink, flows) -> Tile:
    tile = Tile(f"sink{cell[0]}{cell[1]}")
    for name, (dtype, size) in sink_symbols(sink, flows).items():
        tile.symbol(name, dtype, size)
    for i, kinds in sink.kinds.items():
        code = []
        for kind in kinds:
            word = ins.Mem(f"{kind}{i}", 0, 1)
            if kind == "sum":
                code.append(ins.add(word, word, ins.WAVELET))
            elif kind == "max":
                code.append(ins.max_(word, word, ins.WAVELET))
            elif kind == "count":
                code += [ins.iadd(f"c{i}", f"c{i}", 1), ins.mov(word, f"c{i}")]
            elif kind == "last":
                code.append(ins.mov(word, ins.WAVELET))
            else:
                code += [ins.mov(ins.Mem(f"buffer{i}", 0, 1, offset_reg=f"p{i}"), ins.WAVELET),
                         ins.iadd(f"p{i}", f"p{i}", 1)]
        tile.data_task(f"on{i}", flows[i].color, code)
    return tile


def build_program(case: Case) -> Program:
    prog = Program(CONFIG)
    for cell, code in sorted(case.pes.items()):
        prog.place(pe_tile(cell, code, case.flows), pe(*cell))
    for cell, sink in sorted(case.sinks.items()):
        prog.place(sink_tile(cell, sink, case.flows), pe(*cell))
    routes = Routes()
    for f, paths in zip(case.flows, case.paths):
        for cells, receivers in paths:
            routes.add_path(f.color, cells, receivers)
    return routes.apply(prog)
