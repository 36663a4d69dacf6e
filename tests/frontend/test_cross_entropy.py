"""Cross-entropy on the fabric: log_softmax forward through `frontend.compile` (fp32 and
mixed precision), cross-entropy of targets fixed in the model (a gather by a constant
index), and training steps with `F.cross_entropy` (integer class targets, a runtime input,
mean reduction, ignore_index=-100) against eager autograd.

Tolerances: fp32 results with `torch.testing.assert_close`'s defaults (rtol 1.3e-6,
atol 1e-5); the fabric's log is within 1 ulp of the exact value, its exp within 1 ulp, and a
division by the count of valid targets is a multiplication by a reciprocal within 1 ulp,
so each value is a few ulps (below 1e-6 relative) from eager's. Mixed precision: the
per-node bound of `frontend.validate` (MIXED_ULPS epsilons of the half format).
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from frontend import amp
from frontend.training import compile_training_step
from tests.frontend.models import CONFIG, MLP, Fn, TinyGPT


class LogSoftmaxMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = MLP()

    def forward(self, x):
        return F.log_softmax(self.mlp(x), dim=-1)


class LinearLogSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return F.log_softmax(self.fc(x), dim=1)


def _kinds(stages) -> set[str]:
    return {s.kind for s in stages}


def test_log_softmax_forward_matches_eager():
    torch.manual_seed(0)
    model, x = LogSoftmaxMLP().eval(), torch.randn(3, 16)
    cm = frontend.compile(model, (x,), config=CONFIG)
    rows = cm.validate(x)  # every node against eager, raises beyond tolerance
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        torch.testing.assert_close(cm.outputs(), model(x))
    assert {"rowreduce", "exp", "log", "elementwise"} <= {p.stage.kind for p in cm.prepared}
    # large logits: the max subtraction keeps exp finite
    x2 = x * 1e3
    with torch.no_grad():
        torch.testing.assert_close(cm(x2), model(x2))


@pytest.fixture
def _restore_half_dtype():
    before = amp.get_half_dtype()
    yield
    amp.set_half_dtype(before.name)


@pytest.mark.usefixtures("_restore_half_dtype")
def test_log_softmax_mixed_precision():
    """CPU autocast keeps log_softmax in the half dtype (CUDA's autocast lists it as fp32,
    CPU's does not), so its stages store fp16 and compute in fp32 inside each kernel; every
    node within the stated mixed-precision bound of autocast's value."""
    torch.manual_seed(0)
    amp.set_half_dtype("float16")
    model, x = LinearLogSoftmax().eval(), torch.randn(4, 16)
    with torch.autocast("cpu", dtype=torch.float16), torch.no_grad():
        assert model(x).dtype == torch.float16
    cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed")
    rows = cm.validate(x)  # raises on a node beyond the bound
    assert rows and all(r.ok for r in rows)
    dtypes = {p.stage.kind: p.kernel.info.get("dtype") for p in cm.prepared}
    assert dtypes["gemm_summa"] == dtypes["log"] == dtypes["exp"] == "f16"


def _eager(model, inputs, targets, loss_fn):
    model.zero_grad()
    loss = loss_fn(model(*inputs), *targets)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _check(step, model, inputs, targets, loss_fn):
    loss, grads = step(inputs, targets)
    want_loss, want = _eager(model, inputs, targets, loss_fn)
    torch.testing.assert_close(loss, want_loss, equal_nan=True)
    assert set(grads) == set(want)
    for name in want:
        torch.testing.assert_close(grads[name], want[name], msg=lambda m, n=name: f"{n}: {m}")


def _nll(logits, target):
    return F.nll_loss(F.log_softmax(logits, dim=1), target)


def test_mlp_cross_entropy_step():
    torch.manual_seed(0)
    loss_fn = F.cross_entropy
    model, x = MLP(), torch.randn(3, 16)
    step = compile_training_step(model, (x,), (torch.tensor([1, 2, 7]),), loss_fn, CONFIG)
    _check(step, model, (x,), (torch.tensor([1, 2, 7]),), loss_fn)
    assert {"log", "exp", "reciprocal", "rowreduce"} <= _kinds(step.forward.lowered.stages)
    backward = step.backward.lowered.stages
    assert {"exp", "gemm_summa", "resident"} <= _kinds(backward)
    assert any(s.name.endswith("_onehot") for s in backward)  # the targets' one-hot
    # the targets are a runtime input: new ones (one ignored) reuse the compiled step
    _check(step, model, (x,), (torch.tensor([-100, 5, 0]),), loss_fn)


def test_nll_loss_all_targets_ignored_and_out_of_range():
    """log_softmax + nll_loss (the same graph as cross_entropy). Every target ignored: the
    loss is 0/0 = NaN and every gradient 0, as in torch. A target outside [0, classes) that
    is not ignore_index is an IndexError on the call."""
    torch.manual_seed(1)
    model, x = MLP(), torch.randn(3, 16)
    step = compile_training_step(model, (x,), (torch.tensor([0, 1, 2]),), _nll, CONFIG)
    _check(step, model, (x,), (torch.tensor([4, -100, 2]),), _nll)
    _check(step, model, (x,), (torch.tensor([-100, -100, -100]),), _nll)
    with pytest.raises(IndexError, match=r"class index out of range \[0, 8\).*max 8"):
        step((x,), (torch.tensor([1, 8, 0]),))


@pytest.mark.long  # about 180 stages: a minute of CPU (make test-long)
def test_gpt_one_layer_cross_entropy_over_tokens():
    """A GPT's loss: (B, T, V) logits viewed to (B*T, V), targets (B, T) viewed to (B*T,),
    one ignored. Narrow widths (d=8, vocab 16): the same graph at a quarter of the cycles."""
    torch.manual_seed(0)
    model = TinyGPT(vocab=16, d=8, heads=2, layers=1)
    idx = torch.tensor([[3, 7, 3, 3], [7, 0, 15, 3]])
    targets = torch.tensor([[7, 3, 3, 0], [15, 3, -100, 7]])

    def loss_fn(logits, t):
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), t.view(-1))

    step = compile_training_step(model, (idx,), (targets,), loss_fn, CONFIG)
    _check(step, model, (idx,), (targets,), loss_fn)


def test_cross_entropy_of_targets_fixed_in_the_model():
    """Targets made in forward (one of them ignored): the gather by their constant index is
    a re-indexing of the log-softmax, the count of valid targets a folded constant."""
    targets = torch.tensor([1, 2, -100, 5])

    def loss(x):
        return F.cross_entropy(x, targets)

    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(4))
    cm = frontend.compile(Fn(loss).eval(), (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), loss(x))
    torch.testing.assert_close(cm(x * 10), loss(x * 10))


def test_gather_by_a_constant_index_outside_is_refused():
    idx = torch.tensor([[0, 6], [1, 2]])
    with pytest.raises(frontend.FrontendError, match="'gather'.*index 6 is out of bounds "
                       "for dimension 1 with size 6"):
        frontend.compile(Fn(lambda x: x.gather(1, idx)).eval(), (torch.randn(2, 6),),
                         config=CONFIG)
