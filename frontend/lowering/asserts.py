"""Runtime assertions on integer inputs, checked by the host before every call.

`F.one_hot(ids, n)` traces as `_assert_async(not any(not (ids >= 0)), "one_hot: Class values
must be non-negative.")` and the same for ids < n before its comparison with arange. The
conditions are checks of an integer user input (`backward_embedding.IndexPred`), which the
host holds before every call (as it holds an embedding's index range): quantified over the
input's elements (`any` / `all`, their negations: `Quantified`), an `_assert_async` on one
is an `InputAssertion` of the lowering, and a call whose inputs break it raises eager's
RuntimeError with eager's message before anything runs. An assertion on values computed on
the fabric is refused (no host sees them before the call).
"""

from __future__ import annotations

import dataclasses

import torch

from frontend.lowering.backward_embedding import IndexPred
from frontend.lowering.core import rule
from frontend.lowering.losses import IndexCheck
from frontend.values import Symbolic

aten = torch.ops.aten


@dataclasses.dataclass
class Quantified(Symbolic):
    """any (quantifier "any") or all of `pred` over the input's elements, negated when
    `negated`: a bool the host computes from the call's inputs."""

    pred: IndexPred
    quantifier: str
    negated: bool = False


@dataclasses.dataclass(frozen=True)
class InputAssertion:
    """`check` quantified as `quantifier` ("any" / "all"), negated when `negated`, must hold
    for a call's inputs; `message` is eager's."""

    check: IndexCheck
    quantifier: str
    negated: bool
    message: str

    def verify(self, inputs: dict[str, torch.Tensor]) -> None:
        """Raises RuntimeError(message) where the inputs break the assertion, as eager."""
        holds = self.check.holds(inputs)
        value = bool(holds.any()) if self.quantifier == "any" else bool(holds.all())
        if value == self.negated:
            raise RuntimeError(self.message)


def _whole_pred(low, node, x, dim=None, keepdim=False) -> bool:
    """any over every dimension of an input's checks (what an assertion quantifies)."""
    return isinstance(x, IndexPred) and (dim is None or len(dim) == len(x.source.shape))


@rule(aten.any.default, aten.any.dims, case=_whole_pred)
def any_of_checks(low, node, x, dim=None, keepdim=False):
    return Quantified(x, "any")


@rule(aten.all.default, case=_whole_pred)
def all_of_checks(low, node, x):
    return Quantified(x, "all")


@rule(aten.logical_not.default, aten.bitwise_not.default,
      case=lambda low, node, x: isinstance(x, Quantified))
def not_quantified(low, node, x):
    return dataclasses.replace(x, negated=not x.negated)


@rule(aten._assert_async.msg)
def assert_async(low, node, cond, message):
    """An assertion the host checks before every call (module docstring)."""
    if not isinstance(cond, Quantified):
        raise low.unsupported(f"an assertion on values computed on the fabric "
                              f"({message!r})")
    low.input_assertions.append(InputAssertion(IndexCheck.of(low, cond.pred), cond.quantifier,
                                               cond.negated, message))
    return None
