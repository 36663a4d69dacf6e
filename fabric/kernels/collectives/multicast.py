"""Broadcast by multicast: one source PE per row, per column or per rectangle streams a
vector that the routers copy to every other PE of its group, on one color.

Example:
    >>> frag = broadcast(prog, rect, "x", 16, color=3, along="col", src=0)
    >>> tile.local_task("main", list(frag.code))
"""

from __future__ import annotations

import numpy as np

from fabric import instructions as ins
from fabric.isa import Port
from fabric.kernels.collectives.dispatch import _dispatch, _roles_params, _tags
from fabric.kernels.collectives.fragment import Fragment
from fabric.kernels.collectives.geometry import _check_domain
from fabric.kernels.collectives.operands import _fin, _fout, _length, _mem
from fabric.program import Program, Rect


def broadcast(prog: Program, rect: Rect, buf: str, n, color: int, *, along: str = "rect",
              src=0, domain: Rect | None = None, name: str = "bc", offset: int = 0
              ) -> Fragment:
    """Multicast `n` words of `buf` from a source PE to the other PEs (one color).

    along "row": every row of `rect` from its PE at column offset `src`; "col": every column
    from its PE at row offset `src`; "rect": from the PE at offsets `src` = (row, col) along
    its row, then up and down every column. Receivers write `buf` in place.
    Registers: f"{name}.role". Returns the Fragment (routes added to `prog`).
    """
    domain = _check_domain(rect, domain)
    sources = _sources(rect, along, src)
    roles = np.full((domain.rows, domain.cols), "idle", object)
    hops = np.zeros((domain.rows, domain.cols), np.int64)
    for r, c in rect.pes():
        sr, sc = sources(r, c)
        roles[r - domain.row, c - domain.col] = "src" if (r, c) == (sr, sc) else "recv"
        hops[r - domain.row, c - domain.col] = abs(r - sr) + abs(c - sc)
    length, reg, lengths = _length(n, domain)
    if not (roles == "recv").any():  # a single PE per group: nothing moves
        return Fragment((), {}, domain, (), lambda entry: np.asarray(entry))
    for r, c in rect.pes():
        rx, tx = _bcast_route(rect, along, sources(r, c), r, c)
        prog.route(Rect(r, c, 1, 1), color, rx, tx)
    order, params = _roles_params(roles, ["src", "recv", "idle"], f"{name}.role")
    bodies = {"src": [ins.mov(_fout(color, length, reg), _mem(buf, length, reg, offset))],
              "recv": [ins.mov(_mem(buf, length, reg, offset), _fin(color, length, reg))],
              "idle": []}
    code, owners, timing = _dispatch(f"{name}.role", [(r, bodies[r]) for r in order],
                                     name)
    H = prog.config.hop_latency

    def exit_times(entry):
        entry = np.asarray(entry, np.int64)
        out = entry + sum(timing.get("idle", (0, 0)))
        groups = {}
        for r, c in rect.pes():
            groups.setdefault(sources(r, c), []).append((r - domain.row, c - domain.col))
        for (sr, sc), cells in groups.items():
            s = (sr - domain.row, sc - domain.col)
            push0 = entry[s] + timing["src"][0]
            recv = [p for p in cells if p != s]
            latency = {p: (hops[p] + 1) * H + 1 for p in recv}
            # the multicast moves at the pace of its slowest receiver: a late one holds
            # the stream back (ignoring the few words the buffers take meanwhile)
            start = max([push0] + [entry[p] + timing["recv"][0] - latency[p] for p in recv])
            out[s] = start + lengths[s] + timing["src"][1]
            for p in recv:
                out[p] = start + latency[p] + lengths[p] + timing["recv"][1]
        return out

    return Fragment(tuple(code), params, domain, (color,), exit_times, tuple(owners),
                    _tags(roles, name))


def _sources(rect: Rect, along: str, src):
    """(r, c) -> the absolute source PE of the group of PE (r, c)."""
    if along == "rect":
        sr, sc = (0, 0) if src == 0 else tuple(src)
        if not (0 <= sr < rect.rows and 0 <= sc < rect.cols):
            raise ValueError(f"rect broadcast source offsets {src} lie outside {rect}")
        return lambda r, c: (rect.row + sr, rect.col + sc)
    if along == "row":
        if not 0 <= src < rect.cols:
            raise ValueError(f"row broadcast source column offset {src} outside {rect}")
        return lambda r, c: (r, rect.col + src)
    if along == "col":
        if not 0 <= src < rect.rows:
            raise ValueError(f"column broadcast source row offset {src} outside {rect}")
        return lambda r, c: (rect.row + src, c)
    raise ValueError(f"along must be 'row', 'col' or 'rect', got {along!r}")


def _bcast_route(rect: Rect, along: str, source, r: int, c: int):
    """(rx, tx) of PE (r, c) in the multicast tree from `source`: along the source row
    (along "row" or "rect"), then along every column (along "col" or "rect")."""
    sr, sc = source
    if (r, c) == (sr, sc):
        rx, tx = Port.RAMP, set()
    elif r == sr:
        rx, tx = (Port.WEST if c > sc else Port.EAST), {Port.RAMP}
    else:
        rx, tx = (Port.NORTH if r > sr else Port.SOUTH), {Port.RAMP}
    if along in ("row", "rect") and r == sr:
        if c >= sc and c + 1 < rect.col_end:
            tx.add(Port.EAST)
        if c <= sc and c - 1 >= rect.col:
            tx.add(Port.WEST)
    if along in ("col", "rect"):
        if r >= sr and r + 1 < rect.row_end:
            tx.add(Port.SOUTH)
        if r <= sr and r - 1 >= rect.row:
            tx.add(Port.NORTH)
    return rx, sorted(tx)
