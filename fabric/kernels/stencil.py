"""A 2D 5-point Jacobi stencil with halo exchange: u_new = 0.25 * (N + S + E + W).

The grid u has shape (ny + 2, nx + 2): its outer ring holds fixed (Dirichlet) boundary
values and its ny x nx interior is updated T times. The interior is split over the PEs of
`rect` in blocks (`split`: block sizes differ by at most one); a PE holds its block with a
one-cell halo ring in two planes (ping-pong), plane t % 2 being the current one at
iteration t. Edge PEs keep the boundary values in the outer part of their halo ring.

Per iteration, each PE, on the current plane:
1. exchanges halos with its neighbours, columns first (east/west), then rows: on each axis
   in two phases, pairs (even, odd) then (odd, even) along the axis; in a pair the
   west/north member sends its edge cells (a synchronous `mov` to the fabric) and then
   receives its halo, the other receives first and then sends;
2. computes the next plane's interior with four DSD ops over 2D views of the current plane:
   t = N + S; t = t + W; t = t + E; u_new = t * 0.25 (fp32 add at SIMD width 2, mul 1);
3. swaps planes (offset registers cur and nxt).

Colors: a PE cannot accept a color from its RAMP and from a link at once, so each
direction uses two colors, chosen by the sending PE's column (east/west) or row
(north/south) parity: 8 colors in the order E0, E1, W0, W1, S0, S1, N0, N1. PEs are placed
as one tile per region of identical neighbours and block shape (at most 4 x 4 regions); a
region spanning both parities branches on the registers odd_r / odd_c for the color.

Every send meets a receive its partner has posted, so the exchange cannot deadlock, and
every op is synchronous: none outlives the exchange (an async send still in flight would
lose the datapath to the memory-only compute ops, which can always go on, and stall its
receiver for a whole compute phase), and no color is used by two ops at once.

Cycle model (busiest PE: the largest block with the most neighbours; by x bx its block,
nb = by * bx, q its neighbours, L the hop latency, w_add / w_mul the fp32 SIMD widths):
    halo    = 2 * (words sent) + q * (2L + 2)     every word sent and received takes one
                                                  datapath cycle; each pair exchange waits
                                                  once for its first word to cross a hop
                                                  (2L + 1) and turn around (1)
    compute = 3 * ceil(nb / w_add) + ceil(nb / w_mul)
    scalar  = 4 (plane swap, loop) + 2 per axis whose parity a tile branches on
    waits   = the compute ops' element groups that wait under the bank read-pair rule,
              over the T iterations (`fabric.banks.read_pair_stalls`; N and S are 2W words
              apart: every group of N + S waits)
    cycles  = T * (halo + compute + scalar) + waits + STARTUP
Tested within 10% on several shapes.

Example:
    >>> k = build_stencil(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), 30, 22, 5)  # doctest: +SKIP
    >>> u = np.random.default_rng(0).random((32, 24), dtype=np.float32)            # doctest: +SKIP
    >>> out = run_kernel(k, {"u": u}).output                                       # doctest: +SKIP
    >>> np.array_equal(out, stencil_reference(u, 5))                               # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.isa import Port
from fabric.kernels.base import Kernel, pick_colors, split
from fabric.program import Program, Rect, Tile

TASK = "stencil"
STARTUP = 4  # task start, first issues, last RET (measured per run, not per iteration)
EAST, WEST, SOUTH, NORTH = "E", "W", "S", "N"
# (direction, d_row, d_col, out port, in port at the receiver)
DIRECTIONS = ((EAST, 0, 1, Port.EAST, Port.WEST), (WEST, 0, -1, Port.WEST, Port.EAST),
              (SOUTH, 1, 0, Port.SOUTH, Port.NORTH), (NORTH, -1, 0, Port.NORTH, Port.SOUTH))


def stencil_reference(u: np.ndarray, iters: int) -> np.ndarray:
    """numpy Jacobi in the fabric's operation order, fp32: t = N + S; t = t + W; t = t + E;
    u = t * 0.25, on the interior; the outer ring stays fixed. Shape (ny + 2, nx + 2)."""
    u = np.array(u, dtype=np.float32)
    for _ in range(iters):
        t = u[:-2, 1:-1] + u[2:, 1:-1]
        t = t + u[1:-1, :-2]
        t = t + u[1:-1, 2:]
        new = u.copy()
        new[1:-1, 1:-1] = t * np.float32(0.25)
        u = new
    return u


def build_stencil(config: FabricConfig, rect: Rect, ny: int, nx: int, iters: int,
                  dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """T = `iters` Jacobi iterations on an ny x nx interior over the PEs of `rect`.

    Args:
        config, rect: the fabric and the rectangle of PEs (rows split ny, cols split nx).
        ny, nx: interior size; every PE needs at least one row and one column.
        iters: T >= 1.
        dtype: "f32" only.
        colors: 8 colors (E0, E1, W0, W1, S0, S1, N0, N1); default the lowest 8.

    Returns a Kernel with input {"u": array (ny + 2, nx + 2)} (its ring is the boundary)
    and output the array after T iterations; model_cycles as in the module docstring.
    """
    if dtype != "f32":
        raise ValueError(f"the stencil runs in f32, got dtype {dtype!r}")
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    if ny < rect.rows or nx < rect.cols:
        raise ValueError(f"a {ny} x {nx} interior cannot give every PE of the "
                         f"{rect.rows} x {rect.cols} rectangle a row and a column")
    rows, cols = split(ny, rect.rows), split(nx, rect.cols)
    by_max, bx_max = rows[0][1], cols[0][1]
    words = 2 * (by_max + 2) * (bx_max + 2)
    if words > config.sram_words:
        raise ValueError(f"a {by_max} x {bx_max} block (two planes with halos: {4 * words} B) "
                         f"does not fit the {config.sram_bytes // 1024} KiB SRAM of a PE; "
                         "use more PEs or a smaller grid")
    palette = pick_colors(config, 8, colors)
    color = {(d, p): palette[2 * i + p] for i, d in enumerate((EAST, WEST, SOUTH, NORTH))
             for p in (0, 1)}

    prog = Program(config)
    regions = []
    for r0, r1 in _bands(rows):
        for c0, c1 in _bands(cols):
            region = Rect(rect.row + r0, rect.col + c0, r1 - r0, c1 - c0)
            by, bx = rows[r0][1], cols[c0][1]
            near = {EAST: c1 < rect.cols, WEST: c0 > 0, SOUTH: r1 < rect.rows, NORTH: r0 > 0}
            odd_r = np.add.outer(np.arange(r0, r1) % 2, np.zeros(c1 - c0, int))
            odd_c = np.add.outer(np.zeros(r1 - r0, int), np.arange(c0, c1) % 2)
            tile = _tile(f"stencil_{r0}_{c0}", by, bx, iters, near, color,
                         odd_r=r0 % 2 if r1 - r0 == 1 else None,
                         odd_c=c0 % 2 if c1 - c0 == 1 else None)
            # plane offsets: current plane 0, next plane 1 (words)
            prog.place(tile, region, params={"odd_r": odd_r, "odd_c": odd_c, "cur": 0,
                                             "nxt": (by + 2) * (bx + 2)})
            regions.append((region, r0, c0, by, bx))
    _route(prog, rect, color)

    def load(sim, inputs):
        u = np.asarray(inputs["u"], np.float32)
        if u.shape != (ny + 2, nx + 2):
            raise ValueError(f"u has shape {u.shape}, expected {(ny + 2, nx + 2)}")
        for region, r0, c0, by, bx in regions:
            blocks = np.empty((region.rows, region.cols, 2, by + 2, bx + 2), np.float32)
            for i in range(region.rows):
                for j in range(region.cols):
                    y0, x0 = rows[r0 + i][0], cols[c0 + j][0]
                    blocks[i, j, :] = u[y0:y0 + by + 2, x0:x0 + bx + 2]
            sim.memcpy_h2d("u", blocks, rect=region)

    def read(sim):
        # the halo-extended blocks first (edge PEs hold the fixed ring in their halos),
        # then every interior over them (inner halos hold stale neighbour values)
        out = np.zeros((ny + 2, nx + 2), np.float32)
        plane = iters % 2
        pieces = []
        for region, r0, c0, _, _ in regions:
            blocks = sim.memcpy_d2h("u", rect=region)[:, :, plane]
            for i in range(region.rows):
                for j in range(region.cols):
                    pieces.append((rows[r0 + i][0], cols[c0 + j][0], blocks[i, j]))
        for y0, x0, block in pieces:
            out[y0:y0 + block.shape[0], x0:x0 + block.shape[1]] = block
        for y0, x0, block in pieces:
            out[y0 + 1:y0 + block.shape[0] - 1, x0 + 1:x0 + block.shape[1] - 1] = block[1:-1, 1:-1]
        return out

    model, parts = _model(config, rect, rows, cols, iters)
    return Kernel("stencil", config, rect, prog, load, read, lambda sim: sim.launch(TASK),
                  model_cycles=model,
                  info={"ny": ny, "nx": nx, "iters": iters, "row_blocks": rows,
                        "col_blocks": cols, "colors": color, **parts})


def _bands(blocks):
    """Consecutive PE indices with the same (first, last, block size): [(start, end), ...]."""
    n = len(blocks)
    key = [(i == 0, i == n - 1, blocks[i][1]) for i in range(n)]
    bands, start = [], 0
    for i in range(1, n + 1):
        if i == n or key[i] != key[start]:
            bands.append((start, i))
            start = i
    return bands


def _route(prog, rect, color):
    """Per PE and direction d: its own color d_p (p = its parity along d's axis) goes from
    RAMP out through d when it has that neighbour; the neighbour's color d_(1-p) comes in
    from the opposite port to RAMP."""
    for r, c in rect.pes():
        i, j = r - rect.row, c - rect.col
        for d, dr, dc, out, into in DIRECTIONS:
            p = (j if dr == 0 else i) % 2
            ni, nj = i + dr, j + dc
            if 0 <= ni < rect.rows and 0 <= nj < rect.cols:
                prog.route(Rect(r, c, 1, 1), color[(d, p)], Port.RAMP, out)
                prog.route(Rect(r + dr, c + dc, 1, 1), color[(d, p)], into, Port.RAMP)


def _tile(name, by, bx, iters, near, color, odd_r, odd_c):
    """The program of a region of PEs with block by x bx and neighbours `near`.

    odd_r / odd_c: the region's row / column parity, 0 or 1, or None when the region
    spans both (then the code branches on the registers of the same names).
    SRAM: u = two planes of (by + 2) x (bx + 2) words; plane offsets in registers cur, nxt.
    """
    W, P = bx + 2, (by + 2) * (bx + 2)
    tile = Tile(name)
    tile.symbol("u", "f32", (2, by + 2, bx + 2))

    def view(reg, offset, length, stride=1):
        return ins.Mem("u", offset, length, stride, offset_reg=reg)

    halo = {  # direction: (my cells sent that way, my halo cells filled from there), 1D
        EAST: (view("cur", W + bx, by, W), view("cur", W + bx + 1, by, W)),
        WEST: (view("cur", W + 1, by, W), view("cur", W, by, W)),
        SOUTH: (view("cur", by * W + 1, bx), view("cur", (by + 1) * W + 1, bx)),
        NORTH: (view("cur", W + 1, bx), view("cur", 1, bx)),
    }
    code = [ins.label("iter")]
    for axis, (low, high), reg, fixed in ((
            "ew", (WEST, EAST), "odd_c", odd_c), ("ns", (NORTH, SOUTH), "odd_r", odd_r)):
        variants = [_axis_exchange(p, low, high, near, halo, color) for p in (0, 1)]
        if fixed is not None:
            code += variants[fixed]
        else:
            code += [ins.branch_if_nonzero(reg, f"{axis}_odd"), *variants[0],
                     ins.jump(f"{axis}_done"), ins.label(f"{axis}_odd"), *variants[1],
                     ins.label(f"{axis}_done")]
    code += [
        *_compute(by, bx),
        ins.isub("cur", P, "cur"),
        ins.isub("nxt", P, "nxt"),
        ins.iadd("t", "t", 1),
        ins.branch_if_less("t", iters, "iter"),
    ]
    tile.local_task(TASK, code)
    return tile


def _compute(by: int, bx: int) -> list:
    """The next plane's interior from the current one's, by 2D views of symbol u (planes
    at the offsets in registers cur and nxt)."""
    W, nb = bx + 2, by * bx

    def plane(reg, offset):  # the interior shifted by `offset`, as a 2D view
        return ins.Mem("u", offset, nb, 1, bx, W, offset_reg=reg)

    new = plane("nxt", W + 1)
    return [
        ins.add(new, plane("cur", 1), plane("cur", 2 * W + 1)),  # N + S
        ins.add(new, new, plane("cur", W)),  # + W
        ins.add(new, new, plane("cur", W + 2)),  # + E
        ins.mul(new, new, 0.25),
    ]


def _compute_waits(config, by: int, bx: int, iters: int) -> int:
    """Element groups of the compute ops that wait under the bank read-pair rule over
    `iters` iterations: N and S lie 2W words apart (every group waits), the others as the
    planes' parities fall; the planes swap every iteration."""
    tile = Tile("stencil")
    tile.symbol("u", "f32", (2, by + 2, bx + 2))
    code = _compute(by, bx)
    P = (by + 2) * (bx + 2)
    even, odd = (read_pair_stalls(config, tile, code, registers={"cur": c, "nxt": P - c})
                 for c in (0, P))
    return (iters + 1) // 2 * even + iters // 2 * odd


def _axis_exchange(p, low, high, near, halo, color):
    """The synchronous halo exchange of one axis for a PE of parity p along it: two phases,
    pairs (even, odd) then pairs (odd, even); in each pair the low member (west / north)
    sends first and then receives, the high member receives first and then sends. So every
    send meets a posted receive and no op outlives the exchange."""
    code = []
    for phase in (0, 1):
        if p == phase:  # the low member of this phase's pair: the partner is on `high`
            if near[high]:
                code += [_send(halo, color, high, p), _recv(halo, color, high, low, 1 - p)]
        elif near[low]:  # the high member: the partner is on `low`
            code += [_recv(halo, color, low, high, 1 - p), _send(halo, color, low, p)]
    return code


def _send(halo, color, d, p):
    """Send my cells towards d on my color d_p."""
    cells = halo[d][0]
    return ins.mov(ins.FabOut(color[(d, p)], cells.length), cells)


def _recv(halo, color, side, d, p):
    """Fill my halo on `side` with what my neighbour there sent towards d on its color."""
    cells = halo[side][1]
    return ins.mov(cells, ins.FabIn(color[(d, p)], cells.length))


def _model(config, rect, rows, cols, iters):
    """(model cycles, parts) for the busiest PE; see the module docstring."""
    w_add, w_mul = config.simd_width("add", "f32"), config.simd_width("mul", "f32")
    L = config.hop_latency
    best = None
    for i, (_, by) in enumerate(rows):
        for j, (_, bx) in enumerate(cols):
            near = {EAST: j + 1 < len(cols), WEST: j > 0, SOUTH: i + 1 < len(rows),
                    NORTH: i > 0}
            sent = by * (near[EAST] + near[WEST]) + bx * (near[SOUTH] + near[NORTH])
            halo = 2 * sent + sum(near.values()) * (2 * L + 2)
            nb = by * bx
            compute = 3 * math.ceil(nb / w_add) + math.ceil(nb / w_mul)
            scalar = 4 + 2 * ((len(rows) > 1) + (len(cols) > 1))
            waits = _compute_waits(config, by, bx, iters)
            total = iters * (halo + compute + scalar) + waits
            if best is None or total > best["total"]:
                best = {"total": total, "per_iteration": halo + compute + scalar,
                        "halo": halo, "compute": compute, "scalar": scalar,
                        "bank_waits": waits, "busiest_block": (by, bx)}
    return best.pop("total") + STARTUP, best
