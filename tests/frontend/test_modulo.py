"""torch.fmod and torch.remainder (rule `modulo.modulo`) against eager fp32 PyTorch, bit
for bit (rtol 0, atol 0, NaN where eager's is NaN): by numbers, by runtime and constant
tensors with broadcasting, integer-valued positions, special values; every quotient below
FMOD_QUOTIENT_MAX = 2^22, where the kernels are exact (docs/numerics.md). Integer inputs
are refused."""

import math

import pytest
import torch

import frontend
from frontend.errors import UnsupportedOpError
from tests.frontend.models import CONFIG, Fn

G = torch.Generator().manual_seed(5)


def _check(fn, *args):
    cm = frontend.compile(Fn(fn).eval(), args, config=CONFIG)
    got, want = cm(*args), fn(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0.0, atol=0.0, equal_nan=True)
    keep = ~want.isnan()
    assert torch.equal(torch.signbit(got[keep]), torch.signbit(want[keep]))  # zeros' too
    return cm


@pytest.mark.parametrize("fn", [
    lambda x: x % 2.5,
    lambda x: x % -3.0,
    lambda x: torch.fmod(x, 1.5),
    lambda x: torch.fmod(x, -0.1),
    lambda x: torch.remainder(x * 100.0, 6.283185307179586),
])
def test_by_a_number(fn):
    _check(fn, 10 * torch.randn(4, 8, generator=G))


@pytest.mark.parametrize("op", [torch.fmod, torch.remainder])
def test_by_a_runtime_tensor_broadcast(op):
    x = 10 * torch.randn(3, 4, 8, generator=G)
    y = torch.rand(4, 1, generator=G) * 4 - 2
    _check(lambda a, b: op(a, b), x, y)
    _check(lambda a, b: op(b, a), torch.rand(8, generator=G) + 0.5, x)


@pytest.mark.parametrize("op", [torch.fmod, torch.remainder])
def test_by_a_constant_tensor_broadcast(op):
    period = torch.tensor([1.5, -2.0, 3.0, 0.75, 7.0, -0.5, 2.5, 1e-3])
    _check(lambda a: op(a, period), 10 * torch.randn(4, 8, generator=G))


def test_integer_valued_positions():
    """Positions modulo a period, integer-valued fp32 numbers computed on the fabric."""
    x = torch.randn(4, 8, generator=G)
    _check(lambda v: (torch.arange(32.0).view(4, 8) + v.round() * 7) % 7, x)
    _check(lambda v: torch.fmod(torch.arange(32.0).view(4, 8) * 49 + v.round(), -7.0), x)


def test_special_values():
    inf, nan = math.inf, math.nan
    x = torch.tensor([inf, -inf, nan, 0.0, -0.0, 2.0, -2.0, -4.0, 7.5, -7.5, 1e30, -1e-30,
                      3.0, -1.0, 1.0, 5.0] * 2).view(4, 8)
    y = torch.tensor([2.0, 2.0, 2.0, 2.0, 2.0, -2.0, 2.0, 2.0, -2.0, 2.0, inf, 3.0, 0.0,
                      inf, -inf, nan] * 2).view(4, 8)
    small = torch.where(x.abs() == 1e30, 9.25, x)  # 1e30 / 2 is beyond 2^22
    for op in (torch.fmod, torch.remainder):
        _check(lambda a, b, op=op: op(a, b), x, y)
        _check(lambda a, op=op: op(a, 2.0), small)
        _check(lambda a, op=op: op(a, -inf), x)


def test_quotients_from_2_22_give_nan():
    """The stated domain: NaN where |x / y| >= 2^22 (eager gives the exact value)."""
    x = torch.tensor([[3.0 * 2**22 - 1, 3.0 * 2**22, 1e30, -7.0]])
    cm = frontend.compile(Fn(lambda a: torch.fmod(a, 3.0)).eval(), (x,), config=CONFIG)
    got = cm(x)
    assert got[0, 0] == 2 and got[0, 3] == -1 and got[0, 1:3].isnan().all()


def test_integer_inputs_are_refused():
    ids = torch.randint(0, 2**20, (4, 8), generator=G)
    with pytest.raises(UnsupportedOpError, match="integer input"):
        frontend.compile(Fn(lambda v: v % 997).eval(), (ids,), config=CONFIG)
