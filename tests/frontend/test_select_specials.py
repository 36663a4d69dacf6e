"""where(x > 0, x, 0) and relu's gradient where(x <= 0, 0, g) select bit for bit: the zero
branch gives 0 where the other branch is infinite or NaN, as eager does (a product with a
0/1 mask would give NaN there)."""

import torch

import frontend
from tests.frontend.models import CONFIG


class Clip(torch.nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, 0.0) + torch.where(x <= 0, 0.0, -x)


def test_zero_branch_of_a_select_is_zero_for_infinite_and_nan_values():
    x = torch.tensor([[float("-inf"), -1.0, 0.0, 2.0, float("inf"), float("nan"), -0.0,
                       1e-45]])
    cm = frontend.compile(Clip(), (x,), config=CONFIG)
    got = cm(x)
    torch.testing.assert_close(got, Clip()(x), rtol=0, atol=0, equal_nan=True)
    assert got[0, 0] == 0 and got[0, 7] == 0  # -inf selected away; a subnormal x - x
