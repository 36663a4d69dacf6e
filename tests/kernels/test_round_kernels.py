"""trunc and floor of fp32 values by their bits (`unary.trunc_code`, `unary.floor_code`):
exact for every fp32 value.

- Host sweep: `mathlib_numpy.emulate` runs the instruction lists in numpy as the fabric
  computes them, over every exponent (2^-30 .. 2^40, both signs, random fractions), the
  integers and half-integers near 0, 2^23 and 2^24, and the special values; the result must
  equal numpy's np.trunc / np.floor bit for bit (signed zeros included), both fma modes.
- Fabric: `build_unary` runs them on a 2 x 3 rectangle (blocks of different sizes); output
  equal to numpy's bit for bit, cycles equal to the model (2 + the ops' SIMD cycles).
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.instructions import Mem
from fabric.kernels import mathlib_numpy as mn
from fabric.kernels.base import run_kernel
from fabric.kernels.unary import FUNCTIONS, build_unary, unary_cycles

REFERENCE = {"trunc": np.trunc, "floor": np.floor}


def _points(rng, count: int) -> np.ndarray:
    exps = rng.integers(-30, 41, count)
    mant = rng.uniform(1.0, 2.0, count)
    sign = rng.choice([-1.0, 1.0], count)
    rand = (sign * mant * 2.0**exps).astype(np.float32)
    edges = np.concatenate([np.arange(-8, 8.5, 0.5), 2.0**23 + np.arange(-3, 3.5, 0.5),
                            -(2.0**23) + np.arange(-3, 3.5, 0.5), 2.0**24 + np.arange(-4, 5),
                            [0.0, -0.0, 0.49999997, -0.49999997, 0.99999994, -0.99999994,
                             1e30, -1e30, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, 2.0**-126,
                             -(2.0**-126)]]).astype(np.float32)
    return np.concatenate([edges, rand])


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = ~nan & (got.view(np.uint32) != want.view(np.uint32))
    assert not bad.any(), list(zip(got[bad][:5], want[bad][:5]))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("fn", ["trunc", "floor"])
def test_host_sweep_exact(fn, fused):
    x = _points(np.random.default_rng(0), 200_000)
    code_of, scratch, _ = FUNCTIONS[fn]
    code = code_of(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(scratch)])
    got = mn.emulate(code, {"x": x}, fused)["y"].view(np.float32)
    _same_bits(got, REFERENCE[fn](x))


@pytest.mark.parametrize("fn", ["trunc", "floor"])
def test_fabric_exact_and_cycles(fn):
    config = FabricConfig.small(4, 4)
    x = _points(np.random.default_rng(1), 100)[:7 * 13].reshape(7, 13)
    k = build_unary(config, Rect(0, 0, 2, 3), 7, 13, fn)
    res = run_kernel(k, {"x": x})
    _same_bits(np.asarray(res.output, np.float32), REFERENCE[fn](x))
    assert res.cycles == k.model_cycles
    e = 4 * 5  # the largest block: ceil(7 / 2) x ceil(13 / 3)
    stalls = int(res.stats.bank_stall.max())  # groups waiting on a bank pair
    assert k.model_cycles == 2 + unary_cycles(config, fn, e) + stalls


def test_cycles_per_element_on_wse2():
    """The module table's figures: 13 ops for trunc (4 shifts, 2 conversions at 1 per cycle,
    7 fp32 ops), 17 for floor; 12 e and 15 e on WSE-2 for even e."""
    config = FabricConfig.small(4, 4)
    assert unary_cycles(config, "trunc", 100) == 1200
    assert unary_cycles(config, "floor", 100) == 1500
