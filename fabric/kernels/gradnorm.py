"""Sum of squares of a tensor in the 2D block layout, reduced to one fp32 value: the building
block of the global gradient norm (sqrt of the sum over all gradients) and of the loss
scaler's overflow check (an inf or NaN anywhere makes the sum non-finite).

Layout: the m x n tensor x in the blocks of `base.Blocks`, one tile per class of block shape
(`Blocks.classes`, as `elementwise`); it is read, never written (a scratch block holds the
squares).

Per PE (L = mb nb elements of its block):
    sq = x * x                              mul, L elements
    acc = sq[0]; acc = acc + sq[k], k = 1..L-1   (stride-0 accumulator: one element a cycle)
then a rectangle reduction (`collectives.reduce`, along "rect": every row into its west PE,
then the west column into the north-west PE) of the one-word acc. The north-west PE of the
rectangle holds the result; `read` returns it as an np.float32.

Non-finite inputs: inf * inf = inf, NaN stays NaN, and a sum of non-negative terms with an
inf is inf (no inf - inf can arise), so one inf or NaN makes the result inf or NaN. A finite
|x| above sqrt(FLT_MAX) = 1.8e19 squares to inf as well (the fp32 norm overflows). Squares
below FLT_MIN (|x| < 1.1e-19) are flushed to zero by the fabric.

Numerics: fp32 throughout, in a fixed order that `sumsq_reference` reproduces bit for bit.
Against the exact sum S of the squares: every term is rounded once (square) and passes at
most d = L_max - 1 + D_row + D_col additions (D = the reduction depth of a line: L - 1 for a
chain, ceil(log2 L) for a tree), so |result - S| <= ((d + 1) u / (1 - (d + 1) u)) S with
u = 2^-24 (`sumsq_bound`).

Cycle model (exact): every PE enters the reduction at
    E = 1 + c_mul(L) + c_mov(1) + (L - 1) + W    (task start, square, first term, the rest)
(L = 1: no accumulate op; W: the element groups that wait under the bank read-pair rule,
`fabric.banks.read_pair_stalls`: x * x reads one word twice, every group), and T = max
over PEs of the reduction's exit time (`Fragment.exit_times(E)`) + 1 (the implicit ret);
the chain and tree formulas are in `fabric.kernels.collectives`.

Example:
    >>> k = build_sumsq(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), 30, 20)  # doctest: +SKIP
    >>> run_kernel(k, {"x": x}).output           # np.float32, sum of x**2   # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.isa import SIMD_NAME, Op
from fabric.kernels import collectives as co
from fabric.kernels.base import Blocks, Kernel, check_sram, pick_colors, split
from fabric.program import Program, Rect, Tile

U = 2.0**-24


def _c(config: FabricConfig, op: Op, length: int) -> int:
    return math.ceil(length / config.simd_width(*SIMD_NAME[op]))


def _local_code(L: int) -> list:
    code = [ins.mul(Mem("sq"), Mem("x"), Mem("x")), ins.mov(Mem("acc"), Mem("sq", 0, 1))]
    if L > 1:
        acc = Mem("acc", 0, L - 1, stride=0)  # one word that every element adds into
        code.append(ins.add(acc, acc, Mem("sq", 1, L - 1)))
    return code


def _local_cycles(config: FabricConfig, L: int) -> int:
    return _c(config, Op.MUL, L) + _c(config, Op.MOV, 1) + (L - 1)


def build_sumsq(config: FabricConfig, rect: Rect, m: int, n: int, algo: str = "tree",
                colors: Sequence[int] | None = None) -> Kernel:
    """sum(x**2) over x of shape (m, n) in blocks on `rect`, as one fp32 value.

    Args:
        algo: the reduction across PEs, "tree" (default: one word is latency bound, where
            the tree wins) or "chain".
        colors: the colors of the reduction (`collectives.colors_needed("reduce", rect,
            "rect", algo)` of them; default the lowest).

    Returns:
        a Kernel: inputs {"x": (m, n)}; output np.float32 (on the north-west PE of `rect`);
        model: the module docstring's T (exact).
    """
    if algo not in co.ALGOS:
        raise ValueError(f"sumsq: algo must be one of {co.ALGOS}, got {algo!r}")
    blocks = Blocks.of(rect, m, n)
    check_sram(config, "sumsq", 2 * blocks.mb * blocks.nb + 1, f"2 blocks of {blocks.mb} x "
               f"{blocks.nb} ({m} x {n} on {rect.rows} x {rect.cols} PEs)")
    prog = Program(config)
    frag = None
    if rect.rows * rect.cols > 1:
        need = co.colors_needed("reduce", rect, "rect", algo)
        frag = co.reduce(prog, rect, "acc", 1, pick_colors(config, need, colors),
                         along="rect", algo=algo, name="ss")
    entry = np.zeros((rect.rows, rect.cols), np.int64)
    for i, cls in enumerate(blocks.classes()):
        L = cls.size
        tile = Tile(f"sumsq{i}")
        tile.symbol("x", "f32", L)
        tile.symbol("sq", "f32", L)
        tile.symbol("acc", "f32", 1)
        local = _local_code(L)
        code = list(local)
        params = {}
        if frag is not None:
            code += list(frag.code_for(cls.rect))
            params = frag.params_for(cls.rect)
        tile.local_task("main", code)
        prog.place(tile, cls.rect, params=params)
        # x * x reads one word twice, and acc beside sq: groups waiting on a bank pair
        entry[cls.pes] = 1 + _local_cycles(config, L) + read_pair_stalls(config, tile, local)
    done = entry if frag is None else frag.exit_times(entry)
    model = int(done.max()) + 1

    def load(sim, values):
        x = np.asarray(values["x"], np.float32)
        if x.shape != (m, n):
            raise ValueError(f"sumsq: input 'x' has shape {x.shape}, expected {(m, n)}")
        words = blocks.scatter(x)
        for cls in blocks.classes():
            sim.memcpy_h2d("x", words[cls.pes][..., :cls.size], cls.rect)

    def read(sim):
        return np.float32(sim.memcpy_d2h("acc", Rect(rect.row, rect.col, 1, 1))[0, 0, 0])

    return Kernel("sumsq", config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), model, 0,
                  {"m": m, "n": n, "algo": algo, "dtype": "f32",
                   "block": (blocks.mb, blocks.nb),
                   "colors": tuple(frag.colors) if frag is not None else ()})


def sumsq_reference(x: np.ndarray, rect: Rect, algo: str = "tree") -> np.float32:
    """The kernel's arithmetic in float32 and in its order: squares, each block summed left
    to right, then the rectangle reduction of `collectives.reduce_reference`."""
    x = np.asarray(x, np.float32)
    rows, cols = split(x.shape[0], rect.rows), split(x.shape[1], rect.cols)
    partial = np.empty((rect.rows, rect.cols, 1), np.float32)
    for p, (r0, mr) in enumerate(rows):
        for q, (c0, nc) in enumerate(cols):
            sq = (x[r0:r0 + mr, c0:c0 + nc] * x[r0:r0 + mr, c0:c0 + nc]).reshape(-1)
            acc = sq[0]
            for term in sq[1:]:
                acc = np.float32(acc + term)
            partial[p, q, 0] = acc
    if rect.rows * rect.cols == 1:
        return np.float32(partial[0, 0, 0])
    return np.float32(co.reduce_reference(partial, along="rect", algo=algo)[0])


def sumsq_bound(m: int, n: int, rect: Rect, algo: str = "tree") -> float:
    """Relative error bound of the kernel's result against the exact sum of squares (module
    docstring): (d + 1) u / (1 - (d + 1) u)."""
    depth = {"tree": lambda k: (k - 1).bit_length(), "chain": lambda k: k - 1}[algo]
    mb, nb = -(-m // rect.rows), -(-n // rect.cols)
    k = mb * nb - 1 + depth(rect.rows) + depth(rect.cols) + 1
    return k * U / (1 - k * U)
