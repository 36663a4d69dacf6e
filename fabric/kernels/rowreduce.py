"""Reduce every row of an (m, r) tensor to one value: sum, product, max or mean (sum times a
scale), with the rows split over a column of PEs (a P x 1 rectangle; the whole row on one
PE).

Used for mean/sum/prod over trailing dimensions and for pooling windows (the frontend lays
each window out as one row).

Layout: row block i = `split(m, P)[i]` on PE (i, 0), row major, r words per row, padded to
mb = the largest block (padding rows hold zeros; their results are not read).

Per PE (2D DSDs as in `rownorm`: `row(z)` repeats the mb-word z across each row of r):
    z = x[:, 0]                       mov, mb elements at stride r
    row(z) = op(row(z), x[:, 1:])     one op (add, mul or max) over mb (r - 1) elements, one
                                      element per cycle (each element reads the previous
                                      one's result)
    z *= scale                        mean only

Cycle model (exact): T = 1 + c_mov(mb) + mb (r - 1) + [c_mul(mb)] + 1, c_op(e) = ceil(e / w_op)
(w the op's SIMD width; the strided mov at its width for stride r), task start and end one
cycle each, plus the element groups that wait under the bank read-pair rule (the fold
reads z[i] beside x[i, j]: `fabric.banks.read_pair_stalls` of the tile's bank-aware
layout); r = 1: no reduce op. Sums add the r terms of a row left to right in fp32 (as
numpy's `np.add.reduce` does for short rows, checked against a sequential reference);
products multiply them left to right in fp32 (`np.multiply` step by step).

16-bit storage (dtype h = "f16", "bf16" or "cb16"): x and z are h symbols, holding in
half-word slot i what the fp32 symbols hold in word i. Per acc_dtype:
    sum/mean, acc "f32": zf = to_f32(x[:, 0]); row(zf) += x[:, 1:] with fmachs (fp32 zf, 16-bit
        x times 1: the exact widened term added in fp32); zf *= scale (fp32, mean);
        z = to_half(zf), the one 16-bit rounding: the fp32 fold of the widened inputs, rounded.
        T = 1 + c_cvt(mb) + mb (r - 1) + [c_mul(mb)] + c_cvt(mb) + 1
    prod, acc "f32": a product has no fmachs form, so x is widened whole into an fp32 scratch
        xf (mb r words): xf = to_f32(x); zf = xf[:, 0] (fp32 mov at stride r);
        row(zf) *= xf[:, 1:] (fp32 mul); z = to_half(zf), the one 16-bit rounding.
        T = 1 + c_cvt(mb r) + c_mov(mb) + mb (r - 1) + c_cvt(mb) + 1
    sum/mean/prod, acc h: mov, add or mul and mul in h (each rounds to h; scale is rounded
        to h)
    max, either acc: mov and max in h: max picks one of its inputs, so it is exact and equals
        the fp32 max of the widened inputs; acc "f32" issues the same 16-bit ops.
    h ops: T = 1 + c_mov16(mb) + mb (r - 1) + [c_mul16(mb)] + 1
(c_cvt, c_mov16, c_mul16 at the ("cvt" | "mov" | "mul", "f16") widths.)

Example:
    >>> k = build_rowreduce(FabricConfig.small(4, 4), Rect(0, 0, 3, 1), 10, 4, "max")
    >>> run_kernel(k, {"x": x}).output      # (10,)               # doctest: +SKIP
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

OPS = {"sum": ins.add, "mean": ins.add, "prod": ins.mul, "max": ins.max_}


def op_cycles(config: FabricConfig, builtin: str, dtype: str, e: int, stride: int = 1) -> int:
    """ceil(e / w): cycles of one synchronous op of e elements at the builtin's width, its
    memory operands at `stride` (which may cap the width: `FabricConfig.stride_width`)."""
    return math.ceil(e / config.simd_width(builtin, simd_key(dtype), strides=(stride,)))



def row_blocks(name: str, rect: Rect, m: int, r: int) -> tuple[list[tuple[int, int]], int]:
    """The row layout of the row kernels: (split(m, P) row blocks, mb the largest) for m rows
    of r on a P x 1 rect, each PE holding its block row major (padded to mb rows)."""
    if rect.cols != 1:
        raise ValueError(f"{name}: the rectangle must be one PE wide, got {rect}")
    if m < rect.rows or r < 1:
        raise ValueError(f"{name}: {m} rows of {r} on {rect.rows} PEs leaves PEs idle "
                         "or rows empty")
    rows = split(m, rect.rows)
    return rows, rows[0][1]


def load_row_blocks(name: str, rect: Rect, m: int, r: int, rows, mb: int):
    """load(sim, inputs) writing input "x" (m, r) into symbol "x" in `row_blocks`' layout."""

    def load(sim, inputs):
        x = np.asarray(inputs["x"], np.float32)
        if x.shape != (m, r):
            raise ValueError(f"{name}: input x has shape {x.shape}, expected {(m, r)}")
        words = np.zeros((rect.rows, 1, mb * r), np.float32)
        for i, (r0, rs) in enumerate(rows):
            words[i, 0, :rs * r] = x[r0:r0 + rs].reshape(-1)
        sim.memcpy_h2d("x", words, rect)
    return load


def rowreduce_cycles(config: FabricConfig, mb: int, r: int, op: str, dtype: str = "f32",
                     acc_dtype: str = "f32") -> int:
    """The module docstring's T for mb rows of r per PE."""
    fp32_acc = acc_dtype == "f32" and op != "max"  # max runs in dtype (exact)
    convert = dtype != "f32" and fp32_acc
    ops_dtype = "f32" if fp32_acc else dtype
    if convert and op == "prod":  # the whole block widened, then column 0 moved in fp32
        c = 1 + op_cycles(config, "cvt", dtype, mb * r) + op_cycles(config, "mov", "f32", mb,
                                                                    stride=r)
    else:
        first = "cvt" if convert else "mov"
        c = 1 + op_cycles(config, first, dtype if convert else ops_dtype, mb, stride=r)
    c += mb * (r - 1) + 1
    if op == "mean":
        c += op_cycles(config, "mul", ops_dtype, mb)
    if convert:
        c += op_cycles(config, "cvt", dtype, mb)
    tile = rowreduce_tile(mb, r, op, 1.0, dtype, acc_dtype)
    return c + read_pair_stalls(config, tile, tile.tasks["main"].code)


def rowreduce_tile(mb: int, r: int, op: str, scale: float = 1.0, dtype: str = "f32",
                   acc_dtype: str = "f32") -> Tile:
    """The tile of every PE: mb rows of r in symbol x, the results in z (module docstring)."""
    widen = dtype != "f32" and acc_dtype == "f32" and op != "max"
    tile = Tile(f"row{op}")
    tile.symbol("x", dtype, mb * r)
    tile.symbol("z", dtype, mb)
    acc_sym, ops_dtype = ("zf", "f32") if widen else ("z", dtype)
    # a product has no fmachs form: its 16-bit x is widened whole into fp32 xf first
    x_sym = "xf" if widen and op == "prod" else "x"
    if widen:
        tile.symbol("zf", "f32", mb)
    if x_sym == "xf":
        tile.symbol("xf", "f32", mb * r)
        code = [ins.to_f32(Mem("xf", 0, mb * r), Mem("x", 0, mb * r), dtype),
                ins.mov(Mem("zf", 0, mb), Mem("xf", 0, mb, stride=r))]
    elif widen:
        code = [ins.to_f32(Mem("zf", 0, mb), Mem("x", 0, mb, stride=r), dtype)]
    else:
        code = [ins.mov(Mem("z", 0, mb), Mem("x", 0, mb, stride=r), dtype=dtype)]
    if r > 1:
        acc = Mem(acc_sym, 0, mb * (r - 1), stride=0, row_length=r - 1, row_stride=1)
        rest = Mem(x_sym, 1, mb * (r - 1), stride=1, row_length=r - 1, row_stride=r)
        if x_sym == "xf":
            code.append(ins.mul(acc, acc, rest))  # fp32
        elif widen:
            code.append(ins.fmachs(acc, acc, rest, 1.0, dtype=dtype))  # exact x * 1
        else:
            code.append(OPS[op](acc, acc, rest, dtype=dtype))
    if op == "mean":
        code.append(ins.mul(Mem(acc_sym, 0, mb), Mem(acc_sym, 0, mb), float(np.float32(scale)),
                            dtype=ops_dtype))
    if widen:
        code.append(ins.to_half(Mem("z", 0, mb), Mem("zf", 0, mb), dtype))
    tile.local_task("main", code)
    return tile


def build_rowreduce(config: FabricConfig, rect: Rect, m: int, r: int, op: str = "sum",
                    scale: float = 1.0, dtype: str = "f32", acc_dtype: str = "f32") -> Kernel:
    """z[i] = op ("sum" | "mean" | "prod" | "max") over x[i, :] for x of shape (m, r);
    "mean" multiplies the sum by `scale` (1/r for a mean). rect must be one column wide.

    Args:
        dtype: storage format of x and z: "f32", "f16", "bf16" or "cb16".
        acc_dtype: "f32" (widen, fold in fp32, round once) or dtype (fold in 16 bits); for
            max both issue the same exact 16-bit ops (module docstring). A 16-bit prod with
            an fp32 fold holds an fp32 copy of its block (mb r words more).

    Returns:
        a Kernel: inputs {"x": (m, r)}; output (m,) float32; model `rowreduce_cycles`.
    """
    if op not in OPS:
        raise ValueError(f"rowreduce: op must be one of {sorted(OPS)}, got {op!r}")
    check_dtypes("rowreduce", dtype, acc_dtype)
    rows, mb = row_blocks("rowreduce", rect, m, r)
    # fp32 accumulator zf apart from z: 16-bit storage with an fp32 sum, mean or product;
    # a product's whole block widened into fp32 xf besides
    widen = dtype != "f32" and acc_dtype == "f32" and op != "max"
    scratch = (mb + (mb * r if op == "prod" else 0)) if widen else 0
    check_sram(config, "rowreduce", words_for(dtype, mb * r) + words_for(dtype, mb)
               + scratch, f"{mb} rows of {r} ({m} x {r} on {rect.rows} PEs, "
               f"{dtype})")
    tile = rowreduce_tile(mb, r, op, scale, dtype, acc_dtype)
    prog = Program(config)
    prog.place(tile, rect)

    load = load_row_blocks("rowreduce", rect, m, r, rows, mb)

    def read(sim):
        z = np.asarray(sim.memcpy_d2h("z", rect), np.float32)
        return np.concatenate([z[i, 0, :rs] for i, (_, rs) in enumerate(rows)])

    return Kernel("rowreduce", config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect),
                  rowreduce_cycles(config, mb, r, op, dtype, acc_dtype), 0,
                  {"m": m, "r": r, "op": op, "scale": scale, "block_rows": mb,
                   "dtype": dtype, "acc_dtype": acc_dtype})


def rowreduce_reference(x: np.ndarray, op: str = "sum", scale: float = 1.0,
                        dtype: str = "f32", acc_dtype: str = "f32") -> np.ndarray:
    """The kernel's arithmetic in numpy: x rounded to dtype, a left-to-right fold per row in
    fp32 (acc "f32", the result rounded once to dtype) or rounding every step to dtype
    (acc = dtype; scale rounded to dtype too)."""
    def rnd(v):
        v = np.asarray(v, np.float32)
        return v if dtype == "f32" else round_to(v, dtype)

    step = rnd if acc_dtype != "f32" else (lambda v: np.asarray(v, np.float32))
    x = rnd(x)
    fold = {"max": np.maximum, "prod": np.multiply}.get(op, np.add)
    z = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        z = step(fold(z, x[:, j]))
    if op == "mean":
        z = step(z * step(np.float32(scale)))
    return rnd(z)
