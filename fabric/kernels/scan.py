"""Inclusive prefix sums, products, maxima and minima along the rows of an (m, r) tensor
(torch.cumsum, torch.cumprod and the values of torch.cummax / cummin over the last
dimension): z[i, j] = x[i, 0] + x[i, 1] + ... + x[i, j] (op "sum"), x[i, 0] * ... * x[i, j]
("prod"), max(x[i, 0], ..., x[i, j]) ("max") or the min ("min"), the rows split over a
column of PEs (a P x 1 rectangle, the whole row on one PE, as `rowreduce`).

A row's scan is a chain of r - 1 dependent additions (multiplications), so it runs inside
one PE; the rows of a PE's block advance together, one column of the block per op (the ops
are synchronous, so column j is read only after the op before wrote it):

Layout: row block i = `split(m, P)[i]` on PE (i, 0), row major, r words per row, padded to
mb = the largest block (padding rows hold zeros; their results are not read).

Per PE (fp32), z (mb, r) apart from x:
    z[:, 0] = x[:, 0]                       mov, mb elements at stride r
    z[:, j] = z[:, j - 1] op x[:, j]        j = 1 .. r - 1: one add (mul, max, min) of mb
                                            elements each

Cycle model (exact): T = 1 + c_mov(mb) + (r - 1) c_op(mb) + 1, c_op(e) = ceil(e / w_op)
(op add, mul, max or min; task start and end one cycle each; w_op capped by the stride r of
the columns, `FabricConfig.stride_width`). Each row is folded left to right in fp32, as
np.cumsum and np.cumprod do (bit for bit); integer-valued inputs (counts, token masks) give
exact sums and products up to 2^24. The running max and min are exact, NaN propagating
from where it first appears (as torch.cummax's values).

16-bit storage (dtype "f16", "bf16" or "cb16", acc_dtype "f32"): x and z are 16-bit
symbols; x is widened exactly into an fp32 (mb, r) vector w (to_f32), the scan runs in
place on w (w[:, j] = w[:, j] op w[:, j - 1]) and z = to_half(w), one rounding per element:
    T = 1 + 2 c_cvt(mb r) + (r - 1) c_op(mb) + 1

Example:
    >>> k = build_cumsum(FabricConfig.small(4, 4), Rect(0, 0, 2, 1), 5, 8)
    >>> run_kernel(k, {"x": x}).output      # (5, 8)               # doctest: +SKIP
    >>> k = build_scan(FabricConfig.small(4, 4), Rect(0, 0, 2, 1), 5, 8, "prod")
"""

from __future__ import annotations

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.kernels.base import Kernel, check_dtypes, check_sram
from fabric.kernels.rowreduce import load_row_blocks, op_cycles, row_blocks
from fabric.numerics import round_to, words_for
from fabric.program import Program, Rect, Tile

# op: (builtin, instruction)
OPS = {"sum": ("add", ins.add), "prod": ("mul", ins.mul), "max": ("max", ins.max_),
       "min": ("max", ins.min_)}  # fmins: the width of fmaxs
NAMES = {"sum": "cumsum", "prod": "cumprod", "max": "cummax", "min": "cummin"}


def scan_cycles(config: FabricConfig, mb: int, r: int, op: str = "sum",
                dtype: str = "f32") -> int:
    """The module docstring's T for mb rows of r per PE."""
    first = (op_cycles(config, "mov", "f32", mb, stride=r) if dtype == "f32"
             else 2 * op_cycles(config, "cvt", dtype, mb * r))
    return 1 + first + (r - 1) * op_cycles(config, OPS[op][0], "f32", mb, stride=r) + 1


def cumsum_cycles(config: FabricConfig, mb: int, r: int, dtype: str = "f32") -> int:
    """`scan_cycles` of the sum."""
    return scan_cycles(config, mb, r, "sum", dtype)


def build_cumsum(config: FabricConfig, rect: Rect, m: int, r: int, dtype: str = "f32",
                 acc_dtype: str = "f32") -> Kernel:
    """z[i, j] = sum of x[i, :j + 1] for x of shape (m, r): `build_scan` of op "sum"."""
    return build_scan(config, rect, m, r, "sum", dtype, acc_dtype)


def build_scan(config: FabricConfig, rect: Rect, m: int, r: int, op: str = "sum",
               dtype: str = "f32", acc_dtype: str = "f32") -> Kernel:
    """z[i, j] = sum ("sum"), product ("prod"), max ("max") or min ("min") of x[i, :j + 1]
    for x of shape (m, r); rect must be one column wide.

    Args:
        op: "sum" (cumsum), "prod" (cumprod), "max" (cummax) or "min" (cummin).
        dtype: storage format of x and z: "f32", "f16", "bf16" or "cb16".
        acc_dtype: "f32" only (the running sums or products in fp32, each output rounded
            once).

    Returns:
        a Kernel named "cumsum", "cumprod", "cummax" or "cummin": inputs {"x": (m, r)};
        output (m, r) float32; model `scan_cycles`.
    """
    if op not in OPS:
        raise ValueError(f"scan: op must be one of {sorted(OPS)}, got {op!r}")
    name, (_, combine) = NAMES[op], OPS[op]
    check_dtypes(name, dtype, acc_dtype, half_acc=False)
    rows, mb = row_blocks(name, rect, m, r)
    widen = dtype != "f32"
    check_sram(config, name, 2 * words_for(dtype, mb * r) + (mb * r if widen else 0),
               f"{mb} rows of {r} ({m} x {r} on {rect.rows} PEs, {dtype})")
    tile = Tile(name)
    tile.symbol("x", dtype, mb * r)
    tile.symbol("z", dtype, mb * r)

    def column(name, j):  # column j of the (mb, r) block: mb elements at stride r
        return Mem(name, j, mb, stride=r)

    if widen:
        tile.symbol("w", "f32", mb * r)
        code = [ins.to_f32(Mem("w", 0, mb * r), Mem("x", 0, mb * r), dtype)]
        code += [combine(column("w", j), column("w", j), column("w", j - 1))
                 for j in range(1, r)]
        code.append(ins.to_half(Mem("z", 0, mb * r), Mem("w", 0, mb * r), dtype))
    else:
        code = [ins.mov(column("z", 0), column("x", 0))]
        code += [combine(column("z", j), column("z", j - 1), column("x", j))
                 for j in range(1, r)]
    tile.local_task("main", code)
    prog = Program(config)
    prog.place(tile, rect)

    load = load_row_blocks(name, rect, m, r, rows, mb)

    def read(sim):
        z = np.asarray(sim.memcpy_d2h("z", rect), np.float32).reshape(rect.rows, mb, r)
        return np.concatenate([z[i, :rs] for i, (_, rs) in enumerate(rows)])

    return Kernel(name, config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), scan_cycles(config, mb, r, op, dtype),
                  0, {"m": m, "r": r, "op": op, "block_rows": mb, "dtype": dtype,
                      "acc_dtype": acc_dtype})


def scan_reference(x: np.ndarray, op: str = "sum", dtype: str = "f32") -> np.ndarray:
    """The kernel's arithmetic in numpy: x rounded to dtype, a left-to-right fp32 running
    sum (np.cumsum), product (np.cumprod), max or min per row, each rounded once to
    dtype."""
    x = np.asarray(x, np.float32)
    if dtype != "f32":
        x = round_to(x, dtype)
    z = {"sum": np.cumsum, "prod": np.cumprod, "max": np.maximum.accumulate,
         "min": np.minimum.accumulate}[op](x, axis=1, dtype=np.float32)
    return z if dtype == "f32" else round_to(z, dtype)


def cumsum_reference(x: np.ndarray, dtype: str = "f32") -> np.ndarray:
    """`scan_reference` of the sum."""
    return scan_reference(x, "sum", dtype)
