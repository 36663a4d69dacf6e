"""Matrix products: mm, addmm (GEMM then a bias add), bmm (one GEMM per batch entry, each on
its own tile). GEMMs use SUMMA (`fabric.kernels.gemm_summa`), which needs a color per tile
row and column."""

from __future__ import annotations

import torch

from frontend.lowering.common import gemm, map_, relayout, shape_of
from frontend.lowering.core import rule
from frontend.lowering.elementwise import add as add_rule
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.mm.default)
def mm(low, node, a, b):
    return gemm(low, a, b)


@rule(aten.addmm.default)
def addmm(low, node, bias, a, b, beta=1, alpha=1):
    """beta * bias + alpha * (a @ b); a scale of 1 costs nothing, a constant's is folded."""
    prod = gemm(low, a, b, suffix="_mm")
    if alpha != 1:
        prod = map_(low, prod, "mul", alpha, prod.shape)
    if beta == 0:
        return prod
    if beta != 1:
        bias = Const(bias.value * beta) if isinstance(bias, Const) else \
            map_(low, bias, "mul", beta, bias.shape)
    return add_rule(low, node, prod, bias)


@rule(aten.bmm.default)
def bmm(low, node, a, b):
    batch = shape_of(a)[0]
    parts = [gemm(low, relayout(a, lambda t, i=i: t[i]), relayout(b, lambda t, i=i: t[i]),
                  suffix=f"_b{i}") for i in range(batch)]
    return Ref(torch.stack([p.index for p in parts]))
