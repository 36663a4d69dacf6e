"""The natural log kernel (`mathlib.log` through `unary.build_unary`) and the unary
reciprocal: accuracy in fp32 ulps against numpy, bit-exactness against the numpy mirror of
its arithmetic, torch's edge values, cycles against the model.

The fabric run covers 64 x 68 = 4352 points on the 16 PEs of a 4x4 fabric (272 per PE): a
log-uniform sweep of every positive binade (subnormals included), a dense linear sweep of
[0.5, 2] (where k switches between -1, 0 and 1), every power of two from 2^-149 to 2^127,
and edge values. The reference is numpy's float64 log rounded to fp32; the error of a point
is |got - ref| / ulp(ref) (np.spacing) and must not exceed `mathlib.LOG_ULPS` (1 ulp).
"""

import math

import numpy as np
import pytest
import torch

from fabric import FabricConfig
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels import mathlib_numpy as mn
from fabric.kernels.base import run_kernel
from fabric.kernels.unary import build_unary
from fabric.program import Rect

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 4, 4)
M, N = 64, 68  # 272 points per PE
F32 = np.finfo(np.float32)
EDGES = [1.0, float(np.nextafter(np.float32(1), np.float32(2))),
         float(np.nextafter(np.float32(1), np.float32(0))), float(F32.max), float(F32.tiny),
         1e-45, 1e-40, float(np.float32(math.sqrt(0.5))), float(np.float32(math.sqrt(2))),
         math.e, 10.0, 1e30]
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, -1e-40, -float(F32.max), -1e-45]


def _points() -> np.ndarray:
    """The points in use (the specials last); the kernel's other slots hold 3.0."""
    powers = np.exp2(np.arange(-149, 128, dtype=np.float64))
    sweep = np.exp2(np.linspace(-149, 128, 2048, endpoint=False))
    near_one = np.linspace(0.5, 2.0, 1500)
    return np.concatenate([sweep, near_one, powers, EDGES, SPECIALS]).astype(np.float32)


@pytest.fixture(scope="module")
def log_run():
    x = np.full(M * N, np.float32(3.0))
    x[:_points().size] = _points()
    k = build_unary(CONFIG, RECT, M, N, "log")
    res = run_kernel(k, {"x": x.reshape(M, N)})
    return x, res.output.reshape(-1), int(res.stats.bank_stall.max()), res.cycles, k.model_cycles


def ulp_error(got: np.ndarray, x: np.ndarray, fn=np.log) -> np.ndarray:
    with np.errstate(all="ignore"):
        ref = fn(x.astype(np.float64)).astype(np.float32)
    ulp = np.spacing(np.maximum(np.abs(ref), np.float32(F32.tiny))).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref.astype(np.float64)) / ulp


def test_log_within_stated_ulps(log_run):
    x, y, *_ = log_run
    finite = np.isfinite(x) & (x > 0)
    err = ulp_error(y[finite], x[finite])
    worst = int(np.argmax(err))
    assert err.max() <= ml.LOG_ULPS, f"{err.max():.2f} ulps at x={x[finite][worst]!r}"
    # the subnormal binades are as accurate as the rest
    sub = finite & (x < F32.tiny)
    assert sub.sum() > 100 and ulp_error(y[sub], x[sub]).max() <= ml.LOG_ULPS


def test_log_edge_values_as_torch(log_run):
    x, y, *_ = log_run
    start = _points().size  # the specials are the last points written
    got = y[start - len(SPECIALS):start]
    np.testing.assert_array_equal(x[start - len(SPECIALS):start],
                                  np.array(SPECIALS, np.float32))
    want = torch.log(torch.tensor(SPECIALS, dtype=torch.float32)).numpy()
    np.testing.assert_array_equal(got, want)  # equal, NaN where NaN
    one = int(np.flatnonzero(x == 1.0)[0])
    assert y[one] == 0.0 and not np.signbit(y[one])  # log(1) = +0


def test_log_bit_exact_against_numpy_mirror(log_run):
    """The fabric computes exactly `log_reference` (fma rounded once or twice)."""
    x, y, *_ = log_run
    for fused in (False, True):
        ref = mn.log_reference(x, fused)
        if np.array_equal(y.view(np.uint32)[~np.isnan(y)], ref.view(np.uint32)[~np.isnan(y)]) \
                and np.array_equal(np.isnan(y), np.isnan(ref)):
            return
    pytest.fail("the fabric's log differs from log_reference in both fma modes")


def test_log_reference_random_bits_within_ulps():
    """The mirror over a million random positive bit patterns (every binade, subnormals
    included): within LOG_ULPS in both fma modes."""
    bits = np.random.default_rng(0).integers(1, 0x7F800000, 1_000_000, dtype=np.int64)
    x = bits.astype(np.uint32).view(np.float32)
    for fused in (False, True):
        assert ulp_error(mn.log_reference(x, fused), x).max() <= ml.LOG_ULPS


def test_log_cycles_equal_model(log_run):
    *_, stalls, cycles, model = log_run  # plus the groups waiting on a bank pair
    assert cycles == model == 2 + ml.log_cycles(CONFIG, M * N // 16) + stalls


@pytest.mark.parametrize("generation", ["wse2", "wse3"])
def test_log_formula_matches_instruction_list(generation):
    config = FabricConfig.small(1, 1, generation=generation)
    code = ml.log(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(4)])
    assert len(code) == 54
    for n in (1, 2, 7, 100, 4097):
        assert ml.log_cycles(config, n) == ml.sequence_cycles(config, code, n)
    if generation == "wse2":
        assert ml.log_cycles(config, 1000) == 48 * 1000  # 28 integer ops at width 1


def test_log_operands_checked():
    x, y, s = Mem("x", length=8), Mem("y", length=8), Mem("s", length=8)
    with pytest.raises(ValueError, match="needs 4 scratch"):
        ml.log(y, x, [s])
    with pytest.raises(ValueError, match="may overlap"):
        ml.log(y, x, [s, Mem("t", length=8), Mem("u", length=8), Mem("s", offset=4, length=8)])
    ml.log(x, x, [Mem(n, length=8) for n in "stuv"])  # in place is allowed


def test_reciprocal_unary_within_ulps_and_cycles():
    rng = np.random.default_rng(3)
    mag = np.exp2(rng.uniform(-120, 100, (10, 6)))
    x = (mag * rng.choice([-1.0, 1.0], (10, 6))).astype(np.float32)
    k = build_unary(CONFIG, Rect(0, 0, 2, 2), 10, 6, "reciprocal")
    res = run_kernel(k, {"x": x})
    assert ulp_error(res.output, x, lambda v: 1 / v).max() <= ml.RECIPROCAL_REFINED_ULPS
    assert res.cycles == k.model_cycles == 2 + ml.reciprocal_cycles(CONFIG, 15, True, True)
    assert ml.reciprocal_cycles(FabricConfig.small(1, 1), 1000, True, True) == 26000
