"""Inclusive prefix sums along the rows of an (m, r) tensor (torch.cumsum over the last
dimension): z[i, j] = x[i, 0] + x[i, 1] + ... + x[i, j], the rows split over a column of
PEs (a P x 1 rectangle, the whole row on one PE, as `rowreduce`).

A row's scan is a chain of r - 1 dependent additions, so it runs inside one PE; the rows of
a PE's block advance together, one column of the block per op (the ops are synchronous, so
column j is read only after the op before wrote it):

Layout: row block i = `split(m, P)[i]` on PE (i, 0), row major, r words per row, padded to
mb = the largest block (padding rows hold zeros; their results are not read).

Per PE (fp32), z (mb, r) apart from x:
    z[:, 0] = x[:, 0]                       mov, mb elements at stride r
    z[:, j] = z[:, j - 1] + x[:, j]         j = 1 .. r - 1: one add of mb elements each

Cycle model (exact): T = 1 + c_mov(mb) + (r - 1) c_add(mb) + 1, c_op(e) = ceil(e / w_op)
(task start and end one cycle each; w_op capped by the stride r of the columns,
`FabricConfig.stride_width`). Each row is folded left to right in fp32, as
np.cumsum does (bit for bit); integer-valued inputs (counts, token masks) give exact sums
up to 2^24.

16-bit storage (dtype "f16", "bf16" or "cb16", acc_dtype "f32"): x and z are 16-bit
symbols; x is widened exactly into an fp32 (mb, r) vector w (to_f32), the scan runs in
place on w (w[:, j] += w[:, j - 1]) and z = to_half(w), one rounding per element:
    T = 1 + 2 c_cvt(mb r) + (r - 1) c_add(mb) + 1

Example:
    >>> k = build_cumsum(FabricConfig.small(4, 4), Rect(0, 0, 2, 1), 5, 8)
    >>> run_kernel(k, {"x": x}).output      # (5, 8)               # doctest: +SKIP
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


def cumsum_cycles(config: FabricConfig, mb: int, r: int, dtype: str = "f32") -> int:
    """The module docstring's T for mb rows of r per PE."""
    first = (op_cycles(config, "mov", "f32", mb, stride=r) if dtype == "f32"
             else 2 * op_cycles(config, "cvt", dtype, mb * r))
    return 1 + first + (r - 1) * op_cycles(config, "add", "f32", mb, stride=r) + 1


def build_cumsum(config: FabricConfig, rect: Rect, m: int, r: int, dtype: str = "f32",
                 acc_dtype: str = "f32") -> Kernel:
    """z[i, j] = sum of x[i, :j + 1] for x of shape (m, r); rect must be one column wide.

    Args:
        dtype: storage format of x and z: "f32", "f16", "bf16" or "cb16".
        acc_dtype: "f32" only (the running sums in fp32, each output rounded once).

    Returns:
        a Kernel: inputs {"x": (m, r)}; output (m, r) float32; model `cumsum_cycles`.
    """
    check_dtypes("cumsum", dtype, acc_dtype, half_acc=False)
    rows, mb = row_blocks("cumsum", rect, m, r)
    widen = dtype != "f32"
    check_sram(config, "cumsum", 2 * words_for(dtype, mb * r) + (mb * r if widen else 0),
               f"{mb} rows of {r} ({m} x {r} on {rect.rows} PEs, {dtype})")
    tile = Tile("cumsum")
    tile.symbol("x", dtype, mb * r)
    tile.symbol("z", dtype, mb * r)

    def column(name, j):  # column j of the (mb, r) block: mb elements at stride r
        return Mem(name, j, mb, stride=r)

    if widen:
        tile.symbol("w", "f32", mb * r)
        code = [ins.to_f32(Mem("w", 0, mb * r), Mem("x", 0, mb * r), dtype)]
        code += [ins.add(column("w", j), column("w", j), column("w", j - 1))
                 for j in range(1, r)]
        code.append(ins.to_half(Mem("z", 0, mb * r), Mem("w", 0, mb * r), dtype))
    else:
        code = [ins.mov(column("z", 0), column("x", 0))]
        code += [ins.add(column("z", j), column("z", j - 1), column("x", j))
                 for j in range(1, r)]
    tile.local_task("main", code)
    prog = Program(config)
    prog.place(tile, rect)

    load = load_row_blocks("cumsum", rect, m, r, rows, mb)

    def read(sim):
        z = np.asarray(sim.memcpy_d2h("z", rect), np.float32).reshape(rect.rows, mb, r)
        return np.concatenate([z[i, :rs] for i, (_, rs) in enumerate(rows)])

    return Kernel("cumsum", config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), cumsum_cycles(config, mb, r, dtype), 0,
                  {"m": m, "r": r, "block_rows": mb, "dtype": dtype, "acc_dtype": acc_dtype})


def cumsum_reference(x: np.ndarray, dtype: str = "f32") -> np.ndarray:
    """The kernel's arithmetic in numpy: x rounded to dtype, a left-to-right fp32 running
    sum per row (np.cumsum), each sum rounded once to dtype."""
    x = np.asarray(x, np.float32)
    if dtype != "f32":
        x = round_to(x, dtype)
    z = np.cumsum(x, axis=1, dtype=np.float32)
    return z if dtype == "f32" else round_to(z, dtype)
