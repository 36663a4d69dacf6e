"""Convolution variants (`frontend/lowering/conv.py`, docs/frontend.md section 2): grouped
and depthwise, 1D, transposed, against eager PyTorch with assert_close's fp32 tolerances on
the frontend tests' fabric (CONFIG); one training step through the backward of depthwise,
grouped and 1D convolutions, and one in mixed precision.

Which lowering a variant takes: groups with C_out / G <= G (depthwise above all) are
weighted sums of the windows (one `rowdot` stage), other groups one GEMM per group; a
transposed convolution is a GEMM and the col2im sum (a `rowdot` of weight 1, or nothing
when no two contributions meet and there is no bias)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import frontend
from frontend.training import compile_training_step
from tests.frontend.models import CONFIG


class Pre(nn.Module):
    """relu then the layer: the layer's input comes from a stage, as in a model."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(torch.relu(x))


def _check(layer, shape, seed=0):
    torch.manual_seed(seed)
    model = Pre(layer).eval()
    x = torch.randn(shape)
    cm = frontend.compile(model, (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), model(x))
    return sorted(s.kind for s in cm.lowered.stages if s.node.name.startswith("conv"))


@pytest.mark.parametrize("layer,shape,kinds", [
    # ConvNeXt-like depthwise (kernel 5, padding 2) and MobileNet's stride-2 depthwise with
    # a channel multiplier of 2: weighted sums, the bias in the same stage
    (lambda: nn.Conv2d(4, 4, 5, padding=2, groups=4), (1, 4, 6, 6), ["rowdot"]),
    (lambda: nn.Conv2d(3, 6, 3, stride=2, padding=1, groups=3), (2, 3, 7, 7), ["rowdot"]),
    # ResNeXt-like groups, C_out / G = 3 > G = 2: a GEMM per group, then the bias
    (lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2, bias=False), (1, 4, 6, 6),
     ["gemm_summa", "gemm_summa"]),
    # wav2vec2's strided feature encoder conv and a Conformer-style depthwise 1D conv
    (lambda: nn.Conv1d(3, 4, 3, stride=2, bias=False), (2, 3, 9), ["gemm_summa"]),
    (lambda: nn.Conv1d(4, 4, 5, padding=2, dilation=1, groups=4), (1, 4, 8), ["rowdot"]),
    # transposed: decoder upsampling with overlapping taps, and kernel = stride (a layout)
    (lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1),
     (1, 3, 4, 4), ["gemm_summa", "rowdot"]),
    (lambda: nn.ConvTranspose2d(2, 3, 2, stride=2, bias=False), (1, 2, 3, 4),
     ["gemm_summa"]),
    (lambda: nn.ConvTranspose1d(2, 4, 4, stride=2, padding=1, groups=2), (1, 2, 5),
     ["gemm_summa", "gemm_summa", "rowdot"]),
], ids=["depthwise5x5", "depthwise-stride2-x2", "groups2-gemms", "conv1d-stride2",
        "depthwise1d", "transposed-s2", "transposed-k2s2-layout", "transposed1d-groups2"])
def test_convolution_variant_matches_eager(layer, shape, kinds):
    assert _check(layer(), shape) == kinds


def test_mixed_precision_depthwise_gradients():
    """bfloat16 training step of pointwise -> relu -> depthwise: the depthwise backward runs
    its weighted sums in bfloat16 storage with fp32 sums (convolution_backward takes the
    half format, `frontend.amp.node_formats`); the gradients of the scaled loss within 8
    bfloat16 epsilons of eager autocast's, relative to each one's largest magnitude (the
    bound of tests/frontend/test_training_mixed.py)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.ReLU(), nn.Conv2d(3, 3, 3, padding=1,
                                                                    groups=3))
    x, target = torch.randn(2, 3, 5, 5), torch.randn(2, 3, 5, 5)
    step = compile_training_step(model, (x,), (target,), F.mse_loss, CONFIG,
                                 precision="mixed", half="bfloat16")
    scale = 1024.0
    loss, grads = step((x,), (target,), loss_scale=scale)
    rowdot = [s for s in step.backward.lowered.stages if s.kind == "rowdot"]
    assert len(rowdot) == 2 and {s.dtype for s in rowdot} == {"bf16"}  # input and weight
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want_loss = F.mse_loss(model(x), target)
    (want_loss * scale).backward()
    eps = torch.finfo(torch.bfloat16).eps
    torch.testing.assert_close(loss, want_loss.float(), rtol=8 * eps, atol=0)
    for name, p in model.named_parameters():
        err = (grads[name] - p.grad).abs().max() / p.grad.abs().max()
        assert err <= 8 * eps, f"{name}: {err:.3g}"


class DepthwiseNet(nn.Module):
    """depthwise (weighted sums) -> relu -> grouped (a GEMM per group) -> depthwise 1D."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(2, 2, 3, padding=1, groups=2)
        self.grouped = nn.Conv2d(2, 6, 3, groups=2, bias=False)
        self.dw1d = nn.Conv1d(6, 6, 3, padding=1, groups=6)

    def forward(self, x):
        y = self.grouped(torch.relu(self.dw(x)))
        return self.dw1d(y.flatten(2))


def test_depthwise_and_grouped_training_step():
    """One step: the loss and every parameter's gradient against eager autograd."""
    torch.manual_seed(0)
    model = DepthwiseNet()
    x, target = torch.randn(2, 2, 5, 5), torch.randn(2, 6, 9)
    step = compile_training_step(model, (x,), (target,), F.mse_loss, CONFIG)
    loss, grads = step((x,), (target,))
    model.zero_grad()
    want = F.mse_loss(model(x), target)
    want.backward()
    torch.testing.assert_close(loss, want.detach())
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, msg=lambda m, n=name: f"{n}: {m}")


def test_refused_variants_name_what_is_missing():
    torch.manual_seed(0)
    up = nn.ConvTranspose2d(1, 1, 2, stride=2)
    with pytest.raises(frontend.UnsupportedOpError,
                       match="convolution_backward of a transposed convolution"):
        compile_training_step(up, (torch.randn(1, 1, 2, 2),), (torch.randn(1, 1, 4, 4),),
                              F.mse_loss, CONFIG)


def test_a_depthwise_convolutions_windows_cross_once_per_element_and_pe():
    """The windows of a 3 x 3 depthwise convolution hold each input element in up to 9
    rows, most of them on one PE of its tile: the move brings each element to a PE once
    and the PE copies it into its other slots (`fabric.kernels.redistribute`), so fewer
    words cross the fabric than the windows have slots; the output as eager's."""
    torch.manual_seed(0)
    model = Pre(nn.Conv2d(4, 4, 3, padding=1, groups=4)).eval()
    x = torch.randn(1, 4, 6, 6)
    cm = frontend.compile(model, (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), model(x))
    (conv,) = [p for p in cm.prepared if p.stage.kind == "rowdot"]
    (source,) = conv.sources["x"]
    slots = sum(int((a >= 0).sum()) for a in source.dst.symbols.values())
    plan = source.plan
    assert plan.remote_words + plan.local_words == slots
    # every (PE, element) pair crosses at most once: no more words than the pairs
    pairs = sum(len(np.unique(a[r, c][a[r, c] >= 0])) for a in source.dst.symbols.values()
                for r in range(a.shape[0]) for c in range(a.shape[1]))
    assert plan.remote_words <= pairs < slots
