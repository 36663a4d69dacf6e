"""Cannon GEMM on a folded ring: C = A @ B on a P x P rectangle where every step moves
panels to a neighbour at most two hops away (the interleaved placement of WaferLLM's
MeshGEMM).

Logical layout: M, N and K each split into P blocks (`split`). Logical PE (i, j) computes
C[i, j] and, at step t = 0 .. P-1, holds A[i, kk] and B[kk, j] with kk = (i + j + t) mod P
(Cannon's skew, applied by the host when it writes the blocks). After step t it passes A
to its logical west neighbour (i, j - 1) and B to its logical north neighbour (i - 1, j),
and receives the next panels from (i, j + 1) and (i + 1, j), into the other half of a double
buffer while step t computes (`gemm_common`).

With C0 (`with_c0`) every PE's accumulator starts from its block of C0: C = C0 + A @ B.

Placement: a ring of P logical positions folded onto a line, logical l at physical
position fold(l) = (0, 2, 4, ..., then the odd positions descending, ..., 3, 1), so that
logical neighbours (P - 1, 0 included) sit one or two hops apart and every link of the line
carries one ring flow per direction. Rows and columns are folded alike: logical PE (i, j)
sits at physical (fold(i), fold(j)) of the rectangle.

Colors: each ring flow gets a color distinct from the flows sharing one of its routers
(three for rings of 3 or more, two for P = 2), once for the A rings (rows) and once for the
B rings (columns). A PE sends and receives a panel by two ops run one after the other;
logical parity orders them (even: send first; odd: receive first) so that every send meets
its receive.

Cycle model (`gemm_cycles`, per PE, as `gemm_summa`'s): every PE's clock through main,
the empty comm group 0 (the host placed the step-0 panels) and the P steps, each the later
of the main thread's path (its chains, then comm group t + 1) and the datapath's (its fmas
and the group's wavelets). Group t + 1 runs two shifts, A along the row, then B down the
column, each a send to the previous logical position and a receive from the next in the
parity's order (COMM_DISPATCH_CYCLES + the op's index each): a receive waits for its
neighbour's wavelets ((hops + 1) hop latencies + 1 after the last), and a send waits for
its receiver when it is longer than the path's buffers hold (`gemm_cycles.sent`: on an odd
ring logical 0 and P - 1 both send first).

Accuracy as `gemm_summa`'s: within 0.5 % on the tested small blocks (ceil(Mb / w) <= CHAIN_CYCLES),
within 3 % for larger ones (2 x 2 to 4 x 4 PEs, fp32 and 16-bit). For 32 x 32 blocks on
8 x 8 PEs the bound is P Mb Nb kb / (P Mb Nb kb + (P - 1) 2 (Mb + Nb) kb) = 90 % of the fma
peak (measured 89.8 %).

16-bit dtypes: as in `gemm_summa` (A shifts packed, two values per wavelet; B shifts one
value per wavelet, from bs; w of fmachs or fmach; the copy of the step-0 B block into bs
and the final to_half).

Example:
    >>> config = FabricConfig.small(4, 4)                                # doctest: +SKIP
    >>> kern = build_gemm_cannon(config, Rect(0, 0, 4, 4), m=64, k=64, n=64)  # doctest: +SKIP
    >>> out = run_kernel(kern, {"A": A, "B": B})                          # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from fabric.config import FabricConfig
from fabric.isa import Port
from fabric.kernels.base import Blocks, Kernel, pick_colors, split
from fabric.kernels.gemm_common import (
    FP32,
    Numerics,
    PeSchedule,
    a_wavelets,
    check_numerics,
    comm_ops,
    gemm_kernel,
    sequential_matmul,
    tile_words,
)
from fabric.kernels.gemm_cycles import (
    GROUP_CLOSE_CYCLES,
    conflict_cycles,
    dispatched,
    finish_cycles,
    first_op_end,
    main_end,
    received,
    sent,
    step_end,
)
from fabric.program import Program, Rect


def fold(p: int) -> list[int]:
    """Physical position of each logical ring position 0..p-1 (logical neighbours, the
    pair (p - 1, 0) included, are at most two positions apart)."""
    return list(range(0, p, 2)) + list(range(p - 1 - p % 2, 0, -2)) if p > 1 else [0]


def ring_flows(p: int) -> list[tuple[int, int]]:
    """(source, destination) physical positions of the shift "logical l + 1 -> l", by l."""
    pos = fold(p)
    return [(pos[(l + 1) % p], pos[l]) for l in range(p)] if p > 1 else []


SEARCHED_RINGS = 16  # rings up to this size colored by search, longer ones greedily


@functools.lru_cache(maxsize=64)
def ring_colors(p: int) -> tuple[int, ...]:
    """A color index per ring flow, distinct among flows that share a router, with the
    fewest colors (a small backtracking search up to SEARCHED_RINGS: 2 for p = 2, 3 from
    p = 3 on; beyond, the interval graph's greedy coloring, as few). Cached: the model of
    a synchronous-fma Cannon asks for it at every step."""
    flows = ring_flows(p)
    cells = [set(range(min(s, d), max(s, d) + 1)) for s, d in flows]
    clash = [[g for g in range(len(flows)) if g != f and cells[g] & cells[f]]
             for f in range(len(flows))]

    def fill(out: list[int], count: int) -> bool:
        f = len(out)
        if f == len(flows):
            return True
        for color in range(count):
            if all(out[g] != color for g in clash[f] if g < f):
                out.append(color)
                if fill(out, count):
                    return True
                out.pop()
        return False

    if p > SEARCHED_RINGS:
        # flows are intervals of routers (an interval graph): each in order of its first
        # router takes the lowest color its colored neighbours leave, which uses as few
        # colors as the most flows at one router (the search below grows exponentially)
        out = [-1] * len(flows)
        for f in sorted(range(len(flows)), key=lambda f: (min(cells[f]), max(cells[f]))):
            taken = {out[g] for g in clash[f]}
            out[f] = next(c for c in range(len(flows)) if c not in taken)
        return tuple(out)
    for count in range(1, len(flows) + 1):
        out: list[int] = []
        if fill(out, count):
            return tuple(out)
    return ()


def cannon_order(i: int, j: int, ks: Sequence[tuple[int, int]]) -> list[int]:
    """The k order in which logical PE (i, j) accumulates its C block."""
    p = len(ks)
    order: list[int] = []
    for t in range(p):
        start, size = ks[(i + j + t) % p]
        order += range(start, start + size)
    return order


def cannon_reference(a: np.ndarray, b: np.ndarray, p: int, fused: bool = False,
                     dtype: str = "f32", acc_dtype: str = "f32",
                     c0: np.ndarray | None = None) -> np.ndarray:
    """C = C0 + A @ B in fp32 in the kernel's order: block (i, j) starts from its C0
    (default 0) and sums its k blocks starting at (i + j) mod p, one k at a time; `fused`:
    one rounding per fma; a 16-bit dtype rounds as the kernel does
    (`gemm_common.sequential_matmul`)."""
    numerics = Numerics(dtype, acc_dtype)
    m, n = a.shape[0], b.shape[1]
    rows, cols, ks = split(m, p), split(n, p), split(a.shape[1], p)
    init = np.zeros((m, n), np.float32) if c0 is None else \
        np.broadcast_to(np.asarray(c0, np.float32), (m, n))
    out = np.zeros((m, n), np.float32)
    for i, (r0, mr) in enumerate(rows):
        for j, (col0, nc) in enumerate(cols):
            block = (slice(r0, r0 + mr), slice(col0, col0 + nc))
            out[block] = sequential_matmul(a[block[0]], b[:, block[1]], cannon_order(i, j, ks),
                                           fused, numerics, init[block])
    return out


def _shift(config: FabricConfig, ready: np.ndarray, axis: int, send: tuple, recv: tuple,
           hops: np.ndarray, after_chains: bool) -> np.ndarray:
    """One ring shift of a comm group on every logical PE [i, j] from `ready`: the send to
    the previous position along `axis` and the receive from the next, in the parity's order
    (even positions send first). send, recv: (op index, wavelets) arrays; hops: to the next
    position. Returns when comm can run the group's next op."""
    even = (np.indices(ready.shape)[axis] % 2) == 0

    def nxt(a):  # the value of the PE a receive is from: the next position
        return np.roll(a, -1, axis=axis)

    def prev(a):  # the value of the PE a send goes to: the previous position
        return np.roll(a, 1, axis=axis)

    first = dispatched(ready, np.where(even, send[0], recv[0]))
    recv_issue = np.where(even, np.iinfo(np.int64).min // 2, first)
    for _ in range(2):  # an even position's first send may wait for an even receiver
        first_end = np.where(
            even, sent(config, first, send[1], prev(recv_issue), prev(hops)),
            received(config, first, recv[1], nxt(first), hops))  # odd from even: its 1st
        end = first_op_end(first, first_end) if after_chains else first_end
        second = dispatched(end, np.where(even, recv[0], send[0]))
        recv_issue = np.where(even, second, first)
    send_issue = np.where(even, first, second)
    return np.where(even, received(config, second, recv[1], nxt(send_issue), hops),
                    sent(config, second, send[1], prev(recv_issue), prev(hops)))


def cannon_model(config: FabricConfig, rect: Rect, m: int, k: int, n: int,
                 numerics: Numerics = FP32, with_c0: bool = False,
                 bank_aware: bool = False) -> int:
    """The cycle model of the module docstring, on the P x P `rect`: every PE's clock (by
    logical position [i, j]) through main, the empty group 0 and the steps
    (`gemm_cycles`), each shift waiting for its neighbour's send."""
    p = rect.rows
    layout = Blocks.of(rect, m, n)  # C's blocks
    ks = [s for _, s in split(k, p)]
    mbs = np.array([s for _, s in layout.rows])[:, None].repeat(p, 1)  # [i, j]
    nbs = np.array([s for _, s in layout.cols])[None, :].repeat(p, 0)
    ii, jj = np.indices((p, p))

    def kb(t: int) -> np.ndarray:
        return np.array(ks)[(ii + jj + t) % p]

    pos = fold(p)
    hops = [abs(pos[x] - pos[(x + 1) % p]) for x in range(p)]

    def group(t: int, ready: np.ndarray, after_chains: bool) -> np.ndarray:
        """Comm group t + 1 (the shifts after step t) from `ready`."""
        if t >= p - 1:
            return ready + GROUP_CLOSE_CYCLES
        ring_index = np.array(ring_colors(p))  # the op indices (a search: only if needed)
        n_ring = ring_index.max() + 1
        a_send = (2 * ring_index[(jj - 1) % p] + 1, a_wavelets(numerics, mbs * kb(t)))
        a_recv = (2 * ring_index[jj], a_wavelets(numerics, mbs * kb(t + 1)))
        b_send = (2 * n_ring + 2 * ring_index[(ii - 1) % p] + 1, kb(t) * nbs)
        b_recv = (2 * n_ring + 2 * ring_index[ii], kb(t + 1) * nbs)
        t_a = _shift(config, ready, 1, a_send, a_recv, np.array(hops)[jj], after_chains)
        t_b = _shift(config, t_a, 0, b_send, b_recv, np.array(hops)[ii], False)
        return t_b + GROUP_CLOSE_CYCLES

    def wavelets(t: int) -> np.ndarray:
        if t >= p - 1:
            return np.zeros_like(mbs)
        return (a_wavelets(numerics, mbs * kb(t)) + a_wavelets(numerics, mbs * kb(t + 1))
                + nbs * (kb(t) + kb(t + 1)))

    # the tile's layout (build_gemm_cannon: A and B double-buffered, one panel each half)
    size_a, size_b = layout.mb * ks[0], ks[0] * layout.nb
    words = tile_words(numerics, (2 * size_a, 2 * size_b), size_b, layout.mb * layout.nb,
                       bank_aware=bank_aware)
    c_words = layout.mb * layout.nb
    ready = main_end(config, numerics, with_c0, c_words, kb(0) * nbs) + GROUP_CLOSE_CYCLES
    for t in range(p):
        conflicts = conflict_cycles(config, words, (t % 2) * size_a, mbs, nbs, kb(t))
        ready = step_end(config, ready, mbs, nbs, kb(t),
                         lambda r, t=t: group(t, r, True), wavelets(t), wavelets(t),
                         numerics, conflicts)  # each shift reaches one receiver
    return finish_cycles(config, ready, numerics, c_words)


def _ring_routes(prog: Program, rect: Rect, colors: Sequence[int], horizontal: bool) -> None:
    """Route every ring flow of the rows (horizontal) or columns of `rect`."""
    p = rect.cols if horizontal else rect.rows
    for (src, dst), color in zip(ring_flows(p), colors):
        step = 1 if dst > src else -1
        if horizontal:
            out, back = (Port.EAST, Port.WEST) if step > 0 else (Port.WEST, Port.EAST)
        else:
            out, back = (Port.SOUTH, Port.NORTH) if step > 0 else (Port.NORTH, Port.SOUTH)
        for x in range(src, dst + step, step):
            line = (Rect(rect.row, rect.col + x, rect.rows, 1) if horizontal
                    else Rect(rect.row + x, rect.col, 1, rect.cols))
            rx = Port.RAMP if x == src else back
            tx = Port.RAMP if x == dst else out
            prog.route(line, color, rx=rx, tx=tx)


def build_gemm_cannon(config: FabricConfig, rect: Rect, m: int, k: int, n: int,
                      dtype: str = "f32", colors: Sequence[int] | None = None,
                      acc_dtype: str = "f32", with_c0: bool = False,
                      bank_aware: bool = False) -> Kernel:
    """Cannon C (m x n) = A (m x k) @ B (k x n), or C0 (m x n) + A @ B, on the square
    `rect` (see the module docstring).

    Args:
        config, rect: the fabric and a P x P rectangle of it.
        m, k, n: matrix sizes, each >= P (every PE holds a block of each).
        dtype: format of A, B and C: "f32", "f16", "bf16" or "cb16" (16-bit inputs are
            rounded to nearest even by the load).
        colors: 2 * ring colors (A rings, then B rings: 3 each for P >= 3, 2 for P = 2,
            none for P = 1), then with a 16-bit dtype one more (each PE's copy of its B
            block to its own RAMP); default the lowest.
        acc_dtype: "f32" (fmachs into fp32, C rounded once) or the 16-bit dtype (fmach,
            every step rounds); see `gemm_common`.
        with_c0: take a third input "C0", C's initial value instead of zeros (a bias; its
            words go straight into the accumulator, in its format: `gemm_common`).
        bank_aware: start the accumulator at an odd word, apart from A's bank pairs
            (`gemm_common.tile_words`; what the read-pair rule of
            `FabricConfig.bank_conflicts` costs, and the model counts, otherwise).

    Returns:
        A Kernel with inputs {"A", "B"} (and "C0") and output C (m x n, float32 holding
        the values of `dtype`).

    Raises:
        ValueError: a rectangle that is not square, sizes, dtype, colors, or blocks
            exceeding a PE's SRAM.
    """
    p = rect.rows
    if rect.cols != p:
        raise ValueError(f"gemm_cannon needs a square rectangle, got {rect.rows}x{rect.cols} "
                         "(use gemm_summa for other shapes)")
    numerics = check_numerics("gemm_cannon", dtype, acc_dtype)
    if min(m, k, n) < p:
        raise ValueError(f"gemm_cannon on {p}x{p} PEs needs m, k, n >= {p}; got m={m}, "
                         f"k={k}, n={n}")
    ring = ring_colors(p)
    n_ring = max(ring) + 1 if ring else 0
    n_loop = int(numerics.half)
    palette = pick_colors(config, 2 * n_ring + n_loop, colors)
    a_colors = [palette[c] for c in ring]
    b_colors = [palette[n_ring + c] for c in ring]

    # C's row and column blocks, indexed by logical position (the fold below puts logical
    # row i on PE row pos[i]); K splits into p blocks
    layout = Blocks.of(rect, m, n)
    rows_m, cols_n, ks = layout.rows, layout.cols, split(k, p)
    mb_max, nb_max, kb_max = layout.mb, layout.nb, ks[0][1]
    size_a, size_b = mb_max * kb_max, kb_max * nb_max  # one panel; two per buffer

    b_sym = "bs" if numerics.half else "bbuf"  # where B panels are sent from and land
    ops, op_index = comm_ops([("abuf", sorted(set(a_colors))), (b_sym, sorted(set(b_colors)))])

    pos = fold(p)
    logical = {x: l for l, x in enumerate(pos)}
    pes = [[PeSchedule() for _ in range(p)] for _ in range(p)]
    for pr in range(p):
        for pc in range(p):
            i, j = logical[pr], logical[pc]
            mb, nb = rows_m[i][1], cols_n[j][1]
            sched = pes[pr][pc]
            sched.groups.append([])  # the host placed the step-0 panels
            for t in range(p):
                kb = ks[(i + j + t) % p][1]
                sched.compute.append(((t % 2) * size_a, (t % 2) * size_b, kb * nb))
                if t == p - 1:
                    continue
                kb_next = ks[(i + j + t + 1) % p][1]
                here, there = (t % 2), (t + 1) % 2
                # A: to logical (i, j - 1) on flow j - 1, from (i, j + 1) on flow j
                send_a = (op_index[("abuf", a_colors[(j - 1) % p], True)], mb * kb,
                          here * size_a)
                recv_a = (op_index[("abuf", a_colors[j], False)], mb * kb_next, there * size_a)
                send_b = (op_index[(b_sym, b_colors[(i - 1) % p], True)], kb * nb,
                          here * size_b)
                recv_b = (op_index[(b_sym, b_colors[i], False)], kb_next * nb, there * size_b)
                group = [send_a, recv_a] if j % 2 == 0 else [recv_a, send_a]
                group += [send_b, recv_b] if i % 2 == 0 else [recv_b, send_b]
                sched.groups.append(group)
            sched.groups.append([])

    def block(pr: int, pc: int) -> tuple:
        # the host writes the panels of step 0: Cannon's skew, k block i + j
        i, j = logical[pr], logical[pc]
        return rows_m[i], cols_n[j], ks[(i + j) % p], ks[(i + j) % p]

    blocks = [[block(pr, pc) for pc in range(p)] for pr in range(p)]

    def routes(prog: Program) -> None:
        _ring_routes(prog, rect, a_colors, horizontal=True)
        _ring_routes(prog, rect, b_colors, horizontal=False)

    return gemm_kernel(
        config, rect, "gemm_cannon", (m, k, n), ops, pes, blocks, (2 * size_a, 2 * size_b),
        size_b,
        f"gemm_cannon m={m} k={k} n={n} on {p}x{p} PEs (blocks A {mb_max}x{kb_max}, B "
        f"{kb_max}x{nb_max}, C {mb_max}x{nb_max}, double-buffered)", routes,
        cannon_model(config, rect, m, k, n, numerics, with_c0, bank_aware),
        {"steps": p, "block": (mb_max, nb_max), "fold": pos, "colors": palette},
        numerics, palette[-1] if n_loop else None, with_c0, bank_aware)
