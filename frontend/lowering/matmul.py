"""Matrix products: mm, addmm (one GEMM whose sums start from the bias), bmm (one GEMM per
batch entry, each on its own tile). GEMMs use SUMMA (`fabric.kernels.gemm_summa`), which
needs a color per tile row and column; a product of one row is a GEMV
(`fabric.kernels.gemv`, `common.gemm`)."""

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
    """beta * bias + alpha * (a @ b); a scale of 1 costs nothing, a constant's is folded.

    With alpha = 1 the bias (n,), (1, n), (m, 1) or (m, n), scaled, is the GEMM's initial
    accumulator (`gemm`'s c0): one stage, the bias added inside the sums as autocast's
    addmm does. Otherwise the product is scaled before the bias is added, which the
    kernel's accumulator cannot do (it adds the unscaled a @ b to its start): a GEMM, a
    scale and an add."""
    if beta != 0 and beta != 1:
        bias = Const(bias.value * beta) if isinstance(bias, Const) else \
            map_(low, bias, "mul", beta, shape_of(bias))
    if alpha == 1:
        return gemm(low, a, b, c0=bias if beta != 0 else None)
    prod = gemm(low, a, b, suffix="_mm")
    prod = map_(low, prod, "mul", alpha, prod.shape)
    return prod if beta == 0 else add_rule(low, node, prod, bias)


@rule(aten.bmm.default)
def bmm(low, node, a, b):
    batch = shape_of(a)[0]
    parts = [gemm(low, relayout(a, lambda t, i=i: t[i]), relayout(b, lambda t, i=i: t[i]),
                  suffix=f"_b{i}") for i in range(batch)]
    return Ref(torch.stack([p.index for p in parts]))
