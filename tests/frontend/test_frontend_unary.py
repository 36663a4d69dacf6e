"""The transcendental ops of the common model families through the whole frontend: SiLU
(core ATen decomposes it to aten.sigmoid and aten.mul), SwiGLU, quick_gelu, nn.GELU()
(exact, erf form), RMSNorm (x * rsqrt(mean(x^2) + eps)) and sqrt, against eager fp32
(`cm.validate`: every node within assert_close's fp32 tolerances, and the outputs within
rtol = atol = 1e-4), and in mixed precision against CPU autocast (`frontend.validate`'s
tolerances). Lowering rules: elementwise.unary (aten.sigmoid, aten.rsqrt, aten.sqrt) and
elementwise.gelu (approximate="none")."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from frontend import amp
from tests.frontend.models import CONFIG


class RMSNorm(nn.Module):
    """Llama's RMSNorm: x * rsqrt(mean(x^2) + eps) * weight."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaMLP(nn.Module):
    """RMSNorm, then the SwiGLU MLP w2(silu(w1 x) * w3 x), with a residual."""

    def __init__(self, dim=8, hidden=16):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.act = nn.SiLU()

    def forward(self, x):
        h = self.norm(x)
        return x + self.w2(self.act(self.w1(h)) * self.w3(h))


class GeluSqrt(nn.Module):
    """nn.GELU() (exact), quick_gelu's x * sigmoid(1.702 x), and a root-mean-square by
    sqrt."""

    def __init__(self, dim=8):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, 12), nn.Linear(12, dim)
        self.gelu = nn.GELU()

    def forward(self, x):
        h = self.fc2(self.gelu(self.fc1(x)))
        h = h * torch.sigmoid(1.702 * h)
        rms = torch.sqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
        return h + rms + torch.sqrt(F.silu(x) * F.silu(x) + 1.0)


MODELS = {"llama_mlp": LlamaMLP, "gelu_sqrt": GeluSqrt}
# the new kernels of each model that run in float16 under autocast (RMSNorm's rsqrt stays
# in fp32: its input, the mean of x^2 of an fp32 x, is fp32)
NEW_KINDS = {"llama_mlp": {"sigmoid"}, "gelu_sqrt": {"gelu_erf", "sigmoid", "sqrt"}}


def _model(name):
    torch.manual_seed(0)
    return MODELS[name]().eval(), torch.randn(4, 8)


@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_eager_fp32(name):
    model, x = _model(name)
    cm = frontend.compile(model, (x,), config=CONFIG)
    kinds = {p.stage.kind for p in cm.prepared}
    assert NEW_KINDS[name] | ({"rsqrt"} if name == "llama_mlp" else set()) <= kinds
    cm.validate(x)  # every node within assert_close's fp32 tolerances, or raises
    with torch.no_grad():
        torch.testing.assert_close(cm.outputs(), model(x), rtol=1e-4, atol=1e-4)


def test_exact_gelu_compiles_and_is_not_the_tanh_form():
    """nn.GELU()'s default is the erf form; the tanh form differs by up to 4.7e-4, far
    beyond fp32 tolerances: the fabric's gelu_erf stage matches the erf form."""
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU()).eval()
    torch.manual_seed(1)
    x = 3 * torch.randn(6, 8)
    cm = frontend.compile(model, (x,), config=CONFIG)
    with torch.no_grad():
        got, want = cm(x), model(x)
        tanh_form = F.gelu(model[0](x), approximate="tanh")
    torch.testing.assert_close(got, want)
    assert float((tanh_form - want).abs().max()) > 1e-4


@pytest.mark.parametrize("name", list(MODELS))
def test_mixed_precision_matches_autocast(name):
    """float16: the new kernels run on their nodes' autocast formats (widened, computed in
    fp32, rounded once); every node within `frontend.validate`'s mixed tolerances of eager
    autocast."""
    before = amp.get_half_dtype()
    try:
        amp.set_half_dtype("float16")
        model, x = _model(name)
        cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed")
        rows = cm.validate(x)  # raises on a node beyond the stated bound
        assert any(r.fmt == "f16" for r in rows)
        half = {p.stage.kind for p in cm.prepared if p.kernel.info.get("dtype") == "f16"}
        assert NEW_KINDS[name] <= half
    finally:
        amp.set_half_dtype(before.name)
