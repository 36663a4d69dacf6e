"""Elementwise maps over a 2D-blocked tensor against numpy, with exact cycle counts.

Tolerance: bit-exact. Each output element is one fp32 op on fp32 inputs (add, sub, mul,
max with a scalar or a broadcast vector), rounded once, as numpy's float32 op.
Cycles: T = ceil(L_max / w) + 2 with w the op's SIMD width (add/sub/max 2, mul 1 on WSE-2),
plus the vector's multicast when it is multicast.
"""

import math

import numpy as np
import pytest

from fabric import Rect
from fabric.kernels import elementwise as ew
from fabric.kernels.base import Blocks, run_kernel
from tests.kernels.kernel_cases import CONFIG, normal, rng, run_exact

EVEN = (Rect(0, 0, 4, 4), 32, 32)  # 8 x 8 blocks
UNEVEN = (Rect(1, 2, 3, 5), 20, 23)  # blocks of 7/6 rows by 5/4 columns, four classes
SHAPES = [EVEN, UNEVEN]


def _shape_id(shape):
    rect, m, n = shape
    return f"{m}x{n}-on-{rect.rows}x{rect.cols}"


@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_binary(shape, op):
    rect, m, n = shape
    gen = rng(1)
    x, y = normal(gen, m, n), normal(gen, m, n)
    kernel = ew.build_elementwise(CONFIG, rect, m, n, op)
    run_exact(kernel, {"x": x, "y": y}, ew.elementwise_reference(x, y, op))
    L = math.ceil(m / rect.rows) * math.ceil(n / rect.cols)
    assert kernel.model_cycles == math.ceil(L / CONFIG.simd_width(op, "f32")) + 2


@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
@pytest.mark.parametrize("op, scalar", [("relu", 0.0), ("add", 1.25), ("mul", -0.75),
                                        ("min", 0.5)])
def test_map(shape, op, scalar):
    rect, m, n = shape
    x = normal(rng(2), m, n)
    kernel = ew.build_map(CONFIG, rect, m, n, op, scalar)
    run_exact(kernel, {"x": x}, ew.map_reference(x, op, scalar))


@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
@pytest.mark.parametrize("vector", ["row", "col"])
@pytest.mark.parametrize("mode", ["load", "multicast"])
def test_broadcast_vector(shape, vector, mode):
    rect, m, n = shape
    gen = rng(3)
    x, v = normal(gen, m, n), normal(gen, n if vector == "row" else m)
    op = "sub" if vector == "row" else "mul"
    kernel = ew.build_broadcast_op(CONFIG, rect, m, n, op, vector, mode)
    result = run_exact(kernel, {"x": x, "v": v}, ew.broadcast_op_reference(x, v, op, vector))
    if mode == "load":  # every PE: its block's groups, those that wait on a bank pair, 2
        L = Blocks.of(rect, m, n).counts()
        waits = result.stats.bank_stall[rect.row:rect.row_end, rect.col:rect.col_end]
        busy = -(-L // CONFIG.simd_width(op, "f32")) + waits
        assert result.cycles == busy.max() + 2


def test_multicast_costs_the_vector_stream_and_its_latency():
    """Row vector on 4 x 4 PEs (blocks 8 x 8, v blocks of 8): T = (h + 1) H + 8 + 32 + 5
    for the bottom row (h = 3 hops, 8 words of v, 64 adds at width 2)."""
    rect, m, n = EVEN
    kernel = ew.build_broadcast_op(CONFIG, rect, m, n, "add", "row", "multicast")
    assert kernel.model_cycles == (3 + 1) + 8 + 32 + 5
    result = run_kernel(kernel, {"x": normal(rng(4), m, n), "v": normal(rng(5), n)})
    assert result.cycles == kernel.model_cycles


def test_errors_name_sizes_and_ops():
    with pytest.raises(ValueError, match="48 KiB"):
        ew.build_elementwise(CONFIG, Rect(0, 0, 1, 1), 64, 100)
    with pytest.raises(ValueError, match="without a block"):
        ew.build_map(CONFIG, Rect(0, 0, 4, 4), 3, 8)
    with pytest.raises(ValueError, match="op must be"):
        ew.build_elementwise(CONFIG, Rect(0, 0, 2, 2), 4, 4, "div")
    with pytest.raises(ValueError, match="acc_dtype"):
        ew.build_map(CONFIG, Rect(0, 0, 2, 2), 4, 4, dtype="f16", acc_dtype="bf16")
    kernel = ew.build_elementwise(CONFIG, Rect(0, 0, 2, 2), 4, 4)
    with pytest.raises(ValueError, match="expected"):
        run_kernel(kernel, {"x": np.zeros((4, 4)), "y": np.zeros((4, 5))})


def test_block_classes_cover_the_rectangle_once():
    rect, m, n = UNEVEN
    classes = Blocks.of(rect, m, n).classes()
    assert [(c.mb, c.nb) for c in classes] == [(7, 5), (7, 4), (6, 5), (6, 4)]
    cover = np.zeros((rect.rows, rect.cols), int)
    for c in classes:
        cover[c.rect.row - rect.row:c.rect.row_end - rect.row,
              c.rect.col - rect.col:c.rect.col_end - rect.col] += 1
    np.testing.assert_array_equal(cover, 1)
