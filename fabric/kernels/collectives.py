"""Collectives over a rectangle of PEs: broadcast, reduce, allreduce, gather and scatter.

Building blocks
---------------
A collective is a `Fragment`: the instructions it adds to a task (one list for every PE of
its *domain* rectangle; each PE finds its part by branching on registers the fragment owns),
the initial values of those registers (per PE, for `Program.place(..., params=...)`), and
the routes, which the fragment function adds to the program when called. A kernel that
needs a row reduction inside its own program writes

    red = reduce(prog, rect, "y", n, colors=[4, 5], along="row", algo="chain")
    tile.local_task("main", [*my_code, *red.code, *more_code])
    prog.place(tile, rect, params={**my_params, **red.params})

and may chain fragments (`a.then(b)`) as long as their register and label names differ
(`name=` prefixes them). The vector is `n` fp32 words of symbol `buf` (at `offset`); `n`
is an int, or `(register, values)` when the length differs per PE: the register (the
caller's, values an int array of the domain's shape) is the length of every DSD. A
fragment covering only part of a tile's rectangle leaves the other PEs of `domain` idle.
`Fragment.exit_times(entry)` is the fragment's cycle model: given the cycle at which every
PE executes the fragment's first instruction, the cycle at which it executes the next one.

    broadcast(prog, rect, buf, n, color, along="row"|"col"|"rect", src=...)
        multicast from one PE of every row (src = column offset), of every column (src = row
        offset) or of the rectangle (src = (row, col) offsets: along the source row, then
        down and up every column). One color.
    reduce(prog, rect, buf, n, colors, along="row"|"col"|"rect", algo="chain"|"tree",
           op="add"|"max"|"min", root=..., then_root=...)
        every row (column) reduced into its root end (west/east, north/south); "rect":
        rows first, then the root column. The root's buf gets the result; other PEs keep
        their input (chain) or a partial result (tree).
    allreduce(...)   reduce, then a broadcast of the result from the root(s): every buf
        gets the result. One more color.
    gather(prog, rect, src, dst, n, colors) / scatter(...)   along rows (columns): the
        line's vectors (n each) collected into dst (L x n) of the root end, or sent out
        from it. Two colors.
    colors_needed(kind, rect, along, algo)   how many colors a collective routes on.

Algorithms and their cycle models (H = hop latency, L = line length, K = ceil(log2 L),
w_mov = 2 fp32 per cycle; an op with a fabric operand streams one element per cycle, and a
wavelet sent in cycle t is consumed h hops away in cycle t + (h + 1) H + 1). The formulas
are the standalone kernels' cycle counts (task start and end included, every PE starting
together); `Fragment.exit_times` computes the same from the code for any start times.

    chain (pipelined): the leaf sends its vector toward the root; every PE on the way adds
        its own to the stream and sends the sum on (one fused `op(FabOut, FabIn, buf)`, so
        a PE adds 2H + 1 cycles of latency and no bandwidth); colors alternate by parity
        (a router takes a color from one port only).
            T_chain = (2H + 1)(L - 1) + n + 4                                  (L >= 4)
    tree (doubling distances): the PEs still holding a partial result pair up from the far
        end; in round k the second of each pair sends it, through routers only, to the
        first, which adds it to its own (for L = 2^K: PE i = 2^k mod 2^(k+1) sends to
        i - 2^k, 2^k hops away); one color per round.
            T_tree = sum_k [(2^k + 1) H + n + 2] + 3 = (2^K - 1 + K) H + K (n + 2) + 3
    The chain pays 2H + 1 per PE and n once; the tree pays H per hop but n (plus 2) K
    times. For L = 2^K the tree is faster exactly when
            (L - 1 + K) H + (K - 1) n + 2K - 1 < (2H + 1)(L - 1):
    small n (latency bound) favours the tree, e.g. n <= 2 on 8 PEs (n = 1: 22 vs 26
    cycles); large n (bandwidth bound) the chain, whose time grows with n once (n = 16:
    41 vs 67 cycles).
    broadcast (one multicast stream): T = (h_max + 1) H + n + 5, h_max the farthest PE's
        hops from its source.
    allreduce = reduce + broadcast from the root (the rectangle: row reduction, column
        reduction, then a rectangle broadcast from the corner).
    gather: one stream of (L - 1) n words into the root, then its own copy:
        T = (L - 1) n + (2H + 1) + ceil(n / w_mov) + 5 when n is large; for small n the
        latency of the farthest PE's words, (2H + 1) per PE, bounds it instead.
    scatter: the root streams the farthest vector first, then copies its own:
        T = max((L - 1) n + max(ceil(n / w_mov), 2H + 1), n + (2H + 1)(L - 1)) + 4.

Numerics: reductions run in a fixed order that `reduce_reference` reproduces in float32, so
results are bit-exact (chain: s = x[L-1]; s = op(x[i], s) for i = L-2..0; tree: the
pairs of `tree_schedule`, round by round).

Example:
    >>> k = build_allreduce(FabricConfig.small(4, 8), Rect(0, 0, 4, 8), 16, along="row")
    >>> out = run_kernel(k, {"x": x}).output     # (4, 8, 16), every PE has its row's sum
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.isa import OPPOSITE, Port
from fabric.kernels.base import Kernel, pick_colors
from fabric.program import Program, Rect, Tile

OPS = {"add": ins.add, "max": ins.max_, "min": ins.min_}
NP_OPS = {"add": np.add, "max": np.maximum, "min": np.minimum}
ALGOS = ("chain", "tree")
ROOTS = {"row": ("west", "east"), "col": ("north", "south")}
_PORT = {"west": Port.WEST, "east": Port.EAST, "north": Port.NORTH, "south": Port.SOUTH}
IDLE = -1  # register value of a PE of the domain outside the collective's rectangle


# ---- fragments -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Fragment:
    """Instructions a collective adds to a task, for every PE of `domain`.

    code: instructions and labels, the same on every PE (each branches on its registers).
    params: register -> int32 array (domain.rows, domain.cols) of initial values.
    domain: the rectangle whose PEs run `code`.
    colors: the colors the collective routes on.
    exit_times: exit_times(entry) -> array (domain shape): given the cycle at which each PE
        executes the first instruction of `code`, the cycle at which it executes the one
        after it (the cycle model).
    owners: per item of `code`, None (any PE may run it) or the tag of the role whose PEs
        alone run it; roles: per PE of the domain, the frozenset of its role tags. A tile
        placed on part of the domain takes `code_for(part)`, which leaves out the sections
        of roles absent there (so that no tile names a color none of its PEs routes).
    """

    code: tuple
    params: Mapping[str, np.ndarray]
    domain: Rect
    colors: tuple
    exit_times: Callable[[np.ndarray], np.ndarray]
    owners: tuple = ()
    roles: np.ndarray | None = None

    def _slice(self, rect: Rect):
        d = self.domain
        if not (d.contains(rect.row, rect.col) and d.contains(rect.row_end - 1,
                                                              rect.col_end - 1)):
            raise ValueError(f"{rect} is not inside the fragment's domain {d}")
        r0, c0 = rect.row - d.row, rect.col - d.col
        return slice(r0, r0 + rect.rows), slice(c0, c0 + rect.cols)

    def params_for(self, rect: Rect) -> dict[str, np.ndarray]:
        """The params of the PEs of `rect` (a part of the domain), for `Program.place`."""
        rows, cols = self._slice(rect)
        return {k: v[rows, cols] for k, v in self.params.items()}

    def code_for(self, rect: Rect) -> tuple:
        """`code` without the sections no PE of `rect` (a part of the domain) runs."""
        if self.roles is None:
            return self.code
        rows, cols = self._slice(rect)
        present = frozenset().union(*self.roles[rows, cols].ravel())
        return tuple(item for item, owner in zip(self.code, self.owners)
                     if owner is None or owner in present)

    def then(self, *others: Fragment) -> Fragment:
        """This fragment followed by `others` (same domain, distinct registers)."""
        code, params, colors = list(self.code), dict(self.params), list(self.colors)
        owners, roles = list(_owners(self)), _roles(self)
        models = [self.exit_times]
        for other in others:
            if other.domain != self.domain:
                raise ValueError(f"fragments on different domains: {self.domain} and "
                                 f"{other.domain}")
            clash = set(params) & set(other.params)
            if clash:
                raise ValueError(f"fragments share registers {sorted(clash)}: give them "
                                 "different names")
            code += other.code
            owners += _owners(other)
            roles = np.vectorize(frozenset.union, otypes=[object])(roles, _roles(other))
            params.update(other.params)
            colors += [c for c in other.colors if c not in colors]
            models.append(other.exit_times)

        def exit_times(entry):
            for model in models:
                entry = model(entry)
            return entry

        return Fragment(tuple(code), params, self.domain, tuple(colors), exit_times,
                        tuple(owners), roles)


def _owners(frag: Fragment) -> tuple:
    return frag.owners or (None,) * len(frag.code)


def _roles(frag: Fragment) -> np.ndarray:
    if frag.roles is not None:
        return frag.roles
    out = np.empty((frag.domain.rows, frag.domain.cols), object)
    for idx in np.ndindex(out.shape):
        out[idx] = frozenset()
    return out


def line_colors(algo: str, length: int) -> int:
    """Colors of a reduction along lines of `length` PEs: 2 (chain), ceil(log2 length)
    (tree)."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
    return 2 if algo == "chain" else (length - 1).bit_length()


def colors_needed(kind: str, rect: Rect, along: str = "row", algo: str = "chain") -> int:
    """Colors a collective of `kind` ("broadcast", "reduce", "allreduce", "gather",
    "scatter") routes on for `rect`."""
    if kind == "broadcast":
        return 1
    if kind in ("gather", "scatter"):
        return 2
    if kind not in ("reduce", "allreduce"):
        raise ValueError(f"unknown collective {kind!r}")
    if along == "rect":
        n = line_colors(algo, rect.cols) + line_colors(algo, rect.rows)
    elif along in ROOTS:
        n = line_colors(algo, rect.cols if along == "row" else rect.rows)
    else:
        raise ValueError(f"along must be 'row', 'col' or 'rect', got {along!r}")
    return n + (kind == "allreduce")


# ---- geometry ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Lines:
    """The parallel lines of a collective: every row (axis "row") or column of `rect`, each
    indexed from its root end (index 0) outward."""

    rect: Rect
    axis: str
    root: str

    def __post_init__(self):
        if self.axis not in ROOTS:
            raise ValueError(f"along must be 'row' or 'col', got {self.axis!r}")
        if self.root not in ROOTS[self.axis]:
            raise ValueError(f"a {self.axis} collective has its root at "
                             f"{' or '.join(ROOTS[self.axis])}, got {self.root!r}")

    @property
    def length(self) -> int:
        return self.rect.cols if self.axis == "row" else self.rect.rows

    @property
    def toward(self) -> Port:
        """The port of a PE that leads to the root."""
        return _PORT[self.root]

    @property
    def away(self) -> Port:
        return OPPOSITE[self.toward]

    def index(self, r: int, c: int) -> int:
        rect = self.rect
        pos, start, end = (c, rect.col, rect.col_end) if self.axis == "row" else (
            r, rect.row, rect.row_end)
        return pos - start if self.root in ("west", "north") else end - 1 - pos

    def slab(self, i: int) -> Rect:
        """The PEs at index i of every line (a column of rect for rows, a row for columns)."""
        rect = self.rect
        if self.axis == "row":
            col = rect.col + i if self.root == "west" else rect.col_end - 1 - i
            return Rect(rect.row, col, rect.rows, 1)
        row = rect.row + i if self.root == "north" else rect.row_end - 1 - i
        return Rect(row, rect.col, 1, rect.cols)

    def index_grid(self, domain: Rect) -> np.ndarray:
        """Line index of every PE of `domain` (IDLE outside rect)."""
        grid = np.full((domain.rows, domain.cols), IDLE, np.int64)
        for r, c in self.rect.pes():
            grid[r - domain.row, c - domain.col] = self.index(r, c)
        return grid

    def line_cells(self, domain: Rect) -> list[list[tuple[int, int]]]:
        """For every line, the domain-relative (row, col) of its PEs by index."""
        rect, out = self.rect, []
        starts = range(rect.row, rect.row_end) if self.axis == "row" else range(
            rect.col, rect.col_end)
        for s in starts:
            cells = [None] * self.length
            pes = [(s, c) for c in range(rect.col, rect.col_end)] if self.axis == "row" else [
                (r, s) for r in range(rect.row, rect.row_end)]
            for r, c in pes:
                cells[self.index(r, c)] = (r - domain.row, c - domain.col)
            out.append(cells)
        return out


def _route_slab(prog: Program, lines: Lines, i: int, color: int, rx: Port, tx) -> None:
    prog.route(lines.slab(i), color, rx, tx)


def _check_along(along: str, rect_ok: bool) -> None:
    allowed = ("row", "col", "rect") if rect_ok else ("row", "col")
    if along not in allowed:
        raise ValueError(f"along must be one of {allowed}, got {along!r}")


def _check_domain(rect: Rect, domain: Rect | None) -> Rect:
    domain = rect if domain is None else domain
    inside = domain.contains(rect.row, rect.col) and domain.contains(rect.row_end - 1,
                                                                     rect.col_end - 1)
    if not inside:
        raise ValueError(f"the collective's {rect} is not inside its domain {domain}")
    return domain


# ---- operands -----------------------------------------------------------------------------------
def _length(n, domain: Rect):
    """(static length or None, register or None, per-PE lengths over domain)."""
    if isinstance(n, tuple):
        reg, values = n
        values = np.asarray(values, np.int64)
        if values.shape != (domain.rows, domain.cols):
            raise ValueError(f"lengths of register {reg!r} have shape {values.shape}, "
                             f"expected {(domain.rows, domain.cols)}")
        return None, reg, values
    n = int(n)
    if n < 1:
        raise ValueError(f"vector length must be >= 1, got {n}")
    return n, None, np.full((domain.rows, domain.cols), n, np.int64)


def _mem(buf: str, length, reg, offset: int = 0):
    return ins.Mem(buf, offset, length=length, length_reg=reg)


def _fin(color: int, length, reg):
    return ins.FabIn(color, length or 0, length_reg=reg)


def _fout(color: int, length, reg):
    return ins.FabOut(color, length or 0, length_reg=reg)


def _dispatch(reg: str, sections: Sequence[tuple[str, list]], label: str):
    """Code running `sections[v]` on the PEs whose `reg` is v (v = 0, 1, ...).

    Returns (code, owners, timing): owners tags each section's instructions with
    f"{label}:{role}"; timing[role] = (before, after): instructions a PE of that role
    executes before its first DSD op (the branches) and after its last one.
    """
    end = f"{label}.end"
    if len(sections) == 1:
        role, body = sections[0]
        return list(body), [f"{label}:{role}"] * len(body), {role: (0, 0)}
    count = len(sections)
    code = [ins.branch_if_less(reg, v + 1, f"{label}.{v}") for v in range(count - 1)]
    owners = [None] * len(code)
    last_role, last_body = sections[-1]
    code += [*last_body, ins.jump(end)]
    owners += [f"{label}:{last_role}"] * len(last_body) + [None]
    timing = {last_role: (count - 1, 1)}
    for v in range(count - 1):
        role, body = sections[v]
        code += [ins.label(f"{label}.{v}"), *body]
        owners += [None] + [f"{label}:{role}"] * len(body)
        tail = v < count - 2
        if tail:
            code.append(ins.jump(end))
            owners.append(None)
        timing[role] = (v + 1, int(tail))
    code.append(ins.label(end))
    owners.append(None)
    return code, owners, timing


def _tags(roles: np.ndarray, label: str) -> np.ndarray:
    """Per PE, the frozenset of its role tag f"{label}:{role}"."""
    out = np.empty(roles.shape, object)
    for idx, role in np.ndenumerate(roles):
        out[idx] = frozenset([f"{label}:{role}"])
    return out


def _roles_params(grid_roles: np.ndarray, order: Sequence[str], reg: str):
    """Keep the roles of `order` that occur; return (kept order, {reg: values})."""
    present = [r for r in order if (grid_roles == r).any()]
    values = np.zeros(grid_roles.shape, np.int32)
    for v, role in enumerate(present):
        values[grid_roles == role] = v
    return present, {reg: values}


# ---- broadcast -----------------------------------------------------------------------------------
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


# ---- reduce -------------------------------------------------------------------------------------
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


# ---- gather / scatter ---------------------------------------------------------------------------
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


def gather(prog: Program, rect: Rect, src: str, dst: str, n: int, colors: Sequence[int], *,
           along: str = "row", root: str | None = None, domain: Rect | None = None,
           name: str = "ga") -> Fragment:
    """The root PE of every row (column) of `rect` collects the line's vectors: dst[i*n :
    (i+1)*n] = src of the PE at line index i (n words each; dst holds L*n words on the
    root). Each PE sends its own vector, then forwards what comes from farther out; one
    stream of (L - 1) n words reaches the root. Two colors (alternating by index)."""
    _check_along(along, rect_ok=False)
    lines = Lines(rect, along, root or ROOTS[along][0])
    domain = _check_domain(rect, domain)
    L, H, n = lines.length, prog.config.hop_latency, int(n)
    index, roles, order = _line_roles(lines, domain, root_first=False)
    colors = list(colors)[:2]
    for i in range(1, L):
        _route_slab(prog, lines, i, colors[i % 2], Port.RAMP, lines.toward)
        _route_slab(prog, lines, i - 1, colors[i % 2], lines.away, Port.RAMP)
    fl = f"{name}.fwd"
    forward = np.where(index > 0, (L - 1 - index) * n, 0).astype(np.int32)
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
        return out

    return Fragment(tuple(code), params, domain, tuple(colors), exit_times, tuple(owners),
                    _tags(roles, name))


def scatter(prog: Program, rect: Rect, src: str, dst: str, n: int, colors: Sequence[int], *,
            along: str = "row", root: str | None = None, domain: Rect | None = None,
            name: str = "sc") -> Fragment:
    """The reverse of `gather`: the root PE of every row (column) holds L vectors in src
    (src[i*n : (i+1)*n] for line index i); every PE gets its own in dst (n words). The root
    streams the farthest vector first; each PE forwards what is meant for farther out, then
    keeps the last n words. Two colors (alternating by index)."""
    _check_along(along, rect_ok=False)
    lines = Lines(rect, along, root or ROOTS[along][0])
    domain = _check_domain(rect, domain)
    L, H, n = lines.length, prog.config.hop_latency, int(n)
    index, roles, order = _line_roles(lines, domain, root_first=True)
    colors = list(colors)[:2]
    for i in range(1, L):  # PE i receives on colors[i % 2] from PE i - 1
        _route_slab(prog, lines, i - 1, colors[i % 2], Port.RAMP, lines.away)
        _route_slab(prog, lines, i, colors[i % 2], lines.toward, Port.RAMP)
    fl = f"{name}.fwd"
    forward = np.where(index > 0, (L - 1 - index) * n, 0).astype(np.int32)
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
            p = line[0]
            push0 = entry[p] + timing["root"][0]
            out[p] = push0 + (L - 1) * n + -(-n // w_mov) + timing["root"][1]
            for i in range(1, L):
                q = line[i]
                last = push0 + (L - i) * n - 1 + i * (2 * H + 1)
                out[q] = last + 1 + timing[roles[q]][1]
        return out

    return Fragment(tuple(code), params, domain, tuple(colors), exit_times, tuple(owners),
                    _tags(roles, name))


# ---- numpy references ---------------------------------------------------------------------------
def line_reduce_reference(v: np.ndarray, algo: str = "chain", op: str = "add") -> np.ndarray:
    """The fabric's reduction of the vectors v[i] (shape (L, n), i = line index from the
    root) in float32, in the fabric's order."""
    f = NP_OPS[op]
    v = np.asarray(v, np.float32)
    L = v.shape[0]
    if algo == "chain":
        acc = v[L - 1]
        for i in range(L - 2, -1, -1):
            acc = f(v[i], acc)
        return acc
    acc = v.copy()
    for round_pairs in tree_schedule(L)[0]:
        for a, b in round_pairs:
            acc[a] = f(acc[a], acc[b])
    return acc[0]


def _to_lines(x: np.ndarray, along: str, root: str) -> np.ndarray:
    """(P, Q, n) grid order -> (lines, L, n) in line-index order."""
    lines = x if along == "row" else x.transpose(1, 0, 2)
    return lines[:, ::-1] if root in ("east", "south") else lines


def _from_lines(lines: np.ndarray, along: str, root: str) -> np.ndarray:
    lines = lines[:, ::-1] if root in ("east", "south") else lines
    return lines if along == "row" else lines.transpose(1, 0, 2)


def reduce_reference(x: np.ndarray, along: str = "row", algo: str = "chain", op: str = "add",
                     root=None) -> np.ndarray:
    """What `build_reduce` returns for x of shape (P, Q, n): (P, n) for rows, (Q, n) for
    columns, (n,) for the rectangle."""
    x = np.asarray(x, np.float32)
    if along == "rect":
        row_root, col_root = root or ("west", "north")
        per_row = reduce_reference(x, "row", algo, op, row_root)  # (P, n)
        return reduce_reference(per_row[:, None, :], "col", algo, op, col_root)[0]
    lines = _to_lines(x, along, root or ROOTS[along][0])
    return np.stack([line_reduce_reference(v, algo, op) for v in lines])


def allreduce_reference(x: np.ndarray, along: str = "row", algo: str = "chain",
                        op: str = "add") -> np.ndarray:
    """What `build_allreduce` returns: every PE's vector replaced by its group's result."""
    x = np.asarray(x, np.float32)
    red = reduce_reference(x, along, algo, op)
    if along == "row":
        return np.broadcast_to(red[:, None, :], x.shape).copy()
    if along == "col":
        return np.broadcast_to(red[None, :, :], x.shape).copy()
    return np.broadcast_to(red, x.shape).copy()


# ---- standalone kernels -------------------------------------------------------------------------
def _check_sizes(config: FabricConfig, dtype: str, n: int, words: int, what: str) -> None:
    if dtype != "f32":
        raise ValueError(f"{what}: dtype {dtype!r} is not supported (f32 only)")
    if n < 1:
        raise ValueError(f"{what}: vector length n must be >= 1, got {n}")
    if 4 * words > config.sram_bytes:
        raise ValueError(f"{what}: n = {n} needs {4 * words} B of SRAM per PE, above the "
                         f"{config.sram_bytes // 1024} KiB of a PE")


def _kernel(name, config, rect, prog, tile, frag, load, read, info) -> Kernel:
    tile.local_task("main", list(frag.code))
    prog.place(tile, rect, params=frag.params_for(rect))
    entry = np.ones((rect.rows, rect.cols), np.int64)  # task starts at 0, code at 1
    model = int(np.max(frag.exit_times(entry))) + 1  # the implicit RET, then quiet
    return Kernel(name, config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), model, 0, info)


def build_broadcast(config: FabricConfig, rect: Rect, n: int, along: str = "rect", src=0,
                    dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """Broadcast `x` (n fp32) from a source PE by multicast.

    along "rect": x of shape (n,) at the PE at offsets src (default (0, 0)); "row": x of
    shape (P, n), row p's vector at its PE at column offset src; "col": x of shape (Q, n).
    Output: (P, Q, n), every PE's copy. Model (exact): T = (h_max + 1) H + n + 5, h_max
    the farthest PE's hops from its source.
    """
    _check_sizes(config, dtype, n, n, "broadcast")
    (color,) = pick_colors(config, 1, colors)
    prog, tile = Program(config), Tile("broadcast")
    tile.symbol("x", "f32", n)
    frag = broadcast(prog, rect, "x", n, color, along=along, src=src)
    sources = _sources(rect, along, src)
    src_pes = sorted({sources(r, c) for r, c in rect.pes()})

    def load(sim, inputs):
        x = np.asarray(inputs["x"], np.float32).reshape(len(src_pes), n)
        for (r, c), v in zip(src_pes, x):
            sim.memcpy_h2d("x", v, Rect(r, c, 1, 1))

    return _kernel("broadcast", config, rect, prog, tile, frag, load,
                   lambda sim: sim.memcpy_d2h("x", rect), {"n": n, "along": along})


def build_reduce(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                 algo: str = "chain", op: str = "add", root=None, dtype: str = "f32",
                 colors: Sequence[int] | None = None) -> Kernel:
    """Reduce x (P, Q, n) along rows (into the root PE of each row, west by default:
    output (P, n)), columns (north by default: (Q, n)) or the rectangle (root = (row root,
    column root), default ("west", "north"): (n,)).

    Model (exact, see the module docstring), per line:
        chain: T = (2H + 1)(L - 1) + n + 4
        tree:  T = (2^K - 1 + K) H + K (n + 2) + 3 (L = 2^K)
    and the root column's reduction after the rows' for the rectangle.
    """
    _check_sizes(config, dtype, n, n, "reduce")
    need = colors_needed("reduce", rect, along, algo)
    colors = pick_colors(config, need, colors)
    prog, tile = Program(config), Tile("reduce")
    tile.symbol("x", "f32", n)
    frag = reduce(prog, rect, "x", n, colors, along=along, algo=algo, op=op, root=root)
    if along == "rect":
        row_root, col_root = root or ("west", "north")
    else:
        row_root = col_root = root or ROOTS[along][0]
    r = 0 if col_root == "north" else -1
    c = 0 if row_root == "west" else -1

    def load(sim, inputs):
        sim.memcpy_h2d("x", np.asarray(inputs["x"], np.float32), rect)

    def read(sim):
        x = sim.memcpy_d2h("x", rect)
        if along == "row":
            return x[:, c]
        return x[r] if along == "col" else x[r, c]

    return _kernel("reduce", config, rect, prog, tile, frag, load, read,
                   {"n": n, "along": along, "algo": algo, "op": op})


def build_allreduce(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                    algo: str = "chain", op: str = "add", dtype: str = "f32",
                    colors: Sequence[int] | None = None) -> Kernel:
    """Allreduce x (P, Q, n) along rows, columns or the rectangle: output (P, Q, n), every
    PE's vector replaced by its group's reduction. Model: reduce + broadcast from the root
    (module docstring), composed by `Fragment.exit_times`."""
    _check_sizes(config, dtype, n, n, "allreduce")
    need = colors_needed("allreduce", rect, along, algo)
    colors = pick_colors(config, need, colors)
    prog, tile = Program(config), Tile("allreduce")
    tile.symbol("x", "f32", n)
    frag = allreduce(prog, rect, "x", n, colors, along=along, algo=algo, op=op)

    def load(sim, inputs):
        sim.memcpy_h2d("x", np.asarray(inputs["x"], np.float32), rect)

    return _kernel("allreduce", config, rect, prog, tile, frag, load,
                   lambda sim: sim.memcpy_d2h("x", rect),
                   {"n": n, "along": along, "algo": algo, "op": op})


def _line_kernel(kind, config, rect, n, along, dtype, colors):
    _check_along(along, rect_ok=False)
    lines = Lines(rect, along, ROOTS[along][0])
    L = lines.length
    _check_sizes(config, dtype, n, (L + 1) * n, kind)
    colors = pick_colors(config, 2, colors)
    prog, tile = Program(config), Tile(kind)
    tile.symbol("x", "f32", n if kind == "gather" else L * n)
    tile.symbol("y", "f32", L * n if kind == "gather" else n)
    make = gather if kind == "gather" else scatter
    frag = make(prog, rect, "x", "y", n, colors, along=along)
    return lines, prog, tile, frag


def build_gather(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                 dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """Gather x (P, Q, n) to the west PE of every row (north PE of every column): output
    (P, Q, n) read back from the root PEs' L x n buffers (equal to x).
    Model (exact): T = (L - 1) n + 2H + 1 + ceil(n / w_mov) + 5 for large n."""
    lines, prog, tile, frag = _line_kernel("gather", config, rect, n, along, dtype, colors)
    roots = lines.slab(0)

    def load(sim, inputs):
        sim.memcpy_h2d("x", np.asarray(inputs["x"], np.float32), rect)

    def read(sim):
        got = sim.memcpy_d2h("y", roots)  # (P, 1, L n) or (1, Q, L n)
        if along == "row":
            return got[:, 0].reshape(rect.rows, lines.length, n)
        return got[0].reshape(rect.cols, lines.length, n).transpose(1, 0, 2)

    return _kernel("gather", config, rect, prog, tile, frag, load, read,
                   {"n": n, "along": along})


def build_scatter(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                  dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """Scatter from the west PE of every row (north PE of every column): input x
    (P, Q, n), x[p, q] meant for PE (p, q), held by the root PEs; output (P, Q, n) read
    from every PE (equal to x). Model (exact):
    T = max((L - 1) n + max(ceil(n / w_mov), 2H + 1), n + (2H + 1)(L - 1)) + 4."""
    lines, prog, tile, frag = _line_kernel("scatter", config, rect, n, along, dtype, colors)
    roots = lines.slab(0)

    def load(sim, inputs):
        x = np.asarray(inputs["x"], np.float32)
        if along == "row":
            held = x.reshape(rect.rows, 1, -1)
        else:
            held = x.transpose(1, 0, 2).reshape(1, rect.cols, -1)
        sim.memcpy_h2d("x", held, roots)

    return _kernel("scatter", config, rect, prog, tile, frag, load,
                   lambda sim: sim.memcpy_d2h("y", rect), {"n": n, "along": along})
