"""Products on a column of PEs (torch.prod, torch.cumprod): rowreduce's "prod" and the
product scan (`build_scan(..., "prod")`), each against its exact cycle model.

References:
- fp32: bit for bit against a left-to-right fp32 product per row: `np.cumprod` in fp32
  (sequential, as the kernels' folds), its last column for the row product.
- 16-bit storage: bit for bit against the module references (`rowreduce_reference`,
  `scan_reference`: the fp32 fold of the rounded inputs rounded once, or every step rounded
  for rowreduce's acc_dtype = dtype); and the fp32 fold within half an ulp of the format
  plus r fp32 roundings of the float64 product (each rounding is relative, 2^-24).
Values near 1 (1 + 0.3 randn) so that products neither underflow nor overflow. Rows split
unevenly over several PEs (padding rows), and r = 1 (no fold op). Every program fits the
64-row table bucket: one engine per kind of program (fp32 ops, 16-bit ops, without a read
pair).
"""

import numpy as np
import pytest

from fabric import FabricConfig
from fabric.kernels import build_cumsum, build_rowreduce, build_scan, rowreduce_reference
from fabric.kernels import rowreduce as rr
from fabric.kernels import scan as sc
from fabric.kernels.base import run_kernel
from fabric.numerics import FORMATS, round_to
from fabric.program import Rect

CONFIG = FabricConfig.small(4, 4)
HALVES = ("f16", "bf16", "cb16")


def near_one(m, r, seed):
    return (1 + 0.3 * np.random.default_rng(seed).standard_normal((m, r))).astype(np.float32)


def ulp(v, dtype):
    """Spacing of `dtype` values at |v|."""
    fmt = FORMATS[dtype]
    a = np.maximum(np.abs(np.asarray(v, np.float64)), fmt.min_normal)
    return np.exp2(np.floor(np.log2(a)) - fmt.mbits)


@pytest.mark.parametrize("m,r,pes", [(10, 4, 3), (7, 9, 2), (5, 1, 2), (1, 6, 1)])
def test_row_prod_fp32_bit_for_bit_and_cycles(m, r, pes):
    x = near_one(m, r, m * r)
    k = build_rowreduce(CONFIG, Rect(0, 1, pes, 1), m, r, "prod")
    res = run_kernel(k, {"x": x})
    np.testing.assert_array_equal(res.output, np.cumprod(x, axis=1, dtype=np.float32)[:, -1])
    np.testing.assert_array_equal(res.output, rowreduce_reference(x, "prod"))
    assert res.cycles == k.model_cycles == rr.rowreduce_cycles(CONFIG, -(-m // pes), r, "prod")


def test_row_prod_of_integers_is_exact():
    x = np.random.default_rng(2).integers(-3, 4, (6, 8)).astype(np.float32)  # |prod| < 2^24
    res = run_kernel(build_rowreduce(CONFIG, Rect(0, 0, 2, 1), 6, 8, "prod"), {"x": x})
    np.testing.assert_array_equal(res.output, np.prod(x.astype(np.int64), axis=1))


@pytest.mark.parametrize("dtype", HALVES)
def test_row_prod_16_bit(dtype):
    m, r = 10, 7
    x = near_one(m, r, 5)
    xh = round_to(x, dtype)
    want = {}
    for acc in ("f32", dtype):
        k = build_rowreduce(CONFIG, Rect(0, 0, 3, 1), m, r, "prod", dtype=dtype, acc_dtype=acc)
        res = run_kernel(k, {"x": x})
        assert res.cycles == k.model_cycles == rr.rowreduce_cycles(CONFIG, 4, r, "prod", dtype,
                                                                   acc)
        want[acc] = rowreduce_reference(x, "prod", 1.0, dtype, acc)
        np.testing.assert_array_equal(res.output.view(np.uint32), want[acc].view(np.uint32))
        if acc == "f32":
            exact = xh.astype(np.float64).prod(1)
            bound = ulp(res.output, dtype) / 2 + r * 2.0**-24 * np.abs(exact)
            assert np.all(np.abs(res.output - exact) <= bound)
    assert np.any(want["f32"] != want[dtype])  # the 16-bit fold rounds every step


def test_row_prod_16_bit_holds_an_fp32_copy_of_its_block():
    """A 16-bit product with an fp32 fold widens its whole block (mb r fp32 words more than
    the sum, which widens through fmachs): 82 rows of 100 fit one PE for a sum, not for a
    product."""
    build_rowreduce(CONFIG, Rect(0, 0, 1, 1), 82, 100, "sum", dtype="bf16")
    build_rowreduce(CONFIG, Rect(0, 0, 1, 1), 82, 100, "prod", dtype="bf16", acc_dtype="bf16")
    with pytest.raises(ValueError, match="rowreduce: 82 rows of 100.*SRAM"):
        build_rowreduce(CONFIG, Rect(0, 0, 1, 1), 82, 100, "prod", dtype="bf16")


@pytest.mark.parametrize("m,r,pes,dtype", [(5, 8, 2, "f32"), (1, 9, 1, "f32"),
                                           (7, 1, 3, "f32"), (6, 5, 2, "bf16"),
                                           (7, 6, 3, "f16")])
def test_cumprod_bit_for_bit_and_cycles(m, r, pes, dtype):
    x = near_one(m, r, m * r + 1)
    k = build_scan(CONFIG, Rect(0, 1, pes, 1), m, r, "prod", dtype=dtype)
    assert k.name == "cumprod"
    res = run_kernel(k, {"x": x})
    if dtype == "f32":
        np.testing.assert_array_equal(res.output, np.cumprod(x, axis=1, dtype=np.float32))
    np.testing.assert_array_equal(res.output, sc.scan_reference(x, "prod", dtype))
    assert res.cycles == k.model_cycles == sc.scan_cycles(CONFIG, -(-m // pes), r, "prod",
                                                          dtype)


def test_cumprod_of_integers_is_exact():
    x = np.random.default_rng(4).integers(-2, 3, (4, 12)).astype(np.float32)  # |.| <= 2^11
    res = run_kernel(build_scan(CONFIG, Rect(0, 0, 2, 1), 4, 12, "prod"), {"x": x})
    np.testing.assert_array_equal(res.output, np.cumprod(x.astype(np.int64), axis=1))


@pytest.mark.parametrize("op,dtype", [("max", "f32"), ("min", "f32"), ("max", "bf16")])
def test_running_extrema_exact_and_cycles(op, dtype):
    """cummax / cummin: exact, NaN kept from where it first appears (np.maximum.accumulate
    propagates NaN as torch.cummax's values do), infinities as numbers."""
    x = np.random.default_rng(5).standard_normal((6, 7)).astype(np.float32)
    x[1, 2], x[3, 0], x[4, 5], x[5, 3] = np.nan, np.inf, -np.inf, np.nan
    k = build_scan(CONFIG, Rect(0, 1, 2, 1), 6, 7, op, dtype=dtype)
    assert k.name == {"max": "cummax", "min": "cummin"}[op]
    res = run_kernel(k, {"x": x})
    fold = np.maximum.accumulate if op == "max" else np.minimum.accumulate
    np.testing.assert_array_equal(res.output, fold(round_to(x, dtype) if dtype != "f32" else x,
                                                   axis=1))
    np.testing.assert_array_equal(res.output, sc.scan_reference(x, op, dtype))
    assert res.cycles == k.model_cycles == sc.scan_cycles(CONFIG, 3, 7, op, dtype)


def test_scan_ops_are_named():
    assert build_cumsum(CONFIG, Rect(0, 0, 2, 1), 4, 3).name == "cumsum"
    with pytest.raises(ValueError, match="scan: op must be one of"):
        build_scan(CONFIG, Rect(0, 0, 2, 1), 4, 3, "mean")
    with pytest.raises(ValueError, match="one PE wide"):
        build_scan(CONFIG, Rect(0, 0, 2, 2), 8, 4, "prod")
    with pytest.raises(ValueError, match="rowreduce: op must be one of.*'prod'"):
        build_rowreduce(CONFIG, Rect(0, 0, 2, 1), 4, 3, "min")
