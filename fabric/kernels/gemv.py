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
                    that prepare a pair hide behind its async fma when m_p >= 7); each
                    fma also waits for its element groups whose y and A[:, k] words meet
                    the bank read-pair rule (A[:, k] at element k M: the columns alternate
                    bank pairs when M is odd; `fabric.banks.op_read_pair_stalls`), and the
                    root's + b for its own
    row reduction   from the per-PE start times t_x + t_l, by the collective's model
                    (chain: the root gets its last word (2H + 1) q + m_p - 1 cycles after
                    PE q starts sending, a few cycles of dispatch aside), then + b at the
                    root: ceil(m_p / w_add) (16-bit: ceil(m_p / w_fmachs) + ceil(m_p / w_cvt))
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

16-bit dtypes ("f16", "bf16", "cb16"): A, x, b and y are stored in 16 bits (same element
slots as the fp32 words). The fma's scalar is the low half of a register and `load` reads
32-bit words, so x is held for the loop in `xs`, a u32 symbol with one 16-bit pattern per
word: the top PE of each column copies x into xs through its own router (a 16-bit mov out
and a 32-bit mov in, on one more color; the model counts `gemm_common.copy_cycles`), and the
broadcast moves xs (one value per wavelet). With acc_dtype "f32" the local product is
`fmachs` into an fp32 `acc` (exact products, fp32 sums, ("mul_acc32", "f16") width); with
acc_dtype = dtype it is `fma(..., dtype)` into the 16-bit y (each step rounds to 16 bits,
("fma", "f16") width), then widened into acc (`to_f32`). Either way the row reduction of
the partial sums runs in fp32 (the fp32 collectives), the root adds b widened (fmachs
acc + b * 1, exact product) and rounds once into y (`to_half`). In the model the local
product's fmas take ceil(m_p / w) cycles at that width, the zeroing ceil(m_p / w_mov) (fp32
or 16-bit mov) and the root's work ceil(m_p / w) per op at its width.

Example:
    >>> k = build_gemv(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), m=64, n=64)
    >>> y = run_kernel(k, {"A": A, "x": x, "b": b}).output     # (64,)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.banks import op_read_pair_stalls, read_pair_stalls
from fabric.config import FabricConfig
from fabric.isa import Op, Port
from fabric.kernels import collectives as co
from fabric.kernels.base import Blocks, Kernel, pick_colors, split
from fabric.kernels.gemm_common import FP32, Numerics, check_numerics, copy_cycles
from fabric.numerics import round_to, words_for
from fabric.program import Program, Rect, Tile

LOOP_PREP = 7  # instructions from an async fma's issue to the sync fma's issue

def local_product_cycles(m: int, nq: int, fma_width: int = 1, zero_width: int = 2,
                         widen_width: int = 0, column_stalls: Sequence[int] = (),
                         sync: bool = False) -> int:
    """Cycles from the first instruction of the local product (zeroing y) to the first
    instruction after it, for an m x nq block: fmas of ceil(m / fma_width) cycles (plus
    column k's element groups waiting on a bank pair, `column_stalls[k]`; none where not
    given), the zeroing at zero_width, and (widen_width > 0) a final widening of m values.
    sync: every fma synchronous (`FabricConfig.async_memory_ops` False), so the loop's
    instructions after the first fma of a pair (LOOP_PREP less its issue) follow it
    instead of running beside it."""
    pairs, odd = divmod(nq, 2)
    stalls = list(column_stalls) or [0] * nq
    f = [-(-m // fma_width) + s for s in stalls]
    first = (lambda c: c + LOOP_PREP - 1) if sync else (lambda c: max(c, LOOP_PREP))
    cycles = sum(first(f[2 * i]) + f[2 * i + 1] + 1 for i in range(pairs))
    widen = -(-m // widen_width) if widen_width else 0
    return -(-m // zero_width) + 2 + cycles + (f[-1] + 1 if odd else 1) + widen


def build_gemv(config: FabricConfig, rect: Rect, m: int, n: int, dtype: str = "f32",
               colors: Sequence[int] | None = None, algo: str = "chain",
               acc_dtype: str = "f32") -> Kernel:
    """y = A x + b with A (m x n) in blocks over `rect` (P x Q); y ends at column 0.

    Args:
        m, n: sizes of A (m >= P, n >= Q so that every PE has a block).
        dtype: format of A, x, b and y: "f32", "f16", "bf16" or "cb16" (16-bit inputs are
            rounded to nearest even by the load).
        colors: 1 + `collectives.line_colors(algo, Q)` colors (x broadcast, row reduction),
            then with a 16-bit dtype one more (the copy of x into xs on the top PEs).
        algo: "chain" or "tree" row reduction.
        acc_dtype: "f32" or the 16-bit dtype: the format of the local product (see the
            module docstring; the row reduction and + b run in fp32 either way).
    Inputs: "A" (m, n), "x" (n,), "b" (m,). Output: y (m,), float32 holding `dtype` values.
    Raises ValueError for dtypes other than these, sizes below the rectangle's, or blocks
    above the 48 KiB SRAM of a PE.
    """
    P, Q = rect.rows, rect.cols
    num = check_numerics("gemv", dtype, acc_dtype)
    if m < P or n < Q:
        raise ValueError(f"gemv: A is {m} x {n} but the rectangle is {P} x {Q}; every PE "
                         "needs at least one row and one column of A")
    layout = Blocks.of(rect, m, n)
    rows, cols = layout.rows, layout.cols
    M, N = layout.mb, layout.nb  # the largest blocks
    h = num.dtype
    # A, x, y, b in `dtype`; 16-bit: xs and the fp32 acc besides
    words = (words_for(h, N * M) + words_for(h, N + 1) + 2 * words_for(h, M)
             + ((N + 1) + M if num.half else 0))
    if words > config.sram_words:
        extra = ", xs, acc" if num.half else ""
        raise ValueError(f"gemv: the {M} x {N} block of A plus x, y, b{extra} needs "
                         f"{4 * words} B per PE, above the {config.sram_bytes // 1024} KiB of "
                         f"a PE (A is {m} x {n} on {P} x {Q} PEs)")
    colors = pick_colors(config, 1 + co.line_colors(algo, Q) + int(num.half), colors)
    mp, nq = layout.sizes()  # every PE's block is mp x nq, (P, Q) each

    prog, tile = Program(config), _tile(h, N, M, num.half)
    xs, red_buf = ("xs", "acc") if num.half else ("x", "y")
    y, b = ins.Mem("y", length_reg="m"), ins.Mem("b", length_reg="m")
    acc = ins.Mem(red_buf, length_reg="m")
    bc = co.broadcast(prog, rect, xs, ("nq", nq), colors[0], along="col", src=0, name="xb")
    if num.half:
        root = [ins.fmachs(acc, acc, b, 1.0, dtype=h), ins.to_half(y, acc, h)]
        root_widths = (config.simd_width("mul_acc32", "f16"), config.simd_width("cvt", "f16"))
    else:
        root = [ins.add(y, y, b)]
        root_widths = (config.simd_width("add", "f32"),)
    # the root's ops read acc or y beside b: plus their groups that wait on a bank pair,
    # per row's m_p. The layout's pairs are the ops with fixed offsets, the root's alone
    # here, so a tile of the same symbols with the root's code has the tile's layout.
    probe = _tile(h, N, M, num.half)
    probe.local_task("main", root)
    root_waits = np.vectorize(lambda e: read_pair_stalls(config, probe, root, e))(mp)
    red = co.reduce(prog, rect, red_buf, ("m", mp), colors[1:1 + co.line_colors(algo, Q)],
                    along="row", algo=algo, name="rd", then_root=root,
                    then_root_cycles=sum(-(-mp // w) for w in root_widths) + root_waits)
    copy = _copy_x(h, colors[-1]) if num.half else []
    product = _local_product(M, num, sync=not config.async_memory_ops)
    code = [*copy, *bc.code, *product, *red.code]
    tile.local_task("main", code)
    params = {"m": mp, "nq": nq, "J": nq // 2, "odd": nq % 2, **bc.params, **red.params}
    top = np.zeros((P, Q), np.int64)
    top[0] = 1
    if num.half:
        params["lx"] = nq * top  # values the PE copies from x into xs
        prog.route(rect, colors[-1], rx=Port.RAMP, tx=Port.RAMP)
    prog.place(tile, rect, params=params)

    entry = np.ones((P, Q), np.int64)  # the task starts at cycle 0
    if num.half:  # the copy on the top row, its branch everywhere
        entry += copy_cycles(nq * top)
    fma = next(op for op in product if isinstance(op, ins.Instr) and op.op == Op.FMA)

    def local_cycles(e, cols):  # the fma of column k reads A from element k * M beside y
        waits = [op_read_pair_stalls(config, tile, fma, e, registers={"oa": k * M})
                 for k in range(cols)]
        return local_product_cycles(e, cols, *_widths(config, num), column_stalls=waits,
                                    sync=not config.async_memory_ops)

    local = np.vectorize(local_cycles)(mp, nq)
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
        got = np.asarray(sim.memcpy_d2h("y", Rect(rect.row, rect.col, P, 1)), np.float32)[:, 0]
        return np.concatenate([got[p, :mr] for p, (_, mr) in enumerate(rows)])

    info = {"m": m, "n": n, "algo": algo, "block": (M, N), "dtype": num.dtype,
            "acc_dtype": num.acc_dtype, "bound_cycles": M * N // num.fma_width(config)}
    return Kernel("gemv", config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), model, m * n, info)


def _tile(h: str, N: int, M: int, half: bool) -> Tile:
    """The tile's symbols for blocks of at most M x N: A (column pitch M), x, y, b in h;
    16-bit: xs (u32) and the fp32 acc besides."""
    tile = Tile("gemv")
    tile.symbol("A", h, N * M)
    tile.symbol("x", h, N + 1)  # one spare element: the loop loads x[k + 2] ahead
    tile.symbol("y", h, M)
    tile.symbol("b", h, M)
    if half:
        tile.symbol("xs", "u32", N + 1)
        tile.symbol("acc", "f32", M)
    return tile


def _widths(config: FabricConfig, num: Numerics) -> tuple[int, int, int]:
    """(fma, zeroing, widening) widths of the local product for `local_product_cycles`."""
    if not num.half:
        return num.fma_width(config), config.simd_width("mov", "f32"), 0
    if num.wide_acc:
        return num.fma_width(config), config.simd_width("mov", "f32"), 0
    return (num.fma_width(config), config.simd_width("mov", "f16"),
            config.simd_width("cvt", "f16"))


def _copy_x(h: str, color: int) -> list:
    """The top PEs (lx = n_q; 0 elsewhere) copy x into xs through their own router."""
    return [
        ins.branch_if_zero("lx", "cx.done"),
        ins.mov(ins.FabOut(color, 1, length_reg="lx"), ins.Mem("x", length_reg="lx"),
                dtype=h, is_async=True),
        ins.mov(ins.Mem("xs", length_reg="lx"), ins.FabIn(color, 1, length_reg="lx")),
        ins.label("cx.done"),
    ]


def _local_product(M: int, num: Numerics = FP32, sync: bool = False) -> list:
    """y[:m] = sum_k A[:, k] * x[k] over the block's nq columns (registers m, J = nq // 2,
    odd = nq % 2; ka, oa start at 0). A column k is at element k * M of symbol A. 16-bit:
    the scalars come from xs; fmachs into acc, or fmach into y then widened into acc.
    sync: the loop's first fma synchronous too (an fma on memory alone is not async where
    `FabricConfig.async_memory_ops` is False)."""
    h = num.dtype
    y = ins.Mem("acc" if num.wide_acc else "y", length_reg="m")
    xs = "xs" if num.half else "x"

    def column(reg):
        return ins.Mem("A", length_reg="m", offset_reg=reg)

    def fma(scalar, col, **kw):  # y += A[:, col] * scalar in the kernel's format
        make = ins.fmachs if num.wide_acc else ins.fma
        return make(y, y, column(col), scalar, dtype=h, **kw)

    widen = []
    if num.half and not num.wide_acc:
        widen = [ins.to_f32(ins.Mem("acc", length_reg="m"), y, h)]
    return [
        ins.mov(y, 0.0, dtype=h if num.half and not num.wide_acc else "f32"),
        ins.load("xa", ins.Mem(xs, offset_reg="ka")),
        ins.branch_if_zero("J", "lp.tail"),
        ins.label("lp.loop"),
        fma("xa", "oa", is_async=not sync),  # column ka, in flight ...
        ins.load("xb", ins.Mem(xs, 1, offset_reg="ka")),  # ... while the loop prepares
        ins.iadd("ob", "oa", M),
        ins.iadd("oa", "oa", 2 * M),
        ins.iadd("ka", "ka", 2),
        ins.load("xa", ins.Mem(xs, offset_reg="ka")),
        ins.isub("J", "J", 1),
        fma("xb", "ob"),  # column ka + 1: starts when the async one ends
        ins.branch_if_nonzero("J", "lp.loop"),
        ins.label("lp.tail"),
        ins.branch_if_zero("odd", "lp.done"),
        fma("xa", "oa"),
        ins.label("lp.done"),
        *widen,
    ]


def gemv_reference(A: np.ndarray, x: np.ndarray, b: np.ndarray, P: int, Q: int,
                   algo: str = "chain", fused: bool = False, dtype: str = "f32",
                   acc_dtype: str = "f32") -> np.ndarray:
    """y = A x + b in float32 in the fabric's order: per block, y = 0 then y += A[:, k] x[k]
    for k in order; the Q partial blocks of a row reduced by the collective's order; + b.

    fused: round each fma once (a + b s computed in float64, where the product of two
    float32 is exact, then rounded) instead of rounding the product first. Which of the
    two the engine does depends on whether XLA contracts the multiply-add on the backend.
    16-bit dtype: A, x, b rounded to it first; their products are exact in fp32, so the two
    agree; acc_dtype = dtype rounds every step of the local product to 16 bits; the result
    is rounded to 16 bits once after + b.
    """
    A, x, b = (np.asarray(v, np.float32) for v in (A, x, b))
    num = Numerics(dtype, acc_dtype)
    if num.half:
        A, x, b = (round_to(v, dtype) for v in (A, x, b))
    m, n = A.shape
    out = []
    for r0, mr in split(m, P):
        partial = []
        for c0, nc in split(n, Q):
            acc = np.zeros(mr, np.float32)
            for k in range(c0, c0 + nc):
                if num.half:
                    acc = acc + A[r0:r0 + mr, k] * x[k]
                    acc = acc if num.wide_acc else round_to(acc, dtype)
                elif fused:
                    acc = (acc.astype(np.float64) + A[r0:r0 + mr, k].astype(np.float64)
                           * np.float64(x[k])).astype(np.float32)
                else:
                    acc = acc + A[r0:r0 + mr, k] * x[k]
            partial.append(acc)
        out.append(co.line_reduce_reference(np.stack(partial), algo) + b[r0:r0 + mr])
    y = np.concatenate(out)
    return round_to(y, dtype) if num.half else y
