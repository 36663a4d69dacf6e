"""Embedding bags (`frontend.lowering.embedding_bag`) against eager PyTorch: nn.EmbeddingBag
on a 2-D input in the three modes, F.embedding_bag with offsets fixed in the model (bags of
unequal sizes, an empty one, include_last_offset), offsets given at run time (DLRM's call:
bags that change from call to call, the host's check of them as eager's), per-sample
weights given at run time, ids the model was not compiled on, and the refusals (max with
offsets at run time, padding_idx).

Tolerances: the lookup is exact and max picks one element, so max compares bit for bit;
sums add at most four fp32 terms (within 2 ulps of eager's order) and a mean multiplies by
1 / size (one rounding more than eager's division): within assert_close's fp32 defaults
(rtol 1.3e-6, about 11 ulps)."""

import pytest
import torch
import torch.nn.functional as F

import frontend
from tests.frontend.models import CONFIG, Fn

TABLE = torch.randn(10, 3, generator=torch.Generator().manual_seed(0))
EXACT = {"rtol": 0.0, "atol": 0.0}


class Bags(torch.nn.Module):
    def __init__(self, mode, **kwargs):
        super().__init__()
        self.bags = torch.nn.EmbeddingBag(10, 3, mode=mode, **kwargs)
        self.bags.weight.data = TABLE.clone()

    def forward(self, ids, *rest):
        return self.bags(ids, *rest)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_rows_of_a_2d_input_are_the_bags(mode):
    model = Bags(mode).eval()
    ids = torch.tensor([[1, 2, 4], [5, 4, 3]])
    cm = frontend.compile(model, (ids,), config=CONFIG)
    for call in (ids, torch.tensor([[9, 0, 0], [7, 8, 9]])):  # ids it was not compiled on
        tol = EXACT if mode == "max" else {}
        torch.testing.assert_close(cm(call), model(call), **tol)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_offsets_fixed_in_the_model(mode, include_last_offset):
    """Bags of 3, 0, 1 and 3 ids (the last bag's end given, or the ids' end)."""
    offsets = torch.tensor([0, 3, 3, 4] + ([7] if include_last_offset else []))

    def pooled(ids):
        return F.embedding_bag(ids, TABLE, offsets, mode=mode,
                               include_last_offset=include_last_offset)

    ids = torch.tensor([1, 2, 4, 5, 4, 3, 9])
    cm = frontend.compile(Fn(pooled).eval(), (ids,), config=CONFIG)
    got = cm(ids)
    torch.testing.assert_close(got, pooled(ids), **(EXACT if mode == "max" else {}))
    assert (got[1] == 0).all()  # the empty bag


def test_per_sample_weights_at_run_time():
    model = Bags("sum").eval()
    ids = torch.tensor([1, 2, 4, 5, 4, 3])
    offsets = torch.tensor([0, 2])

    def pooled(ids, weights):
        return model(ids, offsets, weights)

    weights = torch.rand(6, generator=torch.Generator().manual_seed(1))
    cm = frontend.compile(Fn(pooled).eval(), (ids, weights), config=CONFIG)
    torch.testing.assert_close(cm(ids, weights), pooled(ids, weights))
    torch.testing.assert_close(cm(ids, 1 - weights), pooled(ids, 1 - weights))


def test_an_id_outside_the_table_raises_before_the_call():
    model = Bags("sum").eval()
    ids = torch.tensor([[1, 2], [3, 4]])
    cm = frontend.compile(model, (ids,), config=CONFIG)
    with pytest.raises(IndexError):
        cm(torch.tensor([[1, 2], [3, 10]]))


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_offsets_at_run_time(mode):
    """One compiled model, bags that change with every call (an empty one among them)."""
    model = Bags(mode).eval()
    ids, offsets = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2, 2])
    cm = frontend.compile(model, (ids, offsets), config=CONFIG)
    for call in (offsets, torch.tensor([0, 0, 5]), torch.tensor([0, 1, 6])):
        torch.testing.assert_close(cm(ids, call), model(ids, call))
        torch.testing.assert_close(cm(ids.flip(0), call), model(ids.flip(0), call))


def test_offsets_at_run_time_with_weights_and_the_last_offset():
    model = Bags("sum", include_last_offset=True).eval()
    ids, offsets = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2, 6])
    weights = torch.rand(6, generator=torch.Generator().manual_seed(1))
    cm = frontend.compile(model, (ids, offsets, weights), config=CONFIG)
    for call in (offsets, torch.tensor([0, 5, 5])):
        torch.testing.assert_close(cm(ids, call, weights), model(ids, call, weights))


@pytest.mark.parametrize("offsets, message", [
    ([1, 3], "offsets\\[0\\] has to be 0"),
    ([0, 7], "offsets\\[-1\\] can not be greater than input's length 6"),
    ([0, 4, 2], "must not decrease"),
])
def test_bad_offsets_at_run_time_raise_before_the_call(offsets, message):
    model = Bags("mean").eval()
    ids = torch.tensor([1, 2, 4, 5, 4, 3])
    cm = frontend.compile(model, (ids, torch.tensor([0, 2, 2])[:len(offsets)]), config=CONFIG)
    with pytest.raises(RuntimeError, match=message):
        cm(ids, torch.tensor(offsets))


def test_max_by_offsets_at_run_time_and_padding_idx_are_refused():
    model = Bags("max").eval()
    ids, offsets = torch.tensor([1, 2, 4, 5]), torch.tensor([0, 2])
    with pytest.raises(frontend.UnsupportedOpError, match="max mode with offsets given"):
        frontend.compile(model, (ids, offsets), config=CONFIG)
    padded = Bags("sum", padding_idx=0).eval()
    with pytest.raises(frontend.UnsupportedOpError, match="padding_idx"):
        frontend.compile(padded, (torch.tensor([[1, 0], [2, 3]]),), config=CONFIG)
