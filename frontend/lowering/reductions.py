"""Reductions over dimensions (mean.dim, sum.dim_IntList, amax) and 2D pooling (max_pool2d,
avg_pool2d): the reduced elements of every output are laid out as one row and reduced by
`fabric.kernels.rowreduce` on a column of PEs."""

from __future__ import annotations

import torch

from frontend.lowering.common import out_shape, pair, reduce, reduce_rows, windows
from frontend.lowering.core import Unavailable, rule
from frontend.values import Ref

aten = torch.ops.aten


@rule(aten.mean.dim)
def mean(low, node, x, dims=None, keepdim=False, dtype=None):
    return reduce(low, node, x, dims, keepdim, "mean")


@rule(aten.sum.dim_IntList)
def sum_(low, node, x, dims=None, keepdim=False, dtype=None):
    return reduce(low, node, x, dims, keepdim, "sum")


@rule(aten.sum.default)
def sum_all(low, node, x, dtype=None):
    return reduce(low, node, x, None, False, "sum")


@rule(aten.amax.default)
def amax(low, node, x, dims=(), keepdim=False):
    return reduce(low, node, x, list(dims) or None, keepdim, "max")


@rule(aten.max_pool2d_with_indices.default)
def max_pool2d(low, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel = pair(kernel_size)
    stride, padding, dilation = pair(stride, kernel), pair(padding), pair(dilation)
    if padding != (0, 0):
        raise low.unsupported("max_pool2d with padding (its padding is -inf, not 0)")
    shape = out_shape(node)
    win = windows(x.index, kernel, stride, padding, dilation)[:, :, :shape[2], :shape[3]]
    if win.shape[2:4] != tuple(shape[2:4]):
        raise low.unsupported("max_pool2d with ceil_mode windows past the edge")
    out = reduce_rows(low, win.reshape(-1, win.shape[-1]), "max")
    return Ref(out.index.reshape(shape)), Unavailable("max_pool2d's indices")


@rule(aten.avg_pool2d.default)
def avg_pool2d(low, node, x, kernel_size, stride=(), padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    kernel = pair(kernel_size)
    stride, padding = pair(stride, kernel), pair(padding)
    if padding != (0, 0) and not count_include_pad:
        raise low.unsupported("avg_pool2d with count_include_pad=False and padding")
    shape = out_shape(node)
    win = windows(x.index, kernel, stride, padding, (1, 1))[:, :, :shape[2], :shape[3]]
    if win.shape[2:4] != tuple(shape[2:4]):
        raise low.unsupported("avg_pool2d with ceil_mode windows past the edge")
    divisor = divisor_override or kernel[0] * kernel[1]
    out = reduce_rows(low, win.reshape(-1, win.shape[-1]), "mean", 1.0 / divisor)
    return Ref(out.index.reshape(shape))
