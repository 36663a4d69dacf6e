"""The guard after a decomposed attention's softmax (`frontend.lowering.attention_guard`,
`masks.where`): rows of all -inf scores are 0, as torch's _safe_softmax gives, where the
softmax alone gives NaN; dropped where no row can be all -inf (a causal mask).

Tolerances: the softmax kernel's (fp32, `rownorm.softmax_tolerance`, well inside
assert_close's fp32 defaults); the guarded rows are exact zeros.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from tests.frontend.models import CONFIG


class Attention(nn.Module):
    """One head of 8 over 6 tokens, SDPA with a runtime boolean mask or causal."""

    def __init__(self, causal: bool):
        super().__init__()
        torch.manual_seed(0)
        self.qkv = nn.Linear(8, 24)
        self.causal = causal

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, -1)
        if self.causal:
            return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)
        return F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask)


def _inputs():
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    mask[3] = False  # a query that sees no key: eager gives a row of zeros
    return x, mask


def _kinds(cm) -> list[str]:
    return [p.stage.kind for p in cm.prepared]


def test_a_fully_masked_row_gives_zeros_as_eager():
    x, mask = _inputs()
    model = Attention(causal=False).eval()
    cm = frontend.compile(model, (x, mask), config=CONFIG)
    assert "select" in _kinds(cm)  # the guard computed: the mask is a runtime input
    got, want = cm(x, mask), model(x, mask)
    assert torch.equal(got[0, 3], torch.zeros(8)) and torch.equal(want[0, 3], torch.zeros(8))
    torch.testing.assert_close(got, want)
    # another mask with every row seeing a key: the same program, no zero rows
    full = torch.ones(6, 6, dtype=torch.bool).tril()
    torch.testing.assert_close(cm(x, full), model(x, full))


def test_a_causal_mask_drops_the_guard():
    x, mask = _inputs()
    model = Attention(causal=True).eval()
    cm = frontend.compile(model, (x, mask), config=CONFIG)
    assert "select" not in _kinds(cm) and "relation" not in _kinds(cm)
    torch.testing.assert_close(cm(x, mask), model(x, mask))


class SafeSoftmax(nn.Module):
    def forward(self, x):
        return torch.ops.aten._safe_softmax(x, 1)


def test_safe_softmax_of_an_input_with_rows_of_all_minus_inf():
    x = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(2))
    x[0, :, 1] = -math.inf  # a whole row along dim 1
    x[1, 2, 0] = -math.inf  # one -inf in a row
    cm = frontend.compile(SafeSoftmax(), (x,), config=CONFIG)
    got, want = cm(x), SafeSoftmax()(x)
    assert torch.equal(got[0, :, 1], torch.zeros(5))
    torch.testing.assert_close(got, want)
