"""Per-op checks from PyTorch's OpInfo database (`opinfo_cases`): samples of the OpInfos the
lowering claims run through `frontend.compile` and must equal eager PyTorch (fp32
tolerances, NaN equal to NaN, subnormals flushed; eager float64 where eager fp32 differs,
`opinfo_cases.run_sample`), or stop with UnsupportedOpError / PlacementError (or, for a
program torch.export cannot capture, the frontend's error saying so).

Default run: for each OpInfo of `CORE` (every op family with a rule), its sample_inputs up
to the first that lowers and passes (those refused before it too), and the special values
(`EDGE_VALUES`: inf, NaN, +-0, overflow and underflow bounds, huge, tiny and subnormal
numbers; `EDGE_ROWS` for the row ops) of every CORE OpInfo that takes them.
Long run (-m long): the first sample of every other claimed OpInfo (`CLAIMED`, derived
from the rule table), and OpInfo's reference_inputs (its extremal, large and small values)
of the CORE OpInfos that have them.

Full sweeps, `python -m tests.frontend.opinfo_cases KIND CAP [core|all]` (torch 2.13, each
sample passing in fp32 unless said; 0 failed unless said):
- `sample 3 all`: 588 samples of the 219 claimed OpInfos, 458 pass, 128 refused, 2 not
  exported (before pow, __rpow__ and scatter_reduce's sum, mean, amax and amin were
  claimed; their samples swept alone since: `sample 8`, pow 8 and __rpow__ 8 pass,
  scatter_reduce 32 pass; conv_transpose3d's 6 pass where they had been refused);
- `reference 2 core`: 43 samples of 22 OpInfos, 36 pass, 6 refused, 1 not exported;
- `reference 8` of the elementwise ops (exp, sigmoid, tanh, rsqrt, sqrt, neg, relu, silu,
  add, mul, sub, div, where): 104 samples, 103 pass, 1 refused;
- `sample 10 all`: 1,845 samples of the 315 claimed OpInfos, 1,613 pass, 216 refused, 7
  not exported, 9 failed, each mended since (any, all and gather of 0-d tensors raised
  ZeroDivisionError; matrix_power's negative powers named an input 'token': refused now
  by the inverse's effectful error check; embedding's max_norm, which renormalizes its
  input in place: refused by name; _safe_softmax's samples, refused before, pass: the
  all -inf row guard computed); `sample 3 all` (817 samples: 723 pass, 88 refused, 2 not
  exported) had found the 4 of any and all;
- `reference 4 all`: 490 samples of 124 OpInfos, 425 pass, 60 refused, 2 not exported,
  3 NaN by the kernels' documented domains (tan of 4988429, fmod and remainder of 1e20 by
  501: |x| < 65536 and |x / y| < 2^22, `fabric.kernels.mathlib`);
- `edge`: the default run's special values, all pass (gelu's erf form as float64 eager at
  +inf and FLT_MAX, where eager fp32's vectorized kernel gives NaN and inf).
"""

import collections
import math

import pytest
import torch
import torch.nn.functional as F

import frontend
from tests.frontend import opinfo_cases as oc

MAX_TRIES = 6  # default run: samples tried per OpInfo until one lowers
REFERENCE_CAP = 2  # long run: reference_inputs per OpInfo beyond its sample_inputs
# CORE OpInfos whose samples the rules refuse (div's rounding modes: by a runtime divisor)
ALL_REFUSED = {"div.trunc_rounding"}
LOWERED = (oc.PASS, oc.PASS_F64)


def _run(key, kind, cap, until_pass=False):
    counts = collections.Counter()
    for sample in oc.samples(key, kind, cap):
        counts[oc.run_sample(key, sample)] += 1
        if until_pass and counts[oc.PASS] + counts[oc.PASS_F64]:
            break
    print(f"{key} ({kind}): {dict(counts)}")  # the per-op count, shown with pytest -s
    return counts


def test_claimed_opinfos_exist():
    for name, keys in (("CLAIMED", oc.CLAIMED), ("CORE", oc.CORE)):
        assert not [k for k in keys if k not in oc.OPINFOS], f"{name}: not in op_db"
        assert len(set(keys)) == len(keys), f"{name} repeats a key"
    assert set(oc.CORE) <= set(oc.CLAIMED), set(oc.CORE) - set(oc.CLAIMED)


@pytest.mark.parametrize("key", oc.CORE)
def test_opinfo_samples(key):
    counts = _run(key, "sample", MAX_TRIES, until_pass=key not in ALL_REFUSED)
    assert sum(counts.values()), f"no sample of {key} fits the test fabric"
    if key in ALL_REFUSED:
        assert counts[oc.REFUSED] == sum(counts.values()), counts
    else:
        assert sum(counts[k] for k in LOWERED), f"no sample of {key} lowers: {counts}"


EDGE_KEYS = [k for k in oc.CORE if next(oc.samples(k, "edge"), None)]


@pytest.mark.parametrize("key", EDGE_KEYS)
def test_opinfo_special_values(key):
    counts = _run(key, "edge", None)
    assert sum(counts.values()) and sum(counts[k] for k in LOWERED) == sum(counts.values()), \
        counts


@pytest.mark.long
@pytest.mark.parametrize("key", [k for k in oc.CLAIMED if k not in oc.CORE])
def test_opinfo_claimed_first_sample(key):
    counts = _run(key, "sample", 1)
    assert sum(counts.values()), f"no sample of {key} fits the test fabric"


@pytest.mark.long
@pytest.mark.parametrize("key", [k for k in oc.CORE if oc.OPINFOS[k].reference_inputs_func])
def test_opinfo_reference_inputs(key):
    _run(key, "reference", REFERENCE_CAP)


# ---- the wrong answers and raw errors the sweep found, each as a plain model -------------
class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


X = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("fn,match", [
    # bernoulli was folded into one constant draw, repeated on every call
    (lambda x: F.dropout2d(x, 0.5, training=True), "random op aten.bernoulli"),
    # an inverse's error checks (an effectful op on export's tokens) named an input
    # 'token' the model does not have
    (lambda x: torch.linalg.matrix_power(x[0, :3, :3], -1), "_linalg_check_errors.* side"),
    # pooling indices through a squeeze raised TypeError
    (lambda x: F.max_pool1d(x, 2, return_indices=True)[1].float(), "not computed"),
    # max_unpool2d of the pool's indices said "an input of type Unavailable"
    (lambda x: F.max_unpool2d(*F.max_pool2d(x[None], 2, return_indices=True), 2),
     "an input that is max_pool2d's indices .*not computed on the fabric"),
])
def test_refused_with_the_reason(fn, match):
    with pytest.raises(frontend.UnsupportedOpError, match=match):
        frontend.compile(Fn(fn), (X,), config=oc.CONFIG)


class GatherScalar(torch.nn.Module):
    """gather of a 0-d tensor by a constant index of shape () or (1,) and by an index
    computed on the fabric (each raised ZeroDivisionError: a dimension taken modulo the
    rank 0)."""

    def forward(self, x):
        s = x.sum()
        return (s.gather(0, torch.tensor(0)), s.gather(-1, torch.tensor([0])),
                s.gather(0, (x[0, 0, :1] > 9).long()))


class GatherScalarByInput(torch.nn.Module):
    def forward(self, x, i):
        return x.sum().gather(0, i)


def test_gather_of_a_0d_tensor_by_an_input_index_is_refused():
    with pytest.raises(frontend.UnsupportedOpError, match="gather of a 0-d tensor"):
        frontend.compile(GatherScalarByInput(), (X, torch.tensor(0)), config=oc.CONFIG)


def test_gather_of_a_0d_tensor_by_a_constant_index():
    cm = frontend.compile(GatherScalar(), (X,), config=oc.CONFIG)
    for got, want in zip(cm(X), GatherScalar()(X)):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want)


def test_full_like_keeps_its_dtype():
    """isreal of a real tensor is a bool constant (it came back as float)."""
    cm = frontend.compile(Fn(torch.isreal), (X,), config=oc.CONFIG)
    torch.testing.assert_close(cm(X), torch.isreal(X))


def test_data_dependent_decomposition_is_a_frontend_error():
    """take of a 0-d tensor: its decomposition guards on the index's value (it raised
    torch's own error)."""
    model = Fn(lambda v: torch.take(v, model.index))
    model.register_buffer("index", torch.tensor(0))  # a buffer, as OpModule holds it
    with pytest.raises(frontend.FrontendError, match="could not capture .* core ATen"):
        frontend.compile(model, (torch.tensor(2.0),), config=oc.CONFIG)


class DivideByConstants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.tensor([3e38, 1e38, 2.0, 0.0, -0.0, math.inf, 1e-30]))

    def forward(self, x):
        return x / self.c, x / 2e38, x / 0.0, x / -0.0


def test_division_by_constants_at_the_ends():
    """x / c with 1 / c subnormal (|c| > 2^126) is x (2^64 / c) 2^-64 (it gave 0: the
    reciprocal flushed), and a division by a zero scalar is by inf (it raised
    ZeroDivisionError); eager with flushed subnormals is the reference."""
    model = DivideByConstants()
    x = torch.tensor([1e38, 1e38, 1.0, 1.0, 1.0, 5.0, 1e-10])
    got = frontend.compile(model, (x,), config=oc.CONFIG)(x)
    with oc.flush_denormal():
        want = model(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True)
