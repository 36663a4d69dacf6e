"""The unary kernels' inverse trigonometric, hyperbolic and rounding functions through
`frontend.compile`: tan, atan, asin, acos, sinh, cosh, exp2, round (and round with
decimals), each against eager fp32 PyTorch on values with the special ones among them.

Tolerances: each kernel's measured bound against the float64 value (`fabric.kernels.mathlib`:
ATAN_ULPS and the others, tests/kernels/test_unary_functions.py sweeps them), plus one ulp
for eager's own rounding; NaN, infinities and zeros (their sign too) equal eager's. round
is exact. round with decimals d computes round(x * 10^d) * 10^-d where eager divides by
10^d: one rounding apart, within an ulp."""

import math

import numpy as np
import pytest
import torch

import frontend
from fabric.kernels import mathlib as ml
from tests.frontend.models import CONFIG, Fn

SPECIAL = [math.inf, -math.inf, math.nan, 0.0, -0.0, 0.5, -0.5, 2.5, -2.5, 1.0, -1.0]


def _values(scale: float) -> torch.Tensor:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(5)) * scale
    x.view(-1)[:len(SPECIAL)] = torch.tensor(SPECIAL)
    return x


def _within_ulps(got: torch.Tensor, want: torch.Tensor, ulps: float) -> None:
    g, w = got.numpy(), want.numpy()
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    assert np.array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0]))  # -0 stays -0
    finite = ~same & np.isfinite(w)
    assert (same | finite).all(), (g[~(same | finite)], w[~(same | finite)])
    spacing = np.spacing(np.abs(w[finite]).astype(np.float32))
    err = np.abs(g[finite].astype(np.float64) - w[finite]) / spacing
    assert err.max(initial=0) <= ulps, err.max()


@pytest.mark.parametrize("fn, scale, ulps", [
    (torch.tan, 3.0, ml.TAN_ULPS),
    (torch.atan, 10.0, ml.ATAN_ULPS),
    (torch.asin, 0.6, ml.ASIN_ULPS),
    (torch.acos, 0.6, ml.ACOS_ULPS),
    (torch.sinh, 4.0, ml.SINH_ULPS),
    (torch.cosh, 4.0, ml.COSH_ULPS),
    (torch.exp2, 20.0, ml.EXP2_ULPS),
])
def test_function_within_its_bound(fn, scale, ulps):
    x = _values(scale)
    cm = frontend.compile(Fn(fn).eval(), (x,), config=CONFIG)
    got = cm(x)
    assert got.dtype == torch.float32
    _within_ulps(got, fn(x), ulps + 1)
    # values it was not compiled on
    _within_ulps(cm(x.flip(1) * 0.5), fn(x.flip(1) * 0.5), ulps + 1)


def test_round_is_eagers_half_to_even_bit_for_bit():
    x = _values(1e3)
    x[3, :4] = torch.tensor([2.0**23 + 1, -(2.0**24), 0.49999997, 1e30])
    cm = frontend.compile(Fn(torch.round).eval(), (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), torch.round(x), rtol=0, atol=0, equal_nan=True)
    assert torch.signbit(cm(x).view(-1)[6])  # round(-0.5) is -0


@pytest.mark.parametrize("decimals", [2, -1])
def test_round_with_decimals(decimals):
    def fn(x):
        return torch.round(x, decimals=decimals)

    x = _values(100.0)
    cm = frontend.compile(Fn(fn).eval(), (x,), config=CONFIG)
    _within_ulps(cm(x), fn(x), 1)


def test_functions_in_16_bit_storage():
    """atan and round in bfloat16 (mixed precision, half given by name): every node within
    the validator's mixed-precision bound against eager's node on the fabric's own inputs;
    the outputs in autocast's dtypes, atan's within four bfloat16 ulps of autocast's (its
    input, the GEMM's bfloat16 output, may itself differ by an ulp); round's values are
    integers."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = self.fc(x)
            return torch.atan(y), torch.round(y * 4)

    torch.manual_seed(0)
    model, x = Model().eval(), torch.randn(4, 8)
    cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed", half="bfloat16")
    rows = cm.validate(x)
    assert {"atan", "round_1"} <= {r.node for r in rows} and all(r.ok for r in rows)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        want = model(x)
    (atan, rounded), (atan_want, rounded_want) = cm.outputs(), want
    assert (atan.dtype, rounded.dtype) == (atan_want.dtype, rounded_want.dtype)
    torch.testing.assert_close(atan.float(), atan_want.float(), rtol=4 * 2**-8, atol=0)
    assert torch.equal(rounded, torch.round(rounded))
