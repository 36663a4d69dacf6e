"""Convolution: 1D, 2D and 3D, grouped and depthwise, transposed.

Everything is lowered in 2D: a 1D convolution is the 2D one of height 1 (its input (N, C, L)
viewed as (N, C, 1, L), its kernel as 1 x k). With `windows` the (N, C, OH, OW, kh kw)
index map of the input's receptive fields (padding reads as 0):

- groups = 1: a GEMM over im2col. The im2col matrix (N OH OW, C kh kw) is an index map of
  the input (its duplicated and padded elements are laid out by the data movement into the
  GEMM's tile), the weight a (C kh kw, C_out) matrix, the bias (broadcast over the rows)
  the GEMM's initial accumulator, so no add follows it.
- groups = G > 1 (C_in / G = c input and C_out / G = c' output channels per group):
  either one GEMM per group over its channels (`_group_gemms`), or, when c' <= G (depthwise
  c = c' = 1 above all), weighted sums of the windows (`_weighted_windows`): every output
  element is the dot product of its window over its group's c channels (c kh kw values)
  with its channel's weights, plus the bias, all rows on one tile (`weighted_rows`,
  `fabric.kernels.rowdot`).
- transposed: the adjoint of the convolution with the same geometry (what its backward
  does to the input's gradient): X (N H W, C_in) @ W (C_in, C_out kh kw) per group gives
  every input element's contribution to each output element its taps reach, and the
  contributions of an output element are summed with the bias in one `weighted_rows` of
  weight 1 (a col2im; a layout when no two contributions meet, e.g. kernel = stride);
  in 3D the same, its taps those of `windows3d`.

A 3D convolution (volumes, video) is the same with `windows3d`: its (N, C, OD, OH, OW,
kd kh kw) windows are those of a 2D one whose output rows are the OD OH (depth, row)
pairs, and its weight (C_out, c, kd, kh, kw) flattens alike, so the group GEMMs and the
weighted sums above serve it. With groups = 1 it is kd GEMMs over the depth slices of the
windows, chained through their accumulators (`_depth_chained_gemms`): one GEMM over all
kd kh kw taps would have its move copy each element into kd times as many rows, more
flows across a PE than a fabric's colors carry in one program. Measured on the zoo's
video CNN (small(12, 12), pipelined): one GEMM per convolution 116,004 cycles of latency,
39,899 per sample, 81 colors as one program (none fits); chained 151,777 and 24,831, and
the model builds as one program on 20 colors.
"""

from __future__ import annotations

import math

import torch

from frontend.lowering.common import (
    gemm,
    out_shape,
    pair,
    positions,
    relayout,
    scatter_rows,
    shape_of,
    triple,
    weighted_rows,
    windows,
    windows3d,
)
from frontend.lowering.core import rule
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.convolution.default)
def convolution(low, node, x, weight, bias, stride, padding, dilation, transposed,
                output_padding, groups):
    nd = len(shape_of(weight)) - 2
    if nd not in (1, 2, 3):
        raise low.unsupported(f"a {nd}D convolution (1D, 2D and 3D only)")
    if nd == 3:
        if len(shape_of(x)) != 5:
            raise low.unsupported("a 3D convolution of an unbatched input (N, C, D, H, W runs)")
        if transposed:
            geometry = (triple(stride), triple(padding), triple(dilation))
            return _transposed(low, x, weight, bias, *geometry, groups, out_shape(node)[2:])
        y = conv3d(low, x, weight, bias, stride, padding, dilation, groups, out_shape(node))
        return Ref(y.index.reshape(out_shape(node)))
    x, weight, geometry = as_2d(x, weight, (stride, padding, dilation, output_padding))
    stride, padding, dilation, output_padding = geometry
    shape = out_shape(node)
    oh, ow = (1, shape[2]) if nd == 1 else shape[2:]
    if transposed:
        y = _transposed(low, x, weight, bias, stride, padding, dilation, groups, (oh, ow))
    else:
        y = conv2d(low, x, weight, bias, stride, padding, dilation, groups, oh, ow)
    return Ref(y.index.reshape(shape))


def as_2d(x, weight, geometry):
    """A 1D convolution's input (N, C, L), weight (C_out, c, k) and (stride, padding,
    dilation, output_padding) as those of the 2D convolution of height 1; a 2D one's as
    they are, each of the four as an (h, w) pair."""
    if len(shape_of(x)) == 4:
        return x, weight, tuple(pair(g, 0) for g in geometry)

    def lift(t):  # (N, C, L) -> (N, C, 1, L)
        return t.unsqueeze(2)

    return (relayout(x, lift), relayout(weight, lift),
            tuple((1 if i in (0, 2) else 0, pair(g, 0)[1]) for i, g in enumerate(geometry)))


def window_map(value, fn):
    """fn, a layout of index maps that may hold -1 (padding), applied to a Ref (its ids) or
    a Const (its values, padding reads 0): e.g. the windows of a constant input."""
    if isinstance(value, Ref):
        return Ref(fn(value.index))
    t = value.value
    ids = fn(positions(t.shape))
    flat = torch.cat([t.reshape(-1), t.new_zeros(1)])
    return Const(flat[torch.where(ids >= 0, ids, flat.numel() - 1)])


def uses_weighted_windows(groups: int, cout_g: int) -> bool:
    """Grouped convolution by weighted sums of the windows (else a GEMM per group).

    The windows of a group are laid out once per output channel of the group (each output
    element is a row), so the weighted sums move c' = C_out / G times the words of the
    im2col matrix into their tile; G GEMMs run one after another, each a stage with its
    own startup and moves, on a tile at most c' PEs wide (an n = c' GEMM). Both kernels
    are fast next to the data movement (`rowdot_cycles`: about 2 cycles per multiply-add
    and PE; SUMMA's model on an n = 1 tile: hundreds of cycles of startup per group), so
    the cost grows with c' for one, with G for the other. Measured on FabricConfig.small(12,
    12) (relu then the convolution, kernel + move cycles, weighted sums vs GEMMs):
    depthwise 7x7 on 8 x 8 x 8: 20602 vs 58595; depthwise 3x3: 3057 vs 7777; multiplier 2
    (G = 4, c' = 2): 4781 vs 5478; G = 8, c' = 4: 14312 vs 17041; G = 2, c' = 4: 13774 vs
    6418. Hence weighted sums when c' <= G."""
    return cout_g <= groups


def conv2d(low, x, weight, bias, stride, padding, dilation, groups, oh, ow) -> Ref:
    """The 2D convolution of x (N, C, H, W) with weight (C_out, C / groups, kh, kw) and
    optional bias (C_out,), the output (N, C_out, oh, ow) (module docstring)."""
    cout, cin_g, kh, kw = shape_of(weight)
    win = window_map(x, lambda t: windows(t, (kh, kw), stride, padding, dilation)
                     [:, :, :oh, :ow])  # (N, C, OH, OW, kh kw)
    if groups > 1 and uses_weighted_windows(groups, cout // groups):
        return _weighted_windows(low, win, weight, bias, groups)
    return _group_gemms(low, win, weight, bias, groups)


def conv3d(low, x, weight, bias, stride, padding, dilation, groups, shape) -> Ref:
    """The 3D convolution of x (N, C, D, H, W) with weight (C_out, C / groups, kd, kh, kw),
    output `shape` (N, C_out, OD, OH, OW), as a 2D one over (OD OH, OW) (module docstring)."""
    cout, cin_g, kd, kh, kw = shape_of(weight)
    n, c = shape_of(x)[:2]
    od, oh, ow = shape[2:]
    geometry = (triple(stride), triple(padding), triple(dilation))
    win = window_map(x, lambda t: windows3d(t, (kd, kh, kw), *geometry)
                     [:, :, :od, :oh, :ow].reshape(n, c, od * oh, ow, kd * kh * kw))
    flat = relayout(weight, lambda t: t.reshape(cout, cin_g, kd * kh, kw))
    if groups > 1 and uses_weighted_windows(groups, cout // groups):
        y = _weighted_windows(low, win, flat, bias, groups)
    elif groups == 1 and kd > 1:
        y = _depth_chained_gemms(low, win, weight, bias, kd)
    else:
        y = _group_gemms(low, win, flat, bias, groups)
    return Ref(y.index.reshape(shape))


def _depth_chained_gemms(low, win, weight, bias, kd: int) -> Ref:
    """A 3D convolution (groups 1) as kd GEMMs chained through their accumulators: GEMM dz
    multiplies the im2col of the windows' depth slice dz (N OD OH OW, C kh kw) by weight[:,
    :, dz] and starts from GEMM dz - 1's output (the first from the bias), so no add
    follows and each input element is copied into kh kw rows per move, not kd kh kw
    (module docstring)."""
    n, c, rows, ow, k = shape_of(win)
    cout = shape_of(weight)[0]
    per = k // kd
    m = n * rows * ow
    y = None if bias is None else relayout(bias, lambda t: t.reshape(1, cout))
    for dz in range(kd):
        cols = relayout(win, lambda t, dz=dz: t[..., dz * per:(dz + 1) * per]
                        .permute(0, 2, 3, 1, 4).reshape(m, c * per))
        w = relayout(weight, lambda t, dz=dz: t[:, :, dz].reshape(cout, c * per).t().contiguous())
        y = gemm(low, cols, w, suffix="_gemm", c0=y)
    return Ref(y.index.reshape(n, rows, ow, cout).permute(0, 3, 1, 2))


def _group_gemms(low, win, weight, bias, groups: int) -> Ref:
    """One GEMM over im2col per group: (N OH OW, c kh kw) @ (c kh kw, c') + the group's c'
    biases (its initial accumulator, a row broadcast over the N OH OW rows); the groups'
    outputs side by side are the (N OH OW, C_out) output matrix."""
    n, _, oh, ow, k = shape_of(win)
    cout, cin_g = shape_of(weight)[:2]
    cout_g, m = cout // groups, n * oh * ow
    ys = []
    for g in range(groups):
        # (N, c, OH, OW, kh kw) -> rows (N, OH, OW), columns (c, kh, kw) as the weight flattens
        cols = relayout(win, lambda t, g=g: t[:, g * cin_g:(g + 1) * cin_g]
                        .permute(0, 2, 3, 1, 4).reshape(m, cin_g * k))
        w = relayout(weight, lambda t, g=g: t[g * cout_g:(g + 1) * cout_g]
                     .reshape(cout_g, cin_g * k).t().contiguous())
        b = None if bias is None else relayout(
            bias, lambda t, g=g: t[g * cout_g:(g + 1) * cout_g].reshape(1, cout_g))
        ys.append(gemm(low, cols, w, suffix="_gemm", c0=b).index)
    y = Ref(torch.cat(ys, dim=1))
    return Ref(y.index.reshape(n, oh, ow, cout).permute(0, 3, 1, 2))


def group_rows(win: torch.Tensor, groups: int, cout: int) -> torch.Tensor:
    """(N, C, OH, OW, kh kw) windows -> (N C_out OH OW, c kh kw): the row of output element
    (n, o, i, j) is its window over the c channels of o's group."""
    n, c, oh, ow, k = win.shape
    cin_g, cout_g = c // groups, cout // groups
    rows = win.reshape(n, groups, 1, cin_g, oh, ow, k).permute(0, 1, 2, 4, 5, 3, 6)
    return rows.expand(n, groups, cout_g, oh, ow, cin_g, k).reshape(-1, cin_g * k)


def _weighted_windows(low, win, weight, bias, groups: int) -> Ref:
    """Every output element (N, C_out, OH, OW) as its row of `group_rows` times its output
    channel's c kh kw weights, summed with its bias, in one `weighted_rows`."""
    n, _, oh, ow, _ = shape_of(win)
    cout, cin_g, kh, kw = shape_of(weight)
    r, per = cin_g * kh * kw, oh * ow
    rows = relayout(win, lambda t: group_rows(t, groups, cout))
    w = relayout(weight, lambda t: t.reshape(1, cout, 1, r).expand(n, cout, per, r)
                 .reshape(-1, r))
    b = None if bias is None else relayout(
        bias, lambda t: t.reshape(1, cout, 1).expand(n, cout, per).reshape(-1))
    y = weighted_rows(low, rows, w, b)
    return Ref(y.index.reshape(n, cout, oh, ow))


def _transposed(low, x, weight, bias, stride, padding, dilation, groups, out) -> Ref:
    """The transposed convolution of x (N, C_in, *S) with weight (C_in, C_out / groups,
    *K), S and K of 2 or 3 dimensions (a 1D one as 2D of height 1): the output (N, C_out,
    *out) (module docstring). The zero-stuffed input's convolution computes the same with
    about stride^2 (stride^3) times the multiply-adds and moves (measured on small(12, 12),
    4 channels, 6 x 6 -> 12 x 12, kernel 3: 5426 cycles vs 1316 here)."""
    if isinstance(x, Const):
        raise low.unsupported("a transposed convolution of a constant input")
    cin, cout_g, *kernel = shape_of(weight)
    n, _, *spatial = x.shape
    cout, cin_g, k = cout_g * groups, cin // groups, math.prod(kernel)
    pixels = math.prod(spatial)
    xs = x.index.movedim(1, -1).reshape(n * pixels, cin)
    cols = []
    for g in range(groups):
        wg = relayout(weight, lambda t, g=g: t[g * cin_g:(g + 1) * cin_g]
                      .reshape(cin_g, cout_g * k))
        cols.append(gemm(low, Ref(xs[:, g * cin_g:(g + 1) * cin_g]), wg,
                         suffix="_gemm").index)
    # the convolution of the same geometry over the output maps output positions (its
    # windows) to input elements: column (o, tap) of input element (n, *i) adds into the
    # output position of window (n, o, *i)'s tap
    unfold = windows if len(kernel) == 2 else windows3d
    target = unfold(positions((n, cout, *out)), tuple(kernel), stride, padding, dilation)
    target = target[(slice(None), slice(None), *(slice(0, d) for d in spatial))]
    target = target.movedim(1, -2).reshape(n * pixels, cout * k)
    size = n * cout * math.prod(out)
    rows = scatter_rows(torch.cat(cols, dim=1), target, size)
    if rows.shape[1] == 1 and bias is None:  # no two contributions meet: a layout
        return Ref(rows.reshape(n, cout, *out))
    b = None if bias is None else relayout(
        bias, lambda t: t.reshape(1, cout, 1).expand(n, cout, math.prod(out)).reshape(-1))
    y = weighted_rows(low, Ref(rows), Const(torch.ones(rows.shape)), b)
    return Ref(y.index.reshape(n, cout, *out))
