"""clamp and hardtanh of activations (ReLU6, Hardtanh, torch.clamp with one or two
bounds) lower to one clamp stage (two bounds) or a max or min map (one) and match eager
PyTorch bit for bit, NaN included; clamp of integer indices stays symbolic (the embedding
backward's)."""

import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG


class Clamps(nn.Module):
    def forward(self, x):
        return (nn.functional.relu6(x * 4.0) + torch.clamp(x, -0.5, 0.25)
                + torch.clamp(x, min=0.1) * torch.clamp(x, max=-0.2) + nn.Hardtanh(-2.0, 3.0)(x))


def test_clamp_and_hardtanh_match_eager():
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0)) * 4.0
    x[0, 0], x[1, 1], x[2, 2] = float("nan"), float("inf"), float("-inf")
    cm = frontend.compile(Clamps(), (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), Clamps()(x), rtol=0.0, atol=0.0, equal_nan=True)
    kinds = [s.kind for s in cm.lowered.stages]
    # relu6, clamp(-0.5, 0.25), Hardtanh: one stage each; x * 4, clamp(min), clamp(max): maps
    assert kinds.count("clamp") == 3 and kinds.count("map") == 3
