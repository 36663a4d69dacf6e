"""Reduce and allreduce along the lines of PEs of a rectangle (rows, columns, or rows then
the root column), by the pipelined chain or the doubling-distance tree, with their cycle
models.

Example:
    >>> red = reduce(prog, rect, "y", n, colors=[4, 5], along="row", algo="chain")
    >>> every = allreduce(prog, rect, "y", n, colors=[4, 5, 6], along="row")
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.isa import Port
from fabric.kernels.collectives.dispatch import _dispatch, _roles_params, _tags
from fabric.kernels.collectives.fragment import Fragment
from fabric.kernels.collectives.geometry import (
    ALGOS,
    IDLE,
    ROOTS,
    Lines,
    _check_along,
    _check_domain,
    _route_slab,
    colors_needed,
    line_colors,
)
from fabric.kernels.collectives.multicast import broadcast
from fabric.kernels.collectives.operands import _fin, _fout, _length, _mem
from fabric.program import Program, Rect

OPS = {"add": ins.add, "max": ins.max_, "min": ins.min_}


def reduce(prog: Program, rect: Rect, buf: str, n, colors: Sequence[int], *,
           along: str = "row", algo: str = "chain", op: str = "add", root: str | None = None,
           domain: Rect | None = None, name: str = "rd", then_root: Sequence = (),
           then_root_cycles=0, offset: int = 0) -> Fragment:
    """Reduce `buf` (n words) with `op` into the root end of every row or column of `rect`
    (along "row"/"col"), or into the root corner (along "rect": rows, then the root
    column; `root` = (row root, column root), default ("west", "north")).

    colors: `colors_needed("reduce", rect, along, algo)` colors (chain: 2 per axis; tree:
        ceil(log2 L) per axis).
    then_root: instructions the root PEs run right after their reduction (e.g. adding a
        bias); then_root_cycles (int or array over domain) is their cost for the model.
    Registers: f"{name}.*". Returns the Fragment (routes added to `prog`).
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {sorted(OPS)}, got {op!r}")
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
    _check_along(along, rect_ok=True)
    domain = _check_domain(rect, domain)
    if along == "rect":
        row_root, col_root = root or ("west", "north")
        rows = Lines(rect, "row", row_root)
        need = line_colors(algo, rect.cols)
        first = reduce(prog, rect, buf, n, colors[:need], along="row", algo=algo, op=op,
                       root=row_root, domain=domain, name=f"{name}.r", offset=offset)
        root_col = rows.slab(0)
        second = reduce(prog, root_col, buf, n, colors[need:], along="col", algo=algo,
                        op=op, root=col_root, domain=domain, name=f"{name}.c",
                        then_root=then_root, then_root_cycles=then_root_cycles,
                        offset=offset)
        return first.then(second)
    lines = Lines(rect, along, root or ROOTS[along][0])
    need = colors_needed("reduce", rect, along, algo)
    colors = list(colors)
    if len(colors) < need:
        raise ValueError(f"a {algo} reduce along {along} of {rect} needs {need} colors, got "
                         f"{colors}")
    make = _chain_reduce if algo == "chain" else _tree_reduce
    return make(prog, lines, buf, n, colors[:need], OPS[op], domain, name, list(then_root),
                then_root_cycles, offset)


def _chain_reduce(prog, lines, buf, n, colors, op, domain, name, then_root, then_cycles,
                  offset):
    L, H = lines.length, prog.config.hop_latency
    length, reg, lengths = _length(n, domain)
    index = lines.index_grid(domain)
    roles = np.full(index.shape, "idle", object)
    roles[index == 0] = "root"
    roles[(index > 0) & (index % 2 == 1)] = "mid1"
    roles[(index > 0) & (index % 2 == 0)] = "mid0"
    roles[index == L - 1] = "leaf" if L > 1 else "root"

    def color(i):  # the color PE i sends on toward the root
        return colors[i % 2]

    for i in range(1, L):
        _route_slab(prog, lines, i, color(i), Port.RAMP, lines.toward)
        _route_slab(prog, lines, i - 1, color(i), lines.away, Port.RAMP)
    mem = _mem(buf, length, reg, offset)
    bodies = {
        "leaf": [ins.mov(_fout(color(L - 1), length, reg), mem)],
        "mid1": [op(_fout(colors[1], length, reg), _fin(colors[0], length, reg), mem)],
        "mid0": [op(_fout(colors[0], length, reg), _fin(colors[1], length, reg), mem)],
        "root": ([op(mem, mem, _fin(color(1), length, reg))] if L > 1 else []) + then_root,
        "idle": [],
    }
    order, params = _roles_params(roles, ["leaf", "mid1", "mid0", "root", "idle"],
                                  f"{name}.role")
    code, owners, timing = _dispatch(f"{name}.role", [(r, bodies[r]) for r in order],
                                     name)
    then_cycles = np.broadcast_to(np.asarray(then_cycles, np.int64), index.shape)
    cells = lines.line_cells(domain)

    def exit_times(entry):
        entry = np.asarray(entry, np.int64)
        out = entry + sum(timing.get("idle", (0, 0)))
        for line in cells:
            if L == 1:
                p = line[0]
                out[p] = entry[p] + sum(timing["root"]) + then_cycles[p]
                continue
            # element j passes PE i at first_i + j: the stream flows one word per cycle
            # once it starts (a PE toward the root that starts late holds the words back
            # in buffers; the PEs behind it are then modelled as finishing early)
            issue = [entry[p] + timing[roles[p]][0] for p in line]
            first = issue[L - 1]  # cycle element 0 is consumed (sent, for the leaf)
            for i in range(L - 1, -1, -1):
                p = line[i]
                if i < L - 1:
                    first = max(issue[i], first + 2 * H + 1)
                extra = then_cycles[p] if i == 0 else 0
                out[p] = first + lengths[p] + extra + timing[roles[p]][1]
        return out

    return Fragment(tuple(code), params, domain, tuple(colors), exit_times, tuple(owners),
                    _tags(roles, name))


def tree_schedule(L: int):
    """The tree of a line of L PEs: (pairs, t, root_idle).

    pairs[k]: the (receiver, sender) index pairs of round k. Each round pairs the PEs still
    holding a partial result from the far end: (S[-2], S[-1]), (S[-4], S[-3]), ...; with an
    odd count the root (S[0]) sits the round out. So every other PE receives in rounds
    0..t-1 back to back and sends in round t (no PE sends early into links that other
    pairs still use), and a power-of-two line is the classic doubling-distance tree.
    t[i]: the round index i sends in (K = len(pairs) for the root).
    root_idle[k]: the root has no partner in round k.
    """
    alive, pairs, t, root_idle = list(range(L)), [], [0] * L, []
    while len(alive) > 1:
        k, odd = len(pairs), len(alive) % 2
        pairs.append([(alive[j], alive[j + 1]) for j in range(odd, len(alive), 2)])
        root_idle.append(bool(odd))
        for _, sender in pairs[-1]:
            t[sender] = k
        alive = alive[:odd] + alive[odd::2]
    t[0] = len(pairs)
    return pairs, t, root_idle


def _tree_reduce(prog, lines, buf, n, colors, op, domain, name, then_root, then_cycles,
                 offset):
    L, H = lines.length, prog.config.hop_latency
    pairs, t, root_idle = tree_schedule(L)
    K = len(pairs)
    length, reg, lengths = _length(n, domain)
    index = lines.index_grid(domain)
    partner = [dict(round_pairs) for round_pairs in pairs]  # receiver -> sender, per round
    for k, round_pairs in enumerate(pairs):
        for a, b in round_pairs:
            _route_slab(prog, lines, b, colors[k], Port.RAMP, lines.toward)
            for j in range(a + 1, b):
                _route_slab(prog, lines, j, colors[k], lines.away, lines.toward)
            _route_slab(prog, lines, a, colors[k], lines.away, Port.RAMP)
    t_reg = f"{name}.t"
    idle = bool((index == IDLE).any())
    t_grid = np.where(index == IDLE, -1, np.array(t + [0])[np.maximum(index, 0)])
    params = {t_reg: t_grid.astype(np.int32)}
    mem = _mem(buf, length, reg, offset)
    end = f"{name}.end"
    code, owners = [], []

    def emit(items, owner=None):
        code.extend(items)
        owners.extend([None if owner is None else f"{name}:{owner}"] * len(items))

    if idle:
        emit([ins.branch_if_less(t_reg, 0, end)])
    for k in range(K):
        emit([ins.branch_if_less(t_reg, k + 1, f"{name}.send{k}")])
        if root_idle[k]:  # the root (t = K) skips this round, the others receive
            emit([ins.branch_if_less(t_reg, K, f"{name}.recv{k}"),
                  ins.jump(f"{name}.skip{k}"), ins.label(f"{name}.recv{k}")])
        emit([op(mem, mem, _fin(colors[k], length, reg))], f"recv{k}")
        if root_idle[k]:
            emit([ins.label(f"{name}.skip{k}")])
    emit(then_root, "root")
    if K:
        emit([ins.jump(end)])
    for k in range(K):
        emit([ins.label(f"{name}.send{k}")])
        emit([ins.mov(_fout(colors[k], length, reg), mem)], f"send{k}")
        if k < K - 1:
            emit([ins.jump(end)])
    emit([ins.label(end)])
    roles = np.empty(index.shape, object)
    for idx, i in np.ndenumerate(index):
        tags = set() if i == IDLE else {"root"} if i == 0 else {f"send{t[i]}"}
        if i != IDLE:
            tags |= {f"recv{k}" for k in range(K) if i in partner[k]}
        roles[idx] = frozenset(f"{name}:{tag}" for tag in tags)
    then_cycles = np.broadcast_to(np.asarray(then_cycles, np.int64), index.shape)
    cells = lines.line_cells(domain)

    def exit_times(entry):
        entry = np.asarray(entry, np.int64)
        out = entry + (1 if idle else 0)
        for line in cells:
            nxt = [entry[p] + (1 if idle else 0) for p in line]  # next instruction's cycle
            done = [False] * L
            for k in range(K):
                push = {}
                for i in range(L):
                    if done[i]:
                        continue
                    nxt[i] += 1  # the branch to send_k
                    if t[i] == k:  # the send mov issues now, one element per cycle
                        p = line[i]
                        push[i] = nxt[i]
                        out[p] = nxt[i] + lengths[p] + (1 if k < K - 1 else 0)
                        done[i] = True
                for i in range(L):
                    if done[i]:
                        continue
                    if root_idle[k]:
                        nxt[i] += 1 if i else 2
                    if i in partner[k]:
                        b = partner[k][i]
                        arrival = push[b] + (b - i + 1) * H + 1
                        nxt[i] = max(nxt[i], arrival) + lengths[line[i]]
            p = line[0]
            out[p] = nxt[0] + then_cycles[p] + (1 if K else 0)
        return out

    return Fragment(tuple(code), params, domain, tuple(colors[:K]), exit_times,
                    tuple(owners), roles)


def allreduce(prog: Program, rect: Rect, buf: str, n, colors: Sequence[int], *,
              along: str = "row", algo: str = "chain", op: str = "add",
              domain: Rect | None = None, name: str = "ar", offset: int = 0) -> Fragment:
    """Every PE's `buf` gets the reduction of its row (along "row"), column ("col") or of
    the whole rectangle ("rect"): `reduce` into the west/north root, then a broadcast from
    it on the last color. colors: `colors_needed("allreduce", rect, along, algo)`."""
    need = colors_needed("allreduce", rect, along, algo)
    if len(colors) < need:
        raise ValueError(f"a {algo} allreduce along {along} of {rect} needs {need} colors, "
                         f"got {list(colors)}")
    red = reduce(prog, rect, buf, n, colors[:need - 1], along=along, algo=algo, op=op,
                 domain=domain, name=f"{name}.rd", offset=offset)
    bc = broadcast(prog, rect, buf, n, colors[need - 1], along=along,
                   src=(0, 0) if along == "rect" else 0, domain=domain, name=f"{name}.bc",
                   offset=offset)
    return red.then(bc)
