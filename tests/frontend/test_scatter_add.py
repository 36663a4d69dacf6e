"""Scatter-adds and assignments by indices (`frontend.lowering.scatter`) against eager
PyTorch: a graph network's aggregation (messages gathered by an edge list given at run
time, summed into their destinations by scatter_add and index_add) with lookups "gather"
(planned per call) and "onehot" (a one-hot GEMM on the fabric), edges the model was not
compiled on, a base that is itself computed, the host's check of the indices (eager's
IndexError), scatter_add by a constant index of any pattern, F.fold's patches added into an image
and other accumulations by constant indices on any dimensions, index_put's assignment by
constant indices, scatter_reduce (sum, mean, amax, amin, with and without self), and the
refusals (a runtime index that differs along a column, an assignment by runtime indices,
one naming an element twice, a product).

Tolerances: each output element sums at most 6 fp32 terms; the per-call form adds them in
eager's token order, the one-hot GEMM in its own order (and a computed base is added after
the sum, where eager adds into it): within assert_close's fp32 defaults (rtol 1.3e-6,
about 11 ulps). Assignments move words and max / min pick one: bit for bit."""

import pytest
import torch
import torch.nn.functional as F

import frontend
from tests.frontend.models import CONFIG, Fn

NODES = 6
EDGES = torch.tensor([[0, 1, 2, 3, 4, 5, 1, 1, 4], [1, 2, 3, 4, 5, 0, 3, 3, 0]])
OTHER_EDGES = torch.tensor([[5, 4, 3, 2, 1, 0, 0, 0, 2], [0, 0, 0, 1, 1, 2, 5, 5, 5]])
X = torch.randn(NODES, 4, generator=torch.Generator().manual_seed(0))
EXACT = {"rtol": 0.0, "atol": 0.0}


def aggregate(x, edges):
    """Mean of the in-neighbours' features beside a sum by index_add, as graph libraries
    write them."""
    src, dst = edges
    messages = torch.tanh(x)[src]  # (E, 4): gathered from a computed tensor
    summed = torch.zeros(NODES, 4).scatter_add(0, dst.view(-1, 1).expand_as(messages),
                                               messages)
    count = torch.zeros(NODES).index_add(0, dst, torch.ones(dst.shape[0]))
    return torch.cat([summed, summed / count.clamp(min=1)[:, None]], 1)


@pytest.mark.parametrize("lookups", ["gather", "onehot"])
def test_messages_summed_into_their_destinations(lookups):
    cm = frontend.compile(Fn(aggregate).eval(), (X, EDGES), config=CONFIG, lookups=lookups)
    for edges in (EDGES, OTHER_EDGES):  # edges it was not compiled on
        torch.testing.assert_close(cm(X, edges), aggregate(X, edges))
    with pytest.raises(IndexError):
        cm(X, torch.tensor([[0] * 9, [0, 1, 2, 3, 4, 5, 6, 0, 0]]))  # node 6 of 6


def test_a_computed_base_takes_the_sums():
    def f(x, dst):
        return torch.relu(x).index_add(0, dst, x[:3] * 2)

    dst = torch.tensor([4, 0, 4])
    cm = frontend.compile(Fn(f).eval(), (X, dst), config=CONFIG)
    for call in (dst, torch.tensor([1, 1, 1])):
        torch.testing.assert_close(cm(X, call), f(X, call))


def test_scatter_add_by_a_constant_index_of_any_pattern():
    index = torch.tensor([[0, 1, 5, 5], [2, 2, 0, 1], [5, 0, 0, 0]])

    def f(x):
        return x.scatter_add(0, index, x[:3] * 3)

    cm = frontend.compile(Fn(f).eval(), (X,), config=CONFIG)
    torch.testing.assert_close(cm(X), f(X))


@pytest.mark.parametrize("stride", [2, 1])  # patches apart, and overlapping (sums of 4)
def test_fold_adds_patches_into_the_image(stride):
    """F.fold (col2im): index_put with accumulate by constant indices on the last two
    dimensions, after leading slices; its inverse unfold is a layout."""
    def f(x):
        cols = F.unfold(torch.relu(x), 2, stride=stride) * 2.0
        return F.fold(cols, (6, 6), 2, stride=stride)

    image = torch.randn(1, 2, 6, 6, generator=torch.Generator().manual_seed(3))
    cm = frontend.compile(Fn(f).eval(), (image,), config=CONFIG)
    torch.testing.assert_close(cm(image), f(image))


def test_accumulation_by_constant_indices_on_two_dimensions():
    rows, cols = torch.tensor([0, 2, 2, 0]), torch.tensor([1, 3, 3, -1])  # (2, 3) twice

    def f(x):
        return torch.relu(x[:3]).index_put((rows, cols), x[0], accumulate=True)

    cm = frontend.compile(Fn(f).eval(), (X,), config=CONFIG)
    torch.testing.assert_close(cm(X), f(X))


def test_assignment_by_constant_indices_moves_words():
    def f(x):
        out = torch.relu(x)
        out[torch.tensor([4, 1])] = x[:2] * 2  # index_put, no accumulate
        return out

    cm = frontend.compile(Fn(f).eval(), (X,), config=CONFIG)
    torch.testing.assert_close(cm(X), f(X), **EXACT)


def test_a_runtime_index_that_differs_along_a_column_is_refused():
    def f(x, index):
        return torch.zeros(NODES, 4).scatter_add(0, index, x)

    index = torch.randint(0, NODES, (NODES, 4), generator=torch.Generator().manual_seed(2))
    with pytest.raises(frontend.UnsupportedOpError, match="differs along a dimension"):
        frontend.compile(Fn(f).eval(), (X, index), config=CONFIG)


def test_assignments_eager_leaves_unordered_are_refused():
    def by_runtime(x, idx):
        return x.index_put((idx,), x[:2])

    def twice(x):
        return x.index_put((torch.tensor([1, 1]),), x[:2])

    with pytest.raises(frontend.UnsupportedOpError, match="runtime indices"):
        frontend.compile(Fn(by_runtime).eval(), (X, torch.tensor([0, 3])), config=CONFIG)
    with pytest.raises(frontend.UnsupportedOpError, match="twice"):
        frontend.compile(Fn(twice).eval(), (X,), config=CONFIG)


def test_negative_constant_indices_wrap_as_eager():
    def accumulate(x):
        return torch.relu(x).index_put((torch.tensor([-1, 2, -1]),), x[:3], accumulate=True)

    def assign(x):
        out = torch.relu(x)
        out[torch.tensor([-2, 0])] = x[:2] * 3
        return out

    for fn, tol in ((accumulate, {}), (assign, EXACT)):
        cm = frontend.compile(Fn(fn).eval(), (X,), config=CONFIG)
        torch.testing.assert_close(cm(X), fn(X), **tol)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_by_destination_nodes(reduce, include_self):
    """scatter_reduce (`frontend.lowering.scatter_reduce`) into a computed base by an
    integer input's indices, one per row: rows no index names keep the base's values
    without self; max and min exact, sums and means within the fp32 defaults."""
    dst = torch.tensor([1, 1, 3, 0, 3, 3, 1, 0, 4])
    src = torch.randn(9, 4, generator=torch.Generator().manual_seed(3))

    def f(x, d):
        return torch.relu(x).scatter_reduce(0, d.view(-1, 1).expand_as(src), src * 2, reduce,
                                            include_self=include_self)

    cm = frontend.compile(Fn(f).eval(), (X, dst), config=CONFIG, lookups="onehot")
    tol = EXACT if reduce in ("amax", "amin") else {}
    for d in (dst, dst.flip(0)):
        torch.testing.assert_close(cm(X, d), f(X, d), **tol)
    with pytest.raises(IndexError):
        cm(X, torch.tensor([1, 1, 3, 0, 3, 3, 1, 0, 6]))


def test_scatter_reduce_by_a_constant_index_and_the_refusals():
    index = torch.tensor([2, 0, 2, 5, 2])[:, None].expand(5, 4)

    def by_constant(x):
        return x.scatter_reduce(0, index, x[:5] * 3, "amax")

    cm = frontend.compile(Fn(by_constant).eval(), (X,), config=CONFIG)
    torch.testing.assert_close(cm(X), by_constant(X), **EXACT)
    with pytest.raises(frontend.UnsupportedOpError, match="'prod'"):
        frontend.compile(Fn(lambda x: x.scatter_reduce(0, index, x[:5], "prod")).eval(),
                         (X,), config=CONFIG)
