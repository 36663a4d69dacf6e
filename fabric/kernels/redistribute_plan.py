"""Planning a redistribution (`fabric.kernels.redistribute`): the source word of every
destination word, the flows that carry them across PEs, their wire formats, routes,
colors and rounds.

`plan_redistribution(config, src, dst)` gives every destination word a source word
holding its element (the same PE if it has one, else the nearest PE holding it; ties go
to a word of the destination's format, else a 32-bit one, then to the PE sending least so
far), then groups the moves:
- words staying on a PE: local memory-to-memory movs (`split_runs` joint runs, 2D when the
  addresses allow; ordered by source address, by destination address, or grouped by the
  offset between the two, whichever needs fewest ops), on the "local" chain;
- words crossing PEs: one flow per (source PE, destination PE) pair, its words in the
  order (source or destination addresses) that needs fewer DSD ops; the sender reads them
  with memory DSDs straight into a fabric output ("send" chain), the receiver writes its
  fabric input into place ("recv" chain). Pairs of one source PE carrying the same source
  words (a duplicated element set) are one multicast flow. An element that a destination
  PE holds in several slots of one format crosses the fabric once: its receive chain then
  copies it into the other slots (`Move.copies`, memory to memory after the flow's
  receives, in joint runs ordered as local movs are: a window's copies repeat a few
  offsets at the window's stride). A convolution's windows as rows (each input element
  in up to kh x kw rows, most on one PE) so move about one word per element instead of
  one per slot.
In the programs the source symbols are named "s_<name>" and the destination symbols
"d_<name>", so the two maps may share names, PEs and rectangles.

Formats: a map's symbols may hold fp32 words or 16-bit values ("f16", "bf16", "cb16",
half-word slots; `WordMap.dtypes`), and every element arrives in its destination's format:
- same format: moved unchanged (16-bit: `mov(..., dtype=h)`, one value in the low half of a
  wavelet);
- fp32 -> h: the receiver rounds what arrives (`to_half` from the fabric input);
- h -> fp32: the sender sends h, the receiver widens it exactly (`to_f32`);
- h1 -> h2: through fp32: the sender widens (`to_f32` into its fabric output), the receiver
  rounds (`to_half`); a local h1 -> h2 move widens into an fp32 scratch symbol "t_" and
  rounds from it (a conversion reads one format and writes the other, so two ops).
Every conversion takes fabric operands directly (tests/kernels/test_redistribute_half.py).
Packing (`pack=True`, the default): a flow whose wire format is 16-bit carries two values per
wavelet (`FabIn`/`FabOut(packed=True)`) when every op at each end but its last moves an even
number of values (an op's wavelets then never straddle two ops of the other end); it then
takes ceil(n / 2) wavelets and datapath cycles instead of n. An fp32 -> h flow that packs
rounds at the sender (`to_half` into the packed fabric output) instead of the receiver.
Flows go on L routes (`traffic_routes.route_tree`) with one color each; flows whose routes
share a PE need distinct colors. Flows are colored greedily (longest route first, "xy"
then "yx" order, lowest free color of the palette) into rounds: a flow that finds no free
color in round r goes to round r + 1. Each round is its own Program, run after the
previous one; the local moves run in round 0. Within a round the flows are ordered by
phases (`_phase`: flows sharing no PE and no link run in one phase), the order every
PE's chains follow; a PE takes its receives on two chains (`redistribute_round`).

Windows: every route runs inside the bounding box of the two rectangles (L paths between
their PEs), so the rounds' programs are built and run on a window of the fabric that holds
the box (`fabric.window.window_for`; `Redistribution.window`), where the engine steps fewer
PEs for the same cycles and words. The plan's moves and programs are in the window's
coordinates; its maps, `flows` and `report` in the fabric's. `windowed=False` plans on the
whole fabric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fabric.config import FabricConfig
from fabric.isa import Port
from fabric.kernels.base import pick_colors
from fabric.kernels.layout import WordMap
from fabric.kernels.redistribute_code import split_runs
from fabric.kernels.redistribute_ops import COUNTERS, DELIVERING
from fabric.kernels.redistribute_round import _round, _scratch_words
from fabric.kernels.redistribute_types import Cell, Move, Redistribution, _inside
from fabric.kernels.traffic_routes import XY, YX, route_tree
from fabric.program import Program
from fabric.window import Window, bounding_box, whole_fabric, window_for


def plan_redistribution(config: FabricConfig, src: WordMap, dst: WordMap,
                        colors: Sequence[int] | None = None,
                        pack: bool = True, windowed: bool = True) -> Redistribution:
    """A plan moving every element of `src` to every `dst` slot holding it, converted to
    the dst symbol's format (see the module docstring).

    Args:
        config: the fabric (both rectangles must lie on it).
        src, dst: the maps (same number of elements; dst element e = src element e).
        colors: the palette the flows may use (default: every color of `config`).
        pack: let 16-bit flows carry two values per wavelet where their runs allow it.
        windowed: plan and run on the window of `config` that holds both rectangles
            (`fabric.window.window_for`): the same cycles and words as on the whole fabric
            (False), at the engine cost of the window.

    Raises:
        ValueError: sizes differ, a rectangle leaves the fabric, a dst element that no src
            word holds (named with its PE, symbol and word), or SRAM overflow.
    """
    if src.size != dst.size:
        raise ValueError(f"redistribution: src has {src.size} elements {src.shape}, dst "
                         f"{dst.size} {dst.shape}")
    for what, m in (("src", src), ("dst", dst)):
        if m.rect.row_end > config.rows or m.rect.col_end > config.cols:
            raise ValueError(f"redistribution: {what} rectangle {m.rect} lies outside the "
                             f"{config.rows}x{config.cols} fabric {config.name}")
    palette = (list(config.program_colors) if colors is None
               else pick_colors(config, len(set(colors)), colors))
    if src.same_placement(dst):
        return Redistribution(config, src, dst, [], 0, 0)
    src_map, dst_map = src, dst
    window = (window_for(config, bounding_box(src.rect, dst.rect)) if windowed
              else whole_fabric(config))
    local, pairs, copies = _into_window(window, *_assign(src, dst))
    src, dst = _inside(window, src), _inside(window, dst)  # the rounds' coordinates
    local_runs = {cell: split_best(items, joint=True)
                  for cell, items in local.items()}
    _check_sram(config, src, dst, max((_scratch_words(src, dst, runs)
                                       for runs in local_runs.values()), default=0))
    moves = _color(_moves(pairs, src, dst, pack, copies), palette)
    if not moves and not local:  # dst holds no element
        return Redistribution(config, src_map, dst_map, [], 0, 0)
    n_rounds = max((m.round for m in moves), default=0) + 1
    rounds = [_round(window.config, src, dst, [m for m in moves if m.round == r],
                     local_runs if r == 0 else {}) for r in range(n_rounds)]
    return Redistribution(config, src_map, dst_map, rounds,
                          local_words=sum(len(v) for v in local.values())
                          + sum(len(v) for v in copies.values()),
                          remote_words=sum(m.n * len(m.dsts) for m in moves), window=window)


def _into_window(window: Window, local: dict, pairs: dict, copies: dict
                 ) -> tuple[dict, dict, dict]:
    """`_assign`'s cells moved into the window's coordinates (orders kept)."""
    r0, c0 = window.corner

    def at(cell):
        return cell[0] - r0, cell[1] - c0

    return ({at(c): v for c, v in local.items()},
            {(at(s), at(d)): v for (s, d), v in pairs.items()},
            {(at(s), at(d)): v for (s, d), v in copies.items()})


def _assign(src: WordMap, dst: WordMap):
    """Source word of every dst word. Returns (local {cell: [((sym, w) dst, (sym, w) src)]},
    pairs {(src cell, dst cell): [((sym, w) src, (sym, w) dst)]}, copies {(src cell, dst
    cell): [((sym, w) dst, (sym, w) dst)]}: a dst word whose element that pair already
    brings to its PE, into a slot of the same format, copied there from that slot)."""
    # every src word holding an element, sorted by element
    rows, cols, syms, wds, els = [], [], [], [], []
    names = list(src.symbols)
    formats = [src.dtypes[n] for n in names]
    for i, a in enumerate(src.symbols.values()):
        r, c, w = np.nonzero(a >= 0)
        rows.append(r + src.rect.row)
        cols.append(c + src.rect.col)
        syms.append(np.full(r.size, i))
        wds.append(w)
        els.append(a[r, c, w])
    e_all = np.concatenate(els)
    order = np.argsort(e_all, kind="stable")
    e_all = e_all[order]
    r_all, c_all = np.concatenate(rows)[order], np.concatenate(cols)[order]
    s_all, w_all = np.concatenate(syms)[order], np.concatenate(wds)[order]
    lo = np.searchsorted(e_all, np.arange(src.size), "left")
    hi = np.searchsorted(e_all, np.arange(src.size), "right")

    local: dict = {}
    pairs: dict = {}
    copies: dict = {}
    sent: dict = {}
    # (dst cell, element, slot format) -> (its first remote slot there, the pair bringing it)
    arrived: dict = {}
    for k, a in dst.symbols.items():
        r, c, w = np.nonzero(a >= 0)
        for dr, dc, dw in zip(r.tolist(), c.tolist(), w.tolist()):
            e = int(a[dr, dc, dw])
            cell = (dr + dst.rect.row, dc + dst.rect.col)
            here = (cell, e, dst.dtypes[k])
            if here in arrived:  # received there already, so no source word is on `cell`
                first, pair = arrived[here]
                copies.setdefault(pair, []).append(((k, dw), first))
                continue
            if lo[e] == hi[e]:
                raise ValueError(_missing_message(src, dst, k, cell, dw, e))
            best, best_key = None, None
            for j in range(lo[e], hi[e]):
                s_cell = (int(r_all[j]), int(c_all[j]))
                dist = abs(s_cell[0] - cell[0]) + abs(s_cell[1] - cell[1])
                # at one distance, a word of the dst slot's format (no conversion), else a
                # 32-bit one (converted from the value itself, not from a rounding of it)
                fmt = formats[int(s_all[j])]
                fit = 0 if fmt == dst.dtypes[k] else 1 if fmt == "f32" else 2
                key = (dist, fit, (s_cell, cell) not in pairs, sent.get(s_cell, 0), j)
                if best_key is None or key < best_key:
                    best, best_key = j, key
            s_cell = (int(r_all[best]), int(c_all[best]))
            s_word = (names[int(s_all[best])], int(w_all[best]))
            if s_cell == cell:
                local.setdefault(cell, []).append(((k, dw), s_word))
            else:
                pairs.setdefault((s_cell, cell), []).append((s_word, (k, dw)))
                sent[s_cell] = sent.get(s_cell, 0) + 1
                arrived[here] = ((k, dw), (s_cell, cell))
    return local, pairs, copies


def _missing_message(src, dst, sym, cell, word, e):
    idx = np.unravel_index(e, dst.shape) if dst.shape else ()
    missing = np.setdiff1d(np.unique(np.concatenate(
        [a[a >= 0] for a in dst.symbols.values()])), np.flatnonzero(src.coverage() > 0))
    return (f"redistribution: dst word {word} of symbol {sym!r} on PE {cell} holds element "
            f"{e} (index {tuple(int(i) for i in idx)} of {dst.shape}), which no src word "
            f"holds; {missing.size} dst elements are missing from src (first: "
            f"{missing[:8].tolist()})")


def _check_sram(config, src, dst, scratch: int = 0):
    """scratch: words of the fp32 scratch of local h1 -> h2 moves (on PEs of both maps)."""
    s_words = sum(src.sram_words(k) for k in src.symbols)
    d_words = sum(dst.sram_words(k) for k in dst.symbols)
    overlap = (src.rect.row < dst.rect.row_end and dst.rect.row < src.rect.row_end
               and src.rect.col < dst.rect.col_end and dst.rect.col < src.rect.col_end)
    need = max(s_words + d_words + scratch if overlap else 0, s_words, d_words)
    if need > config.sram_words:
        sizes = {what + k: 4 * m.sram_words(k) for what, m in (("src ", src), ("dst ", dst))
                 for k in m.symbols}
        if scratch:
            sizes["scratch"] = 4 * scratch
        raise ValueError(f"redistribution: a PE needs {4 * need} B for the symbols {sizes} "
                         f"(bytes), above its {config.sram_bytes} B of SRAM")


def split_best(items, joint=False):
    """Runs of a pair sequence [(a, b)] ordered by a or by b, whichever needs fewer ops
    (sends + receives, or joint local runs; joint, also grouped by the two symbols and the
    offset from a's address to b's, then by a: a window's slots copied from the slots
    where their elements arrived repeat a few offsets at a constant stride). Returns
    [(Run a, Run b)] when `joint`, else (runs of a, runs of b)."""
    best = None
    orders = [lambda it: it[0], lambda it: it[1]]
    if joint:
        orders.append(lambda it: (it[0][0], it[1][0], it[1][1] - it[0][1], it[0][1]))
    for key in orders:
        seq = sorted(items, key=key)
        if joint:
            runs = split_runs(seq)
            cost = len(runs)
        else:
            runs = (split_runs([(a,) for a, _ in seq]), split_runs([(b,) for _, b in seq]))
            cost = len(runs[0]) + len(runs[1])
        if best is None or cost < best[0]:
            best = (cost, runs)
    if joint:
        return best[1]
    return [r for (r,) in best[1][0]], [r for (r,) in best[1][1]]


def _moves(pairs, src: WordMap, dst: WordMap, pack: bool, copies: dict) -> list[Move]:
    """One move per source PE and word sequence: pairs (src, dst) whose words are the same
    source words (a duplicated element set) become one multicast move. Each move's wire
    format and packing follow the formats of its runs (`_wire`); each pair's `copies`, in
    joint runs, go with the move that brings their words."""
    moves = _flows(pairs, src, dst, pack)
    for m in moves:
        m.copies = {d: split_best(copies[(m.src, d)], joint=True) for d in m.dsts
                    if (m.src, d) in copies}
    return moves


def _flows(pairs, src: WordMap, dst: WordMap, pack: bool) -> list[Move]:
    """`_moves` without the copies."""
    groups: dict = {}
    for (s, d), items in pairs.items():
        key = (s, tuple(sorted(a for a, _ in items)))
        groups.setdefault(key, []).append((d, items))
    moves = []
    for (s, _), ends in groups.items():
        if len(ends) == 1:
            d, items = ends[0]
            send, recv = split_best(items)
            moves.append(_with_wire(Move(s, (d,), len(items), XY, -1, -1, send, {d: recv}),
                                    src, dst, pack))
            continue
        # a multicast: every receiver takes the words in the sender's order
        recv = {}
        for d, items in ends:
            seq = sorted(items)
            recv[d] = [r for (r,) in split_runs([(b,) for _, b in seq])]
        seq = sorted(ends[0][1])
        send = [r for (r,) in split_runs([(a,) for a, _ in seq])]
        moves.append(_with_wire(Move(s, tuple(sorted(d for d, _ in ends)), len(seq), XY, -1,
                                     -1, send, recv), src, dst, pack))
    return moves


def _with_wire(m: Move, src: WordMap, dst: WordMap, pack: bool) -> Move:
    """The move with the format its values take on the fabric and whether they pack.

    Wire h (16-bit) when every sender symbol holds h (receivers copy it or widen it), or
    when every receiver symbol holds h, the other symbols are fp32 and the flow packs (the
    sender rounds); otherwise fp32 (receivers of h round on receipt, senders of h widen).
    A flow packs when each of its ends' ops but the last moves an even number of values,
    none repeating a word (stride 0)."""
    s_fmts = {src.dtypes[r.symbol] for r in m.send}
    d_fmts = {dst.dtypes[r.symbol] for runs in m.recv.values() for r in runs}
    halves = (s_fmts | d_fmts) - {"f32"}
    if len(halves) != 1:
        return m
    (h,) = halves
    ends = [m.send, *m.recv.values()]
    # a run of stride 0 repeats a word, which a packed op (two elements a cycle) cannot
    packed = pack and all(r.length % 2 == 0 for runs in ends for r in runs[:-1]) \
        and all(r.stride != 0 for runs in ends for r in runs)
    if s_fmts == {h} or (d_fmts == {h} and packed):
        m.wire, m.packed = h, packed
    return m


def _color(moves, palette) -> list[Move]:
    """Colors and rounds of the moves (see the module docstring), sorted in the global
    order every chain follows: (round, phase (`_phase`), longest first, source,
    destinations)."""
    used: list[dict] = []  # per round: cell -> colors taken (bit c for color c)
    trees = {id(m): {o: route_tree(m.flow("f", o)) for o in (XY, YX)} for m in moves}
    prefer = _balanced_orders(moves, trees)
    for m in sorted(moves, key=lambda m: (-len(trees[id(m)][XY]), m.src, m.dsts)):
        r = 0
        while m.color < 0:
            if r == len(used):
                used.append({})
            taken_at = used[r]
            for order in prefer[id(m)]:
                cells = trees[id(m)][order]
                taken = 0
                for c in cells:
                    taken |= taken_at.get(c, 0)
                color = next((c for c in palette if not taken >> c & 1), None)
                if color is not None:
                    m.color, m.round, m.order = color, r, order
                    bit = 1 << color
                    for c in cells:
                        taken_at[c] = taken_at.get(c, 0) | bit
                    break
            r += 1
    _phase(moves, trees)
    moves.sort(key=lambda m: (m.round, m.phase, -m.wavelets, m.src, m.dsts))
    return moves


def _links(tree) -> list:
    """The links a route tree's wavelets leave PEs by: (cell, port), delivery to a RAMP
    apart."""
    return [(cell, p) for cell, (_, tx) in tree.items() for p in tx if p != Port.RAMP]


def _phase(moves, trees) -> None:
    """Sets each move's phase within its round: moves taken longest first, each into the
    first phase where none of its PEs (sender, receivers) and none of its route's links is
    taken yet. The flows of a phase can run at once at a wavelet per cycle, and chains
    that take the phases in order seldom find a flow's sender busy with another flow (a
    shift, every flow of one offset, is one phase). `trees`: per move (its id), its route
    tree in each order."""
    taken: dict[tuple[int, int], set] = {}  # (round, phase) -> its PEs and links
    for m in sorted(moves, key=lambda m: (m.round, -m.wavelets, m.src, m.dsts)):
        uses = {m.src, *m.dsts, *_links(trees[id(m)][m.order])}
        m.phase = 0
        while taken.get((m.round, m.phase), set()) & uses:
            m.phase += 1
        taken.setdefault((m.round, m.phase), set()).update(uses)


def _balanced_orders(moves, trees) -> dict:
    """Per move, its two route orders, the one first that keeps the busiest link lighter:
    moves taken largest first, each picks the order whose busiest link (loads of the moves
    placed so far plus its own words) is lower ("xy" on ties). Moves between two tiles
    then share both the rows and the columns between them."""
    load: dict = {}
    prefer = {}
    for m in sorted(moves, key=lambda m: (-m.n, m.src, m.dsts)):
        links = {o: _links(trees[id(m)][o]) for o in (XY, YX)}
        peak = {o: max((load.get(k, 0) for k in links[o]), default=0) for o in (XY, YX)}
        best = YX if peak[YX] < peak[XY] else XY
        for k in links[best]:
            load[k] = load.get(k, 0) + m.n
        prefer[id(m)] = (best, YX if best == XY else XY)
    return prefer


# ---- gates: a consumer started by the data it receives ---------------------------------------
def deliveries(plan: Redistribution) -> dict[Cell, int]:
    """{PE of the fabric: the plan's chains writing destination words there}: one per round
    whose program receives there (its "recv" chain) or moves there locally ("local")."""
    out: dict[Cell, int] = {}
    for rnd in plan.rounds:
        for cell, chains in rnd.ops.items():
            n = sum(k in chains for k in DELIVERING)
            if n:
                pe = plan.window_to_fabric(cell)
                out[pe] = out.get(pe, 0) + n
    return out


def round_programs(plan: Redistribution, gates: Mapping[Cell, Sequence[str]] | None = None,
                   counters: str = "registers") -> list[Program]:
    """The plan's round programs, built again with gates or counters in memory; the same
    moves, routes and colors as `plan.rounds`.

    gates: on each PE of `gates` ({PE of the fabric: task names}), every chain that writes
        destination words ends by counting one delivery into the PE's word "g_wait"
        (`redistribute_ops.GATE`, which the PE declares: in a merged program a view of the
        gate's word, `fabric.merge.Part.shared`), and the one that brings it to zero
        activates the tasks (in a merged program the consumer's entry tasks, named through
        `Part.tasks`).
    counters: "registers" (a register per chain, as `plan.rounds`) or "memory" (a word
        per chain and one scratch register, `redistribute_ops.SHARED_COUNTER`, which every
        move's chains on a PE may share in a merged program where registers run short)."""
    if counters not in COUNTERS:
        raise ValueError(f"counters {counters!r}: one of {list(COUNTERS)}")
    src, dst = _inside(plan.window, plan.src), _inside(plan.window, plan.dst)
    inner = {plan.fabric_to_window(pe): tuple(tasks) for pe, tasks in (gates or {}).items()}
    return [_round(plan.window.config, src, dst, rnd.moves, rnd.local, inner, counters).program
            for rnd in plan.rounds]
