"""Ops of training graphs (aot_autograd's forward and backward, core ATen): comparisons
with a scalar and the `where` that selects with them (relu's gradient is
where(x <= 0, 0, g)), full means.

A comparison is symbolic until a `where` uses it; the select then runs as a 0/1 mask from
`fabric.kernels.compare` and elementwise products:
    where(c, 0, b) = b * mask(not c),   where(c, a, 0) = a * mask(c),
This `where` is the case of a `Compare` condition with a zero branch; other `where`s go to
the other rules of `where` (`masks`: the attention guard and the exact bitwise select of
any other condition; the index checks of `backward_embedding` and `losses`).
"""

from __future__ import annotations

import dataclasses

import torch

from fabric.kernels import build_compare
from frontend.lowering.common import as2d, binary, expand_to, num, out_shape, reduce, scalar
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Const, Ref, Symbolic

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

def _zero(v) -> bool:
    return isinstance(v, Const) and bool((v.value == 0).all())


def _compare_against_zero(low, node, cond, a, b) -> bool:
    """A Compare selecting a runtime tensor against 0 (other selects: `masks.where`)."""
    return isinstance(cond, Compare) and ((_zero(a) and isinstance(b, Ref))
                                          or (_zero(b) and isinstance(a, Ref)))


@rule(aten.where.self, case=_compare_against_zero)
def where(low, node, cond, a, b):
    shape = out_shape(node)
    if _zero(a) and isinstance(b, Ref):
        keep, value = mask(low, cond, negate=True), b
    else:
        keep, value = mask(low, cond), a
    return binary(low, expand_to(value, shape), expand_to(keep, shape), "mul", shape)


@rule(aten.mean.default)
def mean_all(low, node, x, dtype=None):
    return reduce(low, node, x, None, False, "mean")
