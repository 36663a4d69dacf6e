"""A tensor resident in PE memory: an (m, n) tensor in the 2D block layout of
`elementwise` (row major blocks, `split` sizes) with no code. It holds a table that other
kernels read over the fabric (an embedding table) or receives rows moved to it (the rows an
embedding picks). Loading and reading go through host I/O; running it takes no cycles.

Example:
    >>> k = build_resident(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 50, 16)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from fabric.config import FabricConfig
from fabric.kernels.activations import Blocks, check_sram
from fabric.kernels.base import Kernel
from fabric.program import Program, Rect, Tile


def build_resident(config: FabricConfig, rect: Rect, m: int, n: int,
                   dtype: str = "f32") -> Kernel:
    """Inputs {"x": (m, n)}; output (m, n) read back from the blocks."""
    if dtype != "f32":
        raise ValueError(f"resident: dtype {dtype!r} is not supported (f32 only)")
    blocks = Blocks.of(rect, m, n)
    words = blocks.mb * blocks.nb
    check_sram(config, "resident", words, f"a block of {blocks.mb} x {blocks.nb} ({m} x {n} "
               f"on {rect.rows} x {rect.cols} PEs)")
    tile = Tile("resident")
    tile.symbol("x", "f32", words)
    prog = Program(config)
    prog.place(tile, rect)

    def load(sim, inputs):
        sim.memcpy_h2d("x", blocks.scatter(np.asarray(inputs["x"], np.float32)), rect)

    def read(sim):
        return blocks.gather(sim.memcpy_d2h("x", rect))

    return Kernel("resident", config, rect, prog, load, read, lambda sim: None, 0, 0,
                  {"m": m, "n": n, "block": (blocks.mb, blocks.nb)})
