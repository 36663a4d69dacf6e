"""Gather to and scatter from the root end of every row or column: one stream of the line's
vectors flows to (from) the edge PE, on two colors alternating by line index.

Example:
    >>> frag = gather(prog, rect, "x", "y", 16, colors=[4, 5], along="row")
    >>> back = scatter(prog, rect, "y", "x", 16, colors=[6, 7], along="row")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fabric import instructions as ins
from fabric.isa import Port
from fabric.kernels.collectives.dispatch import _dispatch, _roles_params, _tags
from fabric.kernels.collectives.fragment import Fragment
from fabric.kernels.collectives.geometry import (
    ROOTS,
    Lines,
    _check_along,
    _check_domain,
    _route_slab,
)
from fabric.program import Program, Rect


def _tandem(arrive: np.ndarray) -> np.ndarray:
    """Cycles a PE passing one element per cycle handles elements arriving at `arrive`."""
    e = np.arange(len(arrive))
    return e + np.maximum.accumulate(arrive - e)


def _line_roles(lines: Lines, domain: Rect, root_first: bool):
    index = lines.index_grid(domain)
    L = lines.length
    roles = np.full(index.shape, "idle", object)
    roles[(index > 0) & (index % 2 == 1)] = "mid1"
    roles[(index > 0) & (index % 2 == 0)] = "mid0"
    roles[index == L - 1] = "leaf"
    roles[index == 0] = "root"
    order = ["root", "mid1", "mid0", "leaf", "idle"] if root_first else [
        "leaf", "mid1", "mid0", "root", "idle"]
    return index, roles, order


def _stream(prog: Program, rect: Rect, colors: Sequence[int], along: str, root: str | None,
            domain: Rect | None, to_root: bool):
    """The lines of `rect`, the role of every PE of `domain` and the routes of one stream per
    line, toward the root (`to_root`) or away from it: PE i and PE i - 1 meet on
    colors[i % 2]. Returns (lines, domain, index, roles, order, colors)."""
    _check_along(along, rect_ok=False)
    lines = Lines(rect, along, root or ROOTS[along][0])
    domain = _check_domain(rect, domain)
    index, roles, order = _line_roles(lines, domain, root_first=not to_root)
    colors = list(colors)[:2]
    out, back = (lines.toward, lines.away) if to_root else (lines.away, lines.toward)
    for i in range(1, lines.length):
        sender, receiver = (i, i - 1) if to_root else (i - 1, i)
        _route_slab(prog, lines, sender, colors[i % 2], Port.RAMP, out)
        _route_slab(prog, lines, receiver, colors[i % 2], back, Port.RAMP)
    return lines, domain, index, roles, order, colors


def _fragment(prog: Program, lines: Lines, domain: Rect, index: np.ndarray, roles: np.ndarray,
              order: list, colors: list, n: int, name: str, bodies: dict,
              line_exits: Callable) -> Fragment:
    """The fragment running `bodies[role]` on every PE; register f"{name}.fwd" holds the
    words a PE forwards. line_exits(entry, out, line, timing, w_mov) writes the exit times of
    one line's PEs into `out`, which starts as `entry` plus the idle PEs' dispatch."""
    fl = f"{name}.fwd"
    forward = np.where(index > 0, (lines.length - 1 - index) * n, 0).astype(np.int32)
    order, params = _roles_params(roles, order, f"{name}.role")
    params[fl] = forward
    code, owners, timing = _dispatch(f"{name}.role", [(r, bodies[r]) for r in order],
                                     name)
    w_mov = prog.config.simd_width("mov", "f32")
    cells = lines.line_cells(domain)

    def exit_times(entry):
        entry = np.asarray(entry, np.int64)
        out = entry + sum(timing.get("idle", (0, 0)))
        for line in cells:
            line_exits(entry, out, line, timing, w_mov)
        return out

    return Fragment(tuple(code), params, domain, tuple(colors), exit_times, tuple(owners),
                    _tags(roles, name))


def gather(prog: Program, rect: Rect, src: str, dst: str, n: int, colors: Sequence[int], *,
           along: str = "row", root: str | None = None, domain: Rect | None = None,
           name: str = "ga") -> Fragment:
    """The root PE of every row (column) of `rect` collects the line's vectors: dst[i*n :
    (i+1)*n] = src of the PE at line index i (n words each; dst holds L*n words on the
    root). Each PE sends its own vector, then forwards what comes from farther out; one
    stream of (L - 1) n words reaches the root. Two colors (alternating by index)."""
    lines, domain, index, roles, order, colors = _stream(prog, rect, colors, along, root,
                                                         domain, to_root=True)
    L, H, n = lines.length, prog.config.hop_latency, int(n)
    fl = f"{name}.fwd"
    own = ins.Mem(src, 0, n)
    bodies = {
        "leaf": [ins.mov(ins.FabOut(colors[(L - 1) % 2], n), own)],
        "mid1": [ins.mov(ins.FabOut(colors[1], n), own),
                 ins.mov(ins.FabOut(colors[1], 0, fl), ins.FabIn(colors[0], 0, fl))],
        "mid0": [ins.mov(ins.FabOut(colors[0], n), own),
                 ins.mov(ins.FabOut(colors[0], 0, fl), ins.FabIn(colors[1], 0, fl))],
        "root": ([ins.mov(ins.Mem(dst, n, (L - 1) * n), ins.FabIn(colors[1], (L - 1) * n))]
                 if L > 1 else []) + [ins.mov(ins.Mem(dst, 0, n), own)],
        "idle": [],
    }

    def line_exits(entry, out, line, timing, w_mov):
        # one stream through a tandem of PEs, each passing one element per cycle:
        # element e leaves PE i at d_e = max(a_e, d_(e-1) + 1) = e + cummax(a_e - e)
        stream = np.zeros(0, np.int64)
        for i in range(L - 1, 0, -1):
            p = line[i]
            issue = entry[p] + timing[roles[p]][0]
            arrive = np.concatenate([issue + np.arange(n),
                                     np.maximum(stream + 2 * H + 1, issue + n)])
            stream = _tandem(arrive)
            out[p] = stream[-1] + 1 + timing[roles[p]][1]
        p = line[0]
        start = entry[p] + timing["root"][0]
        if L > 1:
            start = _tandem(np.maximum(stream + 2 * H + 1, start))[-1] + 1
        out[p] = start + -(-n // w_mov) + timing["root"][1]

    return _fragment(prog, lines, domain, index, roles, order, colors, n, name, bodies,
                     line_exits)


def scatter(prog: Program, rect: Rect, src: str, dst: str, n: int, colors: Sequence[int], *,
            along: str = "row", root: str | None = None, domain: Rect | None = None,
            name: str = "sc") -> Fragment:
    """The reverse of `gather`: the root PE of every row (column) holds L vectors in src
    (src[i*n : (i+1)*n] for line index i); every PE gets its own in dst (n words). The root
    streams the farthest vector first; each PE forwards what is meant for farther out, then
    keeps the last n words. Two colors (alternating by index)."""
    lines, domain, index, roles, order, colors = _stream(prog, rect, colors, along, root,
                                                         domain, to_root=False)
    L, H, n = lines.length, prog.config.hop_latency, int(n)
    fl = f"{name}.fwd"
    mine = ins.Mem(dst, 0, n)
    # farthest first: chunk j of the stream is src[(L-1-j) n : (L-j) n]
    stream = ins.Mem(src, (L - 1) * n, (L - 1) * n, row_length=n, row_stride=-n)
    bodies = {
        "root": ([ins.mov(ins.FabOut(colors[1], (L - 1) * n), stream)] if L > 1 else [])
        + [ins.mov(mine, ins.Mem(src, 0, n))],
        "mid1": [ins.mov(ins.FabOut(colors[0], 0, fl), ins.FabIn(colors[1], 0, fl)),
                 ins.mov(mine, ins.FabIn(colors[1], n))],
        "mid0": [ins.mov(ins.FabOut(colors[1], 0, fl), ins.FabIn(colors[0], 0, fl)),
                 ins.mov(mine, ins.FabIn(colors[0], n))],
        "leaf": [ins.mov(mine, ins.FabIn(colors[(L - 1) % 2], n))],
        "idle": [],
    }

    def line_exits(entry, out, line, timing, w_mov):
        p = line[0]
        push0 = entry[p] + timing["root"][0]
        out[p] = push0 + (L - 1) * n + -(-n // w_mov) + timing["root"][1]
        for i in range(1, L):
            q = line[i]
            last = push0 + (L - i) * n - 1 + i * (2 * H + 1)
            out[q] = last + 1 + timing[roles[q]][1]

    return _fragment(prog, lines, domain, index, roles, order, colors, n, name, bodies,
                     line_exits)
