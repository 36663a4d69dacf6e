"""End to end against eager PyTorch, fp32, with `torch.testing.assert_close`'s default fp32
tolerances (rtol 1.3e-6, atol 1e-5): every node of the graph is also compared."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, MLP, LeNet, TinyGPT


def _check(model, inputs):
    model.eval()
    cm = frontend.compile(model, inputs, config=CONFIG)
    rows = cm.validate(*inputs)  # runs the model; raises on any node out of tolerance
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        want = model(*inputs)
    torch.testing.assert_close(cm.outputs(), want)
    assert cm.cycles > 0 and 0 < cm.utilization < 1
    return cm


@pytest.mark.parametrize("batch", [1, 3])
def test_mlp(batch):
    torch.manual_seed(batch)
    cm = _check(MLP(), (torch.randn(batch, 16),))
    kinds = {p.stage.kind for p in cm.prepared}
    assert {"gemm_summa", "elementwise", "map"} <= kinds


def test_lenet_with_batch_norm():
    torch.manual_seed(0)
    model = LeNet()
    with torch.no_grad():  # non-trivial running statistics
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    cm = _check(model, (torch.randn(2, 1, 8, 8),))
    assert "rowreduce" in {p.stage.kind for p in cm.prepared}


@pytest.mark.long  # one-layer GPTs run by default (test_frontend_mixed, test_cross_entropy)
def test_gpt_two_layers_causal():
    torch.manual_seed(0)
    model = TinyGPT()
    idx = torch.randint(0, 32, (2, 4))
    cm = _check(model, (idx,))
    kinds = {p.stage.kind for p in cm.prepared}
    assert {"softmax", "layernorm", "gelu", "resident"} <= kinds
    # new indices: the embedding's data movement is planned per call, no recompilation
    idx2 = torch.randint(0, 32, (2, 4))
    torch.testing.assert_close(cm(idx2), model(idx2))


def test_zero_dim_input():
    """A 0-dim runtime input (a scale given per call) is written by the host like any."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x, s):
            return self.fc(x) * s

    torch.manual_seed(0)
    _check(Scaled(), (torch.randn(2, 4), torch.tensor(1.5)))
