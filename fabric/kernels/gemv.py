"""GEMV y = A x + b on a P x Q rectangle, A (m x n) in 2D blocks.

Layout (`split` sizes, the first blocks one larger when sizes do not divide):
    PE (p, q) holds A[rows_p, cols_q] (m_p x n_q) column major with a column pitch of
    M = max m_p words (A[:, k] of the block is contiguous); x[cols_q] starts on the top PE
    of column q; b[rows_p] on the west PE of row p; y[rows_p] ends on the west PE of row p
    (column 0 of the rectangle).

Program (one tile on the whole rectangle; per-PE block sizes are registers):
    1. x broadcast: the top PE of every column multicasts its x block south
       (`collectives.broadcast(along="col")`, one color).
    2. local product: y_blk = 0, then y_blk += A[:, k] * x[k] for k < n_q: x[k] is loaded
       into a register (`load`, 1 cycle) and the fmas alternate async / sync, so the loop's
       scalar work (loads, address updates, counter) runs while an fma streams, and the
       fmas still run in order (an async op is always finished before the next one is
       issued: the sync fma behind it waits).
    3. row reduction of the partial y blocks into column 0 (`collectives.reduce`, chain or
       tree); the west PE then adds b.

Cycle model (H = hop latency; cycles counted from the task's start), per PE (p, q):
    x arrives       t_x = (p + 1) H + n_q + 4  (the top row: n_q + 2, it only sends)
    local product   t_l = ceil(m_p / 2) + 2 + floor(n_q / 2) (max(m_p, 7) + m_p + 1)
                          + (m_p + 1 if n_q is odd else 1)
                    (zeroing y, then pairs of fmas of m_p cycles each; the 7 instructions
                    that prepare a pair hide behind its async fma when m_p >= 7)
    row reduction   from the per-PE start times t_x + t_l, by the collective's model
                    (chain: the root gets its last word (2H + 1) q + m_p - 1 cycles after
                    PE q starts sending, a few cycles of dispatch aside), then + b at the
                    root: ceil(m_p / 2)
    T = max over rows of the root's finish + 1. The collectives' `exit_times` compute the
    broadcast and reduction terms from the code; the model is exact with the chain, and
    with the tree when the PEs of a row start their reduction together (uneven n_q with a
    tree lets an early round share links with a late one: within a few %).
    The SRAM-bandwidth bound is the local product alone at the fma width (w = 1 fp32 fma
    per cycle on WSE-2): T_bound = max m_p * max n_q / w; the efficiency reported is
    T_bound / T (0.7 to 0.9 for blocks of 16 x 16 to 32 x 32).

Numerics: the local product accumulates k in increasing order from 0 with one fma per
term, the row reduction runs in the collective's fixed order, then + b: `gemv_reference`
reproduces it in float32 (the fma with one or two roundings, see its docstring).

Example:
    >>> k = build_gemv(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), m=64, n=64)
    >>> y = run_kernel(k, {"A": A, "x": x, "b": b}).output     # (64,)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.kernels import collectives as co
from fabric.kernels.base import Kernel, pick_colors, split
from fabric.program import Program, Rect, Tile

LOOP_PREP = 7  # instructions from an async fma's issue to the sync fma's issue


def local_product_cycles(m: int, nq: int) -> int:
    """Cycles from the first instruction of the local product (zeroing y) to the first
    instruction after it, for an m x nq block."""
    pairs, odd = divmod(nq, 2)
    per_pair = max(m, LOOP_PREP) + m + 1
    return -(-m // 2) + 2 + pairs * per_pair + (m + 1 if odd else 1)


def build_gemv(config: FabricConfig, rect: Rect, m: int, n: int, dtype: str = "f32",
               colors: Sequence[int] | None = None, algo: str = "chain") -> Kernel:
    """y = A x + b with A (m x n) in blocks over `rect` (P x Q); y ends at column 0.

    Args:
        m, n: sizes of A (m >= P, n >= Q so that every PE has a block).
        colors: 1 + `collectives.line_colors(algo, Q)` colors (x broadcast, row reduction).
        algo: "chain" or "tree" row reduction.
    Inputs: "A" (m, n), "x" (n,), "b" (m,). Output: y (m,).
    Raises ValueError for a dtype other than f32, sizes below the rectangle's, or blocks
    above the 48 KiB SRAM of a PE.
    """
    P, Q = rect.rows, rect.cols
    if dtype != "f32":
        raise ValueError(f"gemv: dtype {dtype!r} is not supported (f32 only)")
    if m < P or n < Q:
        raise ValueError(f"gemv: A is {m} x {n} but the rectangle is {P} x {Q}; every PE "
                         "needs at least one row and one column of A")
    rows, cols = split(m, P), split(n, Q)
    M, N = rows[0][1], cols[0][1]  # the largest blocks
    words = N * M + (N + 1) + 2 * M
    if words > config.sram_words:
        raise ValueError(f"gemv: the {M} x {N} block of A plus x, y, b needs {4 * words} B "
                         f"per PE, above the {config.sram_bytes // 1024} KiB of a PE "
                         f"(A is {m} x {n} on {P} x {Q} PEs)")
    colors = pick_colors(config, 1 + co.line_colors(algo, Q), colors)
    mp = np.array([[rows[p][1]] * Q for p in range(P)], np.int64)
    nq = np.array([[cols[q][1] for q in range(Q)]] * P, np.int64)

    prog, tile = Program(config), Tile("gemv")
    tile.symbol("A", "f32", N * M)
    tile.symbol("x", "f32", N + 1)  # one spare word: the loop loads x[k + 2] ahead
    tile.symbol("y", "f32", M)
    tile.symbol("b", "f32", M)
    bc = co.broadcast(prog, rect, "x", ("nq", nq), colors[0], along="col", src=0, name="xb")
    y, b = ins.Mem("y", length_reg="m"), ins.Mem("b", length_reg="m")
    red = co.reduce(prog, rect, "y", ("m", mp), colors[1:], along="row", algo=algo,
                    name="rd", then_root=[ins.add(y, y, b)], then_root_cycles=-(-mp // 2))
    code = [*bc.code, *_local_product(M), *red.code]
    tile.local_task("main", code)
    params = {"m": mp, "nq": nq, "J": nq // 2, "odd": nq % 2, **bc.params, **red.params}
    prog.place(tile, rect, params=params)

    entry = np.ones((P, Q), np.int64)  # the task starts at cycle 0
    local = np.vectorize(local_product_cycles)(mp, nq)
    done = red.exit_times(bc.exit_times(entry) + local)
    model = int(done.max()) + 1

    def load(sim, inputs):
        A = np.asarray(inputs["A"], np.float32)
        x = np.asarray(inputs["x"], np.float32)
        b = np.asarray(inputs["b"], np.float32)
        if A.shape != (m, n) or x.shape != (n,) or b.shape != (m,):
            raise ValueError(f"gemv inputs: A {A.shape}, x {x.shape}, b {b.shape}; expected "
                             f"A {(m, n)}, x {(n,)}, b {(m,)}")
        blocks = np.zeros((P, Q, N, M), np.float32)  # [p, q, k, i] = A[r0 + i, c0 + k]
        for p, (r0, mr) in enumerate(rows):
            for q, (c0, nc) in enumerate(cols):
                blocks[p, q, :nc, :mr] = A[r0:r0 + mr, c0:c0 + nc].T
        sim.memcpy_h2d("A", blocks.reshape(P, Q, N * M), rect)
        xs = np.zeros((1, Q, N + 1), np.float32)
        for q, (c0, nc) in enumerate(cols):
            xs[0, q, :nc] = x[c0:c0 + nc]
        sim.memcpy_h2d("x", xs, Rect(rect.row, rect.col, 1, Q))
        bs = np.zeros((P, 1, M), np.float32)
        for p, (r0, mr) in enumerate(rows):
            bs[p, 0, :mr] = b[r0:r0 + mr]
        sim.memcpy_h2d("b", bs, Rect(rect.row, rect.col, P, 1))

    def read(sim):
        got = sim.memcpy_d2h("y", Rect(rect.row, rect.col, P, 1))[:, 0]
        return np.concatenate([got[p, :mr] for p, (_, mr) in enumerate(rows)])

    info = {"m": m, "n": n, "algo": algo, "block": (M, N),
            "bound_cycles": M * N // config.simd_width("fma", "f32")}
    return Kernel("gemv", config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), model, m * n, info)


def _local_product(M: int) -> list:
    """y[:m] = sum_k A[:, k] * x[k] over the block's nq columns (registers m, J = nq // 2,
    odd = nq % 2; ka, oa start at 0). A column k is at word k * M of symbol A."""
    y = ins.Mem("y", length_reg="m")

    def column(reg):
        return ins.Mem("A", length_reg="m", offset_reg=reg)

    return [
        ins.mov(y, 0.0),
        ins.load("xa", ins.Mem("x", offset_reg="ka")),
        ins.branch_if_zero("J", "lp.tail"),
        ins.label("lp.loop"),
        ins.fma(y, y, column("oa"), "xa", is_async=True),  # column ka, in flight ...
        ins.load("xb", ins.Mem("x", 1, offset_reg="ka")),  # ... while the loop prepares
        ins.iadd("ob", "oa", M),
        ins.iadd("oa", "oa", 2 * M),
        ins.iadd("ka", "ka", 2),
        ins.load("xa", ins.Mem("x", offset_reg="ka")),
        ins.isub("J", "J", 1),
        ins.fma(y, y, column("ob"), "xb"),  # column ka + 1: starts when the async one ends
        ins.branch_if_nonzero("J", "lp.loop"),
        ins.label("lp.tail"),
        ins.branch_if_zero("odd", "lp.done"),
        ins.fma(y, y, column("oa"), "xa"),
        ins.label("lp.done"),
    ]


def gemv_reference(A: np.ndarray, x: np.ndarray, b: np.ndarray, P: int, Q: int,
                   algo: str = "chain", fused: bool = False) -> np.ndarray:
    """y = A x + b in float32 in the fabric's order: per block, y = 0 then y += A[:, k] x[k]
    for k in order; the Q partial blocks of a row reduced by the collective's order; + b.

    fused: round each fma once (a + b s computed in float64, where the product of two
    float32 is exact, then rounded) instead of rounding the product first. Which of the
    two the engine does depends on whether XLA contracts the multiply-add on the backend.
    """
    A, x, b = (np.asarray(v, np.float32) for v in (A, x, b))
    m, n = A.shape
    out = []
    for r0, mr in split(m, P):
        partial = []
        for c0, nc in split(n, Q):
            acc = np.zeros(mr, np.float32)
            for k in range(c0, c0 + nc):
                if fused:
                    acc = (acc.astype(np.float64) + A[r0:r0 + mr, k].astype(np.float64)
                           * np.float64(x[k])).astype(np.float32)
                else:
                    acc = acc + A[r0:r0 + mr, k] * x[k]
            partial.append(acc)
        out.append(co.line_reduce_reference(np.stack(partial), algo) + b[r0:r0 + mr])
    return np.concatenate(out)
