"""Ops of training graphs (aot_autograd's forward and backward, core ATen): comparisons
with a scalar (relu's gradient is where(x <= 0, 0, g)), full means.

A comparison is symbolic until something uses it: the `where` of `masks` selects with it
bit for bit (where(c, 0, g) is 0 where c holds even for an infinite or NaN g, as eager's;
a product with a 0/1 mask would give NaN there), and `mask` gives the 0/1 tensor that
pooling's backward multiplies by.
"""

from __future__ import annotations

import dataclasses

import torch

from fabric.kernels import build_compare
from frontend.lowering.common import as2d, num, reduce, scalar
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Ref, Symbolic

aten = torch.ops.aten

NEGATE = {"gt": "le", "le": "gt", "lt": "ge", "ge": "lt"}
# single-PE cycles per element of the compare kernel, about 2 to 4 (max, mul, min at widths
# 2, 1, 2, plus a subtraction or negation and a complement): sizes its tile
CYCLES_PER_ELEMENT = 3


@dataclasses.dataclass
class Compare(Symbolic):
    """x op scalar, op "gt" | "lt" | "ge" | "le", not yet materialized."""

    x: Ref
    op: str
    scalar: float

    @property
    def shape(self) -> tuple[int, ...]:
        return self.x.shape


def mask(low, c: Compare, negate: bool = False) -> Ref:
    """The 0/1 tensor of c (or of not c) computed on the fabric."""
    op = NEGATE[c.op] if negate else c.op
    m, n = as2d(c.shape)
    s = c.scalar
    ref = low.stage("compare", (m, n),
                    lambda cfg, rect, **fmt: build_compare(cfg, rect, m, n, op, s,
                                                           **_storage(fmt)),
                    [low.operand("x", c.x, (m, n))], m * n * CYCLES_PER_ELEMENT,
                    Limits(m, n), words_per_element=2, suffix=f"_{op}")
    return Ref(ref.index.reshape(c.shape))


def _storage(fmt: dict) -> dict:
    return {"dtype": fmt["dtype"]} if "dtype" in fmt else {}


def _compare_rule(op):
    def lower_compare(low, node, x, other):
        if not isinstance(x, Ref) or not scalar(other):
            raise low.unsupported(f"{op} of {type(x).__name__} with "
                                  f"{type(other).__name__} (a runtime tensor with a scalar)")
        return Compare(x, op, num(other))
    return lower_compare


for _op in ("gt", "lt", "ge", "le"):
    rule(getattr(aten, _op).Scalar)(_compare_rule(_op))


@rule(aten.mean.default)
def mean_all(low, node, x, dtype=None):
    return reduce(low, node, x, None, False, "mean")
