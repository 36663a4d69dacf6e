"""Elementwise tanh or exp of an (m, n) fp32 tensor in 2D blocks on a rectangle, built from
`mathlib`'s sequences of PE builtins (no communication). Layout as `activations.Blocks`
(each PE's block row major, packed; a register holds each PE's element count).

Cycle model (exact): T = 2 + tanh_cycles(e_max) or exp_cycles(e_max) (task start and end,
one straight list of synchronous ops over the PE's e elements; `mathlib` gives the
formulas). Numerics: within `mathlib.TANH_ULPS` / `EXP_ULPS` ulps of the exact value.

Example:
    >>> k = build_unary(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 10, 6, "tanh")
    >>> y = run_kernel(k, {"x": x}).output                       # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels.activations import Blocks, check_sram
from fabric.kernels.base import Kernel
from fabric.program import Program, Rect, Tile

FUNCTIONS = {
    "tanh": (lambda y, x, s: ml.tanh(y, x, s), 4, ml.tanh_cycles),
    "exp": (lambda y, x, s: ml.exp(y, x, s), 2, ml.exp_cycles),
}


def build_unary(config: FabricConfig, rect: Rect, m: int, n: int, fn: str = "tanh",
                dtype: str = "f32") -> Kernel:
    """y = fn(x) for x of shape (m, n); fn "tanh" or "exp". Inputs {"x"}; output (m, n)."""
    if fn not in FUNCTIONS:
        raise ValueError(f"unary: fn must be one of {sorted(FUNCTIONS)}, got {fn!r}")
    if dtype != "f32":
        raise ValueError(f"unary: dtype {dtype!r} is not supported (f32 only)")
    return build_blockwise(config, rect, m, n, fn, *FUNCTIONS[fn])


def build_blockwise(config: FabricConfig, rect: Rect, m: int, n: int, fn: str, code_of,
                    scratch: int, cycles_of) -> Kernel:
    """The kernel of one straight code sequence y = f(x) over every PE's block:
    code_of(y, x, scratch DSDs) gives the code, cycles_of(config, e) its cycles."""
    blocks = Blocks.of(rect, m, n)
    words = blocks.mb * blocks.nb
    check_sram(config, fn, (2 + scratch) * words,
               f"a block of {blocks.mb} x {blocks.nb} ({m} x {n} on {rect.rows} x "
               f"{rect.cols} PEs, {2 + scratch} words per element)")
    tile = Tile(fn)
    # every DSD takes its length from register "n": each PE's own element count
    names = ["x", "y"] + [f"s{i}" for i in range(scratch)]
    vec = {name: Mem(tile.symbol(name, "f32", words).name, length_reg="n") for name in names}
    tile.local_task("main", code_of(vec["y"], vec["x"], [vec[k] for k in names[2:]]))
    prog = Program(config)
    counts = blocks.counts()
    prog.place(tile, rect, params={"n": counts.astype(np.int32)})

    def load(sim, inputs):
        sim.memcpy_h2d("x", blocks.scatter(inputs["x"]), rect)

    def read(sim):
        return blocks.gather(sim.memcpy_d2h("y", rect))

    model = 2 + cycles_of(config, int(counts.max()))
    return Kernel(fn, config, rect, prog, load, read, lambda sim: sim.launch("main", rect),
                  model, 0, {"m": m, "n": n, "block": (blocks.mb, blocks.nb)})
