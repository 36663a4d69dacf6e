"""Error paths: an unsupported op, a model too big for the fabric, wrong inputs."""

import pytest
import torch
import torch.nn as nn

import frontend
from fabric import FabricConfig
from tests.frontend.models import CONFIG, MLP


class Cumulative(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1) + 1.0


def test_unsupported_op_names_op_node_and_source_line():
    with pytest.raises(frontend.UnsupportedOpError) as info:
        frontend.compile(Cumulative(), (torch.randn(2, 8),), config=CONFIG)
    msg = str(info.value)
    assert "aten.cumsum.default" in msg
    assert "FX node 'cumsum'" in msg
    assert "test_frontend_errors.py" in msg and "torch.cumsum(x, dim=1)" in msg
    assert "Supported ops:" in msg and "aten.addmm.default" in msg


def test_exact_gelu_is_refused_with_the_reason():
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU())
    with pytest.raises(frontend.UnsupportedOpError, match="approximate='tanh'"):
        frontend.compile(model, (torch.randn(2, 8),), config=CONFIG)


def test_model_too_big_for_the_fabric():
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    with pytest.raises(frontend.PlacementError) as info:
        frontend.compile(model, (torch.randn(64, 256),), config=FabricConfig.small(2, 2))
    msg = str(info.value)
    assert "4 PEs" in msg and "need at least" in msg and "SRAM" in msg


def test_wrong_input_shape_is_named():
    cm = frontend.compile(MLP(), (torch.randn(2, 16),), config=CONFIG)
    with pytest.raises(frontend.FrontendError, match=r"input 'x' is \(3, 16\)"):
        cm(torch.randn(3, 16))


class ManyLayers(nn.Module):
    """Twelve GEMMs on tiles of several PEs: together their SUMMA colors far exceed 24,
    which the fabric reuses over time (each stage's program holds the colors alone)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(12)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def test_more_colors_than_the_fabric_has_are_reused_over_time():
    torch.manual_seed(0)
    model = ManyLayers().eval()
    x = torch.randn(8, 8)
    cm = frontend.compile(model, (x,), config=CONFIG)
    # SUMMA routes a color per owner column and per owner row (a 1-wide side needs none)
    gemm_colors = sum((p.rect.cols if p.rect.cols > 1 else 0) +
                      (p.rect.rows if p.rect.rows > 1 else 0)
                      for p in cm.prepared if p.stage.kind == "gemm_summa")
    assert gemm_colors > CONFIG.num_colors
    torch.testing.assert_close(cm(x), model(x))
