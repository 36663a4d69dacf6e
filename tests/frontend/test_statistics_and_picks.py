"""Statistics and picks against eager fp32 PyTorch (outputs and `validate` node by node):

- var and var_mean with a correction (two passes as eager's: rtol 1e-5, a few fp32
  roundings of a 6-term sum of squares of order-1 values; atol 1e-6 for values near 0);
- max.dim (values exact: a max picks an element) and argmax with their indices (exact:
  the first maximum, as eager's, also of a row of equal values, of +inf and of -inf);
- index_select and indexing by a runtime index tensor: rows of a constant, of a computed
  tensor, picked by an integer input (a per-call gather; an index out of range raises
  IndexError) or by computed indices (the one-hot product): exact (rows are picked).
"""

import pytest
import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG


def _run(model, *inputs, rtol=0.0, atol=0.0):
    cm = frontend.compile(model, inputs, config=CONFIG)
    rows = cm.validate(*inputs)
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        want = model(*inputs)
    got = cm.outputs()
    for g, w in zip(got if isinstance(got, (tuple, list)) else [got],
                    want if isinstance(want, (tuple, list)) else [want]):
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol)
    return cm


class Variances(nn.Module):
    def forward(self, x):  # (3, 4, 6)
        v, m = torch.var_mean(x * 2.0, dim=-1, correction=1, keepdim=True)
        return v + m, torch.var(x + 1.0, dim=(0, 2), correction=0), x.var()


def test_var_and_var_mean_with_corrections():
    x = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(7))
    _run(Variances(), x, rtol=1e-5, atol=1e-6)


class Maxima(nn.Module):
    def forward(self, x):  # (4, 5)
        values, indices = torch.max(x * 1.0, dim=1)
        return values, indices, torch.argmax(x + 0.0, dim=0), torch.argmax(x * 1.0)


def test_max_dim_and_argmax_pick_the_first_maximum():
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(8))
    x[1] = 0.5  # ties: the first
    x[2, 3] = float("inf")
    x[2, 1] = float("inf")
    x[3] = float("-inf")  # eager: index 0
    cm = frontend.compile(Maxima(), (x,), config=CONFIG)
    got, want = cm(x), Maxima()(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


class Picks(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.table = nn.Parameter(torch.randn(6, 3, 2))

    def forward(self, x, ids):  # x (2, 5, 4), ids (3,) int64 in [0, 5)
        by_input = torch.index_select(self.table, 0, ids) * 2.0  # (3, 3, 2)
        computed = x[:, ids] + 1.0  # (2, 3, 4): a computed tensor's rows
        pos = torch.cumsum(ids.ne(-1).int(), 0).long() - 1  # 0, 1, 2 computed
        by_computed = torch.index_select(x * 1.0, 2, pos)  # (2, 5, 3)
        return by_input, computed, by_computed


def test_index_select_and_runtime_indexing():
    x = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(9))
    ids = torch.tensor([4, 0, 2])
    cm = _run(Picks().eval(), x, ids)
    other = torch.tensor([1, 1, 3])
    with torch.no_grad():
        for g, w in zip(cm(x, other), Picks().eval()(x, other)):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
    with pytest.raises(IndexError, match="out of range"):
        cm(x, torch.tensor([0, 5, 1]))
