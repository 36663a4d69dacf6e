"""Pointwise and comparison ops through the whole frontend, against eager PyTorch:
hardswish, hardsigmoid, leaky_relu, rrelu in eval mode, abs, maximum / minimum
(broadcast), clamp with tensor bounds, log, log1p (lowering rules `elementwise.unary`,
`elementwise.maximum`, `elementwise.clamp_tensor`, `elementwise.leaky_relu`,
`elementwise.rrelu`), comparisons of runtime tensors
(Tensor and Scalar overloads), logical and / or / xor / not, any, where and masked_fill with
a runtime condition, mask.float(), the logical ops of number tensors (nonzero is true),
any / all, isnan, isinf, isfinite, sign, signbit (`masks`), in fp32 and in mixed precision.

Tolerances: the comparisons, logical ops, selects, abs, maximum, minimum, clamp and
leaky_relu are exact on the fabric (bit moves, max / min, one rounding of slope * x as
eager), so they are held to rtol = atol = 0 with NaN equal; hardswish and hardsigmoid are
eager's own decomposition (add, clamp, mul, div by 6: one rounding each, the fabric's
division a multiplication by fl(1/6), 1 ulp apart), so fp32's assert_close defaults;
log and log1p are within LOG_ULPS = 1 and LOG1P_ULPS = 2 ulps of the correctly rounded
value and eager's vectorized CPU log is within 1 ulp of it too, so rtol = 4 ulps of fp32
(4 * 2^-23) with atol = 0. Inputs avoid subnormals (the fabric reads them as zero) except
in the comparisons, which read the bits. Special values (0, -1, negatives, +-inf, NaN)
must equal eager's exactly.
"""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from frontend import amp
from tests.frontend.models import CONFIG

LOG_RTOL = 4 * 2.0**-23
EXACT = {"rtol": 0.0, "atol": 0.0, "equal_nan": True}


def _special(x: torch.Tensor) -> torch.Tensor:
    """x with 0, -0, +-inf, NaN and a tied pair planted in its first row."""
    x = x.clone()
    x[0, :6] = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0])
    return x


class Activations(nn.Module):
    def forward(self, x, y):
        return (F.hardswish(x), F.hardsigmoid(x), F.leaky_relu(x), F.leaky_relu(x, 0.2),
                F.leaky_relu(x, 1.5), F.rrelu(x, 0.1, 0.3), torch.abs(x), torch.maximum(x, y[:1]),
                torch.minimum(x, y), torch.clamp(x, y - 1, y[:, :1] + 1), torch.clamp(x, max=y),
                torch.clamp(x, min=torch.tensor(-0.5)))


class Logs(nn.Module):
    def forward(self, x):
        return torch.log(x), torch.log1p(x)


class Masks(nn.Module):
    def forward(self, x, y):
        m = (x > y) & (x != 0.5) | ~(x <= 0.2)
        return (m, x == y, x != y, x >= y, x < y, x <= y[:1], x.eq(0.0), x.ne(-math.inf),
                x > 0.25, torch.logical_xor(x > 0, y > 0), (x < y).any(-1),
                torch.where(m, x, y), x.masked_fill(x > 1, -math.inf),
                torch.where(x == y, 2.0, x), torch.where(x < 0, torch.ones(6), y),
                (x > 0).float() * y, torch.logical_and(x, y), torch.logical_not(y),
                x == -math.inf, torch.where(x == -math.inf, 0.0, y), (x > 0).all(-1),
                (x > y).any(), torch.isnan(x), torch.isinf(x), torch.isfinite(x),
                torch.sign(x), torch.signbit(x))


def _inputs(seed, shape=(4, 6)):
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    y[1, :3] = x[1, :3]  # ties
    return x, y


def test_activations_match_eager():
    x, y = _inputs(0)
    x = 4 * _special(x)
    cm = frontend.compile(Activations(), (x, y), config=CONFIG)
    kinds = {p.stage.kind for p in cm.prepared}
    assert {"leaky_relu", "abs", "maximum", "minimum"} <= kinds
    got, want = cm(x, y), Activations()(x, y)
    torch.testing.assert_close(got[:2], want[:2], equal_nan=True)  # hardswish, hardsigmoid
    for g, w in zip(got[2:], want[2:]):
        torch.testing.assert_close(g, w, **EXACT)


def test_rrelu_in_training_mode_is_refused_by_name():
    class Random(nn.Module):
        def forward(self, x):
            return F.rrelu(x, training=True)

    with pytest.raises(frontend.UnsupportedOpError, match="rrelu in training mode"):
        frontend.compile(Random(), (torch.randn(4, 6),), config=CONFIG)


def test_log_and_log1p_match_eager_with_special_values():
    gen = torch.Generator().manual_seed(1)
    x = torch.exp(8 * torch.randn(6, 10, generator=gen)) - 0.5  # (-0.5, 1e15), both signs
    x[0] = torch.tensor([0.0, -0.0, -1.0, -2.0, math.inf, -math.inf, math.nan, 1e-30,
                         -0.9999999, 3e38])
    x[1, :4] = torch.tensor([1e-7, -1e-7, 1.0, 6e-8])
    cm = frontend.compile(Logs(), (x,), config=CONFIG)
    assert {"log", "log1p"} <= {p.stage.kind for p in cm.prepared}
    for got, want in zip(cm(x), Logs()(x)):
        torch.testing.assert_close(got, want, rtol=LOG_RTOL, atol=0.0, equal_nan=True)
        # special values bit for bit: -inf, NaN, inf where eager has them
        special = ~torch.isfinite(want)
        assert torch.equal(got[special].isnan(), want[special].isnan())
        assert torch.equal(got[special].nan_to_num(), want[special].nan_to_num())


def test_masks_and_selects_match_eager():
    x, y = _inputs(2)
    x = _special(x)
    x[2, :2] = torch.tensor([1e-40, -1e-40])  # subnormals compare by value, selects move them
    cm = frontend.compile(Masks(), (x, y), config=CONFIG)
    kinds = [p.stage.kind for p in cm.prepared]
    assert {"relation", "select"} <= set(kinds)
    got, want = cm(x, y), Masks()(x, y)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, i
        torch.testing.assert_close(g, w, **EXACT, msg=f"output {i}")


class InputMasks(nn.Module):
    """An integer attention mask and a bool mask given as inputs."""

    def forward(self, x, attention_mask, keep):
        scores = x.masked_fill(attention_mask == 0, float("-inf"))
        return (torch.where(keep, scores, 0.5 * x), keep & (x > 0), ~keep,
                attention_mask.float() * x, attention_mask > 0)


def test_integer_and_bool_inputs_as_masks():
    x, _ = _inputs(3)
    attention_mask = torch.tensor([[1, 1, 0, 1, 0, 1]] * 4)
    keep = torch.rand(4, 6, generator=torch.Generator().manual_seed(4)) > 0.5
    cm = frontend.compile(InputMasks(), (x, attention_mask, keep), config=CONFIG)
    for g, w in zip(cm(x, attention_mask, keep), InputMasks()(x, attention_mask, keep)):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, **EXACT)


class MixedModel(nn.Module):
    """A linear layer (float16 under autocast) feeding the new ops."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, keep, attention_mask):
        h = self.fc(x)
        a = torch.where(h > 0.1, F.leaky_relu(h, 0.1), torch.maximum(h, -h[:1]))
        b = torch.log1p(torch.abs(h)) + torch.log(torch.abs(h) + 1.0)
        c = torch.where(keep, h, 0.5 * h).masked_fill(attention_mask == 0, -1.0)
        return a + b, c.masked_fill(h < -0.5, 0.25), (h > x)


@pytest.fixture
def _float16():
    before = amp.get_half_dtype()
    amp.set_half_dtype("float16")
    yield
    amp.set_half_dtype(before.name)


def test_mixed_precision_matches_autocast(_float16):
    """The new kernels on float16 nodes (widened, computed, rounded once), a bool and an
    integer input as conditions of float16 selects: every node within `frontend.validate`'s
    mixed bound of eager autocast; the masks exact."""
    torch.manual_seed(5)
    model, x = MixedModel().eval(), torch.randn(5, 8)
    inputs = (x, torch.rand(5, 8) > 0.5, torch.tensor([[1] * 6 + [0] * 2] * 5))
    cm = frontend.compile(model, inputs, config=CONFIG, precision="mixed")
    rows = cm.validate(*inputs)  # raises on a node beyond the stated bound
    assert any(r.fmt == "f16" for r in rows)
    half = {p.stage.kind for p in cm.prepared if p.kernel.info.get("dtype") == "f16"}
    assert {"select", "leaky_relu", "maximum", "log1p", "abs"} <= half
    with torch.no_grad(), torch.autocast("cpu", torch.float16):
        want = model(*inputs)
    got = cm(*inputs)
    # the mask of h > x, exact given h; h itself may differ from autocast's by an ulp (the
    # fabric sums the product in another order), which flips no element of this input
    assert got[2].dtype == torch.bool
    torch.testing.assert_close(got[2], want[2], **EXACT)


class IntegerAbs(nn.Module):
    def forward(self, idx):
        return torch.abs(idx)


class IntegerAnd(nn.Module):
    def forward(self, a, b):
        return a & b


@pytest.mark.parametrize("model,inputs,what", [
    (IntegerAbs(), (torch.tensor([[1, -2, 3]]),), "abs of a torch.int64 tensor"),
    (IntegerAnd(), (torch.tensor([3, 5]), torch.tensor([1, 4])),
     "bitwise and of torch.int64 tensors"),
])
def test_unsupported_dtypes_name_the_node(model, inputs, what):
    with pytest.raises(frontend.UnsupportedOpError) as info:
        frontend.compile(model, inputs, config=CONFIG)
    msg = str(info.value)
    assert what in msg and "FX node" in msg and "test_pointwise_ops.py" in msg


class WithPaddingMask(nn.Module):
    """A zoo model called with a padding attention mask (an integer input)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, attention_mask):
        from frontend.architectures import output_tensor

        return output_tensor(self.model(input_ids=ids, attention_mask=attention_mask))


@pytest.mark.long
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_hugging_face_models_with_a_padding_mask(name):
    """The masks Hugging Face builds from an attention_mask input (comparisons of position
    tensors with the mask's integers, their and, the select of the additive mask) run on
    the fabric; the output matches eager within the zoo's rtol = atol = 1e-4 (fp32 through
    a transformer layer)."""
    pytest.importorskip("transformers")
    from frontend.architectures import build

    model, (ids,) = build(name)
    mask = torch.ones_like(ids)
    mask[0, -3:] = 0
    wrapped = WithPaddingMask(model).eval()
    cm = frontend.compile(wrapped, (ids, mask), config=CONFIG)
    with torch.no_grad():
        want = wrapped(ids, mask)
    torch.testing.assert_close(cm(ids, mask), want, rtol=1e-4, atol=1e-4)


class ScalarAnyAll(nn.Module):
    """any / all over dim 0 or -1 of a 0-d tensor (torch allows both): the element's truth."""

    def forward(self, x):
        s = x.sum()
        return s.any(0), s.all(-1), (s > 0).any(0, keepdim=True), (s * 0).all(0)


def test_any_all_of_a_0d_tensor_over_its_dim_match_eager():
    x, _ = _inputs(5)
    cm = frontend.compile(ScalarAnyAll(), (x,), config=CONFIG)
    for got, want in zip(cm(x), ScalarAnyAll()(x)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
