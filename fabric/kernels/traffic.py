"""Synthetic traffic on static color routes: streams, permutations, shared links, multicast.

As on the real fabric, a wavelet's path is set by its color at every router, not by a
destination address: each flow gets one color and a static route (an L: along the row then
the column, "xy", or the column then the row, "yx"; several destinations make a multicast
tree). A color is accepted from one rx port per PE, so flows whose routes share any PE must
use different colors; `assign_colors` colors them greedily (largest route first) and names
the flows when the 24 colors do not suffice.

Every PE runs two chains of async `mov`s: "send" (from its `out<k>` symbols) and "recv"
(into its `in<k>` symbols). A chain keeps one op in flight; the op's completion activates
the chain's task, which issues the next (rounds of `chunk` words, the PE's flow ends in
global flow order within a round). So a PE's sends and receives share the datapath
(otherwise the datapath stays with a send that can go on and the PE's incoming flow backs
up), the words of a color are never moved by two ops at once (which could reorder them),
and at most two of the three async slots are busy. Every chain follows the global order
(round, flow), so the lowest unfinished op is always issued at both ends of its flow: no
pattern can deadlock.

Expected values (`Kernel.info`), L = hop_latency, h = hops:
- zero-load latency of a flow: h*L + (L + 1) cycles from send to consume (docs/engine.md);
- a lone stream of n wavelets: `stream_cycles(config, n, h)` = n + h*L + L + STREAM_OVERHEAD;
- `cut_bound`: for every straight cut of the rectangle and each direction, the wavelets
  that must cross it over the links crossing it (the bisection bound, taken over all cuts);
- `model_cycles` = max(busiest link's wavelets + h_max*L + L + STREAM_OVERHEAD, busiest
  PE + STREAM_OVERHEAD), where a PE's load is the larger of its datapath elements (one send
  or receive element per cycle) and its chains' main-thread cycles (`_chain_thread_cycles`).
  Exact for lone streams and multicasts; an estimate (tested within 10%) under contention.

Example:
    >>> k = build_transpose(FabricConfig.small(8, 8), Rect(0, 0, 8, 8), n=64)  # doctest: +SKIP
    >>> inputs = traffic_inputs(k)                                            # doctest: +SKIP
    >>> r = run_kernel(k, inputs); r.output == traffic_reference(k, inputs)   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.host import Simulator
from fabric.isa import Port
from fabric.kernels.base import Kernel, pick_colors, rect_groups
from fabric.kernels.traffic_routes import (  # noqa: F401  (public names of this module)
    XY,
    YX,
    Cell,
    Flow,
    assign_colors,
    conflicts,
    cut_bound,
    l_path,
    link_loads,
    route_tree,
    transpose_orders,
)
from fabric.program import DTYPES, Program, Rect, Tile

CHAIN_TASK = {"out": "send", "in": "recv"}
# Cycles a lone stream costs beyond n + h*L + L: the sender's task starts in cycle 0 and its
# first word leaves in cycle 1; the last word is consumed in cycle n + h*L + L + 1, and the
# run counts that cycle too.
STREAM_OVERHEAD = 2
CHUNK = 8  # words per op of the permutations, whose PEs both send and receive


def stream_cycles(config: FabricConfig, n: int, hops: int) -> int:
    """Exact cycles of a lone stream of n words over `hops` hops, launch to quiet:
    n + hops*L + L + STREAM_OVERHEAD."""
    L = config.hop_latency
    return n + hops * L + L + STREAM_OVERHEAD


# ---- building ------------------------------------------------------------------------------
def build_traffic(config: FabricConfig, rect: Rect, flows: Sequence[Flow], dtype: str = "f32",
                  colors: Sequence[int] | None = None, chunk: int | None = None,
                  name: str = "traffic") -> Kernel:
    """A kernel moving every flow's words from its source to its destinations.

    Args:
        config, rect: the fabric and the rectangle the flows live in (coordinates of the
            flows are relative to `rect`).
        flows: the flows, in the global order every PE issues them in.
        dtype: the 32-bit word type of the payloads ("f32", "i32" or "u32").
        colors: the palette to color flows from (default: all colors of `config`).
        chunk: words per op; each flow end is cut into ops of `chunk` words, issued in the
            order (chunk index, flow index), so that a PE's sends cannot run ahead of its
            receives (the datapath stays with the op that last advanced). None: one op per
            flow end.

    Returns a Kernel whose inputs are {flow name: array (n,)} and whose output is
    {flow name: {destination: array (n,)}} (see `traffic_reference`). Cycle model: see the
    module docstring; `info` holds the expected values.
    """
    flows = list(flows)
    _check_flows(config, rect, flows, dtype)
    palette = (list(config.program_colors) if colors is None
               else pick_colors(config, len(set(colors)), colors))
    flow_colors = assign_colors(flows, palette)

    # per PE (absolute): its flow ends [(flow index, "out" | "in", color, symbol, n)]
    ends: dict[Cell, list] = {}
    send_at, recv_at = {}, {}
    for i, f in enumerate(flows):
        src = (rect.row + f.src[0], rect.col + f.src[1])
        send_at[f.name] = (src, _add_end(ends, src, "out", i, flow_colors[i], f.n))
        for d in f.dsts:
            dst = (rect.row + d[0], rect.col + d[1])
            recv_at[(f.name, tuple(d))] = (dst, _add_end(ends, dst, "in", i, flow_colors[i],
                                                          f.n))
    specs = {cell: _pe_spec(cell, e, flows, chunk) for cell, e in ends.items()}

    prog = Program(config)
    for block, spec in rect_groups(specs):
        prog.place(_tile(f"{name}_{block.row}_{block.col}", spec, dtype), block)
    for i, f in enumerate(flows):
        for (r, c), (rx, tx) in route_tree(f).items():
            prog.route(Rect(rect.row + r, rect.col + c, 1, 1), flow_colors[i], rx, sorted(tx))

    info = _expected(config, rect, flows, flow_colors, specs)
    info.update(send_at=send_at, recv_at=recv_at, dtype=dtype)
    np_dtype = DTYPES[dtype]

    def load(sim, inputs):
        for f in flows:
            (r, c), sym = send_at[f.name]
            data = np.asarray(inputs[f.name], np_dtype)
            if data.shape != (f.n,):
                raise ValueError(f"input of flow {f.name!r} has shape {data.shape}, "
                                 f"expected ({f.n},)")
            sim.memcpy_h2d(sym, data, rect=Rect(r, c, 1, 1))

    def read(sim):
        out: dict = {f.name: {} for f in flows}
        for (fname, d), ((r, c), sym) in recv_at.items():
            out[fname][d] = sim.memcpy_d2h(sym, rect=Rect(r, c, 1, 1))[0, 0]
        return out

    def launch(sim):
        for task in sorted({kind for spec in specs.values() for kind, *_ in spec[1]}):
            sim.launch(CHAIN_TASK[task])

    return Kernel(name, config, rect, prog, load, read, launch,
                  model_cycles=info["model_cycles"], info=info)


def _check_flows(config, rect, flows, dtype):
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    if not flows:
        raise ValueError("no flows")
    names = [f.name for f in flows]
    if len(set(names)) != len(names):
        raise ValueError(f"flow names repeat: {names}")
    for f in flows:
        for cell in (f.src, *f.dsts):
            if not (0 <= cell[0] < rect.rows and 0 <= cell[1] < rect.cols):
                raise ValueError(f"flow {f.name!r}: PE {tuple(cell)} lies outside the "
                                 f"{rect.rows}x{rect.cols} rectangle {rect}")
        if f.n > config.sram_words:
            raise ValueError(f"flow {f.name!r}: n={f.n} words do not fit the "
                             f"{config.sram_bytes // 1024} KiB SRAM of a PE")
    words: dict[Cell, int] = {}
    for f in flows:
        for cell in (f.src, *f.dsts):
            words[tuple(cell)] = words.get(tuple(cell), 0) + f.n
    for cell, w in words.items():
        if w > config.sram_words:
            raise ValueError(f"PE {cell} of {rect} holds {w} words of flow data "
                             f"({4 * w} B), more than its {config.sram_bytes // 1024} KiB SRAM")


def _add_end(ends, cell, kind, flow, color, n):
    """Record one end of a flow on PE `cell`; returns the symbol holding its words."""
    sym = f"{kind}{sum(e[1] == kind for e in ends.get(cell, []))}"
    ends.setdefault(cell, []).append((flow, kind, color, sym, n))
    return sym


def _pe_spec(cell, ends, flows, chunk):
    """What a PE runs: (symbols [(name, n)], chains [(kind, n, step, ends [(color, sym)])]),
    one chain per kind ("out", "in") holding that kind's ends in flow order; `step` words per
    op (`chunk`, or the whole n when None)."""
    chains = []
    for kind in ("out", "in"):
        mine = sorted(e for e in ends if e[1] == kind)
        if not mine:
            continue
        sizes = {e[4] for e in mine}
        if len(sizes) > 1:
            names = [flows[e[0]].name for e in mine]
            raise ValueError(f"PE {cell}: flows {names} end here with different n "
                             f"{sorted(sizes)}; the flows of one PE must have the same n")
        n = sizes.pop()
        step = n if chunk is None else min(int(chunk), n)
        chains.append((kind, n, step, tuple((e[2], e[3]) for e in mine)))
    symbols = tuple((sym, n) for _, _, _, sym, n in sorted(ends, key=lambda e: e[3]))
    return symbols, tuple(chains)


def _tile(name, spec, dtype):
    """A PE's tile: its symbols and a chain task per direction ("send", "recv")."""
    symbols, chains = spec
    tile = Tile(name)
    for sym, n in symbols:
        tile.symbol(sym, dtype, n)
    for kind, n, step, chain_ends in chains:
        tile.local_task(CHAIN_TASK[kind], _chain_code(kind, n, step, chain_ends))
    return tile


def _chain_code(kind, n, step, chain_ends):
    """The code of one chain: each activation issues one op of `step` words (at offset
    register o; ends in flow order within a round, end index in register k) whose
    completion activates the chain again, except the very last op."""
    task, o, k = CHAIN_TASK[kind], f"{kind}_o", f"{kind}_k"
    e = len(chain_ends)
    last = (n - 1) // step * step  # offset of the last round
    length = f"{kind}_len" if n % step else None  # the last round is shorter

    def op(i, again):
        color, sym = chain_ends[i]
        mem = ins.Mem(sym, 0, step, offset_reg=o, length_reg=length)
        done = ins.Activate(task) if again else None
        if kind == "out":
            return ins.mov(ins.FabOut(color, step, length), mem, is_async=True, on_done=done)
        return ins.mov(mem, ins.FabIn(color, step, length), is_async=True, on_done=done)

    if e == 1 and step == n:  # a single op: nothing to chain
        return [op(0, False)]
    code = []
    if length:  # length = min(step, n - o)
        code += [ins.isub(length, n, o), ins.branch_if_less(length, step, "short"),
                 ins.set_reg(length, step), ins.label("short")]
    code += [ins.branch_if_less(k, i + 1, f"end{i}") for i in range(e - 1)]
    # the last end is the cascade's fall-through; its op of the last round must not
    # activate the chain again
    code += [ins.branch_if_less(o, last, "again"), op(e - 1, False), ins.jump("next"),
             ins.label("again"), op(e - 1, True), ins.jump("next")]
    for i in range(e - 1):
        code += [ins.label(f"end{i}"), op(i, True), ins.jump("next")]
    code[-1:] = [ins.label("next")]
    if e > 1:
        code += [ins.iadd(k, k, 1), ins.branch_if_less(k, e, "done"), ins.set_reg(k, 0)]
    return code + [ins.iadd(o, o, step), ins.label("done")]


def _chain_thread_cycles(kind, n, step, chain_ends) -> int:
    """Main-thread cycles of a chain (`_chain_code`), counted per activation: the task start,
    the instructions run and the return. In a round over e ends, end i < e - 1 costs 7 + i
    (i + 1 dispatch branches, op, jump, k bookkeeping) and the last end 7 + e (5 when
    e = 1); the very last op one more (its jump); a chain with a shorter last round
    computes each op's length (3 cycles, 2 in the short round)."""
    e, rounds = len(chain_ends), -(-n // step)
    if e == 1 and step == n:
        return 3  # start, op, return
    per_round = 5 if e == 1 else sum(7 + i for i in range(e - 1)) + 7 + e
    length = (3 * e * rounds - e) if n % step else 0
    return rounds * per_round + 1 + length


def _expected(config, rect, flows, flow_colors, specs) -> dict:
    L = config.hop_latency
    loads = link_loads(flows)
    links = {k: v for k, v in loads.items() if k[2] != Port.RAMP}
    datapath: dict[Cell, int] = {}  # elements per PE: its sends + its receives
    for f in flows:
        for cell in (f.src, *f.dsts):
            datapath[cell] = datapath.get(cell, 0) + f.n
    thread = max(sum(_chain_thread_cycles(*chain) for chain in spec[1])
                 for spec in specs.values())
    busiest_link = max(links.values(), default=0)
    busiest_pe = max(max(datapath.values()), thread)
    h_max = max(f.hops for f in flows)
    link_term = busiest_link + h_max * L + L + STREAM_OVERHEAD
    return {
        "flows": [{"name": f.name, "src": f.src, "dsts": list(f.dsts), "n": f.n,
                   "order": f.order, "color": col, "hops": f.hops,
                   "zero_load_latency": f.hops * L + L + 1,
                   "stream_cycles": stream_cycles(config, f.n, f.hops)}
                  for f, col in zip(flows, flow_colors)],
        "colors_used": len(set(flow_colors)),
        "link_loads": {(rect.row + r, rect.col + c, Port(p).name): w
                       for (r, c, p), w in loads.items()},
        "max_link_load": busiest_link,
        "max_datapath_load": max(datapath.values()),
        "max_thread_cycles": thread,
        "cut_bound": cut_bound(flows, rect.rows, rect.cols),
        "injected": sum(f.n for f in flows),
        "delivered": sum(f.n * len(f.dsts) for f in flows),
        "model_cycles": max(link_term, busiest_pe + STREAM_OVERHEAD),
    }


# ---- data ----------------------------------------------------------------------------------
def traffic_inputs(kernel: Kernel) -> dict[str, np.ndarray]:
    """Payloads that name their flow and position: word i of flow f is f * 4096 + i + 1
    (exact in fp32 for n <= 4096 and up to 4096 flows)."""
    dtype = DTYPES[kernel.info["dtype"]]
    return {f["name"]: (np.arange(f["n"]) + 1 + 4096 * i).astype(dtype)
            for i, f in enumerate(kernel.info["flows"])}


def traffic_reference(kernel: Kernel, inputs) -> dict:
    """What every destination must hold: the words its flow's source sent, in order."""
    return {f["name"]: {tuple(d): np.asarray(inputs[f["name"]]) for d in f["dsts"]}
            for f in kernel.info["flows"]}


def shared_link_trace(kernel: Kernel, sim: Simulator,
                      limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Runs `sim`, holding a `build_shared_link` kernel loaded and launched, one cycle at a
    time until every word is consumed. Returns (crossed, per_cycle): after each cycle, the
    wavelets of each flow's color counted at the shared link's PE (shape [cycle, flow]), and
    the wavelets the link carried in each cycle. RuntimeError after `limit` cycles."""
    r, c, port = kernel.info["shared_link"]
    colors = [f["color"] for f in kernel.info["flows"]]
    crossed, link = [], []
    while True:
        stats = sim.run(max_cycles=1, raise_on_limit=False)
        crossed.append(stats.color_count_per_pe[r, c, colors])
        link.append(int(stats.link_count[r, c, Port[port]]))
        if stats.in_flight == 0 and stats.consumed == kernel.info["delivered"]:
            break
        if limit is not None and len(link) >= limit:
            raise RuntimeError(f"{kernel.name}: words still in flight after {limit} cycles")
    return np.array(crossed), np.diff(np.array([0, *link]))


# ---- patterns ------------------------------------------------------------------------------
def build_streams(config: FabricConfig, rect: Rect, pairs: Sequence[tuple[Cell, Cell]], n: int,
                  order: str = XY, dtype: str = "f32",
                  colors: Sequence[int] | None = None, chunk: int | None = None) -> Kernel:
    """Streams of n words between chosen PE pairs [(src, dst), ...] on L routes ("xy" or
    "yx"); flow i is named "s<i>"."""
    flows = [Flow(f"s{i}", tuple(s), (tuple(d),), n, order) for i, (s, d) in enumerate(pairs)]
    return build_traffic(config, rect, flows, dtype, colors, chunk, name="streams")


def build_shift(config: FabricConfig, rect: Rect, n: int, k: int = 1, dtype: str = "f32",
                colors: Sequence[int] | None = None, chunk: int | None = CHUNK) -> Kernel:
    """Cyclic shift by k along every row: PE (i, j) sends n words to (i, (j + k) % cols).
    Flows that wrap travel west. Flow names "r<i>c<j>"."""
    if not 0 < k % rect.cols:
        raise ValueError(f"shift by {k} on {rect.cols} columns moves nothing")
    flows = [Flow(f"r{i}c{j}", (i, j), ((i, (j + k) % rect.cols),), n)
             for i in range(rect.rows) for j in range(rect.cols)]
    return build_traffic(config, rect, flows, dtype, colors, chunk, name="shift")


def build_transpose(config: FabricConfig, rect: Rect, n: int, k: int | None = None,
                    balance: bool = True, dtype: str = "f32",
                    colors: Sequence[int] | None = None, chunk: int | None = CHUNK) -> Kernel:
    """Transpose on the k x k square at the top-left of `rect` (default: the largest that
    fits; the kernel's rect is that square): PE (i, j) sends n words to (j, i); diagonal PEs
    keep theirs and send nothing. Its cut bound is the bisection's: (k/2)^2 * n words cross
    the middle over k links each way (k even).

    Every route turns at a diagonal PE ((i, i) for "xy", (j, j) for "yx"); with `balance`
    each flow takes the order that evens out the load on the links around the diagonal
    (`transpose_orders`, the least busiest-link load any choice of L routes reaches), else
    every flow goes "xy" (the row into diagonal PE (k-1, k-1) then carries k - 1 flows).
    Flow names "r<i>c<j>".
    """
    k = min(rect.rows, rect.cols) if k is None else k
    if not 2 <= k <= min(rect.rows, rect.cols):
        raise ValueError(f"transpose size k={k} must be in 2..{min(rect.rows, rect.cols)} "
                         f"for {rect}")
    orders = transpose_orders(k) if balance else {}
    flows = [Flow(f"r{i}c{j}", (i, j), ((j, i),), n, orders.get((i, j), XY))
             for i in range(k) for j in range(k) if i != j]
    square = Rect(rect.row, rect.col, k, k)
    return build_traffic(config, square, flows, dtype, colors, chunk, name="transpose")


def build_neighbour_exchange(config: FabricConfig, rect: Rect, n: int, dtype: str = "f32",
                             colors: Sequence[int] | None = None,
                             chunk: int | None = CHUNK) -> Kernel:
    """Every PE sends n words to each of its (up to 4) neighbours in `rect`, east, west,
    south then north. Flow names "r<i>c<j><E|W|S|N>"."""
    flows = []
    for name, (dr, dc) in (("E", (0, 1)), ("W", (0, -1)), ("S", (1, 0)), ("N", (-1, 0))):
        for i in range(rect.rows):
            for j in range(rect.cols):
                if 0 <= i + dr < rect.rows and 0 <= j + dc < rect.cols:
                    flows.append(Flow(f"r{i}c{j}{name}", (i, j), ((i + dr, j + dc),), n))
    if not flows:
        raise ValueError(f"{rect} has a single PE: no neighbours to exchange with")
    return build_traffic(config, rect, flows, dtype, colors, chunk, name="neighbours")


def build_shared_link(config: FabricConfig, rect: Rect, k: int, n: int, dtype: str = "f32",
                      colors: Sequence[int] | None = None, chunk: int | None = None) -> Kernel:
    """k flows on k colors sharing one link: flow i goes from (0, k-1-i) east to (0, k+i)
    on the first row of `rect`, so all of them cross the link (0, k-1) -> (0, k).
    `info["shared_link"]` is that link as (row, col, "EAST") in fabric coordinates.
    Flow names "f<i>"."""
    if not 1 <= k <= rect.cols // 2:
        raise ValueError(f"{k} flows sharing a link need 2k = {2 * k} columns; {rect} has "
                         f"{rect.cols}")
    flows = [Flow(f"f{i}", (0, k - 1 - i), ((0, k + i),), n) for i in range(k)]
    kernel = build_traffic(config, rect, flows, dtype, colors, chunk, name="shared_link")
    kernel.info["shared_link"] = (rect.row, rect.col + k - 1, "EAST")
    return kernel


def build_multicast(config: FabricConfig, rect: Rect, n: int, src: Cell = (0, 0),
                    dsts: Sequence[Cell] | None = None, order: str = XY, dtype: str = "f32",
                    colors: Sequence[int] | None = None, chunk: int | None = None) -> Kernel:
    """One flow of n words from `src` to every PE of `dsts` (default: every other PE of
    `rect`) on one color, along the tree of its L routes (multicast forks at the turns)."""
    if dsts is None:
        dsts = [c for c in Rect(0, 0, rect.rows, rect.cols).pes() if c != tuple(src)]
    flow = Flow("m", tuple(src), tuple(tuple(d) for d in dsts), n, order)
    return build_traffic(config, rect, [flow], dtype, colors, chunk, name="multicast")
