"""Experts over token rows grouped by expert (`frontend.lowering.experts.grouped_mm`): the
path Hugging Face's mixture-of-experts layers take by default (experts_implementation
"grouped_mm"): the router's expert ids sorted (`ranking`, integers ranked as numbers),
the rows gathered in that order, a histogram's running sum as the groups' ends, one
product per group (`torch._grouped_mm`, or transformers' fallback op on a CPU), and the
rows put back by the inverse order, `inv[perm] = arange(n)` (`scatter`, an assignment
by a permutation). Each against eager fp32 PyTorch, every node validated at its dtype's
tolerances; the values, ids and orders exactly. The product is transformers' own op (on a
CPU in fp32 its fallback: torch._grouped_mm exports in bf16 only)."""

import pytest
import torch
import torch.nn as nn

import frontend
from fabric import FabricConfig
from tests.frontend.models import CONFIG

pytest.importorskip("transformers")
from transformers.integrations import moe  # noqa: E402, F401  (registers the op)

EXPERTS, TOKENS, WIDTH, HIDDEN, TOP = 4, 3, 8, 12, 2
grouped_mm = torch.ops.transformers.grouped_mm_fallback


class Grouped(nn.Module):
    """A top-2 router and experts applied to the token rows sorted by expert."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.router = nn.Parameter(torch.randn(WIDTH, EXPERTS, generator=g))
        self.w = nn.Parameter(torch.randn(EXPERTS, WIDTH, HIDDEN, generator=g))

    def forward(self, x):  # (TOKENS, WIDTH)
        weights, top = torch.topk((x @ self.router).softmax(-1), TOP)
        ids, perm = torch.sort(top.reshape(-1))  # (TOKENS TOP,): rows grouped by expert
        rows = x[perm // TOP]
        ends = torch.cumsum(torch.histc(ids.float(), bins=EXPERTS, min=0, max=EXPERTS - 1),
                            0, dtype=torch.int32)
        out = grouped_mm(rows, self.w, ends) * weights.reshape(-1)[perm, None]
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(perm.numel())
        return out[inverse].view(TOKENS, TOP, HIDDEN).sum(1), ids, perm, inverse


class FixedGroups(nn.Module):
    """Groups of fixed sizes 2, 0, 3, 1 (an empty one among them)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(EXPERTS, WIDTH, HIDDEN,
                                          generator=torch.Generator().manual_seed(3)))
        self.register_buffer("ends", torch.tensor([2, 2, 5, 6], dtype=torch.int32))

    def forward(self, x):  # (6, WIDTH)
        return grouped_mm(torch.relu(x), self.w, self.ends)


class SortedIds(nn.Module):
    def forward(self, ids):  # (2, 6) int64: an integer input's words, ranked as numbers
        values, order = torch.sort(ids, dim=-1, descending=True)
        return values, order, torch.argsort(ids[0])


def _check(model, *inputs, config=CONFIG):
    cm = frontend.compile(model, inputs, config=config)
    # raises with a table when a float node leaves its tolerance (integers: outputs below)
    assert all(r.ok for r in cm.validate(*inputs))
    got = cm(*inputs)
    want = model(*inputs)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if w.is_floating_point():
            torch.testing.assert_close(g, w)
        else:  # ids and orders exactly
            assert torch.equal(g, w), (g, w)
    return cm


def test_experts_on_rows_grouped_by_a_sort():
    x = torch.randn(TOKENS, WIDTH, generator=torch.Generator().manual_seed(1))
    cm = _check(Grouped(), x, config=FabricConfig.small(14, 14))  # a sort: 161 stages
    # one product of every row by every expert, masked to its group
    assert sum(s.name.endswith("_experts") for s in cm.lowered.stages) == 1
    assert "grouped_mm_fallback" in {r.node for r in cm.validate(x)}


def test_groups_of_constant_sizes():
    _check(FixedGroups(), torch.randn(6, WIDTH, generator=torch.Generator().manual_seed(2)))


def test_integers_sorted_with_ties_in_index_order():
    ids = torch.tensor([[3, 1, 3, 0, 7, 1], [2, 2, 2, 5, 0, 2]])  # ties: eager's stable order
    _check(SortedIds(), ids)


class RuntimeWeights(nn.Module):
    def forward(self, x, w):  # x (3, WIDTH); w (2, WIDTH, HIDDEN) given at run time
        return grouped_mm(x, w, torch.tensor([1, 3], dtype=torch.int32))


def test_grouped_products_by_runtime_weights_are_refused():
    inputs = (torch.randn(3, WIDTH), torch.randn(2, WIDTH, HIDDEN))
    with pytest.raises(frontend.UnsupportedOpError, match="constant 3-D weights"):
        frontend.compile(RuntimeWeights(), inputs, config=CONFIG)
