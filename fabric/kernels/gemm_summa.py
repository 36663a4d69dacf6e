"""SUMMA GEMM: C = A @ B on an R x Cc rectangle, the panels multicast along rows and
columns from their owners.

Layout: M splits over the R rows (`split`), N over the Cc columns; A's K axis splits over
the columns (PE (r, c) holds A[rows r, K block c]), B's K axis over the rows (PE (r, c)
holds B[K block r, cols c]). C[rows r, cols c] is computed in place. The merged split
points of both K splits cut K into steps (R + Cc - 1 at most; P for a square P x P with
P | K): step t covers [k0, k1), owned by column oc(t) for A and row or(t) for B.

Step t: every PE of column oc(t) multicasts its A sub-panel (Mb x kb, contiguous in its
column-major block) along its row on color a[oc(t)] (east and west at once); every PE of
row or(t) multicasts its B sub-panel (kb x Nb) down and up its column on color b[or(t)];
every PE accumulates C_blk += A_pan @ B_pan with kb * Nb async fmas. The receives of step
t + 1 land in the other half of a double buffer while step t computes (`gemm_common`).
Static routes need one color per owner: Cc colors for A and R for B (a PE is on every
one of them: the owner sends from RAMP, the others take the color to RAMP and pass it on).

Orientation (`build_gemm_summa(..., orientation=)`): "cols" computes C^T = B^T A^T with
the same program (C's columns over the tile's rows), the host's load and read transposing;
every element is the same sum in the same order, so the words are those of "rows" bit for
bit. A PE's fmas run over its block's rows of C ("rows": m / R elements) or its columns
("cols": n / R), and an fma shorter than the main thread's dispatch waits for it, so a C of
few rows and many columns runs faster transposed; "auto" builds the faster model's.

With C0 (`with_c0`) every PE's accumulator starts from its block of C0, so C = C0 + A @ B,
each element summed from its C0 word over k = 0 .. K-1 in order.

Cycle model (`gemm_cycles`, per PE; w = fma SIMD width): the tile's tasks as the engine
runs them, every PE's clock advanced through main, comm group 0 and the S steps; the kernel
ends with the latest PE:

    main        MAIN_CYCLES + ceil(Mb Nb / w_mov) zeroing C (none with C0, which the host
                wrote into the accumulator)
    group g     per op (A, then B), serially: COMM_DISPATCH_CYCLES + the op's index (comm
                branches once per mode: A colors first, receive before send), then its
                wavelets (Mb kb_g of A along the row, kb_g Nb of B down the column); a
                receive ends no earlier than (hops + 1) hop latencies + 1 after its owner's
                last wavelet, so the PEs farthest from the owners fall behind step by step;
                GROUP_CLOSE_CYCLES
    step t      the later of the main thread's path, ADVANCE_CYCLES + kb_t Nb CHAIN_CYCLES
                + kb_t WRAP_CYCLES + FIN_CYCLES, then group t + 1 (the chains hold the CE,
                comm's runs come after them), and the datapath's, ADVANCE_CYCLES +
                FIRST_FMA_CYCLES + kb_t Nb ceil(Mb / w) + the wavelets of group t + 1 +
                LAST_FIN_CYCLES
    end         LAST_ADVANCE_CYCLES after the last step's empty group

Small blocks (ceil(Mb / w) <= CHAIN_CYCLES) run the main thread's path: 12 cycles per fma,
the panels after the fmas, and per op a dispatch of 7 to 7 + 2 (Cc + R) cycles; the model
is within 0.5 % there on the tested sizes (tiles 1 x 2 to 4 x 8, m 2 to 64, k and n 4 to 256).
Larger blocks run the datapath's path: within 1 % for 16 x 16 blocks and up, and up to 6 %
low where a panel is as long as the step's fmas (Nb <= 2), whose transfer the fmas of both
ends interleave (`gemm_cycles`).

Efficiency (useful fmas over R Cc PEs at w fmas per cycle): on the datapath's path a step
costs Mb Nb kb fma cycles out of (Mb Nb + Mb + Nb) kb datapath cycles, so the bound is
Mb Nb / (Mb Nb + Mb + Nb): 94 % for 32 x 32 blocks (measured 93.8 % on 8 x 8 PEs,
M = N = K = 256). The receives cannot hide behind the fmas: a PE's datapath advances one op
per cycle, and a fabric operand moves one element per cycle.

16-bit dtypes (the tile and which op rounds where: `gemm_common`): A, B and C in 16 bits,
C accumulated by fmachs in fp32 and rounded once (acc_dtype "f32") or by fmach in 16 bits
(acc_dtype = dtype). In the model w is the width of that op (("mul_acc32", "f16") = 2 or
("fma", "f16") = 4 on wse2); A panels travel packed (ceil(Mb kb_t / 2) wavelets instead of
Mb kb_t), B panels one value per wavelet (Nb kb_t); a 16-bit C is zeroed at the 16-bit mov
width; main adds the copy of the PE's B block into bs (`copy_cycles`, about 2 kb Nb) and,
with an fp32 accumulator, the last advance the to_half (ceil(Mb Nb / w_cvt) + 1). The same
mechanisms hold: the model is within 0.5 % on the tested sizes. Efficiency against the
16-bit fma peak (4 per PE and cycle) is at most Mb / (4 CHAIN_CYCLES) while the main thread
paces the chain: 33 % for 16-row blocks (measured 27.8 % with fmachs at M = N = K = 128 on
8 x 8 PEs).

Example:
    >>> config = FabricConfig.small(4, 4)                              # doctest: +SKIP
    >>> k = build_gemm_summa(config, Rect(0, 0, 4, 4), m=64, k=64, n=64)  # doctest: +SKIP
    >>> out = run_kernel(k, {"A": A, "B": B})                          # doctest: +SKIP
    >>> out.output.shape, out.cycles, k.model_cycles                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
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
    step_conflicts,
    step_end,
)
from fabric.program import Program, Rect


def summa_steps(k: int, rows: int, cols: int) -> list[tuple[int, int, int, int]]:
    """K cut at the split points of both K splits: (k0, k1, owner column, owner row)."""
    ka, kb = split(k, cols), split(k, rows)
    cuts = sorted({0, k} | {s for s, n in ka if n} | {s for s, n in kb if n})
    steps = []
    for k0, k1 in zip(cuts[:-1], cuts[1:]):
        oc = next(c for c, (s, n) in enumerate(ka) if s <= k0 < s + n)
        orow = next(r for r, (s, n) in enumerate(kb) if s <= k0 < s + n)
        steps.append((k0, k1, oc, orow))
    return steps


def summa_reference(a: np.ndarray, b: np.ndarray, fused: bool = False, dtype: str = "f32",
                    acc_dtype: str = "f32", c0: np.ndarray | None = None) -> np.ndarray:
    """C = C0 + A @ B in fp32, each element summed from its C0 (default 0) over k = 0 ..
    K-1 in order (the kernel's order); `fused`: one rounding per fma instead of two; a
    16-bit dtype rounds as the kernel does (`gemm_common.sequential_matmul`)."""
    return sequential_matmul(a, b, range(a.shape[1]), fused, Numerics(dtype, acc_dtype), c0)


def summa_model(config: FabricConfig, rect: Rect, m: int, k: int, n: int,
                numerics: Numerics = FP32, with_c0: bool = False,
                bank_aware: bool = False) -> int:
    """The cycle model of the module docstring: every PE's clock through main, comm group
    0 and the steps (`gemm_cycles`), each group's ops in the tile's order, each receive
    waiting for its owner's send. Depends on the tile's size only, not where it lies."""
    return _summa_model(config, rect.rows, rect.cols, m, k, n, numerics, with_c0, bank_aware)


def clear_summa_caches() -> None:
    """Forget the SUMMA cycle model's cached results (`summa_model`, its bank conflicts)."""
    _summa_model.cache_clear()
    step_conflicts.cache_clear()


@functools.lru_cache(maxsize=4096)
def _summa_model(config: FabricConfig, R: int, Cc: int, m: int, k: int, n: int,
                 numerics: Numerics, with_c0: bool, bank_aware: bool) -> int:
    """`summa_model` on an R x Cc tile; cached: a model's placement weighs each GEMM on
    many tile shapes, and its GEMMs of one shape (a layer's projections, a batched
    product's entries) share them (a 1-layer GPT-2's balance: 287 models, 162 distinct)."""
    layout = Blocks.of(Rect(0, 0, R, Cc), m, n)  # C's blocks
    mbs = np.array([s for _, s in layout.rows])[:, None].repeat(Cc, 1)  # (R, Cc)
    nbs = np.array([s for _, s in layout.cols])[None, :].repeat(R, 0)
    rows, cols = np.indices((R, Cc))
    steps = summa_steps(k, R, Cc)
    n_a = Cc if Cc > 1 else 0  # A colors (ops 2 c and 2 c + 1 receive and send on a[c])

    def wavelets(g: int, reach: bool = False) -> np.ndarray:
        """Of group g (the panels of step g) on every PE; `reach`: times the receivers of
        each multicast (Cc - 1 for A, R - 1 for B)."""
        if g >= len(steps):
            return np.zeros_like(mbs)
        kb = steps[g][1] - steps[g][0]
        fan_a, fan_b = (Cc - 1, R - 1) if reach else (Cc > 1, R > 1)
        return a_wavelets(numerics, mbs * kb) * fan_a + nbs * kb * fan_b

    def group(g: int, ready: np.ndarray, after_chains: bool) -> np.ndarray:
        """Comm group g from `ready`: the A multicast along the rows from column oc, then
        the B multicast along the columns from row orow; each PE sends or receives."""
        ops = []
        if g < len(steps):
            k0, k1, oc, orow = steps[g]
            if Cc > 1:
                ops.append((cols == oc, 2 * oc, a_wavelets(numerics, mbs * (k1 - k0)),
                            lambda t, oc=oc: t[:, oc:oc + 1], np.abs(cols - oc), 1))
            if R > 1:
                ops.append((rows == orow, 2 * n_a + 2 * orow, nbs * (k1 - k0),
                            lambda t, orow=orow: t[orow:orow + 1, :], np.abs(rows - orow), 0))
        t = ready
        for i, (owner, index, count, owners, hops, axis) in enumerate(ops):
            issue = dispatched(t, index + owner)  # the send is the op after the receive
            end = np.where(owner, _multicast_sent(config, issue, count, owner, owners, hops, axis),
                           received(config, issue, count, owners(issue), hops))
            t = first_op_end(issue, end) if after_chains and i == 0 else end
        return t + GROUP_CLOSE_CYCLES

    c_words = layout.mb * layout.nb
    own_b = np.array([s for _, s in split(k, R)])[:, None] * nbs  # a 16-bit tile copies it
    # the tile's layout (build_gemm_summa: abuf = [own A block | panel 0 | panel 1], bbuf
    # likewise) and where each step's A panel lies in it
    ka = split(k, Cc)
    pan_a, size_a = layout.mb * ka[0][1], layout.mb * max(k1 - k0 for k0, k1, _, _ in steps)
    pan_b = layout.nb * split(k, R)[0][1]
    size_b = layout.nb * max(k1 - k0 for k0, k1, _, _ in steps)
    words = tile_words(numerics, (pan_a + 2 * size_a, pan_b + 2 * size_b), pan_b, c_words,
                       bank_aware=bank_aware)
    ka_start = np.array([s for s, _ in ka])[None, :]
    t = group(0, main_end(config, numerics, with_c0, c_words, own_b), False)
    for g, (k0, k1, oc, _) in enumerate(steps):
        a_at = np.where(cols == oc, (k0 - ka_start) * mbs, pan_a + (g % 2) * size_a)
        conflicts = conflict_cycles(config, words, a_at, mbs, nbs, k1 - k0)
        t = step_end(config, t, mbs, nbs, k1 - k0,
                     lambda ready, g=g: group(g + 1, ready, True), wavelets(g + 1),
                     wavelets(g + 1, reach=True), numerics, conflicts)
    return finish_cycles(config, t, numerics, c_words)


def _multicast_sent(config: FabricConfig, issue: np.ndarray, count: np.ndarray,
                    owner: np.ndarray, owners, hops: np.ndarray, axis: int) -> np.ndarray:
    """When an owner PE's comm can run again after its send of a multicast along `axis` of
    the (R, Cc) tile (1: along its row, 0: along its column; `owners(t)`: the owner's
    entry of t on each PE's line): `sent` to each receiver of its line, the latest of
    them. With synchronous fmas a receiver with a taller block issues its receive late."""
    each = np.where(owner, issue + count, sent(config, owners(issue), count, issue, hops))
    return each.max(axis=axis, keepdims=True)


def _routes(prog: Program, rect: Rect, color: int, owner: int, horizontal: bool) -> None:
    """Multicast of `color` from the owner column (row) to the whole row (column) of the
    rectangle, both ways."""
    length = rect.cols if horizontal else rect.rows
    fwd, back = (Port.EAST, Port.WEST) if horizontal else (Port.SOUTH, Port.NORTH)
    for x in range(length):
        line = (Rect(rect.row, rect.col + x, rect.rows, 1) if horizontal
                else Rect(rect.row + x, rect.col, 1, rect.cols))
        onward = {fwd} if x < length - 1 else set()
        behind = {back} if x > 0 else set()
        if x == owner:
            prog.route(line, color, rx=Port.RAMP, tx=sorted(onward | behind))
        elif x > owner:
            prog.route(line, color, rx=back, tx=sorted({Port.RAMP} | onward))
        else:
            prog.route(line, color, rx=fwd, tx=sorted({Port.RAMP} | behind))


ORIENTATIONS = ("rows", "cols", "auto")


def build_gemm_summa(config: FabricConfig, rect: Rect, m: int, k: int, n: int,
                     dtype: str = "f32", colors: Sequence[int] | None = None,
                     acc_dtype: str = "f32", with_c0: bool = False,
                     bank_aware: bool = False, orientation: str = "rows") -> Kernel:
    """SUMMA C (m x n) = A (m x k) @ B (k x n), or C0 (m x n) + A @ B, on `rect` (see the
    module docstring).

    orientation: "rows" (C's rows split over the tile's rows, each fma running down a
    column of the PE's C block: m / R elements), "cols" (the transposed product C^T = B^T
    A^T, C's columns over the tile's rows: each fma runs along a row of C, n / R elements;
    load and read transpose, so inputs and output are as with "rows"), or "auto" (the one
    whose model predicts fewer cycles on `rect`; "rows" on ties). Every element is the same
    sum in the same order either way, so the words are the same bit for bit; an fma of
    fewer elements than the main thread's dispatch of the next (`gemm_cycles`) waits for
    it, so a product of few rows and many columns is faster transposed.

    Args:
        config, rect: the fabric and the rectangle the kernel occupies (R x Cc PEs).
        m, k, n: matrix sizes; m >= R and n >= Cc (every PE holds a block); any k >= 1.
        dtype: format of A, B and C: "f32", "f16", "bf16" or "cb16" (16-bit inputs are
            rounded to nearest even by the load).
        colors: Cc + R colors (A colors of owner columns 0.., then B colors of owner rows
            0..; a 1-wide dimension needs none), then with a 16-bit dtype one more (each
            PE's copy of its B block to its own RAMP); default the lowest.
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
        ValueError: sizes, dtype, colors, or blocks exceeding a PE's SRAM.
    """
    if orientation not in ORIENTATIONS:
        raise ValueError(f"gemm_summa: orientation must be one of {ORIENTATIONS}, got "
                         f"{orientation!r}")
    if orientation != "rows":
        return _oriented(config, rect, m, k, n, dtype, colors, acc_dtype, with_c0,
                         bank_aware, orientation)
    R, Cc = rect.rows, rect.cols
    numerics = check_numerics("gemm_summa", dtype, acc_dtype)
    if m < R or n < Cc or k < 1:
        raise ValueError(f"gemm_summa on {R}x{Cc} PEs needs m >= {R}, n >= {Cc}, k >= 1; got "
                         f"m={m}, k={k}, n={n}")
    n_a, n_b = (Cc if Cc > 1 else 0), (R if R > 1 else 0)
    n_loop = int(numerics.half)
    if n_a + n_b + n_loop > len(config.program_colors):
        raise ValueError(f"gemm_summa on {R}x{Cc} PEs multicasts from every column and row: "
                         f"it needs {n_a + n_b + n_loop} colors, {config.name} has "
                         f"{len(config.program_colors)} outside the host's reserved ones; use "
                         f"gemm_cannon (6 colors) or a smaller "
                         "rectangle")
    palette = pick_colors(config, n_a + n_b + n_loop, colors)
    a_colors, b_colors = palette[:n_a], palette[n_a:n_a + n_b]

    # C's blocks (A's rows follow its rows, B's columns its columns); A's K axis splits over
    # the columns, B's over the rows, with empty K blocks when k < Cc or k < R
    layout = Blocks.of(rect, m, n)
    rows_m, cols_n = layout.rows, layout.cols
    ka, kb = split(k, Cc), split(k, R)
    steps = summa_steps(k, R, Cc)
    mb_max, nb_max = layout.mb, layout.nb
    ka_max, kb_max = ka[0][1], kb[0][1]
    ks_max = max(k1 - k0 for k0, k1, _, _ in steps)
    # abuf = [own A block | panel 0 | panel 1], bbuf likewise
    pan_a, pan_b = mb_max * ka_max, nb_max * kb_max
    size_a, size_b = mb_max * ks_max, nb_max * ks_max

    b_sym = "bs" if numerics.half else "bbuf"  # where B panels are sent from and land
    ops, op_index = comm_ops([("abuf", a_colors), (b_sym, b_colors)])

    pes = [[PeSchedule() for _ in range(Cc)] for _ in range(R)]
    for r in range(R):
        mb = rows_m[r][1]
        for c in range(Cc):
            nb = cols_n[c][1]
            pe = pes[r][c]
            for t, (k0, k1, oc, orow) in enumerate(steps):
                width = k1 - k0
                a_at = (k0 - ka[c][0]) * mb if c == oc else pan_a + (t % 2) * size_a
                b_at = (k0 - kb[r][0]) * nb if r == orow else pan_b + (t % 2) * size_b
                pe.compute.append((a_at, b_at, width * nb))
                group = []
                if n_a:
                    group.append((op_index[("abuf", a_colors[oc], c == oc)], mb * width, a_at))
                if n_b:
                    group.append((op_index[(b_sym, b_colors[orow], r == orow)], width * nb, b_at))
                pe.groups.append(group)
            pe.groups.append([])

    # the host writes every PE's own A and B blocks; the panels of a step come from their owners
    blocks = [[(rows_m[r], cols_n[c], ka[c], kb[r]) for c in range(Cc)] for r in range(R)]

    def routes(prog: Program) -> None:
        for owner, color in enumerate(a_colors):
            _routes(prog, rect, color, owner, horizontal=True)
        for owner, color in enumerate(b_colors):
            _routes(prog, rect, color, owner, horizontal=False)

    kernel = gemm_kernel(
        config, rect, "gemm_summa", (m, k, n), ops, pes, blocks,
        (pan_a + 2 * size_a, pan_b + 2 * size_b), pan_b,
        f"gemm_summa m={m} k={k} n={n} on {R}x{Cc} PEs (blocks A {mb_max}x{ka_max}, B "
        f"{kb_max}x{nb_max}, C {mb_max}x{nb_max}, panels double-buffered)", routes,
        summa_model(config, rect, m, k, n, numerics, with_c0, bank_aware),
        {"steps": len(steps), "block": (mb_max, nb_max),
         "k_steps": [k1 - k0 for k0, k1, _, _ in steps], "colors": palette},
        numerics, palette[-1] if n_loop else None, with_c0, bank_aware)
    kernel.info["orientation"] = "rows"
    return kernel


def _oriented(config, rect, m, k, n, dtype, colors, acc_dtype, with_c0, bank_aware,
              orientation) -> Kernel:
    """`build_gemm_summa` with orientation "cols" or "auto" (its docstring)."""
    args = dict(dtype=dtype, colors=colors, acc_dtype=acc_dtype, with_c0=with_c0,
                bank_aware=bank_aware)
    if orientation == "cols":
        transposed = build_gemm_summa(config, rect, n, k, m, **args)
    else:  # "auto": either may not build (C too small for the tile, or its SRAM)
        try:
            transposed = build_gemm_summa(config, rect, n, k, m, **args)
        except ValueError:
            return build_gemm_summa(config, rect, m, k, n, **args)  # or its error
        try:
            rows = build_gemm_summa(config, rect, m, k, n, **args)
        except ValueError:
            rows = None
        if rows is not None and rows.model_cycles <= transposed.model_cycles:
            return rows
    inner_load, inner_read = transposed.load, transposed.read

    def load(sim, values):
        flipped = {"A": np.asarray(values["B"], np.float32).T,
                   "B": np.asarray(values["A"], np.float32).T}
        if with_c0:
            flipped["C0"] = np.asarray(values["C0"], np.float32).T
        inner_load(sim, flipped)

    def read(sim):
        return np.ascontiguousarray(np.asarray(inner_read(sim)).T)

    return dataclasses.replace(transposed, load=load, read=read,
                               info={**transposed.info, "orientation": "cols",
                                     "m": m, "k": k, "n": n})
