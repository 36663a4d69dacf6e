"""Backward of pooling: the gradient of every window added into its input positions by the
static scatter-add (`common.scatter_add`).

avg_pool2d_backward: every window's gradient / divisor, added into its input positions.
max_pool2d_with_indices_backward: the gradient goes to the first maximum of each window
(PyTorch's index). The indices are not materialized (`FirstMaxima`; `training.graphs`
recomputes them in the backward graph instead of saving them): the first-maximum mask is
computed on the fabric from the pooled input,
    mx = rowreduce_max(windows)                         (M,)
    e  = compare(windows - mx >= 0)                     (M, k), 1 at every maximum
    s  = e @ U,  U[i, j] = 1 for i < j                  earlier maxima (exact 0/1 sums)
    first = e * compare(s <= 0)                         the first maximum only
    contrib = grad[:, None] * first                     then scatter_add into the input
"""

from __future__ import annotations

import dataclasses
import math
import operator

import torch

from frontend.lowering import reductions
from frontend.lowering.backward import Compare, mask
from frontend.lowering.common import (
    binary,
    expand_to,
    gemm,
    out_shape,
    pair,
    positions,
    reduce_rows,
    scatter_add,
    windows,
)
from frontend.lowering.core import Unavailable, rule
from frontend.values import Const, Ref, Symbolic

aten = torch.ops.aten


@rule(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(low, node, grad, x, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    kernel = pair(kernel_size)
    stride, padding = pair(stride, kernel), pair(padding)
    if padding != (0, 0) and not count_include_pad:
        raise low.unsupported("avg_pool2d_backward with count_include_pad=False and padding")
    shape = out_shape(node)
    if not isinstance(grad, (Ref, Const)):
        raise low.unsupported(f"max_pool2d_backward of a {type(grad).__name__} gradient")
    # a gradient known at compile time (torch.ones_like of the output, say) is a Const
    gshape = tuple(grad.value.shape if isinstance(grad, Const) else grad.shape)
    win = windows(positions(shape), kernel, stride, padding, (1, 1))
    win = win[:, :, :gshape[2], :gshape[3]]
    if win.shape[2:4] != gshape[2:4]:
        raise low.unsupported("avg_pool2d_backward with ceil_mode windows past the edge")
    contrib = grad.index.unsqueeze(-1).expand(win.shape)
    divisor = divisor_override or kernel[0] * kernel[1]
    out = scatter_add(low, contrib, win, math.prod(shape), 1.0 / divisor)
    return Ref(out.index.reshape(shape))


@dataclasses.dataclass
class FirstMaxima(Symbolic):
    """max_pool2d's indices: not materialized; the backward rule recomputes the mask of
    each window's first maximum from the pooled input."""

    what = "max_pool2d's indices (recomputed only by the pool's backward)"


def _output_used(node, i: int) -> bool:
    return any(u.target is operator.getitem and u.args[1] == i for u in node.users)


def _for_backward(low, node, *args, **kwargs) -> bool:
    """The indices are used, or the values are not (a backward recomputing the indices);
    else `reductions.max_pool2d` alone."""
    return _output_used(node, 1) or not _output_used(node, 0)


@rule(aten.max_pool2d_with_indices.default, case=_for_backward)
def max_pool2d(low, node, x, *args, **kwargs):
    """The inference rule's values (when used) and `FirstMaxima` for the indices."""
    if _output_used(node, 0):
        values, _ = reductions.max_pool2d(low, node, x, *args, **kwargs)
    else:  # only the indices are used (a backward recomputing them): no stage
        values = Unavailable("max_pool2d's values")
    return values, FirstMaxima()


@rule(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_backward(low, node, grad, x, kernel_size, stride, padding, dilation,
                        ceil_mode, indices):
    if not isinstance(indices, FirstMaxima):
        raise low.unsupported("max_pool2d_backward with indices from elsewhere than the "
                              "pooling of its input")
    kernel = pair(kernel_size)
    stride, padding, dilation = pair(stride, kernel), pair(padding), pair(dilation)
    if padding != (0, 0):
        raise low.unsupported("max_pool2d_backward with padding")
    if not isinstance(x, Ref):
        raise low.unsupported("max_pool2d_backward of a constant input")
    shape = out_shape(node)
    if not isinstance(grad, (Ref, Const)):
        raise low.unsupported(f"max_pool2d_backward of a {type(grad).__name__} gradient")
    # a gradient known at compile time (torch.ones_like of the output, say) is a Const
    gshape = tuple(grad.value.shape if isinstance(grad, Const) else grad.shape)
    win = windows(x.index, kernel, stride, padding, dilation)[:, :, :gshape[2], :gshape[3]]
    if win.shape[2:4] != gshape[2:4]:
        raise low.unsupported("max_pool2d_backward with ceil_mode windows past the edge")
    k = win.shape[-1]
    rows = win.reshape(-1, k)
    m = rows.shape[0]
    mx = reduce_rows(low, rows, "max")
    diff = binary(low, Ref(rows), expand_to(Ref(mx.index.reshape(m, 1)), (m, k)), "sub",
                  (m, k))
    is_max = mask(low, Compare(diff, "ge", 0.0))
    earlier = gemm(low, is_max, Const(torch.triu(torch.ones(k, k), diagonal=1)),
                   suffix="_earlier")
    first = binary(low, is_max, mask(low, Compare(earlier, "le", 0.0)), "mul", (m, k))
    if isinstance(grad, Const):
        g = Const(grad.value.to(torch.float32).reshape(m, 1).expand(m, k).contiguous())
    else:
        g = expand_to(Ref(grad.index.reshape(m, 1)), (m, k))
    contrib = binary(low, g, first, "mul", (m, k))
    target = windows(positions(shape), kernel, stride, padding, dilation)
    target = target[:, :, :gshape[2], :gshape[3]].reshape(m, k)
    out = scatter_add(low, contrib.index, target, math.prod(shape))
    return Ref(out.index.reshape(shape))
