"""The two-op elementwise kernels (affine z = x * s + t, clamp z = min(max(x, lo), hi))
against numpy and against the two ops run apart, with exact cycle counts.

Tolerance: bit-exact. Each op rounds once to the storage dtype (fp32: numpy's float32
ops; 16-bit: the fp32 result of 16-bit inputs rounded once, as PyTorch's CPU fp16 / bf16
elementwise ops), the product before the sum; the ops run apart give the same words.
Cycles: T = ceil(L / w_op1) + ceil(L / w_op2) + 2, L the largest block.
"""

import math

import numpy as np
import pytest
import torch

from fabric import Rect
from fabric.kernels import (
    affine_reference,
    build_affine,
    build_clamp,
    build_elementwise,
    build_map,
    clamp_reference,
)
from fabric.kernels.base import run_kernel
from fabric.numerics import round_to
from tests.kernels.kernel_cases import CONFIG, normal, rng, run_exact

EVEN = (Rect(0, 0, 4, 4), 32, 32)  # 8 x 8 blocks
UNEVEN = (Rect(1, 2, 3, 5), 20, 23)  # blocks of 7/6 rows by 5/4 columns, four classes


def _largest(rect, m, n):
    return math.ceil(m / rect.rows) * math.ceil(n / rect.cols)


@pytest.mark.parametrize("shape", [EVEN, UNEVEN], ids=["even", "uneven"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "cb16"])
def test_affine_matches_numpy_and_the_ops_apart(shape, dtype):
    rect, m, n = shape
    gen = rng(11)
    x, s, t = normal(gen, m, n), normal(gen, m, n), normal(gen, m, n)
    kernel = build_affine(CONFIG, rect, m, n, dtype=dtype)
    fused = run_exact(kernel, {"x": x, "s": s, "t": t},
                      affine_reference(x, s, t, dtype=dtype))
    L = _largest(rect, m, n)
    assert kernel.model_cycles == (math.ceil(L / CONFIG.simd_width("mul", _key(dtype)))
                                   + math.ceil(L / CONFIG.simd_width("add", _key(dtype))) + 2)
    product = run_kernel(build_elementwise(CONFIG, rect, m, n, "mul", dtype=dtype),
                         {"x": x, "y": s}).output
    apart = run_kernel(build_elementwise(CONFIG, rect, m, n, "add", dtype=dtype),
                       {"x": product, "y": t}).output
    np.testing.assert_array_equal(fused.output, apart)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("vector", ["col", "row"])
def test_affine_with_one_value_per_row_or_column(vector, dtype):
    """s and t of one value per row (a channel's over an NCHW tensor seen as (N C H, W)) or
    per column, each PE holding its block's: as the full matrices would give; the ops'
    width capped at the block's row length, the groups that wait on a bank pair counted."""
    rect, m, n = UNEVEN
    gen = rng(14)
    x = normal(gen, m, n)
    s, t = (normal(gen, m if vector == "col" else n) for _ in range(2))
    kernel = build_affine(CONFIG, rect, m, n, vector, dtype=dtype)
    result = run_exact(kernel, {"x": x, "s": s, "t": t},
                       affine_reference(x, s, t, vector, dtype))
    full = (s[:, None], t[:, None]) if vector == "col" else (s[None, :], t[None, :])
    want = affine_reference(x, *(np.broadcast_to(v, (m, n)) for v in full), dtype=dtype)
    np.testing.assert_array_equal(result.output, want)
    waits = result.stats.bank_stall[rect.row:rect.row_end, rect.col:rect.col_end]
    nb = np.where(np.arange(rect.cols) < 3, 5, 4)[None, :]  # 23 = 5 + 5 + 5 + 4 + 4
    L = np.where(np.arange(rect.rows) < 2, 7, 6)[:, None] * nb  # 20 = 7 + 7 + 6 rows
    busy = sum(-(-L // np.minimum(CONFIG.simd_width(op, _key(dtype)), nb))
               for op in ("mul", "add")) + waits
    assert result.cycles == kernel.model_cycles == busy.max() + 2
    with pytest.raises(ValueError, match="input 's' has shape"):
        run_kernel(kernel, {"x": x, "s": np.zeros(3, np.float32), "t": t})


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_affine_is_pytorchs_16_bit_mul_then_add(dtype):
    """PyTorch's CPU x * s + t in fp16 / bf16 (two ops, each rounded): the same words."""
    rect, m, n = UNEVEN
    gen = rng(12)
    x, s, t = (round_to(normal(gen, m, n), dtype) for _ in range(3))
    to = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    want = (torch.from_numpy(x).to(to) * torch.from_numpy(s).to(to)
            + torch.from_numpy(t).to(to)).float().numpy()
    got = run_kernel(build_affine(CONFIG, rect, m, n, dtype=dtype),
                     {"x": x, "s": s, "t": t}).output
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("lo, hi", [(0.0, 6.0), (-0.5, 0.25), (1.0, -1.0)],
                         ids=["relu6", "narrow", "lo-above-hi"])
def test_clamp_matches_numpy_and_the_maps_apart(dtype, lo, hi):
    """NaN stays NaN, infinities clamp; lo above hi gives hi everywhere, as torch.clamp."""
    rect, m, n = UNEVEN
    x = 4.0 * normal(rng(13), m, n)
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    kernel = build_clamp(CONFIG, rect, m, n, lo, hi, dtype=dtype)
    fused = run_kernel(kernel, {"x": x})
    np.testing.assert_array_equal(fused.output, clamp_reference(x, lo, hi, dtype))
    if dtype == "f32":
        want = torch.clamp(torch.from_numpy(x), lo, hi).numpy()
        np.testing.assert_array_equal(fused.output, want)
    L = _largest(rect, m, n)
    w_max = CONFIG.simd_width("max", _key(dtype))
    assert fused.cycles == kernel.model_cycles == 2 * math.ceil(L / w_max) + 2
    low = run_kernel(build_map(CONFIG, rect, m, n, "max", lo, dtype=dtype), {"x": x}).output
    apart = run_kernel(build_map(CONFIG, rect, m, n, "min", hi, dtype=dtype),
                       {"x": low}).output
    np.testing.assert_array_equal(fused.output, apart)


def test_errors_name_the_kernel_and_the_memory():
    with pytest.raises(ValueError, match="affine: 4 blocks of .* 48 KiB"):
        build_affine(CONFIG, Rect(0, 0, 1, 1), 64, 64)
    with pytest.raises(ValueError, match="vector must be 'full', 'col' or 'row'"):
        build_affine(CONFIG, Rect(0, 0, 2, 2), 8, 8, "channel")
    with pytest.raises(ValueError, match="clamp: 2 blocks of .* 48 KiB"):
        build_clamp(CONFIG, Rect(0, 0, 1, 1), 100, 100)


def _key(dtype):
    return "f32" if dtype == "f32" else "f16"
