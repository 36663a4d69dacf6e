"""Token ids beside constants and optional inputs left out, as encoder-decoders take them.

An integer input's elements are int32 words on the fabric (the host writes them so); where
a model joins them with a constant other than zeros (a start token, shifted ids) or picks
between them and a number, they become fp32 numbers first, so the joined tensor holds one
kind of word. Inputs given as None (an optional attention mask) are fixed in the graph: the
compiled model takes them, checks they are the same, and refuses another value by name. A
gather by indices computed on the fabric (mBART's start token) is a one-hot product. one_hot's
assertions on its classes are held by the host before every call, with eager's message.
Every output is compared with eager exactly: token ids are small integers, exact as fp32,
and the lookups are exact products with one-hot rows (fp32, one nonzero term per sum).
"""

import pytest
import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG, Fn

VOCAB, DIM, START = 16, 8, 3


def _ids(seed: int, shape=(2, 6)) -> torch.Tensor:
    return torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(seed))


class Lookup(nn.Module):
    """A seeded embedding that the models below look their token ids up in."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(VOCAB, DIM)


class ShiftedTokens(Lookup):
    """BART's decoder ids: the source's ids shifted right behind a start token, -100
    replaced by the pad id 0, then looked up."""

    def forward(self, ids):
        shifted = ids.new_zeros(ids.shape)
        shifted[:, 1:] = ids[:, :-1].clone()
        shifted[:, 0] = START
        shifted.masked_fill_(shifted == -100, 0)
        return self.embed(shifted)


class StartTokenCat(Lookup):
    """A start token put before the ids by cat, then looked up."""

    def forward(self, ids):
        start = torch.full((ids.shape[0], 1), START, dtype=ids.dtype)
        return self.embed(torch.cat([start, ids], dim=1))


class PaddedIds(Lookup):
    """The start token put before the ids by padding with it."""

    def forward(self, ids):
        return self.embed(nn.functional.pad(ids, (1, 0), value=START))


class ClampedIds(Lookup):
    """Ids at or above a limit replaced by a constant (a runtime select of integers)."""

    def forward(self, ids):
        return self.embed(torch.where(ids >= 12, torch.full_like(ids, 1), ids))


@pytest.mark.parametrize("model_cls", [ShiftedTokens, StartTokenCat, PaddedIds,
                                       ClampedIds])
def test_ids_joined_with_constants_look_up_the_rows_eager_does(model_cls):
    model = model_cls().eval()
    ids = _ids(1)
    cm = frontend.compile(model, (ids,), config=CONFIG)
    other = _ids(2)  # the compiled model on ids it was not compiled on
    with torch.no_grad():
        torch.testing.assert_close(cm(other), model(other), rtol=0, atol=0)


class PickLast(nn.Module):
    """mBART's start token: each row's last id before the padding (pad id 0), gathered by
    a count of the ids computed on the fabric."""

    def forward(self, ids):
        return ids.gather(1, (ids.ne(0).sum(dim=1) - 1).unsqueeze(-1))


class PickByCount(nn.Module):
    """x (B, T, D) gathered along T by each column's count of positive entries."""

    def forward(self, x):
        return x.gather(1, (x > 0).sum(dim=1, keepdim=True))


def test_gather_of_a_runtime_tensor_by_computed_indices_as_eager():
    ids = torch.tensor([[5, 9, 2, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    cm = frontend.compile(PickLast().eval(), (ids,), config=CONFIG)
    other = torch.tensor([[7, 0, 0, 0, 0, 0], [3, 3, 8, 1, 0, 0]])
    torch.testing.assert_close(cm(other), PickLast()(other), rtol=0, atol=0)
    assert cm(other).dtype == torch.int64

    x = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(3))
    x[:, 4] = -1.0  # every count below 5: in range
    cm = frontend.compile(PickByCount().eval(), (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), PickByCount()(x), rtol=0, atol=0)
    assert all(row.ok for row in cm.validate(x))
    x[0, :, 1] = 1.0  # column 1 of sample 0 counts 5: outside the 5 rows, which eager
    with pytest.raises(RuntimeError):  # refuses and the fabric marks with -inf
        PickByCount()(x)
    out = cm(x)
    assert out[0, 0, 1] == float("-inf") and torch.isfinite(out[0, 0, [0, 2]]).all()


def test_none_and_numbers_among_the_outputs_come_back_as_returned():
    model = Fn(lambda x: (x * 2, None, 3)).eval()
    x = torch.randn(2, 4)
    cm = frontend.compile(model, (x,), config=CONFIG)
    doubled, none, three = cm(x)
    torch.testing.assert_close(doubled, x * 2, rtol=0, atol=0)
    assert none is None and three == 3


class OptionalMask(nn.Module):
    """forward(x, mask=None, bias=None): the optional mask left out, as a Hugging Face
    encoder-decoder is called with attention_mask None."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 4)

    def forward(self, x, mask=None, bias=None):
        y = self.linear(x)
        if mask is not None:
            y = y * mask
        return y + bias


@pytest.fixture(scope="module")
def optional_mask():
    model = OptionalMask().eval()
    x, bias = torch.randn(2, 4), torch.randn(2, 4)
    return model, frontend.compile(model, (x, None, bias), config=CONFIG)


def test_an_input_given_as_none_is_taken_as_none(optional_mask):
    model, cm = optional_mask
    x, bias = torch.randn(2, 4), torch.randn(2, 4)
    with torch.no_grad():
        want = model(x, None, bias)
    torch.testing.assert_close(cm(x, None, bias), want, rtol=1e-6, atol=1e-6)
    assert all(row.ok for row in cm.validate(x, None, bias))
    # three micro-batches of the compiled batch, the None put back in each
    xs, biases = torch.randn(6, 4), torch.randn(6, 4)
    with torch.no_grad():
        want = model(xs, None, biases)
    torch.testing.assert_close(cm(xs, None, biases), want, rtol=1e-6, atol=1e-6)


def test_a_tensor_where_the_model_was_compiled_with_none_is_refused_by_name(optional_mask):
    _, cm = optional_mask
    x = torch.randn(2, 4)
    with pytest.raises(frontend.FrontendError,
                       match=r"input 'mask' was None when the model was compiled, got a "
                             r"\(2, 4\) torch.float32 tensor.*compile again"):
        cm(x, torch.ones(2, 4), x)
    with pytest.raises(frontend.FrontendError, match=r"compiled for 3 inputs \(x, mask, bias\)"):
        cm(x, x)


class OneHot(nn.Module):
    def forward(self, ids):
        return nn.functional.one_hot(ids, VOCAB).float()


def test_one_hot_checks_its_classes_on_the_host_as_eager():
    ids = _ids(1)
    cm = frontend.compile(OneHot().eval(), (ids,), config=CONFIG)
    other = _ids(2)
    torch.testing.assert_close(cm(other), OneHot()(other), rtol=0, atol=0)
    for bad, message in ((-1, "non-negative"), (VOCAB, "smaller than num_classes")):
        ids = other.clone()
        ids[1, 3] = bad
        with pytest.raises(RuntimeError, match=message):
            OneHot()(ids)
        with pytest.raises(RuntimeError, match=f"one_hot: Class values must be {message}"):
            cm(ids)


class AssertsOnComputedValues(nn.Module):
    def forward(self, x):
        torch._assert_async(x.sum() > 0, "the sum must be positive")
        return x * 2


def test_an_assertion_on_computed_values_is_refused_by_its_message():
    with pytest.raises(frontend.UnsupportedOpError,
                       match=r"an assertion on values computed on the fabric \('the sum must"):
        frontend.compile(AssertsOnComputedValues().eval(), (torch.ones(2, 3),), config=CONFIG)


@pytest.mark.parametrize("use", [
    lambda t: torch.cat([t, torch.tensor([[2**25 + 1]])], 1),
    lambda t: (t == torch.tensor([[2**25 + 1, 2, 3]])).float(),
    lambda t: torch.where(t > 1, t, torch.tensor([[2**25 + 1, 0, 0]])),
], ids=["cat", "eq", "where"])
def test_an_integer_constant_beyond_2_24_among_runtime_tensors_is_refused(use):
    """fp32 words hold integers exactly only up to 2^24: a larger constant beside ids is
    refused (it had been rounded to a neighbour in the comparison, the select and cat)."""
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(frontend.UnsupportedOpError, match="beyond 2\\^24"):
        frontend.compile(Fn(use).eval(), (ids,), config=CONFIG)


def test_a_negative_zero_constant_keeps_its_sign():
    def fn(x):
        return torch.cat([x, torch.full((2, 1), -0.0)], 1)

    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    got = frontend.compile(Fn(fn).eval(), (x,), config=CONFIG)(x)
    assert torch.equal(got, fn(x)) and bool(torch.signbit(got[:, 3]).all())
