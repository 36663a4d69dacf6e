"""One round of a redistribution as a Program: the chains of ops of each PE (sends,
receives, local moves) and its tile, the flows' routes, and the round's cycle model
and estimate.

Chains: a PE's sends are one chain, its local moves another, and its receives two
(`RECEIVES`: the PE's flows of the round alternately, in the global order), so that a
receiver takes its next flow while the sender of the one before is busy with another
flow; the datapath interleaves the two as their wavelets come (docs/engine.md, datapath).

No deadlock: every chain issues its ops one at a time in one global order (round, flow,
run); the lowest unfinished flow has both ends on it (every earlier op of its sender's
chain and of its receiver's chain is of a lower flow, so finished), and its receiver's
datapath goes to it whenever the op holding the datapath stalls. A PE's chains hold at
most four async ops, fewer than its slots (`FabricConfig.num_async_slots`).

Cycle model (`model_cycles`, a lower bound), per round, L = hop latency:
    max( D_max + 1,  W_max + 1,  max over flows (n + h L + L + 2) )
n: a flow's wavelets (its values, or ceil(n / 2) packed);
D: a PE's datapath cycles (one wavelet per cycle per fabric op, local movs and the copies
after a flow's receives at the mov SIMD width of their format, conversions at the "cvt"
width, capped by their row length), +1 for
the task start in cycle 0; W: the busiest
link's wavelets; the last term the exact cycles of each flow alone (docs/engine.md). The
plan's total is the sum over rounds. `estimate_cycles` adds the chains' main-thread
dispatch (`chain_cycles`) per op to D, and takes the busiest link's wavelets plus the
farthest flow's latency, W_max + h_max L + L + 2, as `traffic` does (measured within
0.85x-1.35x of it, random layouts included).
"""

from __future__ import annotations

from fabric.isa import Port
from fabric.kernels.base import rect_groups
from fabric.kernels.layout import WordMap
from fabric.kernels.redistribute_code import chain_cycles
from fabric.kernels.redistribute_ops import (
    CHAINS,
    RECEIVES,
    copy_op,
    local_cycles,
    local_ops,
    recv_op,
    send_op,
    through_f32,
    tile,
    tile_spec,
)
from fabric.kernels.redistribute_types import Cell, Move, Round
from fabric.kernels.traffic_routes import link_loads, route_tree
from fabric.program import Program


def _scratch_words(src: WordMap, dst: WordMap, runs) -> int:
    """fp32 scratch words a PE's local runs [(dst Run, src Run)] need: the longest h1 -> h2
    run (a conversion reads fp32 or writes fp32, so h1 -> h2 takes two ops)."""
    return max((d.length for d, s in runs if through_f32(src.dtypes[s.symbol],
                                                          dst.dtypes[d.symbol])), default=0)


def _round(config, src: WordMap, dst: WordMap, moves: list[Move], local: dict,
           gates: dict[Cell, tuple[str, ...]] | None = None, counters: str = "registers"
           ) -> Round:
    """One round's program and figures; `gates` {cell: tasks}: the delivering chains of
    those PEs each count one delivery into the PE's gate; `counters`: where the chains
    count their activations (`redistribute_ops.tile_spec`)."""
    # copies on memory alone synchronous where an async op needs a fabric operand
    sync = not config.async_memory_ops
    chains: dict[Cell, dict[str, list]] = {}
    elems: dict[Cell, dict[str, int]] = {}  # datapath cycles per PE and chain
    held: dict[Cell, dict[str, int]] = {}  # of those, the synchronous copies' (main thread)
    taken: dict[Cell, int] = {}  # flows each receiving PE has so far
    for m in moves:
        send = chains.setdefault(m.src, {}).setdefault("send", [])
        send += [send_op(m, run, src.dtypes[run.symbol]) for run in m.send]
        e = elems.setdefault(m.src, {})
        e["send"] = e.get("send", 0) + m.wavelets
        for d, runs in m.recv.items():
            chain = RECEIVES[taken.get(d, 0) % len(RECEIVES)]
            taken[d] = taken.get(d, 0) + 1
            recv = chains.setdefault(d, {}).setdefault(chain, [])
            recv += [recv_op(m, run, dst.dtypes[run.symbol]) for run in runs]
            recv += [copy_op(to, of, dst.dtypes[to.symbol], sync)
                     for to, of in m.copies.get(d, ())]
            e = elems.setdefault(d, {})
            copies = sum(
                local_cycles(config, to, dst.dtypes[to.symbol], of, dst.dtypes[of.symbol])
                for to, of in m.copies.get(d, ()))
            e[chain] = e.get(chain, 0) + m.wavelets + copies
            if sync:
                h = held.setdefault(d, {})
                h[chain] = h.get(chain, 0) + copies
    scratch = {}
    for cell, runs in local.items():
        chains.setdefault(cell, {})["local"] = [
            op for d, s in runs for op in local_ops(d, dst.dtypes[d.symbol], s,
                                                     src.dtypes[s.symbol], sync)]
        scratch[cell] = _scratch_words(src, dst, runs)

    for cell, runs in local.items():
        elems.setdefault(cell, {})["local"] = sum(
            local_cycles(config, d, dst.dtypes[d.symbol], s, src.dtypes[s.symbol])
            for d, s in runs)
        if sync:
            held.setdefault(cell, {})["local"] = elems[cell]["local"]
    datapath = {cell: sum(e.values()) for cell, e in elems.items()}
    ops = {cell: {k: len(v) for k, v in ch.items()} for cell, ch in chains.items()}

    prog = Program(config)
    specs = {}
    for cell in set(src.rect.pes()) | set(dst.rect.pes()) | set(chains):
        specs[cell] = tile_spec(src, dst, cell, chains.get(cell, {}), scratch.get(cell, 0),
                                (gates or {}).get(cell, ()), counters)
    tiles: dict = {}  # one Tile per distinct spec, placed on each of its rectangles
    for rect, (symbols, code) in rect_groups(specs):
        key = (tuple(symbols), code)
        if key not in tiles:
            tiles[key] = tile(f"redist_{rect.row}_{rect.col}", (symbols, code))
        prog.place(tiles[key], rect)
    for m in moves:
        prog.route_cells(m.color, route_tree(m.flow("f")))

    L = config.hop_latency
    loads = {k: v for k, v in link_loads([m.flow("f") for m in moves]).items()
             if k[2] != Port.RAMP}
    busiest = max(loads.values(), default=0)
    stream = max((m.wavelets + m.hops * L + L + 2 for m in moves), default=0)
    d_max = max(datapath.values(), default=0)
    model = max(d_max + 1, busiest + 1, stream)
    # the estimate: a chain's ops run one after another, each after its dispatch; a PE's
    # chains share one datapath and one main thread
    busy = 0
    for cell, o in ops.items():
        thread = {k: n * chain_cycles(n, counters == "memory") + held.get(cell, {}).get(k, 0)
                  for k, n in o.items()}
        busy = max(busy, datapath[cell], sum(thread.values()),
                   *(elems[cell][k] + thread[k] for k in o))
    # as traffic.py's model: the busiest link's wavelets, then the farthest flow's latency
    h_max = max((m.hops for m in moves), default=0)
    link_term = busiest + h_max * L + L + 2 if moves else 0
    estimate = max(model, busy + 1, link_term)
    tasks = sorted({k for ch in chains.values() for k in ch}, key=CHAINS.index)
    return Round(prog, tasks, moves, local, datapath, ops, model, estimate, busiest)
