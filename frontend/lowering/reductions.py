"""Reductions over dimensions (mean.dim, sum.dim_IntList, amax) and 2D pooling (max_pool2d,
avg_pool2d): the reduced elements of every output are laid out as one row and reduced by
`fabric.kernels.rowreduce` on a column of PEs."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fabric.kernels import build_rowreduce
from frontend.lowering.common import out_shape
from frontend.lowering.core import Unavailable, rule
from frontend.stages import Limits
from frontend.values import Ref

aten = torch.ops.aten


def reduce_rows(low, rows: torch.Tensor, op: str, scale: float = 1.0) -> Ref:
    """rows: index map (m, r); a Ref of shape (m,)."""
    m, r = rows.shape
    return low.stage("rowreduce", (m,),
                     lambda cfg, rect, **fmt: build_rowreduce(cfg, rect, m, r, op, scale, **fmt),
                     [low.operand("x", Ref(rows), (m, r))], m * r,
                     Limits(m, 1, cols_fixed=1), words_per_element=r + 1, suffix=f"_{op}")


def _reduce(low, node, x, dims, keepdim, op):
    nd = len(x.shape)
    dims = sorted({d % nd for d in (dims or range(nd))}) if nd else []
    kept = [d for d in range(nd) if d not in dims]
    moved = x.index.permute(kept + dims) if nd else x.index.reshape(1)
    r = math.prod(x.shape[d] for d in dims) if dims else 1
    rows = moved.reshape(-1, r)
    out = reduce_rows(low, rows, op, 1.0 / r)
    return Ref(out.index.reshape(out_shape(node)))


@rule(aten.mean.dim)
def mean(low, node, x, dims=None, keepdim=False, dtype=None):
    return _reduce(low, node, x, dims, keepdim, "mean")


@rule(aten.sum.dim_IntList)
def sum_(low, node, x, dims=None, keepdim=False, dtype=None):
    return _reduce(low, node, x, dims, keepdim, "sum")


@rule(aten.sum.default)
def sum_all(low, node, x, dtype=None):
    return _reduce(low, node, x, None, False, "sum")


@rule(aten.amax.default)
def amax(low, node, x, dims=(), keepdim=False):
    return _reduce(low, node, x, list(dims) or None, keepdim, "max")


def _pair(v, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return v, v
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def windows(index: torch.Tensor, kernel, stride, padding, dilation) -> torch.Tensor:
    """(N, C, H, W) index map -> (N, C, OH, OW, kh * kw) windows; padding holds -1 (zero)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    padded = F.pad(index, (pw, pw, ph, ph), value=-1)
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    win = padded.unfold(2, span_h, sh).unfold(3, span_w, sw)[..., ::dh, ::dw]
    return win.reshape(*win.shape[:4], kh * kw)


@rule(aten.max_pool2d_with_indices.default)
def max_pool2d(low, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel = _pair(kernel_size)
    stride, padding, dilation = _pair(stride, kernel), _pair(padding), _pair(dilation)
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
    kernel = _pair(kernel_size)
    stride, padding = _pair(stride, kernel), _pair(padding)
    if padding != (0, 0) and not count_include_pad:
        raise low.unsupported("avg_pool2d with count_include_pad=False and padding")
    shape = out_shape(node)
    win = windows(x.index, kernel, stride, padding, (1, 1))[:, :, :shape[2], :shape[3]]
    if win.shape[2:4] != tuple(shape[2:4]):
        raise low.unsupported("avg_pool2d with ceil_mode windows past the edge")
    divisor = divisor_override or kernel[0] * kernel[1]
    out = reduce_rows(low, win.reshape(-1, win.shape[-1]), "mean", 1.0 / divisor)
    return Ref(out.index.reshape(shape))
