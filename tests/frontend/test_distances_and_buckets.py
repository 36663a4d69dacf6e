"""torch.cdist (p = 2, 1, inf: the norms of the pairs' differences), torch.bucketize
(a count of comparisons against sorted boundaries) and torch.searchsorted into a 1-D
sequence (bucketize's index) through `frontend.compile`, against eager fp32.

Tolerances: bucketize, and cdist with p = 1 and inf (sums of |d| over 4 features, a max),
are exact or within assert_close's fp32 defaults (rtol 1.3e-6): |d| and max are exact, a
sum of four terms rounds like eager's in a possibly different order; p = 2 adds a sqrt
within 3 ulps (SQRT_ULPS) of the rounded sum of squares. The inputs have fewer than 25
points, where eager also takes the differences (not its matrix-product form)."""

import math

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, Fn

G = torch.Generator().manual_seed(0)
X, Y = torch.randn(2, 3, 4, generator=G), torch.randn(2, 5, 4, generator=G)
BOUNDS = torch.tensor([-1.0, 0.0, 1.0])


@pytest.mark.parametrize("p", [2.0, 1.0, math.inf])
def test_cdist_batched(p):
    def fn(a, b):
        return torch.cdist(a, b, p=p)

    cm = frontend.compile(Fn(fn).eval(), (X, Y), config=CONFIG)
    torch.testing.assert_close(cm(X, Y), fn(X, Y))
    torch.testing.assert_close(cm(X * 3, Y.flip(1)), fn(X * 3, Y.flip(1)))


def test_cdist_to_constant_points_and_p_refused():
    points = torch.arange(12.0).reshape(3, 4) / 4

    def fn(a):
        return torch.cdist(a, points)

    cm = frontend.compile(Fn(fn).eval(), (X[0],), config=CONFIG)
    torch.testing.assert_close(cm(X[0]), fn(X[0]))
    with pytest.raises(frontend.UnsupportedOpError, match="cdist with p=3.0"):
        frontend.compile(Fn(lambda a, b: torch.cdist(a, b, p=3)).eval(), (X, Y),
                         config=CONFIG)


def _values():
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1)) * 2
    x.view(-1)[:9] = torch.tensor([math.nan, -0.0, 0.0, -1.0, 1.0, 2.0, -2.0, math.inf,
                                   -math.inf])
    return x


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_by_constant_boundaries(right):
    def fn(x):
        return torch.bucketize(x, BOUNDS, right=right)

    x = _values()
    cm = frontend.compile(Fn(fn).eval(), (x,), config=CONFIG)
    got = cm(x)
    assert got.dtype == torch.int64
    assert torch.equal(got, fn(x))  # NaN in the last bucket, boundaries on either side
    assert torch.equal(cm(x.flip(0)), fn(x.flip(0)))


def test_bucketize_by_runtime_boundaries_and_integer_ids():
    def by_input(x, bounds):
        return torch.bucketize(x, bounds, out_int32=True)

    x = _values()
    cm = frontend.compile(Fn(by_input).eval(), (x, BOUNDS), config=CONFIG)
    assert cm(x, BOUNDS).dtype == torch.int32
    for bounds in (BOUNDS, BOUNDS * 2, torch.tensor([-3.0, -3.0, 5.0])):
        assert torch.equal(cm(x, bounds), by_input(x, bounds))

    def ids_in(ids):  # T5-style bucketing of integer positions
        return torch.bucketize(ids, torch.tensor([2, 4, 8]))

    ids = torch.tensor([[1, 5, 9], [0, 4, 8]])
    cm = frontend.compile(Fn(ids_in).eval(), (ids,), config=CONFIG)
    assert torch.equal(cm(ids), ids_in(ids))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_into_a_sorted_sequence(side):
    def fn(x):
        return torch.searchsorted(BOUNDS, x, side=side)

    x = _values()
    cm = frontend.compile(Fn(fn).eval(), (x,), config=CONFIG)
    assert torch.equal(cm(x), fn(x))
    with pytest.raises(frontend.UnsupportedOpError, match="more than one dimension"):
        frontend.compile(Fn(lambda v: torch.searchsorted(BOUNDS.expand(2, -1), v[:2])).eval(),
                         (x,), config=CONFIG)


def test_bucketize_with_unsorted_boundaries_is_refused():
    with pytest.raises(frontend.UnsupportedOpError, match="unsorted boundaries"):
        frontend.compile(Fn(lambda x: torch.bucketize(x, torch.tensor([1.0, 0.0]))).eval(),
                         (_values(),), config=CONFIG)
