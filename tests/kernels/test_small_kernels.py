"""Small kernels the frontend uses: row reductions (sum, max, mean; exact against a
left-to-right fp32 fold in numpy), the resident table (round trip), elementwise tanh and
exp (within mathlib's ulp bounds); each against its exact cycle model."""

import numpy as np
import pytest

from fabric import FabricConfig
from fabric.kernels.base import run_kernel
from fabric.kernels.resident import build_resident
from fabric.kernels.rowreduce import build_rowreduce, rowreduce_reference
from fabric.program import Rect

CONFIG = FabricConfig.small(4, 4)


@pytest.mark.parametrize("op,m,r,pes", [("sum", 10, 4, 3), ("max", 7, 9, 2), ("mean", 5, 1, 1),
                                        ("mean", 12, 6, 4)])
def test_rowreduce_exact_and_cycles(op, m, r, pes):
    x = np.random.default_rng(m * r).standard_normal((m, r)).astype(np.float32)
    k = build_rowreduce(CONFIG, Rect(0, 1, pes, 1), m, r, op, scale=1 / r)
    res = run_kernel(k, {"x": x})
    np.testing.assert_array_equal(res.output, rowreduce_reference(x, op, 1 / r))
    assert res.cycles == k.model_cycles


def test_rowreduce_rejects_wide_rect():
    with pytest.raises(ValueError, match="one PE wide"):
        build_rowreduce(CONFIG, Rect(0, 0, 2, 2), 8, 4)


def test_resident_round_trip():
    x = np.random.default_rng(1).standard_normal((9, 7)).astype(np.float32)
    k = build_resident(CONFIG, Rect(1, 1, 2, 3), 9, 7)
    res = run_kernel(k, {"x": x})
    np.testing.assert_array_equal(res.output, x)
    assert res.cycles == 0


@pytest.mark.parametrize("fn,ulps", [("tanh", 3), ("exp", 1)])
def test_unary_within_ulps_and_cycles(fn, ulps):
    from fabric.kernels.unary import build_unary

    x = np.random.default_rng(2).uniform(-6, 6, (10, 6)).astype(np.float32)
    k = build_unary(CONFIG, Rect(0, 0, 2, 2), 10, 6, fn)
    res = run_kernel(k, {"x": x})
    exact = getattr(np, fn)(x.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(res.output - exact) <= ulps * ulp)
    assert res.cycles == k.model_cycles
