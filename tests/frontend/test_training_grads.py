"""One training step on the simulated fabric: the loss and every parameter's gradient
against eager autograd, fp32, with `torch.testing.assert_close`'s default fp32 tolerances
(rtol 1.3e-6, atol 1e-5), on the frontend tests' fabric (CONFIG)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fabric.kernels.base import run_kernel
from fabric.kernels.compare import build_compare, compare_reference
from fabric.program import Rect
from frontend.errors import FrontendError
from frontend.tables import MIN_TABLE_ROWS
from frontend.training import compile_training_step, joint_graphs
from tests.frontend.models import CONFIG, MLP, LeNet, TinyGPT, lenet_with_statistics


def _eager(model, inputs, targets, loss_fn):
    model.zero_grad()
    loss = loss_fn(model(*inputs), *targets)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _check_step(model, inputs, targets, loss_fn):
    step = compile_training_step(model, inputs, targets, loss_fn, CONFIG)
    loss, grads = step(inputs, targets)
    want_loss, want = _eager(model, inputs, targets, loss_fn)
    torch.testing.assert_close(loss, want_loss)
    assert set(grads) == set(want)
    for name in want:
        torch.testing.assert_close(grads[name], want[name], msg=lambda m, n=name: f"{n}: {m}")
    assert step.forward.cycles > 0 and step.backward.cycles > 0
    return step


def test_compare_kernel_exact():
    """Masks from max/min/mul/add are exact; cycles match the model."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 9)).astype(np.float32)
    x[0, :4] = [0.0, -0.0, 1e-30, 3e38]
    x[1, :2] = [0.5, 0.5]
    for op, s in (("gt", 0.0), ("le", 0.0), ("lt", 0.5), ("ge", 0.5)):
        k = build_compare(CONFIG, Rect(0, 0, 3, 2), 7, 9, op, s)
        r = run_kernel(k, {"x": x}, min_table_rows=MIN_TABLE_ROWS)
        np.testing.assert_array_equal(r.output, compare_reference(x, op, s))
        assert r.cycles == k.model_cycles


def test_mlp_mse_gradients():
    torch.manual_seed(0)
    model = MLP()
    x, y = torch.randn(3, 16), torch.randn(3, 8)
    step = _check_step(model, (x,), (y,), F.mse_loss)
    kinds = {s.kind for s in step.backward.lowered.stages}
    assert {"gemm_summa", "relation", "select", "rowreduce"} <= kinds  # relu's grad: a select
    # the parameters are runtime inputs: a changed weight changes the next step
    with torch.no_grad():
        model.fc1.weight.mul_(-0.5)
    loss, grads = step((x,), (y,))
    want_loss, want = _eager(model, (x,), (y,), F.mse_loss)
    torch.testing.assert_close(loss, want_loss)
    torch.testing.assert_close(grads["fc1.weight"], want["fc1.weight"])


@pytest.mark.slow  # two graphs of larger tables: one more engine compile
def test_lenet_conv_pool_batch_norm_gradients():
    """Convolution, batch norm (eval: running statistics are constants, its affine
    parameters are trained), relu, max and average pooling, a linear layer."""
    torch.manual_seed(0)
    model = lenet_with_statistics().eval()
    step = _check_step(model, (torch.randn(2, 1, 8, 8),), (torch.randn(2, 5),), F.mse_loss)
    kinds = {s.kind for s in step.backward.lowered.stages}
    assert {"gemm_summa", "relation", "select", "rowreduce"} <= kinds
    # max pooling's integer indices are recomputed in the backward, not saved
    saved = step.graphs.backward.graph.find_nodes(op="placeholder")
    assert all(n.meta["val"].dtype.is_floating_point for n in saved)


class TiedPool(torch.nn.Module):
    """max pooling over windows with equal values: the gradient goes to the first one."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1, 1, 4, 4))

    def forward(self, x):
        return F.max_pool2d(x * self.w, 2)


def test_max_pool_ties_go_to_the_first_maximum():
    torch.manual_seed(0)
    x = torch.tensor([[1.0, 1.0, 2.0, -1.0], [1.0, 0.5, 2.0, 2.0],
                      [0.0, 0.0, 3.0, 1.0], [0.0, 0.0, 1.0, 3.0]]).reshape(1, 1, 4, 4)
    _check_step(TiedPool(), (x,), (torch.randn(1, 1, 2, 2),), F.mse_loss)


@pytest.mark.long  # about 160 stages: a minute of CPU (make test-long)
def test_gpt_one_layer_gradients():
    """Embeddings (runtime tables; the token table's gradient a scatter-add planned per
    call, here with repeated tokens), layer norm (mean and rstd computed for the backward),
    causal attention (math path), tanh gelu."""
    torch.manual_seed(0)
    model = TinyGPT(layers=1)
    idx = torch.tensor([[3, 7, 3, 3], [7, 0, 31, 3]])
    step = _check_step(model, (idx,), (torch.randn(2, 4, 32),), F.mse_loss)
    kinds = {s.kind for s in step.backward.lowered.stages}
    assert {"gemm_summa", "tanh", "rowreduce", "resident"} <= kinds
    assert any(s.name.endswith("_scatter") for s in step.backward.lowered.stages)


def test_joint_graphs_refuses_buffer_updates():
    """Batch norm in training mode updates its running statistics in the forward."""
    with pytest.raises(FrontendError, match="updates buffers"):
        joint_graphs(LeNet().train(), (torch.randn(2, 1, 8, 8),), F.mse_loss,
                     (torch.randn(2, 5),))


def test_joint_graphs_refuses_non_scalar_loss():
    model = MLP()
    with pytest.raises(FrontendError, match="scalar"):
        joint_graphs(model, (torch.randn(2, 16),), lambda out: out * 2)
