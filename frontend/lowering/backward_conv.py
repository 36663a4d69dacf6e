"""convolution_backward, and eval-mode batch norm whose weight and bias are runtime inputs
(parameters being trained; the running statistics stay constants).

The backward of each forward lowering (`lowering.conv`), in 2D (a 1D convolution's as that
of height 1). With G the output gradient:
- GEMMs over im2col (groups = 1, or one GEMM per group): with G as a (N OH OW, C_out)
  matrix, X the im2col matrix of the input (N OH OW, C k_h k_w) and W the weight as
  (C_out, C k_h k_w) (per group: their group's columns and rows),
      grad_weight = X^T @ G       (C k_h k_w, C_out), viewed back as (C_out, C, k_h, k_w)
      grad_input  = col2im(G @ W): every im2col entry added into its input position (the
                    static `scatter_add`; padding entries are dropped)
- weighted sums of the windows (depthwise, groups with C_out / G <= G): with R the rows of
  the forward (N C_out OH OW, c k_h k_w) (`conv.group_rows`) and w the weights,
      grad_weight[o, j] = sum over the rows i of channel o of G[i] R[i, j]: one
                    `weighted_rows` of (C_out c k_h k_w) rows of N OH OW
      grad_input[p] = sum of G[i] w[o(i), j] over the entries (i, j) with R[i, j] = p: one
                    `weighted_rows` of the input's positions (a col2im that multiplies)
- grad_bias = rowreduce_sum(G^T) in both.
Transposed convolutions have no backward here (refused by name).
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
    positions,
    reduce_rows,
    relayout,
    scatter_add,
    scatter_rows,
    shape_of,
    weighted_rows,
    windows,
)
from frontend.lowering.conv import as_2d, group_rows, uses_weighted_windows, window_map
from frontend.lowering.core import Unavailable, rule
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.convolution_backward.default)
def convolution_backward(low, node, grad, x, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    nd = len(shape_of(x)) - 2
    if transposed:
        raise low.unsupported("convolution_backward of a transposed convolution (its "
                              "forward lowers; its gradients do not yet)")
    if nd not in (1, 2):
        raise low.unsupported(f"convolution_backward of a {nd}D convolution (1D and 2D only)")
    x2, w2, (stride, padding, dilation, _) = as_2d(x, weight, (stride, padding, dilation,
                                                               output_padding))
    g2 = relayout(grad, lambda t: t.unsqueeze(2)) if nd == 1 else grad
    geometry = ((shape_of(w2)[2], shape_of(w2)[3]), stride, padding, dilation,
                *g2.shape[2:])
    cout = shape_of(weight)[0]
    if groups > 1 and uses_weighted_windows(groups, cout // groups):
        din, dw = _weighted_backward(low, g2, x2, w2, groups, geometry, output_mask)
    else:
        din, dw = _gemm_backward(low, g2, x2, w2, groups, geometry, output_mask)
    outs = [None, None, None]
    if output_mask[0]:
        outs[0] = Ref(din.index.reshape(shape_of(x)))
    if output_mask[1]:
        outs[1] = Ref(dw.index.reshape(shape_of(weight)))
    if output_mask[2]:
        outs[2] = reduce_rows(low, g2.index.permute(1, 0, 2, 3).reshape(cout, -1), "sum")
    return tuple(outs)


def _windows(index: torch.Tensor, kernel, stride, padding, dilation, oh, ow) -> torch.Tensor:
    """(N, C, H, W) ids -> (N, C, OH, OW, kh kw) windows, -1 for padding."""
    return windows(index, kernel, stride, padding, dilation)[:, :, :oh, :ow]


def _im2col(index: torch.Tensor, *geometry) -> torch.Tensor:
    """(N, C, H, W) ids -> (N OH OW, C kh kw) ids, -1 for padding."""
    win = _windows(index, *geometry)
    n, c, oh, ow, k = win.shape
    return win.permute(0, 2, 3, 1, 4).reshape(n * oh * ow, c * k)


def _gemm_backward(low, grad: Ref, x, weight, groups: int, geometry, mask):
    """(grad_input, grad_weight) by GEMMs over im2col, one per group (module docstring)."""
    n, cin = shape_of(x)[:2]
    cout, cin_g, kh, kw = shape_of(weight)
    _, _, oh, ow = grad.shape
    cout_g, ck = cout // groups, cin_g * kh * kw
    g = grad.index.permute(0, 2, 3, 1).reshape(n * oh * ow, cout)
    din = dw = None
    if mask[0]:
        cols = []
        for i in range(groups):
            w = relayout(weight, lambda t, i=i: t[i * cout_g:(i + 1) * cout_g]
                         .reshape(cout_g, ck))
            cols.append(gemm(low, Ref(g[:, i * cout_g:(i + 1) * cout_g]), w,
                             suffix="_dcols").index)
        target = _im2col(positions(shape_of(x)), *geometry)
        din = scatter_add(low, torch.cat(cols, dim=1), target, math.prod(shape_of(x)))
    if mask[1]:
        x_cols = window_map(x, lambda t: _im2col(t, *geometry))  # (N OH OW, C kh kw)
        dws = []
        for i in range(groups):
            cols = relayout(x_cols, lambda t, i=i: t[:, i * ck:(i + 1) * ck].t())
            part = gemm(low, cols, Ref(g[:, i * cout_g:(i + 1) * cout_g]), suffix="_dweight")
            dws.append(part.index.t())  # (c', c kh kw)
        dw = Ref(torch.cat(dws, dim=0))
    return din, dw


def take(value, ids: torch.Tensor):
    """The elements of a Const or Ref at flat positions `ids` (-1: zero), shaped as ids."""
    return window_map(value, lambda t: torch.where(ids >= 0, t.reshape(-1)[ids.clamp(min=0)],
                                                   -1))


def _weighted_backward(low, grad: Ref, x, weight, groups: int, geometry, mask):
    """(grad_input, grad_weight) of `conv._weighted_windows` (module docstring)."""
    n = shape_of(x)[0]
    cout, cin_g, kh, kw = shape_of(weight)
    _, _, oh, ow = grad.shape
    r, per = cin_g * kh * kw, oh * ow
    din = dw = None
    if mask[0]:
        # entry (i, j) of the forward's rows adds G[i] w[o(i), j] into input position
        # R[i, j]: each position's entries, in a row of ids of G and one of w
        target = group_rows(_windows(positions(shape_of(x)), *geometry), groups, cout)
        entry = scatter_rows(torch.arange(target.numel()), target, math.prod(shape_of(x)))
        g_of = grad.index.reshape(-1, 1).expand(-1, r).reshape(-1)
        rows_g = torch.where(entry >= 0, g_of[entry.clamp(min=0)], -1)
        w_of = torch.arange(cout * r).reshape(1, cout, 1, r).expand(n, cout, per, r)
        rows_w = take(weight, torch.where(entry >= 0, w_of.reshape(-1)[entry.clamp(min=0)],
                                          -1))
        din = weighted_rows(low, Ref(rows_g), rows_w)
    if mask[1]:
        # row (o, j): the forward rows' column j of channel o times G of those rows
        rows = window_map(x, lambda t: group_rows(_windows(t, *geometry), groups, cout)
                          .reshape(n, cout, per, r).permute(1, 3, 0, 2).reshape(cout * r, -1))
        g = grad.index.reshape(n, cout, 1, per).expand(n, cout, r, per).permute(1, 2, 0, 3)
        dw = weighted_rows(low, rows, Ref(g.reshape(cout * r, -1)))
    return din, dw


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
