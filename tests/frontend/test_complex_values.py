"""Complex products as rotary position embeddings written with complex numbers compute them
(`frontend.lowering.complex_values`: Llama 4's and Meta's reference code), against eager
fp32 PyTorch: the head's pairs as complex numbers times constant unit phasors, and a
complex tensor times a real one, a number and another complex tensor.

Each part is one rounding of each of two products and one of their sum (eager's complex
multiply on a CPU: the same roundings, or a fused product within an ulp of it): rtol 1e-6,
atol 1e-6 for parts that cancel to near zero (|x| up to about 4)."""

import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG

TOL = {"rtol": 1e-6, "atol": 1e-6}


class ComplexRotary(nn.Module):
    """Llama 4's apply_rotary_emb on one linear layer's query: (1, 8 tokens, 2 heads, 8)."""

    def __init__(self):
        super().__init__()
        angles = torch.arange(8).float()[:, None] * torch.tensor([1.0, 0.3, 0.05, 0.002])
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))
        self.q = nn.Linear(8, 16)

    def forward(self, x):  # (1, 8, 8)
        xq = self.q(x).view(1, 8, 2, 8)
        pairs = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * self.freqs_cis[None, :, None, :]).flatten(3)


def test_rotary_embedding_with_complex_phasors():
    torch.manual_seed(0)
    model = ComplexRotary().eval()
    x = torch.randn(1, 8, 8, generator=torch.Generator().manual_seed(1))
    cm = frontend.compile(model, (x,), config=CONFIG)
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(cm(x), want, **TOL)
    assert all(r.ok for r in cm.validate(x))


class Products(nn.Module):
    def forward(self, x):  # (3, 4, 2)
        z = torch.view_as_complex(x * 1.0)
        w = torch.view_as_complex(x.flip(0) + 0.5)
        by_real = torch.view_as_real(z * x[..., 0])  # a real factor: each part scaled
        return (by_real, torch.view_as_real(z * w)[..., 1], torch.view_as_real(z * w),
                torch.view_as_real(z * 2.5))


def test_complex_times_real_and_complex():
    x = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(2))
    cm = frontend.compile(Products(), (x,), config=CONFIG)
    for g, w in zip(cm(x), Products()(x)):
        torch.testing.assert_close(g, w, **TOL)
