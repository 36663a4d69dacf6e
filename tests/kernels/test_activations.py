"""gelu on a rectangle, both forms (tanh and exact erf), against float64 references, with
exact cycle counts.

The tolerance per element is `gelu_tolerance`: for the tanh form, the rounding of
z = x (A + B x^2) amplified by exp (the function's own conditioning) plus a few ulps; for
the erf form, GELU_ERF_ULPS. The dense sweeps behind these bounds are in
test_unary_functions.py. Shapes cover even and uneven splits, non-square rectangles and a
rectangle inside a larger fabric (one 4x4 config, one table floor: the engine compiles once
for the module).
"""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels import activations as act
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Blocks, run_kernel

CONFIG = FabricConfig.small(4, 4)
MIN_TABLE_ROWS = (128, 256)  # the erf form's tables: both forms share one engine
rng = np.random.default_rng(7)
EDGES = [0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, 3.0, -3.0, 8.9, -8.9, 9.5, -9.5, 100.0,
         -100.0, 1e20, -1e20, float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max)]

CASES = [  # (rect, m, n)
    (Rect(0, 0, 4, 4), 32, 48),  # even split
    (Rect(0, 0, 3, 4), 50, 37),  # non-square, uneven both ways
    (Rect(1, 1, 2, 3), 7, 11),  # inside the fabric, uneven
    (Rect(0, 2, 4, 1), 9, 5),  # one column of PEs
]


def _inputs(m, n):
    x = (3 * rng.standard_normal((m, n))).astype(np.float32)
    flat = x.reshape(-1)
    flat[:len(EDGES)] = EDGES
    flat[len(EDGES):len(EDGES) + 64] = np.linspace(-12, 12, 64)[:flat.size - len(EDGES)]
    return x


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("rect,m,n", CASES)
def test_gelu_matches_reference_and_model(rect, m, n, approximate):
    x = _inputs(m, n)
    k = act.build_gelu(CONFIG, rect, m, n, approximate=approximate)
    assert k.info["approximate"] == approximate
    res = run_kernel(k, {"x": x}, min_table_rows=MIN_TABLE_ROWS)
    y, ref = res.output, act.gelu_reference(x, approximate)
    err = np.abs(y.astype(np.float64) - ref)
    tol = act.gelu_tolerance(x, approximate)
    bad = np.argwhere(~(err <= tol))
    if bad.size:
        i = tuple(bad[0])
        raise AssertionError(f"x={x[i]!r}: got {y[i]!r}, reference {ref[i]!r}, tol {tol[i]:.3g}")
    assert res.cycles == k.model_cycles
    # the largest block sets the time; every PE was busy exactly for its own block, plus
    # the element groups that waited under the bank read-pair rule (stalled cycles, but a
    # wait in the cycle that issues an op, which counts as busy)
    counts = Blocks.of(rect, m, n).counts()
    window = (slice(rect.row, rect.row_end), slice(rect.col, rect.col_end))
    stalls = res.stats.bank_stall[window]
    assert k.model_cycles == (2 + act.gelu_cycles(CONFIG, int(counts.max()), approximate)
                              + int(stalls.max()))
    busy = res.stats.busy[window] + res.stats.stall[window]
    expect = [[2 + act.gelu_cycles(CONFIG, int(e), approximate) for e in row]
              for row in counts] + stalls
    np.testing.assert_array_equal(busy, expect)


def test_gelu_tolerance_is_tight_in_the_bulk():
    """On ordinary inputs the bound is a few ulps, not a loose rtol."""
    x = np.linspace(-4, 4, 1001).astype(np.float32)
    for approximate in ("tanh", "none"):
        ref = np.abs(act.gelu_reference(x, approximate))
        rel = act.gelu_tolerance(x, approximate) / np.maximum(ref, 1e-30)
        assert np.median(rel) < 16 * 2.0**-24, approximate


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_nan_and_infinities(approximate):
    """NaN propagates, +inf gives +inf and -inf gives NaN (PyTorch's x * 0)."""
    x = np.full((4, 4), np.nan, np.float32)
    x[0, :3] = [1.0, np.inf, -np.inf]
    k = act.build_gelu(CONFIG, Rect(0, 0, 4, 4), 4, 4, approximate=approximate)
    y = run_kernel(k, {"x": x}, min_table_rows=MIN_TABLE_ROWS).output
    assert np.isnan(y[1:]).all() and np.isnan(y[0, 3]) and np.isnan(y[0, 2])
    assert y[0, 1] == np.inf
    assert abs(y[0, 0] - {"tanh": 0.8411920, "none": 0.8413447}[approximate]) < 1e-6


def test_gelu_cycles_per_element():
    assert act.gelu_cycles(CONFIG, 1000) == 34_500  # tanh form: 4 e before sigmoid
    assert act.gelu_cycles(CONFIG, 1000, "none") == 51_500
    assert act.gelu_cycles(CONFIG, 7) == 3 * 7 + 7 + ml.sigmoid_cycles(CONFIG, 7)
    # shl, shr, 2 min at width 1, 2 sub at width 2; the tail
    assert act.gelu_cycles(CONFIG, 7, "none") == (4 * 7 + 2 * 4
                                                   + ml.gauss_tail_cycles(CONFIG, 7, True))


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="48 KiB"):
        act.build_gelu(CONFIG, Rect(0, 0, 1, 1), 100, 100)
    with pytest.raises(ValueError, match="need m >= 3"):
        act.build_gelu(CONFIG, Rect(0, 0, 3, 3), 2, 9)
    with pytest.raises(ValueError, match="acc_dtype"):
        act.build_gelu(CONFIG, Rect(0, 0, 2, 2), 4, 4, dtype="f16", acc_dtype="f16")
    with pytest.raises(ValueError, match="approximate must be one of"):
        act.build_gelu(CONFIG, Rect(0, 0, 2, 2), 4, 4, approximate="erf")


def test_blocks_round_trip():
    b = Blocks.of(Rect(0, 0, 2, 3), 5, 7)
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    for packed in (True, False):
        np.testing.assert_array_equal(b.gather(b.scatter(x, packed=packed), packed), x)
