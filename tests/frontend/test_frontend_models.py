"""End to end against eager PyTorch, fp32, with `torch.testing.assert_close`'s default fp32
tolerances (rtol 1.3e-6, atol 1e-5): every node of the graph is also compared."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, MLP, TinyGPT, lenet_with_statistics


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
    # a batch of one row is a matrix-vector product on the fabric
    gemm = "gemv" if batch == 1 else "gemm_summa"
    assert {gemm, "elementwise", "map"} <= kinds
    assert not ({"gemv", "gemm_summa"} - {gemm}) & kinds


def test_lenet_with_batch_norm():
    torch.manual_seed(0)
    model = lenet_with_statistics()
    cm = _check(model, (torch.randn(2, 1, 8, 8),))
    assert "rowreduce" in {p.stage.kind for p in cm.prepared}
    # eval batch norm: one affine stage, its scale and shift one value per row (channel)
    (norm,) = [p.stage for p in cm.prepared if p.stage.node.name.startswith("_native_batch")]
    assert norm.kind == "affine" and len(norm.operands[1].shape) == 1


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


class Addmm(torch.nn.Module):
    """torch.addmm with a runtime or parameter bias and ATen's beta and alpha."""

    def __init__(self, bias_shape, beta=1, alpha=1):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(6, 5))
        self.b = torch.nn.Parameter(torch.randn(bias_shape))
        self.beta, self.alpha = beta, alpha

    def forward(self, x, bias=None):
        bias = self.b if bias is None else bias
        return torch.addmm(bias, x, self.w, beta=self.beta, alpha=self.alpha)


def _stages(cm):
    """(kernel, operand names) of every stage."""
    return [(p.stage.kind, [op.name for op in p.stage.operands]) for p in cm.prepared]


FUSED = ("gemm_summa", ["A", "B", "C0"])


@pytest.mark.parametrize("shape", [(3, 16), (2, 3, 16)])
def test_linear_with_bias_is_one_gemm_stage(shape):
    """aten.addmm (nn.Linear with a bias, a 3-D input viewed as rows) lowers to one GEMM
    whose accumulator starts from the bias, broadcast over the rows (its operand "C0"):
    no add stage after it (frontend/lowering/matmul.py)."""
    torch.manual_seed(1)
    cm = _check(torch.nn.Linear(16, 7), (torch.randn(*shape),))
    assert _stages(cm) == [FUSED]
    c0 = cm.prepared[0].consts["C0"]  # the parameter, loaded with the weights
    assert c0.shape == (shape[-2] * (shape[0] if len(shape) == 3 else 1), 7)
    assert (c0 == c0[:1]).all()


@pytest.mark.parametrize("bias_shape, beta, alpha, stages", [
    ((5,), 0.5, 1, [FUSED]),  # a constant bias's beta is folded
    ((3, 1), 1, 1, [FUSED]),  # a column broadcast over n
    ((3, 5), 0, 1, [("gemm_summa", ["A", "B"])]),  # beta = 0: no bias at all
    ((5,), 1, 2.0, [("gemm_summa", ["A", "B"]), ("map", ["x"]),  # alpha scales the
                    ("elementwise", ["x", "y"])]),               # product alone
])
def test_addmm_scales_and_bias_shapes(bias_shape, beta, alpha, stages):
    torch.manual_seed(2)
    cm = _check(Addmm(bias_shape, beta, alpha), (torch.randn(3, 6),))
    assert _stages(cm) == stages


def test_addmm_runtime_bias_moves_into_the_accumulator():
    """A bias computed at runtime (an input here, scaled by beta on the fabric) arrives in
    the GEMM's accumulator like any runtime operand."""
    torch.manual_seed(3)
    cm = _check(Addmm((1, 5), beta=2.0), (torch.randn(4, 6), torch.randn(1, 5)))
    assert _stages(cm) == [("map", ["x"]), FUSED]
    assert cm.prepared[1].stage.operands[2].runtime
