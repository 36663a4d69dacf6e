"""The lowering's rule mechanism (frontend/lowering/core.py): case rules of an op are tried
before its general rule, at most one case may accept a node, an op whose rules all decline
is an unknown op, and an op has one general rule. Exercised on aten.lgamma, which has no rule
of its own (registered here and removed afterwards)."""

import pytest
import torch

from frontend.capture import capture_module
from frontend.errors import UnsupportedOpError
from frontend.lowering import core, lower
from frontend.values import Ref

OP = torch.ops.aten.lgamma.default


class LogGamma(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(x)


@pytest.fixture
def captured():
    assert OP not in core.RULES
    yield capture_module(LogGamma(), (torch.randn(2, 3),))
    core.RULES.pop(OP, None)


def test_cases_then_general_rule_then_errors(captured):
    # cases only, all declining: the unknown-op error
    core.rule(OP, case=lambda low, node, x: False)(lambda low, node, x: x)
    with pytest.raises(UnsupportedOpError,
                       match=r"aten.lgamma.default has no lowering.*\nSupported ops:"):
        lower(captured)
    # a general rule takes what the cases decline
    core.rule(OP)(lambda low, node, x: Ref(x.index.flip(0)))
    out = lower(captured).outputs[0]
    assert torch.equal(out.index, torch.arange(6).reshape(2, 3).flip(0))
    # a case that accepts wins over the general rule
    core.rule(OP, case=lambda low, node, x: isinstance(x, Ref))(lambda low, node, x: x)
    assert torch.equal(lower(captured).outputs[0].index, torch.arange(6).reshape(2, 3))
    # two accepting cases: an error naming both
    core.rule(OP, case=lambda low, node, x: True)(lambda low, node, x: x)
    with pytest.raises(RuntimeError, match=r"lgamma.*rules .*<lambda>, .*<lambda> all accept"):
        lower(captured)
    # a second general rule: refused at registration
    with pytest.raises(ValueError, match="has a general rule already"):
        core.rule(OP)(lambda low, node, x: x)


def test_every_rule_module_is_listed_once_in_families():
    """families.FAMILIES is the one list of rule modules (DESIGN: the rule table assembled
    in one listed place): every module that registers a rule is in it, once."""
    import pkgutil

    import frontend.lowering as lowering_pkg
    from frontend.lowering import families

    registering = {fn.__module__ for rules in core.RULES.values() for fn in _rule_fns(rules)}
    listed = [m.__name__ for m in families.FAMILIES]
    assert len(listed) == len(set(listed))
    assert registering <= set(listed), sorted(registering - set(listed))
    helpers = {"frontend.lowering.common", "frontend.lowering.core",
               "frontend.lowering.families", "frontend.lowering.attention_guard"}
    modules = {f"frontend.lowering.{m.name}" for m in pkgutil.iter_modules(lowering_pkg.__path__)}
    assert modules - helpers == set(listed)


def _rule_fns(rules: core.OpRules):
    return ([rules.general] if rules.general else []) + [fn for _, fn in rules.cases]
