"""Reductions over dimensions (mean.dim, sum.dim_IntList, prod, amax, var and var_mean,
max.dim and argmax with their indices, vector norms of order 2, 1 and inf, and torch.cdist
as the norms of the pairs' differences), cumulative sums
and products (cumsum, cumprod: `fabric.kernels.scan` on a column of PEs) and 2D pooling
(max_pool2d, avg_pool2d, adaptive average and max pooling): the reduced elements of every
output are laid out as one row and reduced by `fabric.kernels.rowreduce` on a column of
PEs.

A window's positions outside the input (padding, ceil_mode's last windows) are filled by
index alone: a max pool's with an element of the same window (max is idempotent, and
PyTorch's windows always hold one; told apart from the input's own zeros, a constant
padding's -1, by windowing the input's positions), an average's with -1 (zero). Averages
whose windows count different divisors (count_include_pad=False, adaptive windows of
several sizes) are one row reduction per divisor, the outputs put together by an index
map."""

from __future__ import annotations

import math

import torch

from fabric.kernels import build_scan
from frontend.lowering.common import (
    binary,
    map_,
    negated,
    num,
    out_shape,
    pair,
    positions,
    reduce,
    reduce_rows,
    relayout,
    shape_of,
    windows,
)
from frontend.lowering.core import Unavailable, rule
from frontend.lowering.elementwise import pow_, unary_stage
from frontend.lowering.embedding import compare_mask
from frontend.stages import Limits
from frontend.values import Const, Ref

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


@rule(aten.prod.dim_int)
def prod(low, node, x, dim, keepdim=False, dtype=None):
    """The product along `dim`, folded left to right in fp32 (`build_rowreduce`'s "prod")."""
    return reduce(low, node, x, [dim], keepdim, "prod")


@rule(aten.prod.default)
def prod_all(low, node, x, dtype=None):
    return reduce(low, node, x, None, False, "prod")


@rule(aten.amax.default)
def amax(low, node, x, dims=(), keepdim=False):
    return reduce(low, node, x, list(dims) or None, keepdim, "max")


@rule(aten.max.default)
def max_all(low, node, x):
    """x.max(): the max of every element (amax over all dimensions), exact."""
    return reduce(low, node, x, None, False, "max")


@rule(aten.min.default)
def min_all(low, node, x):
    """x.min() = -max(-x) over every element, exact."""
    return negated(low, reduce(low, node, negated(low, x), None, False, "max"), out_shape(node))


@rule(aten.amin.default)
def amin(low, node, x, dims=(), keepdim=False):
    """min = -max(-x), exact (negation is exact)."""
    top = reduce(low, node, negated(low, x), list(dims) or None, keepdim, "max")
    return negated(low, top, out_shape(node))


@rule(aten.linalg_vector_norm.default)
def vector_norm(low, node, x, ord=2, dims=None, keepdim=False, dtype=None):
    """The 2-norm sqrt(sum(x * x)) (F.normalize, cosine similarity), the 1-norm sum(|x|)
    and the max norm max(|x|) over `dims`: a product or an abs, one row reduction
    (`common.reduce`) and, for the 2-norm, a sqrt; any other positive order p as
    (sum |x|^p)^(1/p), the powers by `elementwise.pow_` (products for p up to 4,
    exp(p log x) else)."""
    if not isinstance(x, Ref) or not x.dtype.is_floating_point:
        raise low.unsupported("vector_norm of a runtime float tensor only")
    order = float(ord)
    if order == 2:
        return unary_stage(low, reduce(low, node, binary(low, x, x, "mul", x.shape), dims,
                                       keepdim, "sum"), "sqrt")
    if order in (1, math.inf):
        return reduce(low, node, unary_stage(low, x, "abs"), dims, keepdim,
                      "sum" if order == 1 else "max")
    if math.isfinite(order) and order > 0:  # (sum |x|^p)^(1/p), as eager's CPU kernel
        powers = pow_(low, node, unary_stage(low, x, "abs"), order)
        return pow_(low, node, reduce(low, node, powers, dims, keepdim, "sum"), 1.0 / order)
    raise low.unsupported(f"vector_norm of order {ord} (positive finite orders and inf)")


@rule(aten._cdist_forward.default)
def cdist(low, node, x1, x2, p=2.0, compute_mode=None):
    """torch.cdist: out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p for p = 2, 1 and
    inf, as `vector_norm` of the (..., P, R, M) differences (broadcast, one subtraction
    stage). Eager's CPU kernel takes the same differences for small inputs; past 25 rows
    (compute_mode's default) it computes p = 2 as sqrt(|a|^2 + |b|^2 - 2 a.b) by a matrix
    product, which cancels where points are close: the differences here are the accurate
    form, so results may differ from eager's there by its rounding."""
    for v in (x1, x2):
        if not isinstance(v, (Ref, Const)) or not shape_of(v) or len(shape_of(v)) < 2:
            raise low.unsupported("cdist of tensors that are not (..., points, features)")
    if float(p) not in (1.0, 2.0, math.inf):
        raise low.unsupported(f"cdist with p={p} (2, 1 and inf run)")
    a, b = shape_of(x1), shape_of(x2)
    batch = torch.broadcast_shapes(a[:-2], b[:-2])
    shape = (*batch, a[-2], b[-2], a[-1])
    first = relayout(x1, lambda t: t.unsqueeze(-2).expand(shape), low)
    second = relayout(x2, lambda t: t.unsqueeze(-3).expand(shape), low)
    diff = binary(low, first, second, "sub", shape)
    return vector_norm(low, node, diff, float(p), [-1], False)


def _rows(x: Ref, dims) -> torch.Tensor:
    """x's index map as (m, r) rows: its kept dimensions are the rows, its reduced ones
    (`dims`; None or empty: all) the r columns of a row (as `common.reduce`)."""
    nd = len(x.shape)
    dims = sorted({d % nd for d in (dims or range(nd))}) if nd else []
    kept = [d for d in range(nd) if d not in dims]
    moved = x.index.permute(kept + dims) if nd else x.index.reshape(1)
    r = math.prod(x.shape[d] for d in dims) if dims else 1
    return moved.reshape(-1, r)


def _variance(low, x: Ref, dims, correction) -> tuple[Ref, Ref]:
    """(variance, mean) of every row of x over `dims`, both (m,): two passes as PyTorch's,
    mean = sum / r, var = sum((x - mean)^2) / max(0, r - correction) (a divisor of 0 gives
    inf or NaN, as eager's)."""
    rows = _rows(x, dims)
    m, r = rows.shape
    mean = reduce_rows(low, rows, "mean", 1.0 / r)
    d = binary(low, Ref(rows), Ref(mean.index[:, None].expand(m, r)), "sub", (m, r))
    sq = binary(low, d, d, "mul", (m, r))
    c = 1.0 if correction is None else num(correction)
    divisor = max(0.0, r - c)
    var = reduce_rows(low, sq.index, "mean", 1.0 / divisor if divisor else float("inf"))
    return var, mean


@rule(aten.var.correction)
def var(low, node, x, dims=None, correction=None, keepdim=False):
    v, _ = _variance(low, x, dims, correction)
    return Ref(v.index.reshape(out_shape(node)))


@rule(aten.var_mean.correction)
def var_mean(low, node, x, dims=None, correction=None, keepdim=False):
    v, mean = _variance(low, x, dims, correction)
    shape = out_shape(node)
    return Ref(v.index.reshape(shape)), Ref(mean.index.reshape(shape))


def _first_max_index(low, rows: torch.Tensor) -> Ref:
    """The index of the first maximum of every row of `rows` (m, r): on y = x clamped to
    [-FLT_MAX, FLT_MAX] (so that an infinite maximum is a number equal to itself; a row of
    -inf gives 0 as eager), hit = (y - max(y) == 0) (`compare_mask`, exact: the difference of
    two finite fp32 values is 0 only when they are equal, or within 2^-126, which the
    fabric flushes), score = hit * (r - j), index = r - max(score). NaN is not ordered
    here (eager returns a NaN's index): a call that gives it one raises RankingNaNError
    (`frontend.nan_rankings`). A Ref (m,)."""
    m, r = rows.shape
    big = float(torch.finfo(torch.float32).max)
    y = map_(low, map_(low, Ref(rows), "max", -big, (m, r)), "min", big, (m, r))
    top = reduce_rows(low, y.index, "max")
    d = binary(low, y, Ref(top.index[:, None].expand(m, r)), "sub", (m, r))
    hit = compare_mask(low, d, 0.0, (m, r))
    ranks = Const((r - torch.arange(r, dtype=torch.float32)).expand(m, r))
    best = reduce_rows(low, binary(low, hit, ranks, "mul", (m, r)).index, "max")
    return map_(low, map_(low, best, "mul", -1.0, (m,)), "add", float(r), (m,))


@rule(aten.max.dim)
def max_dim(low, node, x, dim, keepdim=False):
    rows = _rows(x, [dim])
    values = reduce_rows(low, rows, "max")
    shape = out_shape(node)
    indices = _first_max_index(low, rows)
    return Ref(values.index.reshape(shape)), Ref(indices.index.reshape(shape), torch.int64)


@rule(aten.min.dim)
def min_dim(low, node, x, dim, keepdim=False):
    """The minimum and its first index: `max_dim` of -x, the values negated back."""
    values, indices = max_dim(low, node, negated(low, x), dim, keepdim)
    return negated(low, values, out_shape(node)), indices


@rule(aten.argmax.default)
def argmax(low, node, x, dim=None, keepdim=False):
    """The first maximum's index along `dim` (None: of the flattened tensor)."""
    rows = _rows(x, None if dim is None else [dim])
    indices = _first_max_index(low, rows)
    return Ref(indices.index.reshape(out_shape(node)), torch.int64)


def scan(low, x, dim, op: str, dtype: torch.dtype) -> Ref:
    """Running sums, products, maxima or minima (op "sum" | "prod" | "max" | "min") along
    `dim`, a Ref of x's shape and `dtype`: x's other dimensions are the rows, `dim` the r
    columns of a row, scanned by `build_scan` (rows over a column of PEs). Integer values
    (a token mask's counts) are exact up to 2^24 in the fp32 words kernels compute in; an
    integer input's int32 words would need a conversion first, and are refused. A
    comparison's running count is the cumsum of its 0/1 mask."""
    name = SCANS[op]
    x = low.materialized(x)
    if low.int_words(x):
        raise low.unsupported(f"{name} of an integer input (its int32 words; a {name} of a "
                              "mask of it runs)")
    moved = x.index.movedim(dim, -1)
    r = moved.shape[-1] if moved.dim() else 1
    m = moved.numel() // max(1, r)
    ref = low.stage(name, (m, r),
                    lambda cfg, rect, **fmt: build_scan(cfg, rect, m, r, op, **fmt),
                    [low.operand("x", Ref(moved.reshape(m, r)), (m, r))], m * r,
                    Limits(m, 1, cols_fixed=1), words_per_element=2)
    out = ref.index.reshape(moved.shape).movedim(-1, dim) if moved.dim() else \
        ref.index.reshape(())
    return Ref(out, dtype)


SCANS = {"sum": "cumsum", "prod": "cumprod", "max": "cummax", "min": "cummin"}


@rule(aten.cumsum.default)
def cumsum(low, node, x, dim, dtype=None):
    return scan(low, x, dim, "sum", node.meta["val"].dtype)


@rule(aten.cumprod.default)
def cumprod(low, node, x, dim, dtype=None):
    """Running products (a Ref's -1 reads as zero: the product of a zero, as it should)."""
    return scan(low, x, dim, "prod", node.meta["val"].dtype)


@rule(aten.max_pool2d_with_indices.default)
def max_pool2d(low, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel = pair(kernel_size)
    stride, padding, dilation = pair(stride, kernel), pair(padding), pair(dilation)
    shape = out_shape(node)
    return max_windows(low, _batched(x), lambda t: windows(t, kernel, stride, padding,
                                                           dilation, shape[-2:]),
                       shape), Unavailable("max_pool2d's indices")


@rule(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(low, node, x, output_size):
    shape = out_shape(node)
    return max_windows(low, _batched(x), lambda t: _adaptive_windows(t, shape[-2:])[0],
                       shape), Unavailable("adaptive_max_pool2d's indices")


@rule(aten.avg_pool2d.default)
def avg_pool2d(low, node, x, kernel_size, stride=(), padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    kernel = pair(kernel_size)
    stride, padding = pair(stride, kernel), pair(padding)
    shape = out_shape(node)
    win = windows(_batched(x), kernel, stride, padding, (1, 1), shape[-2:])
    counts = window_divisors(shape[-2:], kernel, stride, padding, x.shape[-2:],
                             count_include_pad, divisor_override)
    return mean_windows(low, win, counts, shape)


def window_divisors(out, kernel, stride, padding, size, count_include_pad: bool,
                    divisor_override) -> torch.Tensor:
    """PyTorch's divisor of an average pool per output position (an `out`-shaped tensor):
    the product over the dimensions of the window's part inside the padded input
    (count_include_pad) or inside the input; divisor_override replaces it."""
    counts = torch.ones((), dtype=torch.int64)
    for o, k, s, p, n in zip(out, kernel, stride, padding, size):
        start = torch.arange(o) * s - p
        end = torch.clamp(start + k, max=n + p)
        inside = end - start if count_include_pad else (
            torch.clamp(end, max=n) - torch.clamp(start, min=0))
        counts = counts[..., None] * inside
    if divisor_override:
        counts = torch.full_like(counts, divisor_override)
    return counts


@rule(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(low, node, x, output_size):
    shape = out_shape(node)
    win, counts = _adaptive_windows(_batched(x), shape[-2:])
    return mean_windows(low, win, counts, shape)


def _batched(x: Ref) -> torch.Tensor:
    """x's index map as (N, C, H, W): an unbatched (C, H, W) input as a batch of one."""
    return x.index if x.index.dim() == 4 else x.index.unsqueeze(0)


def _adaptive_windows(index: torch.Tensor, out_hw):
    """PyTorch's adaptive windows of an (N, C, H, W) index map: output i of a dimension of
    size n -> o reads [floor(i n / o), ceil((i + 1) n / o)). Returns the windows (N, C, OH,
    OW, K) padded with -1 to the largest, K = its size, and the count of each (OH, OW)."""
    spans = []
    for o, n in zip(out_hw, index.shape[2:4]):
        start = [i * n // o for i in range(o)]
        end = [-(-(i + 1) * n // o) for i in range(o)]
        width = max(e - s for s, e in zip(start, end))
        pos = torch.tensor(start)[:, None] + torch.arange(width)  # (o, width)
        inside = pos < torch.tensor(end)[:, None]
        spans.append((torch.where(inside, pos, 0), inside))
    (ph, mh), (pw, mw) = spans
    n, c = index.shape[:2]
    oh, kh = ph.shape
    ow, kw = pw.shape
    picked = index[:, :, ph[:, None, :, None], pw[None, :, None, :]]  # (N, C, OH, OW, kh, kw)
    inside = mh[:, None, :, None] & mw[None, :, None, :]
    win = torch.where(inside, picked, -1).reshape(n, c, oh, ow, kh * kw)
    return win, inside.reshape(oh, ow, -1).sum(-1)


def max_windows(low, index: torch.Tensor, windows_of, shape) -> Ref:
    """max over every window of the (N, C, ...) index map `index`, a Ref of `shape` (the
    output's). windows_of(t) gives the (N, C, OH, OW, K) windows of an index map t of
    index's shape, -1 where a window reaches outside it; it is applied to the positions of
    `index`, so that an outside position (filled with the first element of its window
    inside it: max is idempotent) is told from an element of the input that reads as zero
    (-1 in `index`: a constant padding's zeros, which take part in the max)."""
    win = windows_of(positions(index.shape))
    at = win.reshape(-1, win.shape[-1])
    inside = at >= 0
    if not bool(inside.any(1).all()):
        raise AssertionError("a pooling window outside the input")
    rows = index.reshape(-1)[at.clamp(min=0)]
    first = rows.gather(1, inside.int().argmax(1, keepdim=True))
    out = reduce_rows(low, torch.where(inside, rows, first), "max")
    return Ref(out.index.reshape(shape))


def mean_windows(low, win: torch.Tensor, counts: torch.Tensor, shape) -> Ref:
    """sum / count over every window of (N, C, OH, OW, K) ids (-1: zero), count (OH, OW)
    per output position, a Ref of `shape` (the output's): one `reduce_rows` mean per
    distinct count, over its windows' elements inside the input (in window order, -1s
    dropped where no row needs them)."""
    n, c, oh, ow, _ = win.shape
    out = torch.full((n, c, oh, ow), -1, dtype=torch.int64)
    for count in torch.unique(counts).tolist():
        sel = counts == count
        rows = win[:, :, sel].reshape(-1, win.shape[-1])
        inside = rows >= 0
        order = torch.sort((~inside).int(), dim=1, stable=True).indices  # inside first
        width = max(1, int(inside.sum(1).max()))
        rows = rows.gather(1, order)[:, :width]
        mean = reduce_rows(low, rows, "mean", 1.0 / count)
        out[:, :, sel] = mean.index.reshape(n, c, -1)
    return Ref(out.reshape(shape))
