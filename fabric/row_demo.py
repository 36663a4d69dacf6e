"""The fabric-level demo: a row broadcast, a multiply and a chain reduction on a simulated fabric,
checked against numpy, with a printed summary and a PNG of busy cycles per PE.

Every row r computes y[r] = sum_c a[r, c] * v[r] (vectors of n fp32 values): column 0 holds
v and multicasts it east on color 0; every PE multiplies it with its own block a[r, c]; the
partial vectors then flow west along the row, each PE adding its own (colors 2 and 3
alternate by column so that a PE receives and sends on different colors).

    python -m fabric.demo --rows 8 --cols 8 --n 64 --out out    (or wafer run --fabric-demo)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

# from the modules, not the package: `fabric/__init__` imports this module
from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.host import Simulator
from fabric.isa import Port
from fabric.program import Program, Rect, Tile

BROADCAST = 0


def reduce_color(col: int) -> int:
    """Color a PE of column `col` sends its partial sum west on."""
    return 2 + col % 2


def row_reduce_program(config: FabricConfig, n: int) -> Program:
    R, C = config.rows, config.cols
    if C < 2:
        raise ValueError("the demo needs at least 2 columns")
    prog = Program(config)
    for col in range(C):
        tile = Tile(f"col{col}")
        a = tile.symbol("a", "f32", n)
        w = tile.symbol("w", "f32", n)
        code = []
        if col == 0:
            v = tile.symbol("v", "f32", n)
            code += [ins.mov(ins.FabOut(BROADCAST, n), v.dsd()),
                     ins.mul(w.dsd(), a.dsd(), v.dsd())]
        else:
            code += [ins.mul(w.dsd(), a.dsd(), ins.FabIn(BROADCAST, n))]
        if col < C - 1:
            code += [ins.add(w.dsd(), w.dsd(), ins.FabIn(reduce_color(col + 1), n))]
        if col > 0:
            code += [ins.mov(ins.FabOut(reduce_color(col), n), w.dsd())]
        tile.local_task("main", code)
        rect = Rect(0, col, R, 1)
        prog.place(tile, rect)
        if col == 0:
            prog.route(rect, BROADCAST, rx=Port.RAMP, tx=Port.EAST)
        elif col < C - 1:
            prog.route(rect, BROADCAST, rx=Port.WEST, tx=[Port.RAMP, Port.EAST])
        else:
            prog.route(rect, BROADCAST, rx=Port.WEST, tx=Port.RAMP)
        if col > 0:
            prog.route(rect, reduce_color(col), rx=Port.RAMP, tx=Port.WEST)
            prog.route(Rect(0, col - 1, R, 1), reduce_color(col), rx=Port.EAST, tx=Port.RAMP)
    return prog


def reference(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """numpy in the fabric's order: the partial sum runs from the east end to column 0."""
    acc = a[:, -1] * v
    for col in range(a.shape[1] - 2, -1, -1):
        acc = a[:, col] * v + acc
    return acc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="fabric demo: row broadcast + chain reduction")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--n", type=int, default=64, help="vector length per PE")
    parser.add_argument("--out", default="out", help="folder for the PNG")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.cols < 2 or args.n < 1:
        parser.error("need --rows >= 1, --cols >= 2, --n >= 1")

    import matplotlib

    matplotlib.use("Agg")
    from fabric.viz import busy_heatmap

    config = FabricConfig.small(args.rows, args.cols)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.rows, args.cols, args.n), dtype=np.float32)
    v = rng.standard_normal((args.rows, args.n), dtype=np.float32)

    sim = Simulator(config, row_reduce_program(config, args.n))
    for col in range(args.cols):
        sim.memcpy_h2d("a", a[:, col:col + 1], rect=Rect(0, col, args.rows, 1))
    sim.memcpy_h2d("v", v[:, None, :], rect=Rect(0, 0, args.rows, 1))
    sim.launch("main")
    stats = sim.run(max_cycles=100_000)
    y = sim.memcpy_d2h("w", rect=Rect(0, 0, args.rows, 1))[:, 0]

    expected = reference(a, v)
    err = float(np.max(np.abs(y - expected)))
    # fp32, same operation order as the reference: the results must agree to the last bit
    ok = np.array_equal(y, expected)
    print(f"row broadcast + chain reduction on {config.name}, {args.n} fp32 values per PE")
    print(stats.summary())
    print(f"check vs numpy    max |error| = {err:.3g}  ({'exact match' if ok else 'MISMATCH'})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig = busy_heatmap(stats)
    png = out / "busy_heatmap.png"
    fig.savefig(png, dpi=120)
    print(f"picture           {png}")
    return 0 if ok else 1

