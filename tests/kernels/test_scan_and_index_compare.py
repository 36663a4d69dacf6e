"""Kernels behind position ids computed from token ids: the row scan (cumsum: bit for bit
against np.cumsum's left-to-right fp32 running sums; 16-bit storage against the same sums
rounded once) and the compare kernel's eq/ne and int32 input (exact masks); each against
its exact cycle model."""

import numpy as np
import pytest

from fabric import FabricConfig
from fabric.kernels import build_compare, build_cumsum, compare_reference, cumsum_reference
from fabric.kernels.base import run_kernel
from fabric.numerics import round_to
from fabric.program import Rect

CONFIG = FabricConfig.small(4, 4)


@pytest.mark.parametrize("m,r,pes,dtype", [(5, 8, 2, "f32"), (1, 9, 1, "f32"),
                                           (7, 1, 3, "f32"), (6, 5, 2, "bf16")])
def test_cumsum_matches_numpy_and_its_cycle_model(m, r, pes, dtype):
    x = np.random.default_rng(m * r).standard_normal((m, r)).astype(np.float32)
    k = build_cumsum(CONFIG, Rect(0, 1, pes, 1), m, r, dtype=dtype)
    res = run_kernel(k, {"x": x})
    want = cumsum_reference(x, dtype)
    if dtype == "f32":
        np.testing.assert_array_equal(res.output, np.cumsum(x, axis=1, dtype=np.float32))
    np.testing.assert_array_equal(res.output, want)
    assert res.cycles == k.model_cycles


def test_cumsum_of_a_mask_counts_exactly():
    x = (np.random.default_rng(3).random((4, 12)) < 0.6).astype(np.float32)
    res = run_kernel(build_cumsum(CONFIG, Rect(0, 0, 2, 1), 4, 12), {"x": x})
    np.testing.assert_array_equal(res.output, np.cumsum(x, axis=1))


def test_cumsum_refuses_a_wide_rectangle():
    with pytest.raises(ValueError, match="one PE wide"):
        build_cumsum(CONFIG, Rect(0, 0, 2, 2), 8, 4)


@pytest.mark.parametrize("op,s", [("eq", 1.0), ("ne", 1.0), ("eq", 0.0), ("ne", -2.5)])
def test_equality_masks_exact(op, s):
    x = np.random.default_rng(5).integers(-3, 4, (7, 9)).astype(np.float32)
    x[0, :3] = [s, s + 2.0 ** -20, -0.0]  # a normal difference (subnormal ones flush to 0)
    k = build_compare(CONFIG, Rect(0, 0, 3, 2), 7, 9, op, s)
    res = run_kernel(k, {"x": x})
    np.testing.assert_array_equal(res.output, compare_reference(x, op, s))
    np.testing.assert_array_equal(res.output, (x == s) if op == "eq" else (x != s))
    assert res.cycles == k.model_cycles


@pytest.mark.parametrize("op", ["ne", "ge", "lt"])
def test_compare_reads_int32_token_ids(op):
    ids = np.random.default_rng(6).integers(0, 2 ** 24, (6, 5)).astype(np.int64)
    ids[0, :3] = [1, 0, 2 ** 24]
    k = build_compare(CONFIG, Rect(0, 0, 2, 2), 6, 5, op, 1.0, from_int32=True)
    res = run_kernel(k, {"x": ids.astype(np.int32).view(np.float32)})  # the words
    want = {"ne": ids != 1, "ge": ids >= 1, "lt": ids < 1}[op]
    np.testing.assert_array_equal(res.output, want.astype(np.float32))
    assert res.cycles == k.model_cycles


def test_int32_input_needs_fp32_storage():
    with pytest.raises(ValueError, match="int32 input"):
        build_compare(CONFIG, Rect(0, 0, 1, 1), 2, 2, "ne", 1.0, dtype="bf16", from_int32=True)


def test_reference_rounds_16_bit_sums_once():
    x = np.full((1, 300), 1.0, np.float32)
    np.testing.assert_array_equal(cumsum_reference(x, "bf16")[0, 256:260],
                                  round_to(np.arange(257, 261, dtype=np.float32), "bf16"))
