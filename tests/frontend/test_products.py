"""torch.prod and torch.cumprod (rules `reductions.prod`, `prod_all`, `cumprod`) against
eager fp32 PyTorch.

Tolerance: the fabric multiplies a row's r factors left to right in fp32, each of its r - 1
products rounded (relative error 2^-24 each), so it lies within about (r - 1) 2^-24 of the
exact product; eager's CPU kernels may accumulate otherwise (cumprod in double, rounded
once: 2^-24). Outputs therefore agree within rtol = r 2^-24 (doubled for the second-order
terms and eager's own order), atol 0: the factors are 1 + 0.1 randn, so no product
underflows and the bound stays relative. Integer-valued products (an integer input's) are
exact below 2^24, and come back in eager's dtype (int64). Mixed precision: against CPU
autocast in its dtypes, within r epsilons of the half format (doubled).
"""

import pytest
import torch

import frontend
from frontend import amp
from frontend.validate import EPSILON
from tests.frontend.models import CONFIG, Fn

G = torch.Generator().manual_seed(21)


def near_one(*shape):
    return 1 + 0.1 * torch.randn(*shape, generator=G)


def _check(fn, x, r):
    cm = frontend.compile(Fn(fn), (x,), config=CONFIG)
    got, want = cm(x), fn(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=2 * r * 2.0**-24, atol=0.0)
    return cm


@pytest.mark.parametrize("fn,r", [
    (lambda x: torch.prod(x, 1), 7),
    (lambda x: torch.prod(x, 0, keepdim=True), 5),
    (lambda x: torch.prod(x, -1, keepdim=True), 7),
    (lambda x: torch.prod(x), 35),
    (lambda x: x.prod(), 35),
])
def test_prod_2d(fn, r):
    _check(fn, near_one(5, 7), r)


@pytest.mark.parametrize("fn,r", [
    (lambda x: torch.cumprod(x, 0), 5),
    (lambda x: torch.cumprod(x, 1), 7),
    (lambda x: torch.cumprod(x, -1), 7),
])
def test_cumprod_2d(fn, r):
    _check(fn, near_one(5, 7), r)


def test_prod_and_cumprod_3d():
    x = near_one(3, 4, 6)
    _check(lambda v: torch.prod(v, 1), x, 4)
    _check(lambda v: torch.prod(v * 2.0, 2, keepdim=True), x, 6)
    _check(lambda v: torch.cumprod(v, 1), x, 4)
    _check(lambda v: torch.cumprod(v + 0.0, -1), x, 6)


def test_products_with_zeros_and_signs():
    """A zero anywhere zeros the product (and the running product from there on);
    negative factors flip the sign: exact for these integer values."""
    x = torch.tensor([[2.0, -1.0, 3.0, 0.5], [1.5, 0.0, 4.0, -2.0], [-1.0, -1.0, -1.0, 3.0]])
    for fn in (lambda v: torch.prod(v, 1), lambda v: torch.cumprod(v, 1),
               lambda v: torch.cumprod(v, 0)):
        cm = frontend.compile(Fn(fn), (x,), config=CONFIG)
        torch.testing.assert_close(cm(x), fn(x), rtol=0, atol=0)


def test_prod_of_an_integer_input_as_sum_of_one():
    """As sum's: the int32 words are converted to numbers first; the result in eager's
    dtype (int64), exact while |prod| < 2^24."""
    x = torch.randint(-3, 4, (3, 6), generator=G)
    for fn in (lambda v: torch.prod(v, 1), lambda v: torch.prod(v)):
        cm = frontend.compile(Fn(fn), (x,), config=CONFIG)
        got, want = cm(x), fn(x)
        assert got.dtype == want.dtype == torch.int64
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_cumprod_of_an_integer_input_is_refused_as_cumsum_is():
    x = torch.randint(1, 3, (3, 4), generator=G)
    with pytest.raises(frontend.UnsupportedOpError, match="cumprod of an integer input"):
        frontend.compile(Fn(lambda v: torch.cumprod(v, 1)), (x,), config=CONFIG)
    # a float copy of it runs
    cm = frontend.compile(Fn(lambda v: torch.cumprod(v.float(), 1)), (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), torch.cumprod(x.float(), 1), rtol=0, atol=0)


class LinearProducts(torch.nn.Module):
    """Products of a linear layer's outputs (weights scaled to 0.1, bias 1: near 1)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 6)
        with torch.no_grad():
            self.lin.weight.mul_(0.1)
            self.lin.bias.fill_(1.0)

    def forward(self, x):
        y = self.lin(x)
        return torch.prod(y, 1), torch.cumprod(y, 1)


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_mixed_precision_follows_autocast(half):
    """CPU autocast runs prod in fp32 (its fp32 list: the half GEMM output widened) and
    cumprod in the half dtype (the fabric's 16-bit scan: widened, fp32 running products,
    each rounded once); both equal autocast's here, in its dtypes."""
    before = amp.get_half_dtype()
    try:
        amp.set_half_dtype(half)
        model, x = LinearProducts().eval(), torch.randn(4, 8, generator=G)
        cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed")
        rows = cm.validate(x)  # every node within the stated mixed-precision bound
        assert {r.node: r.fmt for r in rows}["cumprod"] == amp.half_dtype(half).fabric
        with torch.no_grad(), torch.autocast("cpu", dtype=amp.half_dtype(half).torch_dtype):
            want = model(x)
        for g, w in zip(cm.outputs(), want):
            assert g.dtype == w.dtype
            torch.testing.assert_close(g, w, rtol=2 * 6 * EPSILON[amp.half_dtype(half).fabric],
                                       atol=0.0)
    finally:
        amp.set_half_dtype(before.name)
