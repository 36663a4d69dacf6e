"""Weighted row sums: z[i] = b[i] + sum_j x[i, j] * w[i, j] for x, w of shape (m, r) (b
optional), with the rows split over every PE of a P x Q rectangle (the whole row on one PE).

Used for depthwise and grouped convolution (`frontend.lowering.conv`): a row is the window
of one output element over its group's input channels, w the weights of its output channel.

Layout: row block k = `split(m, P Q)[k]` on PE (k // Q, k % Q) (row-major over the
rectangle), row major, r words per row for x and w, one word per row for b and z; every PE
pads its block to mb = the largest block (padding rows hold zeros; their results are not
read).

Per PE (2D DSDs as in `rowreduce`; `col(p, j)` is column j of the mb x r block, stride r):
    p = x * w                                 mul, mb r elements
    z = p[:, 0]          (b: z = b + p[:, 0])  mov (add), mb elements at stride r
    z = z + col(p, j), j = 1 .. r - 1         one add over (r - 1) rows of mb elements: the
                                              mb sums advance together, j after j, at the
                                              add's SIMD width capped at the row length mb
                                              (a group may span one row end: its elements
                                              are still distinct sums)

Cycle model (exact): T = 1 + c_mul(mb r) + c_first(mb) + c_chain + 1 + W, c_op(e) =
ceil(e / w_op) (w the op's SIMD width), c_chain = ceil(mb (r - 1) / min(w_add, mb)), task
start and end one cycle each, W the element groups that wait under the bank read-pair rule
(`fabric.banks.read_pair_stalls` of the tile's code with its bank-aware layout). The
chain is what `rowreduce` runs one element per cycle (there a row's sum is one word that
every element reads): here it is mb independent sums, so it takes the SIMD width; a PE of
a P x Q rectangle instead of a column. Every row is summed left to right in fp32 (b first,
then the products in order j = 0 .. r - 1), each product rounded once to fp32, as
`rowdot_reference` computes.

16-bit storage (dtype h = "f16", "bf16" or "cb16"): x, w, b and z are h symbols. Per
acc_dtype:
    "f32": xf = to_f32(x), wf = to_f32(w) (exact), p = xf * wf in fp32 (a product of two
        16-bit values is exact in fp32), the sums as above in fp32 (b widened first, into
        zf), z = to_half(zf): one 16-bit rounding of the fp32 sum, what PyTorch's CPU
        kernels compute in fp16 / bf16 ("opmath").
        T = 1 + 2 c_cvt(mb r) + c_mul(mb r) + [c_cvt(mb)] + c_first(mb) + c_chain
            + c_cvt(mb) + 1      ([ ]: with b; c_first the fp32 mov or add)
    h: every op in h (each rounds to h): T as in fp32 at the ("op", "f16") widths.

Example:
    >>> k = build_rowdot(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 10, 9)  # doctest: +SKIP
    >>> run_kernel(k, {"x": x, "w": w}).output      # (10,)                  # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.kernels.base import Kernel, check_dtypes, check_sram, simd_key, split
from fabric.numerics import round_to, words_for
from fabric.program import Program, Rect, Tile


def _c(config: FabricConfig, builtin: str, dtype: str, e: int, stride: int = 1) -> int:
    return math.ceil(e / config.simd_width(builtin, simd_key(dtype), strides=(stride,)))


def rowdot_cycles(config: FabricConfig, mb: int, r: int, bias: bool = False,
                  dtype: str = "f32", acc_dtype: str = "f32") -> int:
    """The module docstring's T for mb rows of r per PE."""
    widen = dtype != "f32" and acc_dtype == "f32"
    ops = "f32" if widen else dtype
    c = 1 + _c(config, "mul", ops, mb * r)
    if widen:
        c += 2 * _c(config, "cvt", dtype, mb * r) + _c(config, "cvt", dtype, mb)  # to_half z
        c += _c(config, "cvt", dtype, mb) if bias else 0
    c += _c(config, "add" if bias else "mov", ops, mb, stride=r)  # p[:, 0], stride r
    if r > 1:  # groups of up to min(width, mb) elements, across row ends; p at stride r
        width = min(config.simd_width("add", simd_key(ops), strides=(r,)), mb)
        c += math.ceil(mb * (r - 1) / width)
    tile = rowdot_tile(mb, r, bias, dtype, acc_dtype)
    return c + 1 + read_pair_stalls(config, tile, tile.tasks["main"].code)


def rowdot_tile(mb: int, r: int, bias: bool = False, dtype: str = "f32",
                acc_dtype: str = "f32") -> Tile:
    """The tile of every PE: mb rows of r in x and w, the sums in z (module docstring)."""
    widen = dtype != "f32" and acc_dtype == "f32"
    ops = "f32" if widen else dtype
    tile = Tile("rowdot")
    tile.symbol("x", dtype, mb * r)
    tile.symbol("w", dtype, mb * r)
    if bias:
        tile.symbol("b", dtype, mb)
    tile.symbol("z", dtype, mb)
    tile.symbol("p", ops, mb * r)
    code = []
    if widen:  # exact widening; the product of two 16-bit values is exact in fp32
        tile.symbol("q", "f32", mb * r)
        tile.symbol("zf", "f32", mb)
        code += [ins.to_f32(Mem("p", 0, mb * r), Mem("x", 0, mb * r), dtype),
                 ins.to_f32(Mem("q", 0, mb * r), Mem("w", 0, mb * r), dtype),
                 ins.mul(Mem("p", 0, mb * r), Mem("p", 0, mb * r), Mem("q", 0, mb * r))]
    else:
        code.append(ins.mul(Mem("p", 0, mb * r), Mem("x", 0, mb * r), Mem("w", 0, mb * r),
                            dtype=dtype))
    acc = "zf" if widen else "z"
    first = Mem("p", 0, mb, stride=r)
    if bias:
        if widen:
            code.append(ins.to_f32(Mem("zf", 0, mb), Mem("b", 0, mb), dtype))
            code.append(ins.add(Mem("zf", 0, mb), Mem("zf", 0, mb), first))
        else:
            code.append(ins.add(Mem("z", 0, mb), Mem("b", 0, mb), first, dtype=dtype))
    else:
        code.append(ins.mov(Mem(acc, 0, mb), first, dtype=ops))
    if r > 1:  # rows j = 1 .. r - 1 of mb elements: z[i] += p[i, j]
        z = Mem(acc, 0, mb * (r - 1), stride=1, row_length=mb, row_stride=0)
        rest = Mem("p", 1, mb * (r - 1), stride=r, row_length=mb, row_stride=1)
        code.append(ins.add(z, z, rest, dtype=ops))
    if widen:
        code.append(ins.to_half(Mem("z", 0, mb), Mem("zf", 0, mb), dtype))
    tile.local_task("main", code)
    return tile


def build_rowdot(config: FabricConfig, rect: Rect, m: int, r: int, bias: bool = False,
                 dtype: str = "f32", acc_dtype: str = "f32") -> Kernel:
    """z[i] = (b[i] +) sum_j x[i, j] * w[i, j] for x, w of shape (m, r) and, with `bias`,
    b of shape (m,); the rows split over every PE of `rect`.

    Args:
        dtype: storage format of x, w, b and z: "f32", "f16", "bf16" or "cb16".
        acc_dtype: "f32" (widen, multiply and sum in fp32, round once) or dtype (every op
            rounds to dtype).

    Returns:
        a Kernel: inputs {"x": (m, r), "w": (m, r)} (and "b": (m,) with `bias`); output (m,)
        float32; model `rowdot_cycles`; fmas m r.
    """
    check_dtypes("rowdot", dtype, acc_dtype)
    pes = rect.rows * rect.cols
    if m < pes or r < 1:
        raise ValueError(f"rowdot: {m} rows of {r} on {pes} PEs leaves PEs idle or rows empty")
    blocks = split(m, pes)
    mb = blocks[0][1]
    widen = dtype != "f32" and acc_dtype == "f32"
    ops = "f32" if widen else dtype
    check_sram(config, "rowdot",
               2 * words_for(dtype, mb * r) + (1 + bias) * words_for(dtype, mb)
               + words_for(ops, mb * r) * (2 if widen else 1) + (mb if widen else 0),
               f"{mb} rows of {r} ({m} x {r} on {pes} PEs, {dtype})")
    tile = rowdot_tile(mb, r, bias, dtype, acc_dtype)
    prog = Program(config)
    prog.place(tile, rect)

    def put(sim, name, value, shape, width):
        v = np.asarray(value, np.float32)
        if v.shape != shape:
            raise ValueError(f"rowdot: input {name} has shape {v.shape}, expected {shape}")
        words = np.zeros((rect.rows, rect.cols, mb * width), np.float32)
        for k, (r0, rs) in enumerate(blocks):
            words[k // rect.cols, k % rect.cols, :rs * width] = v[r0:r0 + rs].reshape(-1)
        sim.memcpy_h2d(name, words, rect)

    def load(sim, inputs):
        put(sim, "x", inputs["x"], (m, r), r)
        put(sim, "w", inputs["w"], (m, r), r)
        if bias:
            put(sim, "b", inputs["b"], (m,), 1)

    def read(sim):
        z = np.asarray(sim.memcpy_d2h("z", rect), np.float32)
        return np.concatenate([z[k // rect.cols, k % rect.cols, :rs]
                               for k, (_, rs) in enumerate(blocks)])

    return Kernel("rowdot", config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect),
                  rowdot_cycles(config, mb, r, bias, dtype, acc_dtype), m * r,
                  {"m": m, "r": r, "bias": bias, "block_rows": mb, "dtype": dtype,
                   "acc_dtype": acc_dtype})


def rowdot_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                     dtype: str = "f32", acc_dtype: str = "f32") -> np.ndarray:
    """The kernel's arithmetic in numpy: x, w (and b) rounded to dtype; per row b (or 0's
    absence: the first product) then each product x[i, j] * w[i, j] added left to right,
    in fp32 rounding the result once to dtype (acc "f32"), or rounding every product and
    sum to dtype (acc = dtype)."""
    def rnd(v):
        v = np.asarray(v, np.float32)
        return v if dtype == "f32" else round_to(v, dtype)

    step = rnd if acc_dtype != "f32" else (lambda v: np.asarray(v, np.float32))
    x, w = rnd(x), rnd(w)
    p = step(x * w)
    z = p[:, 0].copy() if b is None else step(rnd(b) + p[:, 0])
    for j in range(1, x.shape[1]):
        z = step(z + p[:, j])
    return rnd(z)
