"""Elementwise maps over a tensor distributed in 2D blocks on a P x Q rectangle.

Layout: the m x n tensor is split in blocks (`split` sizes: the first m % P block rows and
n % Q block columns are one larger); PE (p, q) holds its block row major in a symbol of
m_p * n_q words (`base.Blocks`). The PEs with blocks of one shape form at most four
sub-rectangles (`Blocks.classes`); each gets its own tile, so every DSD has a static length.

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
consuming read, jump, end). A broadcast op's width is capped at the vector's row length
(the block width nb: an element group never spans two rows). Ops reading two memory
sources add, on each PE, the element groups that wait under the bank read-pair rule
(`fabric.banks.read_pair_stalls`, from the tile's bank-aware layout: none for x + y of
equal blocks; a broadcast vector meets x's bank pairs on some groups, as its rows restart).
Results are bit-exact against
numpy's float32 ops (one rounding per element, as numpy).

16-bit storage (dtype "f16", "bf16" or "cb16"): x, y, z and a loaded vector v are 16-bit
symbols (element slot i holding what word i holds in fp32) and the ops are the 16-bit
builtins at the ("op", "f16") widths (4 for add/sub/mul/max on WSE-2): each computes the fp32
result of its 16-bit inputs and rounds it once to dtype, which is PyTorch's fp16 / bf16
elementwise op (fp32 opmath, one rounding). For one op, acc_dtype "f32" (widen, compute in
fp32, round once) and acc_dtype = dtype give the same numbers, so both build that builtin:
    T = ceil(L_max / w16_op) + 2
Exceptions:
- build_map "add" / "mul" with acc_dtype "f32" and a scalar s not exact in dtype: PyTorch
  computes x * s with s in fp32 (x + s too on CUDA; on CPU it rounds the scalar of an add
  to the tensor's dtype first, which is acc_dtype = dtype here), so the kernel widens x
  (to_f32 into an fp32 vector), applies the fp32 op with the fp32 s and rounds once
  (to_half): T = 2 ceil(L_max / w_cvt) + ceil(L_max / w32_op) + 2 (w_cvt: ("cvt", "f16")).
  With acc_dtype = dtype, s is rounded to dtype when the program is built and the 16-bit
  builtin runs. relu / max / min need no
  widening: rounding is monotone, so max(x, round(s)) = round(max(x, s)).
- a multicast vector travels as fp32 words (the collectives move 32-bit words); every PE
  rounds it to dtype (to_half, the host's rounding) before the op: T = max over PEs [(h + 1)
  H + len + ceil(len / w_cvt) + ceil(L / w16_op)] + 5.

Example:
    >>> k = build_elementwise(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), 30, 17, "add")
    >>> z = run_kernel(k, {"x": x, "y": y}).output                  # (30, 17)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.kernels import collectives as co
from fabric.kernels.base import BlockClass, Blocks, Kernel, check_dtypes, pick_colors, simd_key
from fabric.numerics.convert import round_to
from fabric.numerics.packing import words_for
from fabric.program import Program, Rect, Tile

BINARY = {"add": (ins.add, np.add), "sub": (ins.sub, np.subtract),
          "mul": (ins.mul, np.multiply)}
MAPS = {"add": (ins.add, np.add), "mul": (ins.mul, np.multiply),
        "max": (ins.max_, np.maximum), "min": (ins.min_, np.minimum)}
SIMD = {"add": "add", "sub": "sub", "mul": "mul", "max": "max", "min": "max", "relu": "max"}


def check_blocks(config: FabricConfig, rect: Rect, m: int, n: int, dtype: str,
                 acc_dtype: str, arrays: int, what: str, f32_blocks: int = 0,
                 f32_vector: bool = False, vectors: int = 1) -> Blocks:
    """The block layout, after checking the dtypes and that `arrays` blocks of `dtype`,
    `vectors` vectors of max(mb, nb) of `dtype`, `f32_blocks` fp32 blocks and (f32_vector)
    an fp32 vector of max(mb, nb) fit in a PE."""
    check_dtypes(what, dtype, acc_dtype)
    blocks = Blocks.of(rect, m, n)
    mb, nb = blocks.mb, blocks.nb
    words = (arrays * words_for(dtype, mb * nb) + vectors * words_for(dtype, max(mb, nb))
             + f32_blocks * mb * nb + int(f32_vector) * max(mb, nb))
    if words > config.sram_words:
        raise ValueError(f"{what}: {arrays} blocks of {mb} x {nb} ({dtype}) need "
                         f"{4 * words} B per PE, above the {config.sram_bytes // 1024} KiB "
                         f"of a PE ({m} x {n} on {rect.rows} x {rect.cols} PEs)")
    return blocks


def blocks_kernel(name, config, blocks, prog, inputs, op_key, model, info, dtype, acc_dtype):
    """The `Kernel` of an elementwise program over `blocks`: the host writes each of
    `inputs` ((m, n) arrays) into the symbol of that name on every PE and reads z back."""
    rect, m, n = blocks.rect, blocks.m, blocks.n

    def load(sim, values):
        for key in inputs:
            x = np.asarray(values[key], np.float32)
            if x.shape != (m, n):
                raise ValueError(f"{name}: input {key!r} has shape {x.shape}, expected "
                                 f"{(m, n)}")
            words = blocks.scatter(x)
            for cls in blocks.classes():
                sim.memcpy_h2d(key, words[cls.pes][..., :cls.size], cls.rect)

    def read(sim):
        words = np.zeros((rect.rows, rect.cols, blocks.mb * blocks.nb), np.float32)
        for cls in blocks.classes():
            words[cls.pes][..., :cls.size] = sim.memcpy_d2h("z", cls.rect)
        return blocks.gather(words)

    return Kernel(name, config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), model, 0,
                  {"m": m, "n": n, "op": op_key, "dtype": dtype, "acc_dtype": acc_dtype,
                   **info})


def op_cycles(config, op, length, dtype="f32"):
    """Cycles of one DSD op of `length` elements at its SIMD width in `dtype`."""
    return math.ceil(length / config.simd_width(SIMD[op], simd_key(dtype)))


def _cvt_cycles(config, length):
    return math.ceil(length / config.simd_width("cvt", "f16"))


def build_elementwise(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "add",
                      dtype: str = "f32", acc_dtype: str = "f32",
                      colors: Sequence[int] | None = None) -> Kernel:
    """z = x op y for x, y of shape (m, n) in blocks on `rect`; op "add", "sub" or "mul".

    dtype: storage of x, y, z ("f32", "f16", "bf16", "cb16"); acc_dtype "f32" or dtype (the
    same numbers: one 16-bit builtin, see the module docstring).
    Model (exact): T = ceil(L_max / w_op) + 2, L_max the largest block's element count,
    w_op the op's width in dtype; plus, for the slowest block, the groups that wait under
    the bank read-pair rule (`fabric.banks.read_pair_stalls`: none where the bank-aware
    layout puts x and y in different bank pairs).
    """
    check_binary(op)
    blocks = check_blocks(config, rect, m, n, dtype, acc_dtype, 3, "elementwise")
    prog = Program(config)
    model = 0
    for i, cls in enumerate(blocks.classes()):
        tile = Tile(f"{op}{i}")
        code = binary_code(tile, cls, tile.symbol("x", dtype, cls.size).dsd(), op, dtype)
        tile.local_task("main", code)
        prog.place(tile, cls.rect)
        model = max(model, op_cycles(config, op, cls.size, dtype) + 2
                    + read_pair_stalls(config, tile, code))
    return blocks_kernel("elementwise", config, blocks, prog, ("x", "y"), op, model, {},
                         dtype, acc_dtype)


def build_map(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "relu",
              scalar: float = 0.0, dtype: str = "f32", acc_dtype: str = "f32",
              colors: Sequence[int] | None = None) -> Kernel:
    """z = op(x, scalar) for x (m, n): "relu" (max(x, 0)), "add", "mul", "max", "min".

    dtype: storage of x and z ("f32", "f16", "bf16", "cb16"). acc_dtype "f32": the scalar
    is used in fp32 (as PyTorch's x * s for a 16-bit x, and x + s on CUDA); acc_dtype =
    dtype: the scalar is rounded to dtype (PyTorch's CPU x + s). info["widened"] says
    whether the fp32 path (to_f32, fp32 op, to_half) was built (see the module docstring).
    Model (exact): T = ceil(L_max / w_op) + 2, or 2 ceil(L_max / w_cvt) + ceil(L_max /
    w32_op) + 2 when widened.
    """
    check_map(op)
    s = 0.0 if op == "relu" else float(scalar)
    widen = map_widens(op, s, dtype, acc_dtype)
    blocks = check_blocks(config, rect, m, n, dtype, acc_dtype, 2, "map", int(widen))
    prog = Program(config)
    for i, cls in enumerate(blocks.classes()):
        tile = Tile(f"{op}{i}")
        x = tile.symbol("x", dtype, cls.size).dsd()
        tile.local_task("main", map_code(tile, cls, x, op, s, dtype, acc_dtype))
        prog.place(tile, cls.rect)
    size = blocks.mb * blocks.nb
    if widen:
        model = 2 * _cvt_cycles(config, size) + op_cycles(config, op, size) + 2
    else:
        model = op_cycles(config, op, size, dtype) + 2
    return blocks_kernel("map", config, blocks, prog, ("x",), op, model,
                         {"scalar": s, "widened": widen}, dtype, acc_dtype)


def build_broadcast_op(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "add",
                       vector: str = "row", mode: str = "load", dtype: str = "f32",
                       acc_dtype: str = "f32", colors: Sequence[int] | None = None
                       ) -> Kernel:
    """z = x op v[None, :] (vector "row": v of n values) or x op v[:, None] (vector "col":
    v of m values), op "add", "sub" or "mul".

    mode "load": the host writes v's block to every PE that uses it; "multicast": to the
    top PE of every column (west PE of every row), which multicasts it (one color).
    dtype: storage of x, z and v ("f32", "f16", "bf16", "cb16"; a multicast v travels in
    fp32 and is rounded on every PE); acc_dtype "f32" or dtype (the same numbers).
    Inputs: "x" (m, n), "v". Model (exact): see the module docstring.
    """
    check_broadcast(op, vector)
    if mode not in ("load", "multicast"):
        raise ValueError(f"broadcast_op: mode must be 'load' or 'multicast', got {mode!r}")
    # a multicast 16-bit vector travels in fp32: an fp32 copy "v", rounded into "vh"
    cast = dtype != "f32" and mode == "multicast"
    blocks = check_blocks(config, rect, m, n, dtype, acc_dtype, 2, "broadcast_op",
                          f32_vector=cast)
    mb, nb = blocks.sizes()  # per PE, (rect.rows, rect.cols)
    vlen = nb if vector == "row" else mb  # v block length per PE
    prog = Program(config)
    frag = None
    if mode == "multicast":
        (color,) = pick_colors(config, 1, colors)
        frag = co.broadcast(prog, rect, "v", ("vn", vlen), color,
                            along="col" if vector == "row" else "row", src=0, name="vb")
    stalls = np.zeros((rect.rows, rect.cols), np.int64)  # bank read-pair waits per PE
    for i, cls in enumerate(blocks.classes()):
        tile = Tile(f"{op}{vector}{i}")
        x = tile.symbol("x", dtype, cls.size).dsd()
        code = broadcast_code(tile, cls, x, op, vector, dtype, cast)
        compute = code[-1]
        params = {}
        if frag is not None:
            code = [*frag.code_for(cls.rect), *code]
            params = {**frag.params_for(cls.rect), "vn": vlen[cls.pes]}
        tile.local_task("main", code)
        prog.place(tile, cls.rect, params=params)
        stalls[cls.pes] = read_pair_stalls(config, tile, [compute])

    # the width is capped at v's row length nb (no element group spans two rows)
    width = np.minimum(config.simd_width(SIMD[op], simd_key(dtype)), nb)
    cycles = -(-blocks.counts() // width) + stalls
    if cast:
        cycles += -(-vlen // config.simd_width("cvt", "f16"))
    start = np.ones((rect.rows, rect.cols), np.int64)
    if frag is not None:
        start = frag.exit_times(start)
    model = int((start + cycles).max()) + 1

    sources = _vector_sources(rect, vector, mode)

    def load(sim, values):
        v = np.asarray(values["v"], np.float32)
        want = n if vector == "row" else m
        if v.shape != (want,):
            raise ValueError(f"broadcast_op: v has shape {v.shape}, expected {(want,)}")
        write_vector_blocks(sim, "v", v, blocks, vector, sources)

    kernel = blocks_kernel("broadcast_op", config, blocks, prog, ("x",), op, model,
                           {"vector": vector, "mode": mode}, dtype, acc_dtype)
    load_x = kernel.load

    def load_all(sim, values):
        load_x(sim, values)
        load(sim, values)

    kernel.load = load_all
    return kernel


def write_vector_blocks(sim, name: str, v: np.ndarray, blocks: Blocks, vector: str,
                        pes) -> None:
    """The host writes into symbol `name` of each PE of `pes` (in `blocks.rect`) its block
    of the vector v: the values of its block's columns (vector "row", v of n values) or of
    its rows ("col", v of m values)."""
    rect = blocks.rect
    parts = blocks.cols if vector == "row" else blocks.rows
    for r, c in pes:
        start, size = parts[c - rect.col if vector == "row" else r - rect.row]
        sim.memcpy_h2d(name, v[start:start + size], Rect(r, c, 1, 1))


def _vector_sources(rect: Rect, vector: str, mode: str) -> list[tuple[int, int]]:
    """PEs the host writes the vector's blocks to."""
    if mode == "load":
        return list(rect.pes())
    if vector == "row":
        return [(rect.row, c) for c in range(rect.col, rect.col_end)]
    return [(r, rect.col) for r in range(rect.row, rect.row_end)]


# ---- the ops on one PE's block: one definition for the standalone kernels above and the
# stream form (`fabric.kernels.streams`) --------------------------------------------------
# Each takes `x`, the operand of the PE's block of x: its symbol's DSD (standalone), or a
# `FabIn` of the block's element count (the stream form: each element taken as it arrives
# on a color). It declares z and the op's other symbols on `tile` (after x, in the order
# the bank-aware layout was measured with) and returns the ops; the first reads x, once,
# in order, and the rest read memory only.
def check_binary(op: str) -> None:
    if op not in BINARY:
        raise ValueError(f"elementwise: op must be one of {sorted(BINARY)}, got {op!r}")


def check_map(op: str) -> None:
    if op != "relu" and op not in MAPS:
        raise ValueError(f"map: op must be 'relu' or one of {sorted(MAPS)}, got {op!r}")


def check_broadcast(op: str, vector: str) -> None:
    if op not in BINARY:
        raise ValueError(f"broadcast_op: op must be one of {sorted(BINARY)}, got {op!r}")
    if vector not in ("row", "col"):
        raise ValueError(f"broadcast_op: vector must be 'row' or 'col', got {vector!r}")


def binary_code(tile: Tile, cls: BlockClass, x, op: str, dtype: str) -> list:
    """z = x op y on the block (y, z declared here)."""
    y, z = (tile.symbol(s, dtype, cls.size) for s in ("y", "z"))
    return [BINARY[op][0](z.dsd(), x, y.dsd(), dtype=dtype)]


def map_widens(op: str, scalar: float, dtype: str, acc_dtype: str) -> bool:
    """Whether `build_map` computes in fp32: an fp32 add or mul whose scalar dtype cannot
    hold exactly (the 16-bit builtin would round it)."""
    s32 = np.float32(scalar)
    return (dtype != "f32" and acc_dtype == "f32" and op in ("add", "mul")
            and not round_to(s32, dtype) == s32)


def map_code(tile: Tile, cls: BlockClass, x, op: str, scalar: float, dtype: str,
             acc_dtype: str) -> list:
    """z = op(x, scalar) on the block (z, and when widened its fp32 copy w, declared
    here)."""
    make, s = (ins.max_, 0.0) if op == "relu" else (MAPS[op][0], float(scalar))
    z = tile.symbol("z", dtype, cls.size)
    if map_widens(op, s, dtype, acc_dtype):
        w = tile.symbol("w", "f32", cls.size).dsd()
        return [ins.to_f32(w, x, dtype), make(w, w, s), ins.to_half(z.dsd(), w, dtype)]
    return [make(z.dsd(), x, s, dtype=dtype)]


def broadcast_code(tile: Tile, cls: BlockClass, x, op: str, vector: str, dtype: str,
                   cast: bool = False) -> list:
    """z = x op v on the block, v the block's part of a row (n values) or column (m
    values) vector (z, v declared here; cast: v held in fp32 and rounded into "vh" first,
    as a multicast vector arrives: that op comes first, and the one reading x last, so
    the stream form takes cast=False)."""
    z = tile.symbol("z", dtype, cls.size)
    vsym = tile.symbol("v", "f32" if cast else dtype, cls.vector_length(vector))
    code = []
    if cast:
        vh = tile.symbol("vh", dtype, vsym.shape)
        code = [ins.to_half(vh.dsd(), vsym.dsd(), dtype)]
        vsym = vh
    # v[j] for element (i, j) of a row-major block: stride 1 within a row, rows restart
    # at 0 (row vector); or stride 0 within a row, one step per row (column vector)
    stride, row_stride = (1, 0) if vector == "row" else (0, 1)
    v = ins.Mem(vsym.name, 0, cls.size, stride=stride, row_length=cls.nb,
                row_stride=row_stride)
    return [*code, BINARY[op][0](z.dsd(), x, v, dtype=dtype)]


# ---- numpy references ---------------------------------------------------------------------------
def rounded(values, dtype):
    """float32 values rounded to `dtype` (fp32: unchanged)."""
    values = np.asarray(values, np.float32)
    return values if dtype == "f32" else round_to(values, dtype)


def elementwise_reference(x, y, op="add", dtype="f32"):
    """Inputs rounded to dtype, the float32 op, the result rounded once to dtype."""
    return rounded(BINARY[op][1](rounded(x, dtype), rounded(y, dtype)), dtype)


def map_reference(x, op="relu", scalar=0.0, dtype="f32", acc_dtype="f32"):
    """As elementwise_reference, with the scalar in fp32 (acc_dtype "f32") or rounded to
    dtype (acc_dtype = dtype)."""
    x = rounded(x, dtype)
    s = np.float32(0.0 if op == "relu" else scalar)
    s = s if acc_dtype == "f32" else rounded(s, dtype)
    return rounded((np.maximum if op == "relu" else MAPS[op][1])(x, s), dtype)


def broadcast_op_reference(x, v, op="add", vector="row", dtype="f32"):
    x, v = rounded(x, dtype), rounded(v, dtype)
    return rounded(BINARY[op][1](x, v[None, :] if vector == "row" else v[:, None]), dtype)
