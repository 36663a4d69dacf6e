"""Powers, ELUs, sin, cos, erf, vector norms, instance norm and flips through the whole
frontend, against eager PyTorch (`elementwise.pow_`, `elementwise.elu`, `elementwise.unary`,
`reductions.vector_norm`, `norms.batch_statistics_norm`, `layout.flip` and
`layout.repeat`).

Tolerances: x ** p by exp(p log x) is within `unary_params.pow_ulps` of the exact power, a
few ulps where |p log x| stays below 1/2 (the inputs here: x in [0.6, 1.6], |p| <= 1.5), so
fp32's assert_close defaults (rtol 1.3e-6, about 11 ulps); the powers by products,
reciprocals and roots, ELU (2 ulps) and the norms (sums of a few products, a sqrt) likewise;
flips and repeats move words and are exact. Special values (0, -0, +-inf, NaN) are compared
with eager's where the kernels state eager's results."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from tests.frontend.models import CONFIG, Fn

EXACT = {"rtol": 0.0, "atol": 0.0, "equal_nan": True}



def _compiled(fn, *xs):
    cm = frontend.compile(Fn(fn).eval(), xs, config=CONFIG)
    return cm, cm(*xs)


def _kinds(cm) -> set[str]:
    return {s.kind for s in cm.lowered.stages}


@pytest.mark.parametrize("p, kind", [(1.5, "pow"), (-1.3, "pow"), (0.5, "sqrt"),
                                     (-0.5, "rsqrt"), (-2, "reciprocal"), (5, "pow")])
def test_powers_of_positive_tensors(p, kind):
    x = torch.rand(4, 8, generator=torch.Generator().manual_seed(1)) + 0.6
    cm, y = _compiled(lambda t: torch.pow(t * 1.0, p), x)
    torch.testing.assert_close(y, torch.pow(x, p))
    assert kind in _kinds(cm)
    cm.validate(x)


def test_integer_powers_keep_the_sign_and_zero_is_ones():
    x = torch.rand(4, 8, generator=torch.Generator().manual_seed(2)) + 0.6
    x[0] *= -1  # negative rows: odd powers negative, even ones positive
    cm, (odd, even, ones) = _compiled(lambda t: (t.pow(5), t.pow(6), t.pow(0)), x)
    torch.testing.assert_close(odd, x.pow(5))
    torch.testing.assert_close(even, x.pow(6))
    torch.testing.assert_close(ones, torch.ones_like(x), **EXACT)


def test_power_special_values_as_eager():
    x = torch.tensor([[0.0, -0.0, math.inf, -math.inf, math.nan, -2.0, 1.0, 4.0]])
    _, (a, b, c) = _compiled(lambda t: (t.pow(1.5), t.pow(-1.5), t.pow(3)), x)
    for got, p in ((a, 1.5), (b, -1.5), (c, 3)):
        want = x.pow(p)
        special = ~torch.isfinite(want) | (want == 0)
        torch.testing.assert_close(got[special], want[special], **EXACT)
        assert torch.equal(torch.signbit(got[want == 0]), torch.signbit(want[want == 0]))


def test_elu_selu_celu_as_eager():
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3)) * 3
    x[0, :4] = torch.tensor([1e-4, -1e-4, -30.0, math.inf])
    cm, outs = _compiled(lambda t: (F.elu(t), F.selu(t), F.celu(t, 2.0), torch.expm1(t)), x)
    for got, want in zip(outs, (F.elu(x), F.selu(x), F.celu(x, 2.0), torch.expm1(x))):
        torch.testing.assert_close(got, want)
    assert {"elu", "expm1"} <= _kinds(cm)


def test_vector_norms_and_normalize():
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(4))
    fns = (lambda t: torch.linalg.vector_norm(t, dim=-1),
           lambda t: torch.linalg.vector_norm(t, 1, (0, 1)),
           lambda t: torch.linalg.vector_norm(t, math.inf, -1, keepdim=True),
           lambda t: F.normalize(t, dim=-1),
           lambda t: torch.linalg.vector_norm(t, 3, -1),  # (sum |x|^3)^(1/3)
           lambda t: torch.linalg.vector_norm(t, 1.5, 0))
    _, outs = _compiled(lambda t: tuple(f(t) for f in fns), x)
    for got, f in zip(outs, fns):
        torch.testing.assert_close(got, f(x))
    with pytest.raises(frontend.UnsupportedOpError, match="vector_norm of order -inf"):
        _compiled(lambda t: torch.linalg.vector_norm(t, -math.inf), x)


@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_by_each_samples_statistics(affine):
    norm = nn.InstanceNorm2d(3, affine=affine)
    if affine:
        with torch.no_grad():
            norm.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
            norm.bias.copy_(torch.tensor([0.1, 0.0, -0.3]))
    x = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(5)) * 2 + 1
    cm = frontend.compile(norm.eval(), (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), norm(x))
    cm.validate(x)


@pytest.mark.parametrize("fn, message", [
    (lambda x, w: F.group_norm(x, 3, weight=w), "group norm with a runtime weight"),
    (lambda x, w: F.instance_norm(x, bias=w), "batch norm with a runtime bias"),
    (lambda x, w: F.batch_norm(x, w, torch.ones(3), training=False),
     "batch norm with a runtime running_mean"),
])
def test_norms_name_a_runtime_parameter_they_refuse(fn, message):
    x, w = torch.randn(2, 3, 4, 5), torch.randn(3)
    with pytest.raises(frontend.UnsupportedOpError, match=message):
        frontend.compile(Fn(fn).eval(), (x, w), config=CONFIG)


def test_flip_and_repeat_move_words_only():
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(6))
    cm, (a, b, c) = _compiled(lambda t: (torch.relu(t).flip(-1) * 2,
                                         torch.relu(t).repeat(2, 3) * 2,
                                         torch.relu(t).tile((2,)) * 2), x)
    torch.testing.assert_close(a, torch.relu(x).flip(-1) * 2, **EXACT)
    torch.testing.assert_close(b, torch.relu(x).repeat(2, 3) * 2, **EXACT)
    torch.testing.assert_close(c, torch.relu(x).tile((2,)) * 2, **EXACT)


def test_sin_cos_erf_as_eager_and_nan_beyond_the_reduction():
    """sin and cos within 3 ulps below |x| = 65536 (mathlib's TRIG_MAX), NaN from there on
    (eager reduces exactly at any size; the fabric says it cannot rather than drift); erf
    within 4 ulps everywhere. Sinusoidal embeddings of runtime positions, as a diffusion
    model's timestep embedding computes them."""
    t = torch.tensor([[0.0, 1.0, 17.0, 999.0]]).T  # (4, 1) timesteps
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(4) / 4)
    cm, (s, c, e) = _compiled(lambda x: (torch.sin(x * freqs), torch.cos(x * freqs),
                                         torch.erf(x * freqs - 1.0)), t)
    torch.testing.assert_close(s, torch.sin(t * freqs))
    torch.testing.assert_close(c, torch.cos(t * freqs))
    torch.testing.assert_close(e, torch.erf(t * freqs - 1.0))
    big = torch.tensor([[1e5, -7e4, 65535.0, 0.5]])
    _, (sb, cb) = _compiled(lambda x: (torch.sin(x), torch.cos(x)), big)
    assert torch.isnan(sb[0, :2]).all() and torch.isnan(cb[0, :2]).all()
    torch.testing.assert_close(sb[0, 2:], torch.sin(big[0, 2:]))
