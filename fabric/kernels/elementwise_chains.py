"""Two elementwise ops in one task, over a tensor in 2D blocks on a P x Q rectangle (the
layout of `fabric.kernels.elementwise`: PE (p, q) holds its block row major).

    build_affine   z = x * s + t     (s, t of x's shape, or one value per row or per
                                      column: an eval batch norm's per-channel scale and
                                      shift, a group norm's weight and bias)
    build_clamp    z = min(max(x, lo), hi)   (hardtanh, ReLU6, torch.clamp with both bounds)

Each op rounds once, as the two ops run apart would (`build_elementwise` then
`build_elementwise`, `build_map` then `build_map`): the same words, bit for bit, in fp32
and in 16-bit storage (each op the 16-bit builtin: fp32 result of 16-bit inputs, rounded
once to dtype). Run together, the intermediate never leaves the PE: one tile, one task,
one move in and one out instead of two of each.

Cycle model (exact): the two DSD ops back to back in a task that starts and ends,
    T = ceil(L / w_op1) + ceil(L / w_op2) + 2
maximized over the block classes (L a class's element count, w an op's SIMD width in
dtype: fp32 on WSE-2 mul 1, add 2, max and min 1; an affine's per-row or per-column
vector caps it at the block's row length), plus, for the affine, the element groups that
wait under the bank read-pair rule (`fabric.banks.read_pair_stalls`: none where the
tile's bank-aware layout puts each op's two sources in different bank pairs).

Example:
    >>> k = build_affine(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), 30, 17)
    >>> z = run_kernel(k, {"x": x, "s": s, "t": t}).output            # (30, 17)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.kernels.base import BlockClass, Kernel, simd_key
from fabric.kernels.elementwise import (
    blocks_kernel,
    check_blocks,
    op_cycles,
    rounded,
    write_vector_blocks,
)
from fabric.program import Program, Rect, Tile


def build_affine(config: FabricConfig, rect: Rect, m: int, n: int, vector: str = "full",
                 dtype: str = "f32", acc_dtype: str = "f32",
                 colors: Sequence[int] | None = None) -> Kernel:
    """z = x * s + t for x of shape (m, n) in blocks on `rect`: a mul into z, then an add
    in place, each rounded once (as x * s and then + t run apart).

    vector: the shape of s and t. "full": (m, n), in x's blocks; "col": (m,), one value
    per row (s[i] for every element of row i: a batch norm's channel scale over an NCHW
    tensor seen as (N C H, W)), each PE holding its block's rows; "row": (n,), one per
    column, each PE holding its block's columns. A vector's element groups never span two
    rows of a block (the ops' width capped at the block's row length, as
    `build_broadcast_op`'s).
    dtype: storage of x, s, t and z ("f32", "f16", "bf16", "cb16"; the product rounds to
    dtype before the add, as two 16-bit ops do); acc_dtype "f32" or dtype (the same
    numbers, see `fabric.kernels.elementwise`). Inputs "x", "s", "t".
    Model (exact): T = ceil(L / w_mul) + ceil(L / w_add) + 2 plus read-pair waits, the
    slowest PE.
    """
    check_affine(vector)
    full = vector == "full"
    blocks = check_blocks(config, rect, m, n, dtype, acc_dtype, 4 if full else 2, "affine",
                          vectors=0 if full else 2)
    prog = Program(config)
    busy = np.zeros((rect.rows, rect.cols), np.int64)  # op cycles and read-pair waits per PE
    for i, cls in enumerate(blocks.classes()):
        tile = Tile(f"affine{vector}{i}")
        code = affine_code(tile, cls, tile.symbol("x", dtype, cls.size).dsd(), vector, dtype)
        tile.local_task("main", code)
        prog.place(tile, cls.rect)
        # a vector's groups stay within a row of the block
        cap = cls.size if full else cls.nb
        busy[cls.pes] = sum(-(-cls.size // min(config.simd_width(op, simd_key(dtype)), cap))
                            for op in ("mul", "add")) + read_pair_stalls(config, tile, code)
    kernel = blocks_kernel("affine", config, blocks, prog, ("x", "s", "t") if full else ("x",),
                           "affine", int(busy.max()) + 2, {"vector": vector}, dtype, acc_dtype)
    if not full:
        kernel.load = _with_vectors(kernel.load, blocks, vector)
    return kernel


# ---- the ops on one PE's block (x: its symbol's DSD, or a `FabIn` in the stream form;
# see `fabric.kernels.elementwise`, "the ops on one PE's block") ---------------------------
def check_affine(vector: str) -> None:
    if vector not in ("full", "col", "row"):
        raise ValueError(f"affine: vector must be 'full', 'col' or 'row', got {vector!r}")


def affine_code(tile: Tile, cls: BlockClass, x, vector: str, dtype: str) -> list:
    """z = x * s + t on the block (z, s, t declared here: s and t of the block's size, or
    of its rows / columns for a per-row / per-column vector)."""
    z = tile.symbol("z", dtype, cls.size)
    s, t = (_operand(tile.symbol(name, dtype, cls.vector_length(vector)), cls, vector)
            for name in "st")
    return [ins.mul(z.dsd(), x, s, dtype=dtype), ins.add(z.dsd(), z.dsd(), t, dtype=dtype)]


def clamp_code(tile: Tile, cls: BlockClass, x, lo: float, hi: float, dtype: str) -> list:
    """z = min(max(x, lo), hi) on the block (z declared here)."""
    z = tile.symbol("z", dtype, cls.size)
    return [ins.max_(z.dsd(), x, float(lo), dtype=dtype),
            ins.min_(z.dsd(), z.dsd(), float(hi), dtype=dtype)]


def _operand(symbol, cls, vector: str) -> ins.Mem:
    """The DSD of s or t for a block of cls.mb x cls.nb, row major: the whole symbol, or a
    per-row value (stride 0 within a row, one step per row) or a per-column one (stride 1
    within a row, restarting at 0 on every row)."""
    if vector == "full":
        return symbol.dsd()
    stride, row_stride = (0, 1) if vector == "col" else (1, 0)
    return ins.Mem(symbol.name, 0, cls.size, stride=stride, row_length=cls.nb,
                   row_stride=row_stride)


def _with_vectors(load_x, blocks, vector: str):
    """`load_x` (the host writing x) followed by s and t's blocks on every PE: the rows
    (vector "col", each of m values) or columns ("row", n values) of its block."""
    length = blocks.m if vector == "col" else blocks.n

    def load(sim, values):
        load_x(sim, values)
        for key in ("s", "t"):
            v = np.asarray(values[key], np.float32)
            if v.shape != (length,):
                raise ValueError(f"affine: input {key!r} has shape {v.shape}, expected "
                                 f"{(length,)} (vector {vector!r})")
            write_vector_blocks(sim, key, v, blocks, vector, blocks.rect.pes())

    return load


def build_clamp(config: FabricConfig, rect: Rect, m: int, n: int, lo: float = -1.0,
                hi: float = 1.0, dtype: str = "f32", acc_dtype: str = "f32",
                colors: Sequence[int] | None = None) -> Kernel:
    """z = min(max(x, lo), hi) for x of shape (m, n) in blocks on `rect` (torch.clamp's
    order: a NaN stays NaN, and hi wins where lo > hi).

    dtype: storage of x and z; the bounds need no rounding first (rounding is monotone:
    max(x, round(lo)) = round(max(x, lo)) for x in dtype). Input "x".
    Model (exact): T = ceil(L / w_max) + ceil(L / w_min) + 2, the largest block.
    """
    blocks = check_blocks(config, rect, m, n, dtype, acc_dtype, 2, "clamp")
    prog = Program(config)
    for i, cls in enumerate(blocks.classes()):
        tile = Tile(f"clamp{i}")
        x = tile.symbol("x", dtype, cls.size).dsd()
        tile.local_task("main", clamp_code(tile, cls, x, lo, hi, dtype))
        prog.place(tile, cls.rect)
    size = blocks.mb * blocks.nb
    model = op_cycles(config, "max", size, dtype) + op_cycles(config, "min", size, dtype) + 2
    return blocks_kernel("clamp", config, blocks, prog, ("x",), "clamp", model,
                         {"lo": float(lo), "hi": float(hi)}, dtype, acc_dtype)


# ---- numpy references ---------------------------------------------------------------------------
def affine_reference(x, s, t, vector="full", dtype="f32"):
    """Inputs rounded to dtype; the float32 product rounded to dtype, plus t, rounded. s and
    t of x's shape ("full"), one per row ("col") or one per column ("row")."""
    x, s, t = rounded(x, dtype), rounded(s, dtype), rounded(t, dtype)
    if vector == "col":
        s, t = s[:, None], t[:, None]
    return rounded(np.add(rounded(np.multiply(x, s), dtype), t), dtype)


def clamp_reference(x, lo, hi, dtype="f32"):
    """min(max(x, lo), hi) of x rounded to dtype (NaN kept, as torch.clamp)."""
    x = rounded(x, dtype)
    return rounded(np.minimum(np.maximum(x, np.float32(lo)), np.float32(hi)), dtype)
