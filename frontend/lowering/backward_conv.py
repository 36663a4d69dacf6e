"""convolution_backward as GEMMs over im2col, and eval-mode batch norm whose weight and bias
are runtime inputs (parameters being trained; the running statistics stay constants).

With G the output gradient as a (N OH OW, C_out) matrix, X the im2col matrix of the input
(N OH OW, C k_h k_w) and W the weight as (C_out, C k_h k_w) (`lowering.conv`'s layouts):
    grad_weight = X^T @ G           (C k_h k_w, C_out), viewed back as (C_out, C, k_h, k_w)
    grad_bias   = rowreduce_sum(G^T)
    grad_input  = col2im(G @ W): every im2col entry added into its input position (the
                  static `scatter_add`; padding entries are dropped)
Batch norm (eval), as PyTorch's CPU kernel computes it: invstd = 1 / sqrt(var + eps) (a
constant), alpha = weight * invstd, beta = bias - mean * alpha, y = x * alpha + beta (per
channel).
"""

from __future__ import annotations

import math

import torch

from frontend.lowering.common import (
    binary,
    gemm,
    out_shape,
    pair,
    positions,
    reduce_rows,
    relayout,
    scatter_add,
    shape_of,
    windows,
)
from frontend.lowering.core import Unavailable, rule
from frontend.values import Const, Ref

aten = torch.ops.aten


def _im2col(index: torch.Tensor, kernel, stride, padding, dilation, oh, ow) -> torch.Tensor:
    """(N, C, H, W) ids -> (N OH OW, C kh kw) ids, -1 for padding."""
    n, c = index.shape[:2]
    win = windows(index, kernel, stride, padding, dilation)[:, :, :oh, :ow]
    return win.permute(0, 2, 3, 1, 4).reshape(n * oh * ow, c * kernel[0] * kernel[1])


@rule(aten.convolution_backward.default)
def convolution_backward(low, node, grad, x, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    if transposed or groups != 1 or len(shape_of(x)) != 4:
        raise low.unsupported("convolution_backward other than a 2D, ungrouped, "
                              "non-transposed convolution")
    n, cin, _, _ = shape_of(x)
    cout, _, kh, kw = shape_of(weight)
    _, _, oh, ow = grad.shape
    geometry = ((kh, kw), pair(stride), pair(padding), pair(dilation), oh, ow)
    g = Ref(grad.index.permute(0, 2, 3, 1).reshape(n * oh * ow, cout))
    outs = [None, None, None]
    if output_mask[0]:
        w = relayout(weight, lambda t: t.reshape(cout, cin * kh * kw))
        cols = gemm(low, g, w, suffix="_dcols")
        target = _im2col(positions(shape_of(x)), *geometry)
        flat = scatter_add(low, cols.index, target, math.prod(shape_of(x)))
        outs[0] = Ref(flat.index.reshape(shape_of(x)))
    if output_mask[1]:
        cols = relayout(x, lambda t: _im2col(t, *geometry) if isinstance(x, Ref)
                        else _im2col_values(t, *geometry))
        dw = gemm(low, relayout(cols, lambda t: t.t()), g, suffix="_dweight")
        outs[1] = Ref(dw.index.t().reshape(cout, cin, kh, kw))
    if output_mask[2]:
        outs[2] = reduce_rows(low, g.index.t(), "sum")
    return tuple(outs)


def _im2col_values(t: torch.Tensor, kernel, stride, padding, dilation, oh, ow):
    """The im2col matrix of a constant input (its values; padding reads 0)."""
    ids = _im2col(positions(t.shape), kernel, stride, padding, dilation, oh, ow)
    flat = torch.cat([t.reshape(-1), t.new_zeros(1)])
    return flat[torch.where(ids >= 0, ids, flat.numel() - 1)]


def _trained_affine(low, node, x, weight, bias, *args, **kwargs) -> bool:
    """Weight or bias a runtime input (else `norms.batch_norm`, all constants)."""
    return isinstance(weight, Ref) or isinstance(bias, Ref)


@rule(aten._native_batch_norm_legit_no_training.default, case=_trained_affine)
def batch_norm(low, node, x, weight, bias, mean, var, momentum, eps):
    if not (isinstance(mean, Const) and isinstance(var, Const)):
        raise low.unsupported("batch norm with runtime running statistics")
    channels = x.shape[1]
    w = weight if weight is not None else Const(torch.ones(channels))
    b = bias if bias is not None else Const(torch.zeros(channels))
    invstd = Const(1.0 / torch.sqrt(var.value + eps))
    alpha = binary(low, w, invstd, "mul", (channels,)) if isinstance(w, Ref) \
        else Const(w.value * invstd.value)
    shifted = binary(low, alpha, mean, "mul", (channels,))
    beta = binary(low, b, shifted, "sub", (channels,))
    view = (1, channels) + (1,) * (len(x.shape) - 2)
    shape = out_shape(node)
    y = binary(low, x, relayout(alpha, lambda t: t.reshape(view)), "mul", shape)
    y = binary(low, y, relayout(beta, lambda t: t.reshape(view)), "add", shape)
    return y, Unavailable("batch norm's saved mean"), Unavailable("batch norm's saved rstd")
