"""Reduce every row of an (m, r) tensor to one value: sum, max or mean (sum times a scale),
with the rows split over a column of PEs (a P x 1 rectangle; the whole row on one PE).

Used for mean/sum over trailing dimensions and for pooling windows (the frontend lays each
window out as one row).

Layout: row block i = `split(m, P)[i]` on PE (i, 0), row major, r words per row, padded to
mb = the largest block (padding rows hold zeros; their results are not read).

Per PE (2D DSDs as in `rownorm`: `row(z)` repeats the mb-word z across each row of r):
    z = x[:, 0]                       mov, mb elements at stride r
    row(z) = op(row(z), x[:, 1:])     one op over mb (r - 1) elements, one element per cycle
                                      (each element reads the previous one's result)
    z *= scale                        mean only

Cycle model (exact): T = 1 + c_mov(mb) + mb (r - 1) + [c_mul(mb)] + 1, c_op(e) = ceil(e / w_op)
(w the op's SIMD width; the strided mov at its width), task start and end one cycle each;
r = 1: no reduce op. Sums add the r terms of a row left to right in fp32 (as numpy's
`np.add.reduce` does for short rows, checked against a sequential reference).

Example:
    >>> k = build_rowreduce(FabricConfig.small(4, 4), Rect(0, 0, 3, 1), 10, 4, "max")
    >>> run_kernel(k, {"x": x}).output      # (10,)               # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.kernels.activations import check_sram
from fabric.kernels.base import Kernel, split
from fabric.program import Program, Rect, Tile

OPS = {"sum": ins.add, "mean": ins.add, "max": ins.max_}
SIMD = {"sum": "add", "mean": "add", "max": "max"}


def rowreduce_cycles(config: FabricConfig, mb: int, r: int, op: str) -> int:
    c = 1 + math.ceil(mb / config.simd_width("mov", "f32")) + mb * (r - 1) + 1
    if op == "mean":
        c += math.ceil(mb / config.simd_width("mul", "f32"))
    return c


def build_rowreduce(config: FabricConfig, rect: Rect, m: int, r: int, op: str = "sum",
                    scale: float = 1.0, dtype: str = "f32") -> Kernel:
    """z[i] = op over x[i, :] for x of shape (m, r); "mean" multiplies the sum by `scale`
    (1/r for a mean). Inputs {"x": (m, r)}; output (m,). rect must be one column wide."""
    if op not in OPS:
        raise ValueError(f"rowreduce: op must be one of {sorted(OPS)}, got {op!r}")
    if dtype != "f32":
        raise ValueError(f"rowreduce: dtype {dtype!r} is not supported (f32 only)")
    if rect.cols != 1:
        raise ValueError(f"rowreduce: the rectangle must be one PE wide, got {rect}")
    if m < rect.rows or r < 1:
        raise ValueError(f"rowreduce: {m} rows of {r} on {rect.rows} PEs leaves PEs idle "
                         "or rows empty")
    rows = split(m, rect.rows)
    mb = rows[0][1]
    check_sram(config, "rowreduce", mb * r + mb, f"{mb} rows of {r} ({m} x {r} on "
               f"{rect.rows} PEs)")
    tile = Tile(f"row{op}")
    tile.symbol("x", "f32", mb * r)
    tile.symbol("z", "f32", mb)
    code = [ins.mov(Mem("z", 0, mb), Mem("x", 0, mb, stride=r))]
    if r > 1:
        acc = Mem("z", 0, mb * (r - 1), stride=0, row_length=r - 1, row_stride=1)
        code.append(OPS[op](acc, acc, Mem("x", 1, mb * (r - 1), stride=1, row_length=r - 1,
                                          row_stride=r)))
    if op == "mean":
        code.append(ins.mul(Mem("z", 0, mb), Mem("z", 0, mb), float(np.float32(scale))))
    tile.local_task("main", code)
    prog = Program(config)
    prog.place(tile, rect)

    def load(sim, inputs):
        x = np.asarray(inputs["x"], np.float32)
        if x.shape != (m, r):
            raise ValueError(f"rowreduce: input x has shape {x.shape}, expected {(m, r)}")
        words = np.zeros((rect.rows, 1, mb * r), np.float32)
        for i, (r0, rs) in enumerate(rows):
            words[i, 0, :rs * r] = x[r0:r0 + rs].reshape(-1)
        sim.memcpy_h2d("x", words, rect)

    def read(sim):
        z = sim.memcpy_d2h("z", rect)
        return np.concatenate([z[i, 0, :rs] for i, (_, rs) in enumerate(rows)])

    return Kernel("rowreduce", config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect),
                  rowreduce_cycles(config, mb, r, op), 0,
                  {"m": m, "r": r, "op": op, "scale": scale, "block_rows": mb})


def rowreduce_reference(x: np.ndarray, op: str = "sum", scale: float = 1.0) -> np.ndarray:
    """The kernel's arithmetic in numpy: a left-to-right fp32 fold per row."""
    x = np.asarray(x, np.float32)
    fold = np.maximum if op == "max" else np.add
    z = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        z = fold(z, x[:, j]).astype(np.float32)
    if op == "mean":
        z = (z * np.float32(scale)).astype(np.float32)
    return z
