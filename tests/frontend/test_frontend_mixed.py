"""Mixed precision end to end: the MLP and the GPT test models with each half dtype.

Tolerances (stated in `frontend.validate`): every node within MIXED_ULPS = 8 epsilons of
its half format of the reference, relative to the node's largest magnitude; the reference
is eager PyTorch under CPU autocast for float16 and bfloat16, fp32 eager for cbfloat16
(torch has no such dtype). 8 epsilons: the fabric and autocast both round every node to
the half format, but the fabric sums a GEMM's products in another order (a linear
layer's bias is its GEMM's initial accumulator: one rounding, as autocast's addmm), and
such 1-ulp differences pass through the following layers.
"""

import pytest
import torch

import frontend
from frontend import amp
from frontend.validate import EPSILON, MIXED_ULPS
from tests.frontend.models import CONFIG, MLP, TinyGPT


@pytest.fixture(autouse=True)
def _restore_half_dtype():
    before = amp.get_half_dtype()
    yield
    amp.set_half_dtype(before.name)


def test_half_dtype_names_and_errors():
    assert amp.get_half_dtype().name == "float16"  # the default
    assert amp.set_half_dtype("bfloat16").fabric == "bf16"
    assert amp.set_half_dtype(torch.float16).fabric == "f16"
    assert amp.set_half_dtype("cbfloat16").torch_dtype is None
    with pytest.raises(ValueError, match="'float8'.*bfloat16.*cbfloat16.*float16"):
        amp.set_half_dtype("float8")
    with pytest.raises(frontend.FrontendError, match="'half'.*fp32.*mixed"):
        frontend.compile(MLP().eval(), (torch.randn(1, 16),), config=CONFIG, precision="half")


def test_node_formats_follow_autocast():
    """matmuls in the half dtype, ops they feed stay there, an add with an fp32 input is
    promoted to fp32 (autocast's and type promotion's rules)."""
    torch.manual_seed(0)
    cm = frontend.compile(MLP().eval(), (torch.randn(2, 16),), config=CONFIG,
                          precision="mixed")
    by_op = {}
    for node in cm.captured.graph.nodes:
        by_op.setdefault(str(node.target), set()).add(cm.formats.get(node.name))
    assert by_op["aten.addmm.default"] == {"f16"}
    assert by_op["aten.relu.default"] == {"f16"}
    assert by_op["aten.add.Tensor"] == {"f32"}  # fp16 product + fp32 input slice
    stages = {p.stage.kind: p.kernel.info.get("dtype") for p in cm.prepared}
    assert stages["gemm_summa"] == "f16"


def _run(model, inputs, half):
    amp.set_half_dtype(half)
    cm = frontend.compile(model, inputs, config=CONFIG, precision="mixed")
    rows = cm.validate(*inputs)  # raises on a node beyond the stated bound
    return cm, rows


def _model(name):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP().eval(), (torch.randn(3, 16),)
    return TinyGPT(layers=1).eval(), (torch.randint(0, 32, (1, 4)),)


_RUNS: dict = {}


def _case(name, half):
    """(model, inputs, compiled model, validation rows) of a test model in mixed precision
    with `half`, compiled once per module (the model's weights are fixed by the seed)."""
    if (name, half) not in _RUNS:
        model, inputs = _model(name)
        _RUNS[name, half] = (model, inputs, *_run(model, inputs, half))
    return _RUNS[name, half]


CASES = ("gpt", "mlp")


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", CASES)
def test_mixed_matches_autocast(name, half):
    model, inputs, cm, rows = _case(name, half)
    hd = amp.half_dtype(half)
    with torch.no_grad(), torch.autocast("cpu", dtype=hd.torch_dtype):
        want = model(*inputs)
    got = cm.outputs()
    assert got.dtype == want.dtype
    eps = EPSILON[hd.fabric]
    scale = float(want.float().abs().max())
    torch.testing.assert_close(got.float(), want.float(), rtol=MIXED_ULPS * eps,
                               atol=MIXED_ULPS * eps * scale)
    # the half format is really used: the error against fp32 is of the half format's size
    with torch.no_grad():
        exact = model(*inputs)
    err32 = float((got.float() - exact).abs().max())
    assert err32 > 2 ** -20 * scale
    assert any(r.fmt == hd.fabric for r in rows)
    assert "err autocast" in cm.report() and hd.name in cm.report()


@pytest.mark.parametrize("name", CASES)
def test_mixed_cbfloat16_against_fp32(name):
    """cbfloat16 has 9 mantissa bits (epsilon 2^-9): its errors against fp32 eager stay
    within 8 epsilons of each node's scale (validate checks every node), and lie between
    bf16's (7 bits) and fp16's (10 bits) on the output."""
    errors = {}
    for half in ("cbfloat16", "bfloat16", "float16"):
        model, inputs, cm, rows = _case(name, half)
        with torch.no_grad():
            exact = model(*inputs)
        errors[half] = float((cm.outputs().float() - exact).abs().max())
    assert errors["float16"] <= errors["cbfloat16"] <= errors["bfloat16"]
    assert errors["cbfloat16"] > 0


def test_overflow_fp16_infinite_cbfloat16_finite():
    """A product of 300 x 300 x 2 = 180000 exceeds fp16's 65504: autocast and the fabric
    give infinity in float16; cbfloat16 (max about 4.3e9) keeps it finite and exact to its
    epsilon."""
    model = torch.nn.Linear(2, 1, bias=False).eval()
    with torch.no_grad():
        model.weight.fill_(300.0)
    x = torch.full((1, 2), 300.0)
    results = {}
    for half in ("float16", "cbfloat16"):
        cm, _ = _run(model, (x,), half)
        results[half] = cm.outputs().float()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        assert torch.isinf(model(x)).all()
    assert torch.isinf(results["float16"]).all()
    assert torch.isfinite(results["cbfloat16"]).all()
    assert abs(float(results["cbfloat16"]) - 180000.0) <= 180000.0 * 2 ** -9


def test_convolution_runs_in_the_half_dtype_as_eager_autocast_runs_conv2d():
    """Eager autocast casts conv2d's inputs to the half dtype, but the captured graph holds
    aten.convolution, which autocast's lists do not name: the frontend follows the user's
    eager code (the convolution node in 16 bits, its reference computed the same way)."""
    from frontend.zoo import LeNet

    torch.manual_seed(0)
    model, x = LeNet().eval(), torch.randn(2, 1, 8, 8)
    cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed", half="bfloat16")
    conv = next(n for n in cm.captured.graph.nodes
                if n.target is torch.ops.aten.convolution.default)
    assert cm.formats[conv.name] == "bf16"
    assert {p.kernel.info.get("dtype") for p in cm.prepared if p.stage.node is conv} == {"bf16"}
    cm.validate(x)  # every node within 8 bf16 epsilons of eager autocast's value
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        want = model(x)
    scale = float(want.float().abs().max())
    eps = EPSILON["bf16"]
    torch.testing.assert_close(cm.outputs().float(), want.float(), rtol=MIXED_ULPS * eps,
                               atol=MIXED_ULPS * eps * scale)
