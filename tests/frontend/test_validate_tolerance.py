"""`cm.validate`'s fp32 tolerance (`frontend.validate.fp32_tolerance`): assert_close's
(rtol 1.3e-6, atol 1e-5), atol widened to FP32_SCALE_ULPS fp32 epsilons of the node's
largest magnitude, since a sum that cancels is off by roundings of its terms; and a node
off by more raises ValidationError naming it."""

import pytest
import torch

import frontend
import frontend.validate as validate_module
from frontend.validate import FP32_SCALE_ULPS, compare, fp32_tolerance
from tests.frontend.models import CONFIG, Fn


def test_atol_follows_the_nodes_largest_magnitude():
    small = torch.tensor([0.5, -0.25])
    assert fp32_tolerance(small) == (1.3e-6, 1e-5)
    large = torch.tensor([100.0, 0.0, float("inf")])  # inf is not a magnitude
    rtol, atol = fp32_tolerance(large)
    assert atol == pytest.approx(FP32_SCALE_ULPS * 2.0 ** -23 * 100.0)
    # a cancelled element of a node reaching 100, off by a few of 100's roundings, passes;
    # one off by a thousandth fails
    assert compare(torch.tensor([100.0, 2e-4]), large[:2], (rtol, atol))[3]
    assert not compare(torch.tensor([100.0, 1e-3]), large[:2], (rtol, atol))[3]
    assert not compare(torch.tensor([100.0, 2e-4]), large[:2])[3]  # assert_close's alone


def test_a_node_off_raises_naming_it(monkeypatch):
    torch.manual_seed(0)
    model = Fn(lambda x: torch.relu(x @ x.T) * 3.0)
    x = torch.randn(4, 8)
    cm = frontend.compile(model, (x,), config=CONFIG)
    rows = cm.validate(x)
    assert rows and all(r.ok for r in rows)
    golden = validate_module.golden_values

    def off(captured, inputs):  # eager's relu 1e-3 away at one element
        values = golden(captured, inputs)
        name = next(n for n in values if n.startswith("relu"))
        values[name] = values[name].clone()
        values[name][0, 0] += 1e-3
        return values

    monkeypatch.setattr(validate_module, "golden_values", off)
    with pytest.raises(frontend.ValidationError, match=r"relu\s+aten\.relu\.default"):
        cm.validate(x)
