"""Elementwise maps over a tensor distributed in 2D blocks on a P x Q rectangle.

Layout: the m x n tensor is split in blocks (`split` sizes: the first m % P block rows and
n % Q block columns are one larger); PE (p, q) holds its block row major in a symbol of
m_p * n_q words. The PEs with blocks of one shape form at most four sub-rectangles
(`block_classes`); each gets its own tile, so every DSD has a static length.

Kernels (output z, same layout):
    build_elementwise(op="add"|"sub"|"mul")     z = x op y
    build_map(op="relu"|"add"|"mul"|"max"|"min", scalar)   z = max(x, 0), x + s, x * s, ...
    build_broadcast_op(op, vector="row"|"col", mode="load"|"multicast")
        z = x op v[None, :] (v of n values: v[cols_q] on column q) or x op v[:, None]
        (v of m values: v[rows_p] on row p). mode "load": the host writes the block of v
        on every PE of the column (row); "multicast": only the top PE of every column (west
        PE of every row) gets it and multicasts it (`collectives.broadcast`, one color).

Cycle model (exact): one DSD op of L = m_p n_q elements at the op's SIMD width w
(fp32 on WSE-2: add/sub/max/min 2, mul 1) in a task that starts and ends:
    T = ceil(L_max / w) + 2
plus, with a multicast vector, its broadcast first (`Fragment.exit_times`):
    T = max over PEs [ (h + 1) H + len(v block) + ceil(L / w) ] + 5
(h: the PE's hops from its source, H the hop latency; 5 = task start, branch, the
consuming read, jump, end). Results are bit-exact against
numpy's float32 ops (one rounding per element, as numpy).

Example:
    >>> k = build_elementwise(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), 30, 17, "add")
    >>> z = run_kernel(k, {"x": x, "y": y}).output                  # (30, 17)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.kernels import collectives as co
from fabric.kernels.base import Kernel, pick_colors, split
from fabric.program import Program, Rect, Tile

BINARY = {"add": (ins.add, np.add), "sub": (ins.sub, np.subtract),
          "mul": (ins.mul, np.multiply)}
MAPS = {"add": (ins.add, np.add), "mul": (ins.mul, np.multiply),
        "max": (ins.max_, np.maximum), "min": (ins.min_, np.minimum)}
SIMD = {"add": "add", "sub": "sub", "mul": "mul", "max": "max", "min": "max", "relu": "max"}


@dataclasses.dataclass(frozen=True)
class BlockClass:
    """PEs of `rect` (absolute) all holding blocks of mb x nb; their first block is
    (p0, q0) and its first element (r0, c0) of the tensor."""

    rect: Rect
    mb: int
    nb: int
    p0: int
    q0: int


def block_classes(rect: Rect, m: int, n: int) -> list[BlockClass]:
    """The (at most four) sub-rectangles of `rect` with uniform block shapes."""
    if m < rect.rows or n < rect.cols:
        raise ValueError(f"a {m} x {n} tensor on {rect.rows} x {rect.cols} PEs leaves PEs "
                         "without a block; use a smaller rectangle")
    out = []
    for p0, pr, mb in _groups(m, rect.rows):
        for q0, qc, nb in _groups(n, rect.cols):
            out.append(BlockClass(Rect(rect.row + p0, rect.col + q0, pr, qc), mb, nb, p0, q0))
    return out


def _groups(total: int, parts: int):
    """(first index, count, size) of the runs of equal block sizes of split(total, parts)."""
    base, extra = divmod(total, parts)
    runs = [(0, extra, base + 1), (extra, parts - extra, base)]
    return [r for r in runs if r[1] > 0]


def to_blocks(x: np.ndarray, cls: BlockClass, rect: Rect) -> np.ndarray:
    """The blocks of `cls` as (rows, cols, mb * nb), row major."""
    P, Q = rect.rows, rect.cols
    m, n = x.shape
    rows, cols = split(m, P), split(n, Q)
    out = np.empty((cls.rect.rows, cls.rect.cols, cls.mb * cls.nb), np.float32)
    for i in range(cls.rect.rows):
        r0, mr = rows[cls.p0 + i]
        for j in range(cls.rect.cols):
            c0, nc = cols[cls.q0 + j]
            out[i, j] = x[r0:r0 + mr, c0:c0 + nc].reshape(-1)
    return out


def from_blocks(parts: list[np.ndarray], classes: list[BlockClass], rect: Rect, m: int,
                n: int) -> np.ndarray:
    rows, cols = split(m, rect.rows), split(n, rect.cols)
    out = np.empty((m, n), np.float32)
    for got, cls in zip(parts, classes):
        for i in range(cls.rect.rows):
            r0, mr = rows[cls.p0 + i]
            for j in range(cls.rect.cols):
                c0, nc = cols[cls.q0 + j]
                out[r0:r0 + mr, c0:c0 + nc] = got[i, j].reshape(mr, nc)
    return out


def _check(config: FabricConfig, rect: Rect, m: int, n: int, dtype: str, arrays: int,
           what: str) -> list[BlockClass]:
    if dtype != "f32":
        raise ValueError(f"{what}: dtype {dtype!r} is not supported (f32 only)")
    classes = block_classes(rect, m, n)
    big = classes[0]
    words = arrays * big.mb * big.nb + max(big.mb, big.nb)
    if words > config.sram_words:
        raise ValueError(f"{what}: {arrays} blocks of {big.mb} x {big.nb} need {4 * words} B "
                         f"per PE, above the {config.sram_bytes // 1024} KiB of a PE "
                         f"({m} x {n} on {rect.rows} x {rect.cols} PEs)")
    return classes


def _kernel(name, config, rect, m, n, prog, classes, inputs, op_key, model, info):
    def load(sim, values):
        for key in inputs:
            x = np.asarray(values[key], np.float32)
            if x.shape != (m, n):
                raise ValueError(f"{name}: input {key!r} has shape {x.shape}, expected "
                                 f"{(m, n)}")
            for cls in classes:
                sim.memcpy_h2d(key, to_blocks(x, cls, rect), cls.rect)

    def read(sim):
        parts = [sim.memcpy_d2h("z", cls.rect) for cls in classes]
        return from_blocks(parts, classes, rect, m, n)

    return Kernel(name, config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), model, 0,
                  {"m": m, "n": n, "op": op_key, **info})


def _op_cycles(config, op, length):
    return math.ceil(length / config.simd_width(SIMD[op], "f32"))


def build_elementwise(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "add",
                      dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """z = x op y for x, y of shape (m, n) in blocks on `rect`; op "add", "sub" or "mul".

    Model (exact): T = ceil(L_max / w_op) + 2, L_max the largest block's element count.
    """
    if op not in BINARY:
        raise ValueError(f"op must be one of {sorted(BINARY)}, got {op!r}")
    classes = _check(config, rect, m, n, dtype, 3, "elementwise")
    prog = Program(config)
    for i, cls in enumerate(classes):
        size = cls.mb * cls.nb
        tile = Tile(f"{op}{i}")
        x, y, z = (tile.symbol(s, "f32", size) for s in ("x", "y", "z"))
        tile.local_task("main", [BINARY[op][0](z.dsd(), x.dsd(), y.dsd())])
        prog.place(tile, cls.rect)
    model = _op_cycles(config, op, classes[0].mb * classes[0].nb) + 2
    return _kernel("elementwise", config, rect, m, n, prog, classes, ("x", "y"), op, model, {})


def build_map(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "relu",
              scalar: float = 0.0, dtype: str = "f32",
              colors: Sequence[int] | None = None) -> Kernel:
    """z = op(x, scalar) for x (m, n): "relu" (max(x, 0)), "add", "mul", "max", "min".

    Model (exact): T = ceil(L_max / w_op) + 2.
    """
    if op != "relu" and op not in MAPS:
        raise ValueError(f"op must be 'relu' or one of {sorted(MAPS)}, got {op!r}")
    make, s = (ins.max_, 0.0) if op == "relu" else (MAPS[op][0], float(scalar))
    classes = _check(config, rect, m, n, dtype, 2, "map")
    prog = Program(config)
    for i, cls in enumerate(classes):
        tile = Tile(f"{op}{i}")
        x, z = (tile.symbol(name, "f32", cls.mb * cls.nb) for name in ("x", "z"))
        tile.local_task("main", [make(z.dsd(), x.dsd(), s)])
        prog.place(tile, cls.rect)
    model = _op_cycles(config, op, classes[0].mb * classes[0].nb) + 2
    return _kernel("map", config, rect, m, n, prog, classes, ("x",), op, model,
                   {"scalar": s})


def build_broadcast_op(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "add",
                       vector: str = "row", mode: str = "load", dtype: str = "f32",
                       colors: Sequence[int] | None = None) -> Kernel:
    """z = x op v[None, :] (vector "row": v of n values) or x op v[:, None] (vector "col":
    v of m values), op "add", "sub" or "mul".

    mode "load": the host writes v's block to every PE that uses it; "multicast": to the
    top PE of every column (west PE of every row), which multicasts it (one color).
    Inputs: "x" (m, n), "v". Model (exact): see the module docstring.
    """
    if op not in BINARY:
        raise ValueError(f"op must be one of {sorted(BINARY)}, got {op!r}")
    if vector not in ("row", "col") or mode not in ("load", "multicast"):
        raise ValueError(f"vector must be 'row' or 'col' and mode 'load' or 'multicast', got "
                         f"{vector!r}, {mode!r}")
    classes = _check(config, rect, m, n, dtype, 2, "broadcast_op")
    prog = Program(config)
    vlen = np.zeros((rect.rows, rect.cols), np.int64)  # v block length per PE
    for cls in classes:
        r0, c0 = cls.rect.row - rect.row, cls.rect.col - rect.col
        vlen[r0:r0 + cls.rect.rows, c0:c0 + cls.rect.cols] = cls.nb if vector == "row" \
            else cls.mb
    frag = None
    if mode == "multicast":
        (color,) = pick_colors(config, 1, colors)
        frag = co.broadcast(prog, rect, "v", ("vn", vlen), color,
                            along="col" if vector == "row" else "row", src=0, name="vb")
    for i, cls in enumerate(classes):
        size = cls.mb * cls.nb
        tile = Tile(f"{op}{vector}{i}")
        x, z = tile.symbol("x", "f32", size), tile.symbol("z", "f32", size)
        tile.symbol("v", "f32", cls.nb if vector == "row" else cls.mb)
        # v[j] for element (i, j) of a row-major block: stride 1 within a row, rows restart
        # at 0 (row vector); or stride 0 within a row, one step per row (column vector)
        stride, row_stride = (1, 0) if vector == "row" else (0, 1)
        v = ins.Mem("v", 0, size, stride=stride, row_length=cls.nb, row_stride=row_stride)
        code = [BINARY[op][0](z.dsd(), x.dsd(), v)]
        params = {}
        if frag is not None:
            code = [*frag.code_for(cls.rect), *code]
            r0, c0 = cls.rect.row - rect.row, cls.rect.col - rect.col
            params = {**frag.params_for(cls.rect),
                      "vn": vlen[r0:r0 + cls.rect.rows, c0:c0 + cls.rect.cols]}
        tile.local_task("main", code)
        prog.place(tile, cls.rect, params=params)

    size = np.zeros((rect.rows, rect.cols), np.int64)
    for cls in classes:
        r0, c0 = cls.rect.row - rect.row, cls.rect.col - rect.col
        size[r0:r0 + cls.rect.rows, c0:c0 + cls.rect.cols] = cls.mb * cls.nb
    op_cycles = -(-size // config.simd_width(SIMD[op], "f32"))
    start = np.ones((rect.rows, rect.cols), np.int64)
    if frag is not None:
        start = frag.exit_times(start)
    model = int((start + op_cycles).max()) + 1

    sources = _vector_sources(rect, vector, mode)
    vsplit = split(n, rect.cols) if vector == "row" else split(m, rect.rows)

    def load(sim, values):
        v = np.asarray(values["v"], np.float32)
        want = n if vector == "row" else m
        if v.shape != (want,):
            raise ValueError(f"broadcast_op: v has shape {v.shape}, expected {(want,)}")
        for r, c in sources:
            idx = c - rect.col if vector == "row" else r - rect.row
            s0, ln = vsplit[idx]
            sim.memcpy_h2d("v", v[s0:s0 + ln], Rect(r, c, 1, 1))

    kernel = _kernel("broadcast_op", config, rect, m, n, prog, classes, ("x",), op, model,
                     {"vector": vector, "mode": mode})
    load_x = kernel.load

    def load_all(sim, values):
        load_x(sim, values)
        load(sim, values)

    kernel.load = load_all
    return kernel


def _vector_sources(rect: Rect, vector: str, mode: str) -> list[tuple[int, int]]:
    """PEs the host writes the vector's blocks to."""
    if mode == "load":
        return list(rect.pes())
    if vector == "row":
        return [(rect.row, c) for c in range(rect.col, rect.col_end)]
    return [(r, rect.col) for r in range(rect.row, rect.row_end)]


# ---- numpy references ---------------------------------------------------------------------------
def elementwise_reference(x, y, op="add"):
    return BINARY[op][1](np.asarray(x, np.float32), np.asarray(y, np.float32))


def map_reference(x, op="relu", scalar=0.0):
    x = np.asarray(x, np.float32)
    if op == "relu":
        return np.maximum(x, np.float32(0.0))
    return MAPS[op][1](x, np.float32(scalar))


def broadcast_op_reference(x, v, op="add", vector="row"):
    x, v = np.asarray(x, np.float32), np.asarray(v, np.float32)
    return BINARY[op][1](x, v[None, :] if vector == "row" else v[:, None])
