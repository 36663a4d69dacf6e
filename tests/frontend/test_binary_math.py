"""The rule of `frontend.lowering.binary_math`: torch.atan2 and torch.hypot on the fabric
(`fabric.kernels.build_binary_math`), against eager PyTorch: broadcast operands, a constant
operand, the special values (signed zeros, infinities, NaN), mixed precision; integer
operands refused. The kernels' bounds (ATAN2_ULPS 2, HYPOT_ULPS 1) lie within the tolerance
(3 ulps of fp32: torch's own results are within an ulp)."""

from __future__ import annotations

import math

import pytest
import torch

import frontend
from fabric.kernels import mathlib as ml
from frontend import amp
from frontend.validate import EPSILON
from tests.frontend.models import CONFIG, Fn

G = torch.Generator().manual_seed(17)
FNS = {"atan2": torch.atan2, "hypot": torch.hypot}
EPS = 2.0**-23


def _flush(t):
    """Results below FLT_MIN as zeros of their sign, as the fabric writes them
    (atan2(1, 3e38) = 3.3e-39 is subnormal)."""
    tiny = torch.finfo(torch.float32).tiny
    return torch.where(t.abs() < tiny, torch.copysign(torch.zeros_like(t), t), t)


def _close(got, want, ulps):
    torch.testing.assert_close(got, want, rtol=(ulps + 1) * EPS, atol=0.0, equal_nan=True)


@pytest.mark.parametrize("fn", list(FNS))
def test_broadcast_operands_as_eager(fn):
    """A (4, 6) and a (6,) tensor, both orders: one stage of the two broadcast operands."""
    f = FNS[fn]
    a = torch.randn(4, 6, generator=G) * 3
    b = torch.randn(6, generator=G)
    for args in ((a, b), (b, a)):
        model = Fn(lambda u, v: f(u, v))
        cm = frontend.compile(model, args, config=CONFIG)
        _close(cm(*args), f(*args), ml.ATAN2_ULPS if fn == "atan2" else ml.HYPOT_ULPS)


def test_constant_operand_and_special_values():
    """atan2 against a constant (a tensor the model holds), hypot with a 0-d constant; the
    runtime inputs hold the special values: the signs of zero and pi, the infinities'
    multiples of pi / 4, hypot(inf, NaN) = inf."""
    specials = torch.tensor([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e30,
                             -1e-30, 3e38])
    y = specials.repeat(len(specials), 1)
    x = specials[:, None].expand(len(specials), len(specials)).contiguous()
    for fn, f in FNS.items():
        model = Fn(lambda u, v, f=f: f(u, v))
        cm = frontend.compile(model, (y, x), config=CONFIG)
        got, want = cm(y, x), _flush(f(y, x))
        _close(got, want, 2)
        number = ~torch.isnan(want)  # the sign of a NaN means nothing
        assert torch.equal(torch.signbit(got[number]), torch.signbit(want[number])), fn
    held = torch.randn(3, 5, generator=G)
    z = torch.randn(3, 5, generator=G)
    for model, want in ((Fn(lambda u: torch.atan2(u, held)), torch.atan2(z, held)),
                        (Fn(lambda u: torch.hypot(torch.tensor(2.5), u)),
                         torch.hypot(torch.tensor(2.5), z))):
        cm = frontend.compile(model, (z,), config=CONFIG)
        _close(cm(z), want, 2)


def test_integer_operand_refused():
    model = Fn(lambda u, v: torch.atan2(u, v))
    i = torch.arange(6, dtype=torch.int64)
    with pytest.raises(frontend.UnsupportedOpError, match="atan2 of a torch.int64"):
        frontend.compile(model, (torch.randn(6), i), config=CONFIG)


class Angles(torch.nn.Module):
    """atan2 and hypot of two linear maps: the products run in the half dtype under CPU
    autocast, and so do atan2 and hypot of them."""

    def __init__(self):
        super().__init__()
        self.p = torch.nn.Linear(8, 6)
        self.q = torch.nn.Linear(8, 6)

    def forward(self, x):
        u, v = self.p(x), self.q(x)
        return torch.atan2(u, v), torch.hypot(u, v)


@pytest.mark.parametrize("half", ["bf16"])
def test_mixed_precision_follows_autocast(half):
    before = amp.get_half_dtype()
    try:
        amp.set_half_dtype(half)
        torch.manual_seed(3)
        model, x = Angles().eval(), torch.randn(4, 8, generator=G)
        cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed")
        fmt = amp.half_dtype(half)
        rows = cm.validate(x)
        formats = {r.node: r.fmt for r in rows}
        assert formats["atan2"] == formats["hypot"] == fmt.fabric
        with torch.no_grad(), torch.autocast("cpu", dtype=fmt.torch_dtype):
            want = model(x)
        for g, w in zip(cm.outputs(), want):
            assert g.dtype == w.dtype == fmt.torch_dtype
            # the GEMMs' half outputs, then one more rounding of the result
            torch.testing.assert_close(g.float(), w.float(), rtol=4 * EPSILON[fmt.fabric],
                                       atol=4 * EPSILON[fmt.fabric])
    finally:
        amp.set_half_dtype(before.name)
