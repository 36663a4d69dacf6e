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

Cycle model (critical PE: the largest Mb and Nb; w = fma SIMD width; tau =
max(ceil(Mb / w), CHAIN_CYCLES), the main thread's cost per fma bounding short blocks;
zero_c = ceil(Mb Nb / w_mov) + 8, main zeroing C and starting):

    T = zero_c + sum_t [ kb_t * Nb * tau            (fmas, one op on the datapath at a time)
                       + (Mb + Nb) * kb_t ]         (the A and B panels of the step, sent or
                                                     received at one wavelet per cycle on the
                                                     same datapath; overlap with the fmas of
                                                     the previous step hides their latency but
                                                     not their datapath cycles)
        + S * STEP_CYCLES                           (S steps: task switches between steps)
        + (R - 1) + (Cc - 1) + 2                    (hops of the first panels)

Efficiency (useful fmas over R Cc PEs at w fmas per cycle): with tau = Mb / w, a step
costs Mb Nb kb fma cycles out of (Mb Nb + Mb + Nb) kb datapath cycles, so the bound is
Mb Nb / (Mb Nb + Mb + Nb): 94 % for 32 x 32 blocks (measured 93.8 % on 8 x 8 PEs,
M = N = K = 256, the model within 0.2 %). The receives cannot hide behind the fmas: a PE's
datapath advances one op per cycle, and a fabric operand moves one element per cycle. The
model holds within a few % for blocks of 12 rows or more; tiny blocks (a few elements) are
dominated by task switches and comm dispatch, which it counts only in part.

Example:
    >>> config = FabricConfig.small(4, 4)                              # doctest: +SKIP
    >>> k = build_gemm_summa(config, Rect(0, 0, 4, 4), m=64, k=64, n=64)  # doctest: +SKIP
    >>> out = run_kernel(k, {"A": A, "B": B})                          # doctest: +SKIP
    >>> out.output.shape, out.cycles, k.model_cycles                   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric.config import FabricConfig
from fabric.isa import Port
from fabric.kernels.base import Kernel, pick_colors, split
from fabric.kernels.gemm_common import (
    STEP_CYCLES,
    CommOp,
    PeSchedule,
    TileWords,
    chain_params,
    check_fits,
    col_major,
    fma_cycles,
    gemm_tile,
    pack_schedule,
    row_major,
    sequential_matmul,
    zero_c_cycles,
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


def summa_reference(a: np.ndarray, b: np.ndarray, fused: bool = False) -> np.ndarray:
    """C = A @ B in fp32, each element summed over k = 0 .. K-1 in order (the kernel's
    order); `fused`: one rounding per fma instead of two."""
    return sequential_matmul(a, b, range(a.shape[1]), fused)


def summa_model(config: FabricConfig, rect: Rect, m: int, k: int, n: int) -> int:
    """The cycle model of the module docstring."""
    R, Cc = rect.rows, rect.cols
    mb, nb = max(s for _, s in split(m, R)), max(s for _, s in split(n, Cc))
    tau = fma_cycles(config, mb)
    steps = summa_steps(k, R, Cc)
    total = zero_c_cycles(config, mb * nb) + (R - 1) + (Cc - 1) + 2 + len(steps) * STEP_CYCLES
    for k0, k1, _, _ in steps:
        kb = k1 - k0
        total += kb * nb * tau + (mb * (Cc > 1) + nb * (R > 1)) * kb
    return total


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


def build_gemm_summa(config: FabricConfig, rect: Rect, m: int, k: int, n: int,
                     dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """SUMMA C (m x n) = A (m x k) @ B (k x n) on `rect` (see the module docstring).

    Args:
        config, rect: the fabric and the rectangle the kernel occupies (R x Cc PEs).
        m, k, n: matrix sizes; m >= R and n >= Cc (every PE holds a block); any k >= 1.
        dtype: "f32".
        colors: Cc + R colors (A colors of owner columns 0.., then B colors of owner rows
            0..; a 1-wide dimension needs none); default the lowest.

    Returns:
        A Kernel with inputs {"A", "B"} and output C (m x n, fp32).

    Raises:
        ValueError: sizes, dtype, colors, or blocks exceeding a PE's SRAM.
    """
    R, Cc = rect.rows, rect.cols
    if dtype != "f32":
        raise ValueError(f"gemm_summa supports dtype 'f32', got {dtype!r}")
    if m < R or n < Cc or k < 1:
        raise ValueError(f"gemm_summa on {R}x{Cc} PEs needs m >= {R}, n >= {Cc}, k >= 1; got "
                         f"m={m}, k={k}, n={n}")
    n_a, n_b = (Cc if Cc > 1 else 0), (R if R > 1 else 0)
    if n_a + n_b > config.num_colors:
        raise ValueError(f"gemm_summa on {R}x{Cc} PEs multicasts from every column and row: "
                         f"it needs {n_a + n_b} colors, {config.name} has "
                         f"{config.num_colors}; use gemm_cannon (6 colors) or a smaller "
                         "rectangle")
    palette = pick_colors(config, n_a + n_b, colors)
    a_colors, b_colors = palette[:n_a], palette[n_a:]

    rows_m, cols_n = split(m, R), split(n, Cc)
    ka, kb = split(k, Cc), split(k, R)
    steps = summa_steps(k, R, Cc)
    mb_max, nb_max = rows_m[0][1], cols_n[0][1]
    ka_max, kb_max = ka[0][1], kb[0][1]
    ks_max = max(k1 - k0 for k0, k1, _, _ in steps)
    # abuf = [own A block | panel 0 | panel 1], bbuf likewise
    pan_a, pan_b = mb_max * ka_max, nb_max * kb_max
    size_a, size_b = mb_max * ks_max, nb_max * ks_max

    ops: list[CommOp] = []
    op_index = {}
    for kind, cols in (("abuf", a_colors), ("bbuf", b_colors)):
        for owner, color in enumerate(cols):
            for send in (False, True):
                op_index[(kind, owner, send)] = len(ops)
                ops.append(CommOp(color, kind, send))

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
                    group.append((op_index[("abuf", oc, c == oc)], mb * width, a_at))
                if n_b:
                    group.append((op_index[("bbuf", orow, r == orow)], width * nb, b_at))
                pe.groups.append(group)
            pe.groups.append([])
    table, comm_base = pack_schedule(pes)

    words = TileWords(a=pan_a + 2 * size_a, b=pan_b + 2 * size_b, c=mb_max * nb_max,
                      sched=table.shape[-1])
    check_fits(config, words, f"gemm_summa m={m} k={k} n={n} on {R}x{Cc} PEs (blocks "
               f"A {mb_max}x{ka_max}, B {kb_max}x{nb_max}, C {mb_max}x{nb_max}, panels "
               f"double-buffered)")

    prog = Program(config)
    mb_grid = np.array([[rows_m[r][1]] * Cc for r in range(R)])
    nb_grid = np.array([[cols_n[c][1] for c in range(Cc)]] * R)
    prog.place(gemm_tile("gemm_summa", words, ops, comm_base), rect,
               params=chain_params(mb_grid, nb_grid))
    for owner, color in enumerate(a_colors):
        _routes(prog, rect, color, owner, horizontal=True)
    for owner, color in enumerate(b_colors):
        _routes(prog, rect, color, owner, horizontal=False)

    def load(sim, inputs):
        a = np.asarray(inputs["A"], np.float32)
        b = np.asarray(inputs["B"], np.float32)
        if a.shape != (m, k) or b.shape != (k, n):
            raise ValueError(f"gemm_summa expects A {(m, k)} and B {(k, n)}, got "
                             f"{a.shape} and {b.shape}")
        abuf = np.zeros((R, Cc, words.a), np.float32)
        bbuf = np.zeros((R, Cc, words.b), np.float32)
        for r, (r0, mr) in enumerate(rows_m):
            for c, (c0, nc) in enumerate(cols_n):
                abuf[r, c] = col_major(a[r0:r0 + mr, ka[c][0]:ka[c][0] + ka[c][1]], words.a)
                bbuf[r, c] = row_major(b[kb[r][0]:kb[r][0] + kb[r][1], c0:c0 + nc], words.b)
        sim.memcpy_h2d("abuf", abuf, rect)
        sim.memcpy_h2d("bbuf", bbuf, rect)
        sim.memcpy_h2d("sched", table, rect)

    def read(sim):
        blocks = sim.memcpy_d2h("c", rect)
        out = np.zeros((m, n), np.float32)
        for r, (r0, mr) in enumerate(rows_m):
            for c, (c0, nc) in enumerate(cols_n):
                out[r0:r0 + mr, c0:c0 + nc] = blocks[r, c, :mr * nc].reshape(nc, mr).T
        return out

    def launch(sim):
        sim.launch("main", rect)

    return Kernel(
        name="gemm_summa", config=config, rect=rect, program=prog, load=load, read=read,
        launch=launch, model_cycles=summa_model(config, rect, m, k, n), fmas=m * n * k,
        info={"m": m, "k": k, "n": n, "steps": len(steps), "block": (mb_max, nb_max),
              "k_steps": [k1 - k0 for k0, k1, _, _ in steps], "colors": palette,
              "sram_bytes_per_pe": 4 * words.total})
