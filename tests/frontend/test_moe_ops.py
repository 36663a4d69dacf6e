"""Mixture-of-experts routing ops against eager fp32 PyTorch (`frontend.lowering.routing`):

- div with rounding_mode "floor" / "trunc" (x // k, torch.div(..., rounding_mode=)): exact
  (atol = rtol = 0, NaN where eager's NaN, signed zeros as eager's): float tensors by +-2^k
  (infinities, NaN, +-0, values near integers), by 0; integer inputs and computed integers
  by positive and negative integers (every residue class, negative dividends);
- trunc and floor of float tensors: exact; rounding_mode=None: true division (by a runtime
  tensor rtol 3e-7, two roundings);
- refusals naming the node: a float tensor by 3.0, a runtime divisor, an integer by 2.5.
"""

import pytest
import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG


def _exact(cm, model, *inputs):
    got = cm(*inputs)
    with torch.no_grad():
        want = model(*inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
        if w.is_floating_point():  # signed zeros too
            zero = w == 0
            assert torch.equal(torch.signbit(g[zero]), torch.signbit(w[zero]))


class FloatDivs(nn.Module):
    def forward(self, x):
        return (x // 2.0, torch.div(x, -4.0, rounding_mode="trunc"),
                torch.div(x, 0.5, rounding_mode="floor"),
                torch.div(x, -0.25, rounding_mode="floor"),
                torch.div(x, 0.0, rounding_mode="floor"), torch.trunc(x * 3.0),
                torch.floor(x * 3.0))


def test_float_div_modes_trunc_and_floor_exact():
    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(3)) * 10
    x[0] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, -3.0, 3.5,
                         -3.5, 1e30])
    x[1] = torch.tensor([-0.5, 0.5, -1.0, 2.0, -2.0, 8388607.5, -8388607.5, 16777216.0,
                         -1e-3])
    _exact(frontend.compile(FloatDivs(), (x,), config=CONFIG), FloatDivs(), x)


class NoRounding(nn.Module):
    def forward(self, x, y):
        return (torch.ops.aten.div.Tensor_mode(x, y, rounding_mode=None),
                torch.ops.aten.div.Tensor_mode(x, 4.0, rounding_mode=None))


def test_div_mode_none_is_true_division():
    """rounding_mode=None: by a runtime tensor x * reciprocal(y) (2 roundings: rtol 3e-7),
    by 4.0 exact."""
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(2, 3, generator=g), torch.rand(2, 3, generator=g) + 0.5
    got, want = frontend.compile(NoRounding(), (x, y), config=CONFIG)(x, y), NoRounding()(x, y)
    torch.testing.assert_close(got[0], want[0], rtol=3e-7, atol=0)
    torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)


class IntDivs(nn.Module):
    def forward(self, i):
        j = i * 1  # a computed integer tensor
        return (i // 3, torch.div(i, -3, rounding_mode="trunc"),
                torch.div(j, 4, rounding_mode="trunc"),
                j // -5, torch.div(i, 1, rounding_mode="floor"), i // 7.0)


def test_integer_div_modes_exact():
    i = torch.arange(-30, 30).reshape(6, 10)
    model = IntDivs()
    cm = frontend.compile(model, (i,), config=CONFIG)
    _exact(cm, model, i)
    other = torch.randint(-5000, 5000, (6, 10), generator=torch.Generator().manual_seed(4))
    _exact(cm, model, other)


class Refused(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x, y):
        return self.op(x, y)


@pytest.mark.parametrize("op, ints", [
    (lambda x, y: x // 3.0, False),
    (lambda x, y: torch.div(x, y, rounding_mode="floor"), False),
    (lambda x, y: x // 2.5, True),
])
def test_refusals_name_the_node(op, ints):
    x = torch.arange(6).reshape(2, 3) if ints else torch.randn(2, 3)
    y = torch.full((2, 3), 2.0)
    with pytest.raises(frontend.UnsupportedOpError, match="div"):
        frontend.compile(Refused(op), (x, y), config=CONFIG)


class Sorts(nn.Module):
    def forward(self, x):  # (3, 4)
        s, j = torch.sort(x + 0.0, dim=-1, descending=True)
        return s, j, torch.argsort(x * 1.0, dim=1)


class TopKs(nn.Module):
    def forward(self, x):  # (3, 6)
        v, i = torch.topk(x * 1.0, 2)
        lo, li = torch.topk(x * 1.0, 3, dim=0, largest=False)
        return v, i, lo, li


INF = float("inf")
SPECIAL_ROWS = {  # +-inf; a row of -inf for sort, distinct values (rows, columns) for topk
    "sort": torch.tensor([[INF, 2.0, -INF, 5.0], [-INF, -INF, 1.0, -INF]]),
    "topk": torch.tensor([[INF, 2.0, -INF, 5.0, -3.0, 0.5], [-INF, 1e30, 3.0, -1e30, 1.0, 4.0]]),
}


@pytest.mark.parametrize("model", [Sorts(), TopKs()], ids=["sort", "topk"])
def test_topk_sort_argsort_exact(model):
    """Random rows, then +-inf (and for sort a row of -inf); sort / argsort also rows of ties
    (stable: index order, as eager's), topk only distinct values (eager's order of ties is
    its own)."""
    sort = isinstance(model, Sorts)
    x = torch.randn(3, 4 if sort else 6, generator=torch.Generator().manual_seed(5))
    cm = frontend.compile(model, (x,), config=CONFIG)
    _exact(cm, model, x)
    x[1:] = SPECIAL_ROWS["sort" if sort else "topk"]
    _exact(cm, model, x)
    if sort:
        ties = torch.tensor([[3.0, 1.0, 3.0, 3.0], [2.0] * 4, [-INF] * 4])
        _exact(cm, model, ties)


class StableSorts(nn.Module):
    def forward(self, x):  # (2, 40)
        s, j = torch.sort(x + 0.0, dim=-1, descending=True, stable=True)
        return s, j, torch.argsort(x * 1.0, dim=1, stable=True)


def test_sort_of_a_long_row_with_ties():
    """40 elements per row (a router's 20 tokens x top-2 ids), values drawn from 6, so
    most tie: places counted from the row's comparisons, ties in index order as eager's
    stable sort (its default sort keeps ties in order on a CPU only up to 16 elements)."""
    x = torch.randint(0, 6, (2, 40), generator=torch.Generator().manual_seed(3)).float()
    x[1, 7] = -INF
    cm = frontend.compile(StableSorts(), (x,), config=CONFIG)
    _exact(cm, StableSorts(), x)
    distinct = torch.randperm(80, generator=torch.Generator().manual_seed(4)).float()
    distinct = distinct.reshape(2, 40) - 40.0  # no ties: eager's default sort, any length
    _exact(frontend.compile(Sorts(), (distinct,), config=CONFIG), Sorts(), distinct)


class Unsorted(nn.Module):
    def forward(self, x):  # (3, 6)
        return torch.topk(x * 1.0, 3, sorted=False)


def test_topk_unsorted_gives_the_sorted_order():
    """sorted=False allows any order (eager's CPU leaves its partial sort's): the same k
    values per row as eager's, in descending order, each index naming its value."""
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(5))
    values, indices = frontend.compile(Unsorted(), (x,), config=CONFIG)(x)
    want = torch.topk(x, 3)
    assert torch.equal(values, want.values) and torch.equal(indices, want.indices)
    assert torch.equal(Unsorted()(x).values.sort(-1, descending=True).values, values)


class Marks(nn.Module):
    """Positions marked by a ranking's indices (DeepSeek-V3's group mask) and a float
    tensor read as bool."""

    def forward(self, x):  # (3, 6)
        y = x * 1.0
        keep = torch.zeros_like(y).scatter(1, torch.topk(y, 2).indices, 1.0)
        marked = y.scatter(1, torch.argmax(y, 1, keepdim=True), -5.0)  # onto a runtime base
        # Phi-3.5-MoE's router: its first expert masked out by max's index
        second = y.scatter(-1, y.max(dim=-1, keepdim=True)[1], -INF)
        return (keep, marked, y.masked_fill(~keep.bool(), -INF), torch.relu(y).bool(),
                second, y.scatter(1, y.min(1, keepdim=True).indices, 0.0))


def test_scatter_of_a_number_by_a_ranking_and_a_cast_to_bool():
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(7))
    x[0, 1] = 0.0  # relu(x).bool(): zeros false
    _exact(frontend.compile(Marks(), (x,), config=CONFIG), Marks(), x)


class Writes(nn.Module):
    """Tensors written at a ranking's indices: Llama 4's router (its top-k logits into
    -inf) and a sort undone (each element back at its place)."""

    def forward(self, x):  # (3, 6)
        y = x * 1.0
        top = torch.topk(y, 2, dim=1)
        router = torch.full_like(y, -INF).scatter_(1, top.indices, top.values)
        ordered = torch.sort(y, dim=1)
        undone = torch.zeros_like(y).scatter(1, ordered.indices, ordered.values)
        return router, undone, y.scatter(1, y.argmax(1, keepdim=True), y[:, :1] * 2.0)


def test_scatter_of_a_tensor_by_a_ranking():
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(9))
    x[1, 2] = -0.0  # a signed zero written back as it is
    x[2, 4] = INF
    _exact(frontend.compile(Writes(), (x,), config=CONFIG), Writes(), x)


def test_scatter_by_other_computed_indices_is_refused():
    # topk's indices halved: computed, in range here, but no ranking's
    model = Refused(lambda x, y: torch.zeros_like(x).scatter(1, torch.topk(x, 2).indices // 2,
                                                            1.0))
    g = torch.Generator().manual_seed(2)
    with pytest.raises(frontend.UnsupportedOpError, match="scatter.*computed on the fabric"):
        frontend.compile(model, (torch.randn(2, 5, generator=g), torch.randn(2, generator=g)),
                         config=CONFIG)


def test_ranking_refusals():
    with pytest.raises(frontend.UnsupportedOpError, match="sort of 129 elements"):
        frontend.compile(Refused(lambda x, y: torch.sort(x)[0]),
                         (torch.randn(2, 129), torch.randn(2)), config=CONFIG)


class Histograms(nn.Module):
    def forward(self, x):  # (4, 6)
        return torch.histc(x * 1.0, bins=4, min=0, max=3), torch.histc(x, bins=3, min=-1, max=1)


def test_histc_exact_at_the_bin_edges():
    """Counts exactly as eager's: values at and next to every bin start (eager's own fp32
    rounding of (x - min) * bins / (max - min)), min and max, outside, +-inf and NaN."""
    edges = torch.tensor([0.0, 0.75, 1.5, 2.25, 3.0, -1.0, -1 / 3, 1 / 3, 1.0])
    below = torch.nextafter(edges, torch.tensor(-10.0))
    below[0] = -(2.0**-126)  # the fp32 value below 0 is subnormal: the fabric reads it as -0
    x = torch.cat([edges, below, torch.tensor([-2.0, 5.0, INF, -INF, float("nan"), 1.2])])
    x = x.reshape(4, 6)
    model = Histograms()
    _exact(frontend.compile(model, (x,), config=CONFIG), model, x)


def test_histc_refuses_the_data_range():
    with pytest.raises(frontend.UnsupportedOpError, match="histc with min=0, max=0"):
        frontend.compile(Refused(lambda x, y: torch.histc(x, bins=4)),
                         (torch.randn(2, 5), torch.randn(2)), config=CONFIG)
