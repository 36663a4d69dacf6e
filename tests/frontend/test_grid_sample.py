"""F.grid_sample (`frontend.lowering.grid_sample`) against eager PyTorch: a grid given at
run time (bilinear, zeros and border padding, both align_corners, points outside the
image), a spatial transformer whose grid comes from the input (a linear layer's affine
theta, `F.affine_grid`), a constant grid in every mode and padding, and the refusal of the
runtime modes the fabric does not build.

Tolerances: a runtime grid's weights are eager's products of 1 - frac and frac, the four
pixels added in eager's order (fused into the GEMM's sums where eager rounds each
product, and ix unnormalized in two roundings where eager's vectorized kernel fuses one):
within an ulp or two of the output, inside assert_close's fp32 defaults (rtol 1.3e-6,
atol 1e-5) for values of order 1. A constant grid's weights are eager's own: the same."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from tests.frontend.models import CONFIG, Fn

GEN = torch.Generator().manual_seed(0)
IMAGE = torch.randn(2, 3, 5, 6, generator=GEN)
GRID = torch.rand(2, 4, 3, 2, generator=GEN) * 2.6 - 1.3  # some points outside [-1, 1]


@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_a_runtime_grid_samples_as_eager(padding, align_corners):
    def f(x, grid):
        return F.grid_sample(torch.relu(x) - 0.5, grid, padding_mode=padding,
                             align_corners=align_corners)

    cm = frontend.compile(Fn(f).eval(), (IMAGE, GRID), config=CONFIG)
    torch.testing.assert_close(cm(IMAGE, GRID), f(IMAGE, GRID))
    grid = GRID.flip(1) * 0.9  # another call, other points
    torch.testing.assert_close(cm(IMAGE, grid), f(IMAGE, grid))


class SpatialTransformer(nn.Module):
    """theta (2 x 3) regressed from the image by a linear layer, near the identity."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.loc = nn.Linear(3 * 5 * 6, 6)
        nn.init.normal_(self.loc.weight, std=0.02)
        self.loc.bias.data = torch.tensor([1.0, 0.1, 0.0, -0.1, 0.9, 0.05])

    def forward(self, x):
        theta = self.loc(x.flatten(1)).view(-1, 2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)


def test_a_spatial_transformer_warps_by_its_own_theta():
    model = SpatialTransformer().eval()
    cm = frontend.compile(model, (IMAGE,), config=CONFIG)
    with torch.no_grad():
        torch.testing.assert_close(cm(IMAGE), model(IMAGE))


@pytest.mark.parametrize("mode, padding", [("bilinear", "zeros"), ("nearest", "border"),
                                           ("bicubic", "reflection")])
def test_a_constant_grid_takes_eagers_weights(mode, padding):
    def f(x):
        return F.grid_sample(x * 2.0, GRID, mode=mode, padding_mode=padding,
                             align_corners=True)

    cm = frontend.compile(Fn(f).eval(), (IMAGE,), config=CONFIG)
    torch.testing.assert_close(cm(IMAGE), f(IMAGE))


def test_a_runtime_grid_in_nearest_mode_is_refused_by_name():
    def f(x, grid):
        return F.grid_sample(x, grid, mode="nearest", align_corners=False)

    with pytest.raises(frontend.UnsupportedOpError, match="runtime grid in mode 'nearest'"):
        frontend.compile(Fn(f).eval(), (IMAGE, GRID), config=CONFIG)
