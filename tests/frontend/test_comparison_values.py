"""A comparison used as a tensor: reshaped, transposed, flipped, joined by cat (with a bool
constant too), counted by sum and cumsum, cast to an integer dtype, multiplied with a float
tensor. The lowering keeps
a comparison symbolic until a kernel needs it (a select reads it inline); every other use
computes its 0/1 mask first (`Lowering.materialized`). Masks, counts and products with them
are exact, so every output equals eager's bit for bit, dtype included."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, Fn

USES = {
    "view": lambda x: (x > 0).view(-1).float(),
    "transpose": lambda x: (x > 0).t().float(),
    "flip": lambda x: (x > 0).flip(1).float(),
    "cat": lambda x: torch.cat([x > 0, x < 0], 1).float(),
    "cat with a constant": lambda x: torch.cat([x > 0, torch.ones(4, 1, dtype=torch.bool)],
                                               1).float(),
    "count": lambda x: (x > 0).sum(dim=1),
    "running count": lambda x: (x > 0).cumsum(1),
    "int cast": lambda x: (x > 0).int() + 1,
    "product": lambda x: (x > 0) * x,
}


@pytest.mark.parametrize("use", list(USES))
def test_a_comparison_used_as_a_tensor_as_eager(use):
    fn = USES[use]
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    cm = frontend.compile(Fn(fn).eval(), (x,), config=CONFIG)
    other = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    got, want = cm(other), fn(other)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)
