"""Integers computed from integer inputs stay within 2^24 (`frontend.integer_ranges`): the
host evaluates them before every call and refuses a call whose values leave fp32's exact
range, naming the FX node, instead of running on with a rounded number."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, Fn, LengthsChecked

TABLE = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))


def hashed(ids):
    """CANINE's bucket hash: ((id + 1) * prime) % buckets, then a lookup."""
    buckets = ((ids + 1) * 113) % 64
    return torch.nn.functional.embedding(buckets, TABLE)


def test_computed_integers_run_while_exact_and_are_refused_beyond():
    ids = torch.tensor([[1, 5, 9, 140_000]])
    cm = frontend.compile(Fn(hashed).eval(), (ids,), config=CONFIG)
    assert [n.name for n in cm.integer_nodes] == ["add", "mul", "remainder"]
    torch.testing.assert_close(cm(ids), hashed(ids), rtol=0, atol=0)
    big = torch.tensor([[1, 5, 9, 160_000]])  # (160,001 * 113) > 2^24
    with pytest.raises(frontend.IntegerRangeError, match="FX node 'mul'.*18080113 at \\(0, 3\\)"):
        cm(big)
    assert isinstance(frontend.IntegerRangeError("x"), ValueError)


def test_counts_through_a_mask_and_lookups_of_inputs_are_evaluated_or_left_alone():
    """RoBERTa's position ids (a bool mask's running count) are evaluated and pass; ids
    that only index an embedding have nothing computed from them."""

    def positions(ids):
        mask = ids.ne(0).int()
        return torch.cumsum(mask, 1) * mask + 1

    ids = torch.tensor([[3, 0, 7, 9]])
    cm = frontend.compile(Fn(positions).eval(), (ids,), config=CONFIG)
    assert {n.name for n in cm.integer_nodes} >= {"ne", "cumsum", "mul", "add"}
    assert torch.equal(cm(ids), positions(ids))

    lookup = Fn(lambda ids: torch.nn.functional.embedding(ids, TABLE)).eval()
    assert frontend.compile(lookup, (ids,), config=CONFIG).integer_nodes == []


def test_assertions_on_numbers_read_from_integer_inputs_are_the_hosts():
    """XLM's `assert lengths.max().item() <= slen` (lengths counted from its ids): the
    count, its max, the number read from it and the comparison run on the host before
    every call (no stage for them; the count, which the model also uses, has one), and a
    call that breaks the assertion raises RuntimeError naming the user's line."""

    ids, x = torch.tensor([[1, 2, 2, 5], [2, 2, 2, 7]]), torch.randn(2, 4)
    model = LengthsChecked().eval()
    cm = frontend.compile(model, (ids, x), config=CONFIG)
    assert not [s for s in cm.lowered.stages if s.node.name.startswith(("max", "_local"))]
    torch.testing.assert_close(cm(ids, x), model(ids, x))
    with pytest.raises(RuntimeError, match="assert lengths.max\\(\\).item\\(\\) <= ids"):
        cm(torch.tensor([[1, 3, 4, 5], [2, 2, 2, 7]]), x)


def test_a_number_read_from_a_computed_float_is_refused():
    def scaled(x):
        torch._check(x.sum().item() < 1e9)  # no host sees the sum before the call
        return x * 2

    with pytest.raises(frontend.UnsupportedOpError, match="_local_scalar_dense"):
        frontend.compile(Fn(scaled).eval(), (torch.randn(2, 4),), config=CONFIG)
