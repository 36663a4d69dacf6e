"""nn.Bilinear (`lowering.matmul.trilinear`: a GEMM of the second input by the weight's
(O I, J) view, then each output's weighted row over the first input) against eager fp32
PyTorch, with and without bias, the inputs computed or given; other _trilinear calls are
refused.

Tolerance: each output sums I J = 20 products in another order than eager's (the GEMM's
over j, then the row's over i): assert_close's fp32 defaults (rtol 1.3e-6, about 11 ulps;
atol 1e-5) for outputs of order 1."""

import pytest
import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG

GEN = torch.Generator().manual_seed(4)
X1, X2 = torch.randn(3, 4, generator=GEN), torch.randn(3, 5, generator=GEN)


class Pair(nn.Module):
    def __init__(self, bias: bool):
        super().__init__()
        torch.manual_seed(0)
        self.bilinear = nn.Bilinear(4, 5, 6, bias=bias)
        self.proj = nn.Linear(5, 5)

    def forward(self, x1, x2):
        return self.bilinear(torch.tanh(x1), self.proj(x2))


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_matches_eager(bias):
    model = Pair(bias).eval()
    cm = frontend.compile(model, (X1, X2), config=CONFIG)
    with torch.no_grad():
        torch.testing.assert_close(cm(X1, X2), model(X1, X2))
        torch.testing.assert_close(cm(X1 * 2, X2.flip(0)), model(X1 * 2, X2.flip(0)))


def test_another_trilinear_is_refused():
    class Other(nn.Module):
        def forward(self, a, b):
            return torch.ops.aten._trilinear(a, b, a, [], [], [], [1])  # (a b a).sum(1)

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    with pytest.raises(frontend.UnsupportedOpError, match="other than nn.Bilinear's"):
        frontend.compile(Other(), (a, b), config=CONFIG)
