"""3D pooling (video, volumes): max_pool3d, avg_pool3d and adaptive average / max pooling
over (N, C, D, H, W), as the 2D pools of `reductions` over the windows of `windows3d`: the
(N, C, OD, OH, OW, K) windows are those of a 2D pool whose output rows are the (depth, row)
pairs, reduced by one `reduce_rows` (max: a window's positions outside the input filled
with one of its elements inside; average: one mean per distinct divisor).

local_response_norm arrives as an avg_pool3d over (size, 1, 1) windows of the squares, so it
runs through these too."""

from __future__ import annotations

import torch

from frontend.lowering.common import out_shape, triple, windows3d
from frontend.lowering.core import Unavailable, rule
from frontend.lowering.reductions import max_windows, mean_windows, window_divisors
from frontend.values import Ref

aten = torch.ops.aten


def _batched(x: Ref) -> torch.Tensor:
    """x's index map as (N, C, D, H, W): an unbatched (C, D, H, W) input as a batch of one."""
    return x.index if x.index.dim() == 5 else x.index.unsqueeze(0)


def _as_2d(win: torch.Tensor) -> torch.Tensor:
    """(N, C, OD, OH, OW, K) windows as the (N, C, OD OH, OW, K) of a 2D pool."""
    n, c, od, oh, ow, k = win.shape
    return win.reshape(n, c, od * oh, ow, k)


@rule(aten.max_pool3d_with_indices.default)
def max_pool3d(low, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel = triple(kernel_size)
    stride, padding, dilation = triple(stride, kernel), triple(padding), triple(dilation)
    shape = out_shape(node)
    return max_windows(low, _batched(x), lambda t: _as_2d(windows3d(
        t, kernel, stride, padding, dilation, shape[-3:])), shape), Unavailable(
            "max_pool3d's indices")


@rule(aten.avg_pool3d.default)
def avg_pool3d(low, node, x, kernel_size, stride=(), padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    kernel = triple(kernel_size)
    stride, padding = triple(stride, kernel), triple(padding)
    shape = out_shape(node)
    win = windows3d(_batched(x), kernel, stride, padding, (1, 1, 1), shape[-3:])
    counts = window_divisors(shape[-3:], kernel, stride, padding, x.shape[-3:],
                             count_include_pad, divisor_override)
    od, oh, ow = shape[-3:]
    return mean_windows(low, _as_2d(win), counts.reshape(od * oh, ow), shape)


@rule(aten._adaptive_avg_pool3d.default, aten.adaptive_max_pool3d.default)
def adaptive_pool3d(low, node, x, output_size):
    """Adaptive average (one mean per window size) or max (with its indices unavailable)."""
    shape = out_shape(node)
    if node.target == aten.adaptive_max_pool3d.default:
        return max_windows(low, _batched(x), lambda t: _as_2d(_adaptive_windows(
            t, shape[-3:])[0]), shape), Unavailable("adaptive_max_pool3d's indices")
    win, counts = _adaptive_windows(_batched(x), shape[-3:])
    od, oh, ow = shape[-3:]
    return mean_windows(low, _as_2d(win), counts.reshape(od * oh, ow), shape)


def _adaptive_windows(index: torch.Tensor, out_dhw):
    """PyTorch's adaptive windows of an (N, C, D, H, W) index map (output i of a dimension
    of size n -> o reads [floor(i n / o), ceil((i + 1) n / o))): the windows (N, C, OD, OH,
    OW, K) padded with -1 to the largest, and the count of each (OD, OH, OW)."""
    spans = []
    for o, n in zip(out_dhw, index.shape[2:]):
        start = [i * n // o for i in range(o)]
        end = [-(-(i + 1) * n // o) for i in range(o)]
        width = max(e - s for s, e in zip(start, end))
        pos = torch.tensor(start)[:, None] + torch.arange(width)  # (o, width)
        inside = pos < torch.tensor(end)[:, None]
        spans.append((torch.where(inside, pos, 0), inside))
    (pd, md), (ph, mh), (pw, mw) = spans
    picked = index[:, :, pd[:, None, None, :, None, None], ph[None, :, None, None, :, None],
                   pw[None, None, :, None, None, :]]  # (N, C, OD, OH, OW, kd, kh, kw)
    inside = (md[:, None, None, :, None, None] & mh[None, :, None, None, :, None]
              & mw[None, None, :, None, None, :])
    n, c = index.shape[:2]
    od, oh, ow = (p.shape[0] for p in (pd, ph, pw))
    win = torch.where(inside, picked, -1).reshape(n, c, od, oh, ow, -1)
    return win, inside.reshape(od, oh, ow, -1).sum(-1)
