"""The rules of `frontend.lowering.powers`: torch.pow with a tensor exponent
(aten.pow.Tensor_Tensor) and with a number base (aten.pow.Scalar) on the fabric, against
eager PyTorch: two runtime tensors broadcast, negative bases with integer and fractional
exponents, constant exponents (one value: the scalar path; several: the "pow" kernel),
GeM pooling, 2 ** x and 3.0 ** x, mixed precision; integer tensors refused.

Tolerances, from the kernels' bounds (eager's fp32 result is itself within an ulp of the
exact one, and an ulp is at most 2^-23 of a value):
- the "pow" kernel (`mathlib_pow`, POW_ULPS = 3): rtol 4 * 2^-23 (4.8e-7), no atol, NaN
  equal to NaN, and the sign of every zero and infinity as eager's;
- exp2 for 2 ** x (EXP2_ULPS = 1): rtol 2 * 2^-23;
- a constant exponent of one value p: products (and a refined reciprocal) within an ulp
  or two of eager's, `build_pow` within `unary_params.pow_ulps` (2 + 6 |t| to 2 + 12 |t|,
  t = p log|x|: 30 ulps at x = 9, p = 2.5) plus eager's ulp;
- GeM: x^3 as two products (two roundings), a mean of 16 (a sum's roundings, up to 16
  ulps of the mean), then m^(1/3) by `build_pow` (`unary_params.pow_ulps`, 2 + 12 |t| at
  most, t = log(m) / 3: 15 ulps here) whose cube root divides the mean's relative error by
  3: rtol (max pow_ulps + 16 / 3 + 1) * 2^-23 (2.7e-6);
- mixed precision: as atan2's (4 epsilons of the half format: the products' half outputs,
  then one rounding of the result).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import frontend
from fabric.kernels import mathlib as ml
from fabric.kernels import unary_params as up
from frontend import amp
from frontend.validate import EPSILON
from tests.frontend.models import CONFIG, Fn

G = torch.Generator().manual_seed(23)
EPS = 2.0**-23
INF, NAN = math.inf, math.nan


def _close(got, want, ulps):
    torch.testing.assert_close(got, want, rtol=ulps * EPS, atol=0.0, equal_nan=True)
    ends = (want == 0) | torch.isinf(want)  # the sign of zeros and infinities too
    assert torch.equal(torch.signbit(got[ends]), torch.signbit(want[ends]))


def _kinds(cm) -> list[str]:
    """The kinds of the compiled model's stages; "pow" with two operands is "pow2" (the
    two-tensor kernel), with one the scalar exponent's `build_pow`."""
    return [s.kind + ("2" if s.kind == "pow" and len(s.operands) == 2 else "")
            for s in cm.lowered.stages]


X = torch.randn(4, 6, generator=G) * 3
Y = torch.tensor([2.0, 3.0, -1.0, 0.5, -2.5, 1.75])


@pytest.mark.parametrize("args", [(X, Y), (Y.abs() + 0.5, X)], ids=["wide_base", "wide_exponent"])
def test_two_tensors_broadcast_with_negative_bases(args):
    """x of shape (4, 6) with negative entries to a (6,) exponent of integers (odd and even:
    the sign kept or dropped) and fractions (NaN for a negative base), and the reverse."""
    cm = frontend.compile(Fn(lambda u, v: u ** v), args, config=CONFIG)
    assert "pow2" in _kinds(cm)
    want = args[0] ** args[1]
    assert torch.isnan(want).any() or args[0].min() > 0
    _close(cm(*args), want, ml.POW_ULPS + 1)


def test_special_values_of_two_tensors():
    """Every pair of C99's special operands (zeros, +-1, infinities, NaN, odd, even and
    fractional powers) as eager's."""
    specials = torch.tensor([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 0.5, -0.5, 2.0, -3.0, 2.5])
    base = specials.repeat(len(specials), 1)
    exponent = specials[:, None].expand(len(specials), len(specials)).contiguous()
    cm = frontend.compile(Fn(torch.pow), (base, exponent), config=CONFIG)
    _close(cm(base, exponent), torch.pow(base, exponent), ml.POW_ULPS + 1)


HELD = torch.tensor([0.5, 2.0, -1.5, 3.0, 0.0, 7.0])
WIDE = torch.full((2, 3, 6), 1.5)


@pytest.mark.parametrize("fn", [lambda u: u ** HELD, lambda u: u ** WIDE,
                                lambda u: torch.pow(HELD, u)],
                         ids=["several_values", "one_value_enlarging", "held_base"])
def test_constant_exponents(fn):
    """A held exponent of several values (the kernel, the constant on a resident tile), one
    of one value that enlarges x (the kernel too) and a base held as a constant."""
    x = torch.rand(3, 6, generator=G) * 4 + 0.1
    cm = frontend.compile(Fn(fn), (x,), config=CONFIG)
    assert "pow2" in _kinds(cm)
    _close(cm(x), fn(x), ml.POW_ULPS + 1)


class OneValueExponent(torch.nn.Module):
    """x.pow(p) with p a (1,) buffer: aten.pow.Tensor_Tensor with a constant of one value."""

    def __init__(self, p: float):
        super().__init__()
        self.register_buffer("p", torch.tensor([p]))

    def forward(self, x):
        return x.pow(self.p)


@pytest.mark.parametrize(("p", "kind"), [(3.0, "elementwise"), (-1.0, "reciprocal"),
                                         (2.5, "pow"), (0.5, "pow2"), (-0.5, "pow2")])
def test_one_value_exponent_as_eager(p, kind):
    """Integer p as products (and a reciprocal), 2.5 as the scalar kernel (`build_pow`,
    within `pow_ulps`), +-0.5 by the two-tensor kernel: eager's two-tensor pow gives
    C99's +0 and inf at -0 and -inf there (sqrt and rsqrt would give -0 and NaN); the
    special values as eager's, signs of zeros included."""
    x = torch.tensor([-0.0, 0.0, -INF, INF, NAN, 1.0, -1.0, -2.0, 0.25, 3.0, 9.0])
    model = OneValueExponent(p)
    cm = frontend.compile(model, (x,), config=CONFIG)
    assert kind in _kinds(cm)
    with torch.no_grad():
        want = model(x)
    finite = torch.isfinite(x) & (x != 0)
    bound = float(up.pow_ulps(x[finite].abs().numpy(), p).max()) if kind == "pow" else 1
    _close(cm(x), want, max(bound, ml.POW_ULPS) + 1)


class GeM(torch.nn.Module):
    """Generalized-mean pooling (Radenovic et al.), p a learned parameter of shape (1,)."""

    def __init__(self, p: float = 3.0):
        super().__init__()
        self.p = torch.nn.Parameter(torch.ones(1) * p)

    def forward(self, x):
        return F.avg_pool2d(x.clamp(min=1e-6).pow(self.p), 4).pow(1.0 / self.p)


def test_gem_pooling_takes_the_scalar_paths():
    """x.pow(p) with p = 3 is two products (as x ** 3.0), m.pow(1 / p) the scalar kernel
    (`build_pow`), no two-tensor "pow" stage."""
    model = GeM().eval()
    x = torch.rand(2, 3, 8, 8, generator=G) * 4
    cm = frontend.compile(model, (x,), config=CONFIG)
    kinds = _kinds(cm)
    assert kinds.count("elementwise") == 2 and kinds.count("pow") == 1, kinds
    assert "pow2" not in kinds
    with torch.no_grad():
        want = model(x)
        pooled = F.avg_pool2d(x.clamp(min=1e-6) ** 3, 4)
    bound = float(up.pow_ulps(pooled.numpy(), 1 / 3).max())
    _close(cm(x), want, bound + 16 / 3 + 1)


@pytest.mark.parametrize(("base", "ulps", "kind"), [(2, ml.EXP2_ULPS + 1, "exp2"),
                                                    (3.0, ml.POW_ULPS + 1, "pow2"),
                                                    (-2.0, ml.POW_ULPS + 1, "pow2")])
def test_number_base(base, ulps, kind):
    """2 ** x by exp2 (exact at integers), 3.0 ** x and (-2.0) ** x by the kernel with the
    base a constant (NaN for a negative base's fractional powers); 1 ** x is ones, no
    stage."""
    x = torch.cat([torch.randn(10, generator=G) * 8, torch.tensor([-3.0, 0.0, 5.0, INF, NAN])])
    cm = frontend.compile(Fn(lambda u: base ** u), (x,), config=CONFIG)
    assert kind in _kinds(cm)
    _close(cm(x), base ** x, ulps)
    cm = frontend.compile(Fn(lambda u: 1 ** u), (x,), config=CONFIG)
    assert not _kinds(cm)
    torch.testing.assert_close(cm(x), torch.ones_like(x))


@pytest.mark.parametrize(("fn", "match"), [
    (lambda i, v: i ** v, "pow with a torch.int64 base tensor"),
    (lambda i, v: v ** i, "pow with a torch.int64 exponent tensor"),
    (lambda i, v: 2.0 ** i, "pow with a torch.int64 exponent tensor"),
])
def test_integer_tensors_refused(fn, match):
    i = torch.arange(6, dtype=torch.int64)
    v = torch.rand(6, generator=G) + 0.5
    with pytest.raises(frontend.UnsupportedOpError, match=match):
        frontend.compile(Fn(fn), (i, v), config=CONFIG)


class Powers(torch.nn.Module):
    """pow of two linear maps, and 3 ** one of them: the products run in the half dtype
    under CPU autocast, and so does pow of them."""

    def __init__(self):
        super().__init__()
        self.p = torch.nn.Linear(8, 6)
        self.q = torch.nn.Linear(8, 6)

    def forward(self, x):
        u, v = self.p(x), self.q(x)
        return torch.pow(u.abs() + 0.5, v), 3.0 ** v


def test_mixed_precision_follows_autocast():
    before = amp.get_half_dtype()
    try:
        amp.set_half_dtype("bf16")
        torch.manual_seed(3)
        model, x = Powers().eval(), torch.randn(4, 8, generator=G)
        cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed")
        fmt = amp.half_dtype("bf16")
        formats = {r.node: r.fmt for r in cm.validate(x)}
        assert formats["pow_1"] == formats["pow_2"] == fmt.fabric
        with torch.no_grad(), torch.autocast("cpu", dtype=fmt.torch_dtype):
            want = model(x)
        for g, w in zip(cm.outputs(), want):
            assert g.dtype == w.dtype == fmt.torch_dtype
            torch.testing.assert_close(g.float(), w.float(), rtol=4 * EPSILON[fmt.fabric],
                                       atol=4 * EPSILON[fmt.fabric])
    finally:
        amp.set_half_dtype(before.name)
