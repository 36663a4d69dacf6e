"""Ops lowered through identities of ops the fabric has: ceil(x) = -floor(-x),
min(x) = -max(-x) (amin, min with its first index), log2 and log10 as log times a constant,
reciprocal by the unary kernel, diagonal as an index map, heaviside as its decomposition's
selects (computed integers beside a float branch).

Tolerances: negation, floor, max and index maps are exact, so those compare bit for bit
(special values included); reciprocal is within RECIPROCAL_REFINED_ULPS (1) of 1 / x and
log2 / log10 within LOG_ULPS + 1 (the product's rounding), both inside fp32's assert_close
defaults (rtol 1.3e-6, about 11 ulps)."""

import math

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, Fn

EXACT = {"rtol": 0.0, "atol": 0.0, "equal_nan": True}



def _values() -> torch.Tensor:
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(2)) * 3
    x[0, :5] = torch.tensor([-0.5, -0.0, math.inf, -math.inf, 2.0])
    return x


def _run(fn, x):
    cm = frontend.compile(Fn(fn).eval(), (x,), config=CONFIG)
    return cm(x)


@pytest.mark.parametrize("name, fn", [
    ("ceil", torch.ceil),
    ("amin", lambda x: x.amin(1)),
    ("min values", lambda x: torch.min(x, 1)[0]),
    ("min indices", lambda x: torch.min(x, 0)[1]),
    ("diagonal", lambda x: torch.diagonal(x, 1)),
    ("heaviside", lambda x: torch.heaviside(x, torch.tensor(0.5))),
    ("heaviside by a tensor", lambda x: torch.heaviside(x, torch.arange(6.0) - 2)),
])
def test_exact_identities_as_eager(name, fn):
    x = _values()
    x[1, 2] = x[1, 4] = -5.0  # a tie: the first index, as eager
    got = _run(fn, x)
    assert got.dtype == fn(x).dtype
    torch.testing.assert_close(got, fn(x), **EXACT)
    if name == "ceil":
        assert torch.signbit(got[0, 0])  # ceil(-0.5) is -0


@pytest.mark.parametrize("fn", [torch.reciprocal, torch.log2, torch.log10])
def test_reciprocal_and_logs_within_a_few_ulps(fn):
    x = torch.rand(4, 6, generator=torch.Generator().manual_seed(3)) * 100 + 1e-3
    torch.testing.assert_close(_run(fn, x), fn(x))


@pytest.mark.parametrize("fn", [torch.max, torch.min], ids=["max", "min"])
def test_max_and_min_of_every_element(fn):
    """x.max() and x.min() (aten.max.default, aten.min.default): exact, -0 kept by min."""
    x = _values()
    x[0, 2:4] = torch.tensor([60.0, -50.0])  # in place of the infinities
    got = _run(fn, x)
    assert abs(float(got)) in (60.0, 50.0)
    assert got.shape == () and got.dtype == torch.float32
    torch.testing.assert_close(got, fn(x), **EXACT)
