"""A tensor resident in PE memory: an (m, n) tensor in the 2D block layout of
`elementwise` (row major blocks, `split` sizes) with no code. It holds a table that other
kernels read over the fabric (an embedding table) or receives rows moved to it (the rows an
embedding picks). Loading and reading go through host I/O; running it takes no cycles.

dtype "f16", "bf16" or "cb16" stores the table as 16-bit symbols (two per word: half the
SRAM of fp32, element slot i of the 16-bit symbol holding what word i holds in fp32);
loading rounds to nearest even, reading returns the exact fp32 values of the stored ones.
acc_dtype is accepted for the common signature ("f32" or dtype): nothing is computed.

Example:
    >>> k = build_resident(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 50, 16)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from fabric.config import FabricConfig
from fabric.kernels.base import Blocks, Kernel, check_dtypes, check_sram
from fabric.numerics.packing import words_for
from fabric.program import Program, Rect, Tile


def build_resident(config: FabricConfig, rect: Rect, m: int, n: int,
                   dtype: str = "f32", acc_dtype: str = "f32") -> Kernel:
    """Inputs {"x": (m, n)}; output (m, n) read back from the blocks. dtype: storage format
    ("f32", "f16", "bf16", "cb16")."""
    check_dtypes("resident", dtype, acc_dtype)
    blocks = Blocks.of(rect, m, n)
    size = blocks.mb * blocks.nb
    check_sram(config, "resident", words_for(dtype, size), f"a block of {blocks.mb} x "
               f"{blocks.nb} ({m} x {n} on {rect.rows} x {rect.cols} PEs, dtype {dtype})")
    tile = Tile("resident")
    tile.symbol("x", dtype, size)
    prog = Program(config)
    prog.place(tile, rect)

    def load(sim, inputs):
        sim.memcpy_h2d("x", blocks.scatter(np.asarray(inputs["x"], np.float32)), rect)

    def read(sim):
        return blocks.gather(np.asarray(sim.memcpy_d2h("x", rect), np.float32))

    return Kernel("resident", config, rect, prog, load, read, lambda sim: None, 0, 0,
                  {"m": m, "n": n, "block": (blocks.mb, blocks.nb), "dtype": dtype,
                   "acc_dtype": acc_dtype})
