"""Mixed-precision training steps (compile_training_step(..., precision="mixed")): the
backward's node formats follow eager autocast's backward (matmuls and convolution
gradients in the half dtype), and one MLP step's gradients of the scaled loss match eager
autocast's within the mixed-precision bound."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from frontend.amp import half_dtype
from frontend.training import compile_training_step
from tests.frontend.models import CONFIG, MLP, LeNet

SCALE = 1024.0


def _stage_dtypes(compiled, prefix: str) -> set[str]:
    return {s.dtype for s in compiled.lowered.stages if s.name.startswith(prefix)}


def test_lenet_backward_formats_follow_autocast():
    torch.manual_seed(0)
    model = LeNet().eval()
    step = compile_training_step(model, (torch.randn(2, 1, 8, 8),), (torch.randn(2, 5),),
                                 F.mse_loss, CONFIG, precision="mixed", half="float16")
    bw = step.backward
    conv = [n for n in bw.captured.graph.nodes
            if n.target is torch.ops.aten.convolution_backward.default]
    assert conv and all(bw.formats[n.name] == "f16" for n in conv)
    assert _stage_dtypes(bw, conv[0].name) == {"f16"}
    mms = [n.name for n in bw.captured.graph.nodes if n.target is torch.ops.aten.mm.default]
    assert mms and all(bw.formats[m] == "f16" for m in mms)
    # batch norm's and pooling's gradients stay in fp32, as autocast's backward gives them
    assert "f32" in {bw.formats.get(n.name) for n in bw.captured.graph.nodes
                     if n.target is torch.ops.aten.max_pool2d_with_indices_backward.default}


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_mlp_scaled_gradients_match_eager_autocast(half):
    torch.manual_seed(0)
    model = MLP()
    x, y = torch.randn(3, 16), torch.randn(3, 8)
    step = compile_training_step(model, (x,), (y,), F.mse_loss, CONFIG, precision="mixed",
                                 half=half)
    loss, grads = step((x,), (y,), loss_scale=SCALE)
    model.zero_grad()
    with torch.autocast("cpu", dtype=getattr(torch, half)):
        want_loss = F.mse_loss(model(x), y)
    (want_loss * SCALE).backward()
    eps = half_dtype(half).torch_dtype and torch.finfo(getattr(torch, half)).eps
    # each gradient within 8 half epsilons of its largest magnitude (validate's bound)
    torch.testing.assert_close(loss, want_loss.float(), rtol=8 * eps, atol=0)
    for name, p in model.named_parameters():
        want = p.grad
        err = (grads[name] - want).abs().max() / want.abs().max()
        assert err <= 8 * eps, f"{name}: {err:.3g}"
