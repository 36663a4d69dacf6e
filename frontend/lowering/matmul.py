"""Matrix products: mm, addmm (one GEMM whose sums start from the bias), bmm (one GEMM per
batch entry, each on its own tile), nn.Bilinear's _trilinear (a GEMM and weighted rows).
GEMMs use SUMMA (`fabric.kernels.gemm_summa`), which needs a color per tile row and
column; a product of one row is a GEMV (`fabric.kernels.gemv`, `common.gemm`)."""

from __future__ import annotations

import torch

from frontend.lowering.common import gemm, map_, relayout, shape_of, weighted_rows
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


# nn.Bilinear's call: _trilinear(x1 (B, I), W (O, I, J), x2 (B, J), expand1, expand2,
# expand3, sumdim) -> (B, O)
BILINEAR = ([1, 3], [0], [1, 2], [2, 3])


@rule(aten._trilinear.default)
def trilinear(low, node, x1, w, x2, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """nn.Bilinear, out[b, o] = sum_ij x1[b, i] W[o, i, j] x2[b, j], as

        t (B, O I) = x2 (B, J) @ W^T (J, O I)         the GEMM over j
        out[b, o]  = sum_i x1[b, i] t[b, o, i]        weighted rows (B O, I)

    (the sums in another order than eager's: fp32 roundings). Other _trilinear calls are
    refused."""
    if ([list(e) for e in (expand1, expand2, expand3, sumdim)] != [list(b) for b in BILINEAR]
            or len(shape_of(w)) != 3):
        raise low.unsupported("_trilinear other than nn.Bilinear's (expand [1, 3], [0], "
                              "[1, 2], sum over [2, 3])")
    o, i, j = shape_of(w)
    batch = shape_of(x1)[0]
    t = gemm(low, x2, relayout(w, lambda v: v.reshape(o * i, j).t()), suffix="_bilinear")
    rows = Ref(t.index.reshape(batch * o, i))
    weights = relayout(x1, lambda v: v[:, None, :].expand(batch, o, i).reshape(batch * o, i))
    return Ref(weighted_rows(low, rows, weights).index.reshape(batch, o))
