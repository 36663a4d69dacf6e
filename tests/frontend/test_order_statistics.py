"""Order statistics and running extrema against eager fp32 PyTorch (outputs and `validate`
node by node; `frontend/lowering/order_statistics.py`):

- median, nanmedian and kthvalue (values and indices): exact, an element is picked; NaN
  ordered as eager orders it (median: NaN at the row's first NaN; nanmedian: the median of
  the numbers), ties by index. Eager's index of a tied kthvalue or of an all-NaN row's
  nanmedian is its partial sort's, unspecified: those rows are checked by value.
- cummax and cummin (values and indices): exact, NaN kept from where it first appears,
  the index the last one holding the running extremum (also of signed zeros).
- logcumsumexp: against eager within rtol 1e-5 (exp and log 1 to 8 ulps, a sum of up to 6
  terms in [0, 1]), atol 1e-6; infinities and NaN exact.
"""

import math

import pytest
import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG

NAN, INF = math.nan, math.inf


def _check(model, x, rtol=0.0, atol=0.0):
    cm = frontend.compile(model, (x,), config=CONFIG)
    got = cm(x)
    rows = cm.validate(x)
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        want = model(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True)
    return cm, got


class Medians(nn.Module):
    def forward(self, x):  # (5, 6)
        med = torch.median(x, dim=1)
        nanmed = torch.nanmedian(x, dim=1, keepdim=True)
        return med.values, med.indices, nanmed.values, torch.median(x * 1.0)


def test_median_and_nanmedian_order_nan_as_eager():
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(3))
    x[0, 1], x[0, 4] = NAN, NAN  # median NaN at index 1; nanmedian of 4 numbers
    x[1] = torch.tensor([2.0, 2.0, 2.0, 1.0, 3.0, -1.0])  # ties: eager's index 1 as ours
    x[2, 2], x[2, 5] = INF, -INF
    x[3] = torch.tensor([-0.0, 1.0, 0.0, -1.0, 7.0, 0.0])
    cm, got = _check(Medians(), x)
    assert torch.isnan(got[0][0]) and got[1][0] == 1


class Kth(nn.Module):
    def forward(self, x):  # (4, 7)
        second = torch.kthvalue(x, 2, dim=1)
        last = torch.kthvalue(x, 4, dim=0, keepdim=True)
        return second.values, second.indices, last.values, last.indices


def test_kthvalue_first_last_and_nan_largest():
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(4))
    x[1, 3] = NAN  # ranks after every number: dim 0's 4th of column 3 is that NaN
    x[2, 0] = -INF
    _check(Kth(), x)


def test_nanmedian_of_an_all_nan_row_is_nan():
    x = torch.tensor([[NAN, NAN, NAN, NAN, NAN], [NAN, 1.0, NAN, NAN, 2.0]])
    cm = frontend.compile(NanMedianValues(), (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), NanMedianValues()(x), rtol=0, atol=0, equal_nan=True)


class NanMedianValues(nn.Module):
    def forward(self, x):
        return torch.nanmedian(x, dim=1).values


class RunningExtrema(nn.Module):
    def forward(self, x):  # (3, 5)
        hi, lo = torch.cummax(x, dim=1), torch.cummin(x, dim=1)
        return hi.values, hi.indices, lo.values, lo.indices, torch.cummax(x, 0).values


def test_cummax_cummin_values_and_last_indices():
    x = torch.tensor([[1.0, NAN, 2.0, NAN, 0.0], [2.0, 2.0, 1.0, 3.0, 3.0],
                      [-0.0, 0.0, -0.0, 1.0, -INF]])
    _check(RunningExtrema(), x)


class LogCumSumExp(nn.Module):
    def forward(self, x):  # (3, 6)
        return torch.logcumsumexp(x, dim=1), torch.logcumsumexp(x * 0.5, dim=0)


def test_logcumsumexp_stable_with_infinities_and_nan():
    x = torch.tensor([[-INF, 0.0, INF, 1.0, NAN, 2.0], [-INF, -INF, 3.0, 1.0, -2.0, 50.0],
                      [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    _check(LogCumSumExp(), x, rtol=1e-5, atol=1e-6)


class LongMedian(nn.Module):
    def forward(self, x):
        return torch.median(x, dim=1).values


def test_rows_longer_than_the_comparisons_allow_are_refused():
    x = torch.randn(1, 129)
    with pytest.raises(frontend.UnsupportedOpError, match=r"median of 129 elements per row"):
        frontend.compile(LongMedian(), (x,), config=CONFIG)
