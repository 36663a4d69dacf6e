"""Standalone kernels running one collective on a rectangle: inputs loaded, the fragment as
the whole task, results read back, and the fragment's cycle model as the kernel's.

Example:
    >>> k = build_reduce(FabricConfig.small(4, 8), Rect(0, 0, 4, 8), 16, algo="tree")
    >>> out = run_kernel(k, {"x": x}).output     # (4, 16), every row's sum
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric.config import FabricConfig
from fabric.kernels.base import Kernel, pick_colors
from fabric.kernels.collectives.edge import gather, scatter
from fabric.kernels.collectives.geometry import ROOTS, Lines, _check_along, colors_needed
from fabric.kernels.collectives.lines import allreduce, reduce
from fabric.kernels.collectives.multicast import _sources, broadcast
from fabric.program import Program, Rect, Tile


def _check_sizes(config: FabricConfig, dtype: str, n: int, words: int, what: str) -> None:
    if dtype != "f32":
        raise ValueError(f"{what}: dtype {dtype!r} is not supported (f32 only)")
    if n < 1:
        raise ValueError(f"{what}: vector length n must be >= 1, got {n}")
    if 4 * words > config.sram_bytes:
        raise ValueError(f"{what}: n = {n} needs {4 * words} B of SRAM per PE, above the "
                         f"{config.sram_bytes // 1024} KiB of a PE")


def _kernel(name, config, rect, prog, tile, frag, load, read, info) -> Kernel:
    tile.local_task("main", list(frag.code))
    prog.place(tile, rect, params=frag.params_for(rect))
    entry = np.ones((rect.rows, rect.cols), np.int64)  # task starts at 0, code at 1
    model = int(np.max(frag.exit_times(entry))) + 1  # the implicit RET, then quiet
    return Kernel(name, config, rect, prog, load, read,
                  lambda sim: sim.launch("main", rect), model, 0, info)


def build_broadcast(config: FabricConfig, rect: Rect, n: int, along: str = "rect", src=0,
                    dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """Broadcast `x` (n fp32) from a source PE by multicast.

    along "rect": x of shape (n,) at the PE at offsets src (default (0, 0)); "row": x of
    shape (P, n), row p's vector at its PE at column offset src; "col": x of shape (Q, n).
    Output: (P, Q, n), every PE's copy. Model (exact): T = (h_max + 1) H + n + 5, h_max
    the farthest PE's hops from its source.
    """
    _check_sizes(config, dtype, n, n, "broadcast")
    (color,) = pick_colors(config, 1, colors)
    prog, tile = Program(config), Tile("broadcast")
    tile.symbol("x", "f32", n)
    frag = broadcast(prog, rect, "x", n, color, along=along, src=src)
    sources = _sources(rect, along, src)
    src_pes = sorted({sources(r, c) for r, c in rect.pes()})

    def load(sim, inputs):
        x = np.asarray(inputs["x"], np.float32).reshape(len(src_pes), n)
        for (r, c), v in zip(src_pes, x):
            sim.memcpy_h2d("x", v, Rect(r, c, 1, 1))

    return _kernel("broadcast", config, rect, prog, tile, frag, load,
                   lambda sim: sim.memcpy_d2h("x", rect), {"n": n, "along": along})


def build_reduce(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                 algo: str = "chain", op: str = "add", root=None, dtype: str = "f32",
                 colors: Sequence[int] | None = None) -> Kernel:
    """Reduce x (P, Q, n) along rows (into the root PE of each row, west by default:
    output (P, n)), columns (north by default: (Q, n)) or the rectangle (root = (row root,
    column root), default ("west", "north"): (n,)).

    Model (exact, see the module docstring), per line:
        chain: T = (2H + 1)(L - 1) + n + 4
        tree:  T = (2^K - 1 + K) H + K (n + 2) + 3 (L = 2^K)
    and the root column's reduction after the rows' for the rectangle.
    """
    _check_sizes(config, dtype, n, n, "reduce")
    need = colors_needed("reduce", rect, along, algo)
    colors = pick_colors(config, need, colors)
    prog, tile = Program(config), Tile("reduce")
    tile.symbol("x", "f32", n)
    frag = reduce(prog, rect, "x", n, colors, along=along, algo=algo, op=op, root=root)
    if along == "rect":
        row_root, col_root = root or ("west", "north")
    else:
        row_root = col_root = root or ROOTS[along][0]
    r = 0 if col_root == "north" else -1
    c = 0 if row_root == "west" else -1

    def load(sim, inputs):
        sim.memcpy_h2d("x", np.asarray(inputs["x"], np.float32), rect)

    def read(sim):
        x = sim.memcpy_d2h("x", rect)
        if along == "row":
            return x[:, c]
        return x[r] if along == "col" else x[r, c]

    return _kernel("reduce", config, rect, prog, tile, frag, load, read,
                   {"n": n, "along": along, "algo": algo, "op": op})


def build_allreduce(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                    algo: str = "chain", op: str = "add", dtype: str = "f32",
                    colors: Sequence[int] | None = None) -> Kernel:
    """Allreduce x (P, Q, n) along rows, columns or the rectangle: output (P, Q, n), every
    PE's vector replaced by its group's reduction. Model: reduce + broadcast from the root
    (module docstring), composed by `Fragment.exit_times`."""
    _check_sizes(config, dtype, n, n, "allreduce")
    need = colors_needed("allreduce", rect, along, algo)
    colors = pick_colors(config, need, colors)
    prog, tile = Program(config), Tile("allreduce")
    tile.symbol("x", "f32", n)
    frag = allreduce(prog, rect, "x", n, colors, along=along, algo=algo, op=op)

    def load(sim, inputs):
        sim.memcpy_h2d("x", np.asarray(inputs["x"], np.float32), rect)

    return _kernel("allreduce", config, rect, prog, tile, frag, load,
                   lambda sim: sim.memcpy_d2h("x", rect),
                   {"n": n, "along": along, "algo": algo, "op": op})


def _line_kernel(kind, config, rect, n, along, dtype, colors):
    _check_along(along, rect_ok=False)
    lines = Lines(rect, along, ROOTS[along][0])
    L = lines.length
    _check_sizes(config, dtype, n, (L + 1) * n, kind)
    colors = pick_colors(config, 2, colors)
    prog, tile = Program(config), Tile(kind)
    tile.symbol("x", "f32", n if kind == "gather" else L * n)
    tile.symbol("y", "f32", L * n if kind == "gather" else n)
    make = gather if kind == "gather" else scatter
    frag = make(prog, rect, "x", "y", n, colors, along=along)
    return lines, prog, tile, frag


def build_gather(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                 dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """Gather x (P, Q, n) to the west PE of every row (north PE of every column): output
    (P, Q, n) read back from the root PEs' L x n buffers (equal to x).
    Model (exact): T = (L - 1) n + 2H + 1 + ceil(n / w_mov) + 5 for large n."""
    lines, prog, tile, frag = _line_kernel("gather", config, rect, n, along, dtype, colors)
    roots = lines.slab(0)

    def load(sim, inputs):
        sim.memcpy_h2d("x", np.asarray(inputs["x"], np.float32), rect)

    def read(sim):
        got = sim.memcpy_d2h("y", roots)  # (P, 1, L n) or (1, Q, L n)
        if along == "row":
            return got[:, 0].reshape(rect.rows, lines.length, n)
        return got[0].reshape(rect.cols, lines.length, n).transpose(1, 0, 2)

    return _kernel("gather", config, rect, prog, tile, frag, load, read,
                   {"n": n, "along": along})


def build_scatter(config: FabricConfig, rect: Rect, n: int, along: str = "row",
                  dtype: str = "f32", colors: Sequence[int] | None = None) -> Kernel:
    """Scatter from the west PE of every row (north PE of every column): input x
    (P, Q, n), x[p, q] meant for PE (p, q), held by the root PEs; output (P, Q, n) read
    from every PE (equal to x). Model (exact):
    T = max((L - 1) n + max(ceil(n / w_mov), 2H + 1), n + (2H + 1)(L - 1)) + 4."""
    lines, prog, tile, frag = _line_kernel("scatter", config, rect, n, along, dtype, colors)
    roots = lines.slab(0)

    def load(sim, inputs):
        x = np.asarray(inputs["x"], np.float32)
        if along == "row":
            held = x.reshape(rect.rows, 1, -1)
        else:
            held = x.transpose(1, 0, 2).reshape(1, rect.cols, -1)
        sim.memcpy_h2d("x", held, roots)

    return _kernel("scatter", config, rect, prog, tile, frag, load,
                   lambda sim: sim.memcpy_d2h("y", rect), {"n": n, "along": along})
