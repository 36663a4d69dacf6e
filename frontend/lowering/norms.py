"""Softmax and layer norm over the last dimension(s) (`fabric.kernels.rownorm`), group norm
(the layer norm kernel over each group's elements, then the per-channel affine), batch norm
in eval mode (a per-channel scale and shift, one `affine` stage) and by the batch's own
statistics (instance norm: the layer norm kernel over each channel's elements, then the
per-channel affine)."""

from __future__ import annotations

import math

import torch

from fabric.kernels import build_layernorm, build_softmax
from frontend.lowering.common import CYCLES_PER_ELEMENT, affine, as2d, binary, out_shape
from frontend.lowering.core import Unavailable, rule
from frontend.stages import Limits
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten._softmax.default)
def softmax(low, node, x, dim, half_to_float=False):
    moved = x.index.movedim(dim, -1)
    m, n = as2d(moved.shape)
    ref = low.stage("softmax", (m, n),
                    lambda cfg, rect, **fmt: build_softmax(cfg, rect, m, n, **fmt),
                    [low.operand("x", Ref(moved), (m, n))],
                    m * n * CYCLES_PER_ELEMENT["softmax"], Limits(m, n),
                    words_per_element=2)
    return Ref(ref.index.reshape(moved.shape).movedim(-1, dim))


@rule(aten.native_layer_norm.default)
def layer_norm(low, node, x, normalized_shape, weight, bias, eps):
    n = math.prod(normalized_shape)
    m = x.index.numel() // n
    gamma = weight if weight is not None else Const(torch.ones(n))
    beta = bias if bias is not None else Const(torch.zeros(n))
    ref = low.stage("layernorm", (m, n),
                    lambda cfg, rect, **fmt: build_layernorm(cfg, rect, m, n, eps=float(eps),
                                                             **fmt),
                    [low.operand("x", x, (m, n)), low.operand("gamma", gamma, (n,)),
                     low.operand("beta", beta, (n,))],
                    m * n * CYCLES_PER_ELEMENT["layernorm"], Limits(m, n),
                    words_per_element=2)
    return (Ref(ref.index.reshape(x.shape)), Unavailable("layer norm's mean"),
            Unavailable("layer norm's rstd"))


@rule(aten._native_batch_norm_legit_no_training.default)
def batch_norm(low, node, x, weight, bias, mean, var, momentum, eps):
    _refuse_runtime(low, "batch norm", weight=weight, bias=bias, running_mean=mean,
                    running_var=var)
    channels = x.shape[1]
    w = weight.value if weight is not None else torch.ones(channels)
    b = bias.value if bias is not None else torch.zeros(channels)
    # eval batch norm is y = x * scale + shift per channel; folded as PyTorch folds it
    scale = w / torch.sqrt(var.value + eps)
    shift = b - mean.value * scale
    view = (1, channels) + (1,) * (len(x.shape) - 2)
    shape = out_shape(node)
    y = affine(low, x, Const(scale.reshape(view)), Const(shift.reshape(view)), shape)
    return y, Unavailable("batch norm's saved mean"), Unavailable("batch norm's saved rstd")


@rule(aten._native_batch_norm_legit.no_stats)
def batch_statistics_norm(low, node, x, weight, bias, training, momentum, eps):
    """Batch norm by the batch's own statistics, without running ones (InstanceNorm, which
    PyTorch writes as this op on x seen as (1, N C, *), and BatchNorm with
    track_running_stats=False): each channel's elements over the batch and the positions
    are one row of the layer norm kernel (its own mean and biased variance, as PyTorch
    normalizes), then the per-channel weight and bias as one `affine` stage."""
    _refuse_runtime(low, "batch norm", weight=weight, bias=bias)
    channels = x.shape[1]
    rows = x.index.movedim(1, 0)  # (C, N, *)
    normalized = _normalized_rows(low, rows.reshape(channels, -1), eps)
    y = Ref(normalized.index.reshape(rows.shape).movedim(0, 1))
    y = _channel_affine(low, y, weight, bias, channels, out_shape(node))
    return y, Unavailable("batch norm's mean"), Unavailable("batch norm's rstd")


@rule(aten.native_group_norm.default)
def group_norm(low, node, x, weight, bias, n, channels, hw, groups, eps):
    """GroupNorm: each (sample, group) of x (N, C, *) is one row of C / G * HxW elements,
    normalized by the layer norm kernel (its own mean and variance, no affine), then the
    per-channel weight and bias as one `affine` stage (PyTorch's order: normalize, times
    weight, plus bias, each rounded)."""
    _refuse_runtime(low, "group norm", weight=weight, bias=bias)
    m, width = n * groups, (channels // groups) * hw
    normalized = _normalized_rows(low, x.index.reshape(m, width), eps)
    y = _channel_affine(low, Ref(normalized.index.reshape(x.shape)), weight, bias, channels,
                        out_shape(node))
    return y, Unavailable("group norm's mean"), Unavailable("group norm's rstd")


def _refuse_runtime(low, what: str, **params) -> None:
    """UnsupportedOpError naming the first of `params` (a norm's weight, bias, running
    statistics) computed at run time: the norms fold them on the host as constants."""
    for name, v in params.items():
        if v is not None and not isinstance(v, Const):
            raise low.unsupported(f"{what} with a runtime {name}")


def _normalized_rows(low, rows: torch.Tensor, eps) -> Ref:
    """Every row of the index map `rows` (m, width) normalized by its own mean and biased
    variance, no affine: one layer norm stage (weight 1, bias 0); a Ref (m, width)."""
    m, width = rows.shape
    return low.stage("layernorm", (m, width),
                     lambda cfg, rect, **fmt: build_layernorm(cfg, rect, m, width,
                                                              eps=float(eps), **fmt),
                     [low.operand("x", Ref(rows), (m, width)),
                      low.operand("gamma", Const(torch.ones(width)), (width,)),
                      low.operand("beta", Const(torch.zeros(width)), (width,))],
                     m * width * CYCLES_PER_ELEMENT["layernorm"], Limits(m, width),
                     words_per_element=2)


def _channel_affine(low, y: Ref, weight, bias, channels: int, shape) -> Ref:
    """y (N, C, *) times the per-channel `weight` plus `bias` (Consts or None), PyTorch's
    order: one `affine` stage, or a product or a sum for one of them."""
    view = (1, channels) + (1,) * (len(shape) - 2)
    if weight is not None and bias is not None:
        return affine(low, y, Const(weight.value.reshape(view)),
                      Const(bias.value.reshape(view)), shape)
    if weight is not None:
        return binary(low, y, Const(weight.value.reshape(view)), "mul", shape)
    if bias is not None:
        return binary(low, y, Const(bias.value.reshape(view)), "add", shape)
    return y
