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

With C0 (`with_c0`) every PE's accumulator starts from its block of C0, so C = C0 + A @ B,
each element summed from its C0 word over k = 0 .. K-1 in order.

Cycle model (critical PE: the largest Mb and Nb; w = fma SIMD width; tau =
max(ceil(Mb / w), CHAIN_CYCLES), the main thread's cost per fma bounding short blocks;
zero_c = ceil(Mb Nb / w_mov) + 8, main zeroing C and starting; 8 with C0, which the host
wrote into the accumulator instead):

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

16-bit dtypes (the tile and which op rounds where: `gemm_common`): A, B and C in 16 bits,
C accumulated by fmachs in fp32 and rounded once (acc_dtype "f32") or by fmach in 16 bits
(acc_dtype = dtype). In the model w is the width of that op (("mul_acc32", "f16") = 2 or
("fma", "f16") = 4 on wse2); A panels travel packed (ceil(Mb kb_t / 2) wavelets instead of
Mb kb_t), B panels one value per wavelet (Nb kb_t); a 16-bit C is zeroed at the 16-bit mov
width; `half_cycles` adds the copy of the PE's B block into bs (`copy_cycles`, about
2 kb Nb) and, with an fp32 accumulator, the final to_half (ceil(Mb Nb / w_cvt) + 2). The
model holds within 2 % when the datapath paces the chain (ceil(Mb / w) > CHAIN_CYCLES: Mb >
24 with fmachs, Mb > 48 with fmach); below that the main thread paces it, each panel that
takes the datapath costs a refill of the chain, and the model is a lower bound (measured
2.7 % under at 16 x 16 blocks on 8 x 8 PEs, within 15 % on the tested sizes). Efficiency
against the 16-bit fma peak (4 per PE and cycle) is then at most Mb / (4 CHAIN_CYCLES): 33 %
for 16-row blocks (measured 27.8 % with fmachs at M = N = K = 128 on 8 x 8 PEs).

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
from fabric.kernels.base import Blocks, Kernel, pick_colors, split
from fabric.kernels.gemm_common import (
    FP32,
    Numerics,
    PeSchedule,
    a_wavelets,
    check_numerics,
    comm_ops,
    compute_cycles,
    gemm_kernel,
    half_cycles,
    sequential_matmul,
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
                numerics: Numerics = FP32, with_c0: bool = False) -> int:
    """The cycle model of the module docstring."""
    R, Cc = rect.rows, rect.cols
    layout = Blocks.of(rect, m, n)  # C's blocks
    mb, nb = layout.mb, layout.nb
    kbs = [k1 - k0 for k0, k1, _, _ in summa_steps(k, R, Cc)]
    total = compute_cycles(config, mb, nb, kbs, numerics, with_c0) + (R - 1) + (Cc - 1) + 2
    total += half_cycles(config, numerics, split(k, R)[0][1] * nb, mb * nb)
    return total + sum(a_wavelets(numerics, mb * kb) * (Cc > 1) + nb * kb * (R > 1)
                       for kb in kbs)


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
                     dtype: str = "f32", colors: Sequence[int] | None = None,
                     acc_dtype: str = "f32", with_c0: bool = False) -> Kernel:
    """SUMMA C (m x n) = A (m x k) @ B (k x n), or C0 (m x n) + A @ B, on `rect` (see the
    module docstring).

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

    Returns:
        A Kernel with inputs {"A", "B"} (and "C0") and output C (m x n, float32 holding
        the values of `dtype`).

    Raises:
        ValueError: sizes, dtype, colors, or blocks exceeding a PE's SRAM.
    """
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

    return gemm_kernel(
        config, rect, "gemm_summa", (m, k, n), ops, pes, blocks,
        (pan_a + 2 * size_a, pan_b + 2 * size_b), pan_b,
        f"gemm_summa m={m} k={k} n={n} on {R}x{Cc} PEs (blocks A {mb_max}x{ka_max}, B "
        f"{kb_max}x{nb_max}, C {mb_max}x{nb_max}, panels double-buffered)", routes,
        summa_model(config, rect, m, k, n, numerics, with_c0),
        {"steps": len(steps), "block": (mb_max, nb_max),
         "k_steps": [k1 - k0 for k0, k1, _, _ in steps], "colors": palette},
        numerics, palette[-1] if n_loop else None, with_c0)
