"""Layer norm in training graphs: the backward needs the forward's per-row mean and rstd
(native_layer_norm's outputs 1 and 2), which the inference rule leaves uncomputed.

When a graph uses them they are computed on the fabric next to the normalized output:
    mean = rowreduce_mean(x)                       (m,)
    var  = rowreduce_mean((x - mean)^2)            (the two-pass biased variance)
    rstd = rsqrt(var + eps)                        (mathlib.rsqrt, within RSQRT_ULPS ulps)
shaped (..., 1) per normalized row, as ATen gives them. PyTorch's CPU kernel gets the same
mean and variance up to rounding (it accumulates in another order), so rstd agrees within a
few ulps.
"""

from __future__ import annotations

import math
import operator

import torch

from fabric.kernels import build_blockwise
from fabric.kernels import mathlib as ml
from frontend.lowering import norms
from frontend.lowering.common import as2d, binary, expand_to, map_, reduce_rows
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Ref

aten = torch.ops.aten

RSQRT_CYCLES_PER_ELEMENT = 14  # mathlib.rsqrt: 14 ops (shr, isubv, 3 x (mul, mul, fma, mul))


def build_rsqrt(cfg, rect, m, n, dtype="f32", acc_dtype="f32"):
    """y = 1 / sqrt(x) elementwise on an (m, n) tensor in blocks (`build_blockwise`)."""
    return build_blockwise(cfg, rect, m, n, "rsqrt", ml.rsqrt, 1, ml.rsqrt_cycles, dtype)


def rsqrt(low, x: Ref) -> Ref:
    m, n = as2d(x.shape)
    ref = low.stage("rsqrt", (m, n),
                    lambda cfg, rect, **fmt: build_rsqrt(cfg, rect, m, n, **fmt),
                    [low.operand("x", x, (m, n))],
                    m * n * RSQRT_CYCLES_PER_ELEMENT, Limits(m, n), words_per_element=3)
    return Ref(ref.index.reshape(x.shape))


def _stats_used(low, node, *args, **kwargs) -> bool:
    """The graph reads the mean or rstd (else `norms.layer_norm` alone)."""
    return any(u.target is operator.getitem and u.args[1] in (1, 2)
               for u in node.users)


@rule(aten.native_layer_norm.default, case=_stats_used)
def layer_norm(low, node, x, normalized_shape, weight, bias, eps):
    y, _, _ = norms.layer_norm(low, node, x, normalized_shape, weight, bias, eps)
    n = math.prod(normalized_shape)
    rows = x.index.reshape(-1, n)
    m = rows.shape[0]
    stat_shape = tuple(x.shape[:len(x.shape) - len(normalized_shape)]) + \
        (1,) * len(normalized_shape)
    mean = reduce_rows(low, rows, "mean", 1.0 / n)  # (m,)
    centered = binary(low, Ref(rows), expand_to(Ref(mean.index.reshape(m, 1)), (m, n)),
                      "sub", (m, n))
    square = binary(low, centered, centered, "mul", (m, n))
    var = reduce_rows(low, square.index, "mean", 1.0 / n)
    shifted = map_(low, Ref(var.index.reshape(m, 1)), "add", float(eps), (m, 1))
    rstd = rsqrt(low, Ref(shifted.index.reshape(1, m)))
    return (y, Ref(mean.index.reshape(stat_shape)), Ref(rstd.index.reshape(stat_shape)))
