"""Models of 16-bit tensors (`model.to(torch.bfloat16)`) compiled in precision "fp32":
each node stored in the dtype the model gives it, computing in fp32 (`amp.traced_formats`),
the casts between fp32 and the 16-bit dtype (RMSNorm's and softmax's upcasts) a widening
and a rounding map (`layout.to_copy`).

Tolerances: eager PyTorch's CPU kernels for float16 and bfloat16 compute in fp32 and round
each op's output once, as the fabric's 16-bit kernels do, so elementwise ops, norms and
casts are bit for bit; a GEMM's fp32 sum may differ in order, by one rounding of the
16-bit output: the outputs are held to 2 epsilons of the format relative to the output's
largest magnitude, and `validate` holds every node to `MIXED_ULPS` epsilons.
"""

import pytest
import torch
import torch.nn as nn

import frontend
from frontend.amp import traced_formats
from frontend.capture import capture_module
from tests.frontend.models import CONFIG

EPS = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


class Block(nn.Module):
    """Llama's RMSNorm (upcast to fp32, rsqrt, cast back), a linear layer, a softmax
    computed in fp32 and cast back, a residual add."""

    def __init__(self, d: int = 16):
        super().__init__()
        torch.manual_seed(0)
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = self.weight * h.to(x.dtype)
        p = torch.softmax(self.proj(h), dim=-1, dtype=torch.float32).to(x.dtype)
        return x + p


class Rounding(nn.Module):
    """fp32 values rounded through a 16-bit dtype and back (a cast pair eager rounds)."""

    def forward(self, x):
        return (x * 3.0).to(torch.bfloat16).to(torch.float32) - x


def _close(got, want):
    tol = 2 * EPS[want.dtype] * float(want.float().abs().max())
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_block_of_16_bit_tensors_matches_eager(dtype):
    model = Block().to(dtype).eval()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1)).to(dtype)
    cm = frontend.compile(model, (x,), config=CONFIG)
    assert cm.stored_half is not None and cm.half is None
    assert {"f32", {torch.bfloat16: "bf16", torch.float16: "f16"}[dtype]} <= set(
        cm.formats.values())
    got = cm(x)
    assert got.dtype == dtype
    with torch.no_grad():
        _close(got, model(x))
    assert all(r.ok for r in cm.validate(x))
    report = cm.report()
    assert "precision: the model's" in report and "err eager" in report


def test_a_cast_to_bfloat16_rounds_as_eager():
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    cm = frontend.compile(Rounding(), (x,), config=CONFIG)
    got, want = cm(x), Rounding()(x)
    assert float(want.abs().max()) > 0  # the rounding is seen
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_an_fp32_model_keeps_no_formats():
    cm = frontend.compile(nn.Linear(8, 8).eval(), (torch.randn(2, 8),), config=CONFIG)
    assert cm.stored_half is None and cm.formats == {}


class BothHalves(nn.Module):
    def forward(self, x):
        return x.to(torch.float16).float() + x.to(torch.bfloat16).float()


def test_a_model_with_both_16_bit_dtypes_is_refused():
    captured = capture_module(BothHalves(), (torch.randn(2, 4),))
    with pytest.raises(frontend.FrontendError, match="both float16 and bfloat16"):
        traced_formats(captured)


@pytest.mark.long
@pytest.mark.parametrize("name,dtype", [("llama", torch.bfloat16), ("vit", torch.float16)])
def test_zoo_models_of_16_bit_tensors_match_eager(name, dtype):
    """Llama's RMSNorm upcasts, ViT's softmax upcast: every node within the format's
    epsilons of eager (validate raises otherwise), the output within 2 of them."""
    from frontend.architectures import build, fabric_config, output_tensor

    model, inputs = build(name)
    model = model.to(dtype)
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    cm = frontend.compile(model, inputs, config=fabric_config(name))
    assert all(r.ok for r in cm.validate(*inputs))
    with torch.no_grad():
        _close(output_tensor(cm.outputs()), output_tensor(model(*inputs)))
