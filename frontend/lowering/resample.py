"""Upsampling. Nearest (1D, 2D, 3D; "nearest" and "nearest-exact") copies input elements,
so it is an index map: the op itself applied to the input's ids (as float64, exact for ids
below 2^53) gives each output element's source. Bilinear is a fixed linear map, separable
into the width's and the height's: two GEMMs by constant matrices,

    t   = x (N C H, W)        @ A_w (W, OW)
    out = t' (N C OW, H)      @ A_h (H, OH)       t' = t permuted, then permuted back

(the order of PyTorch's CPU kernel: along the width first). A_w and A_h are read off the op
itself on unit vectors (its own source indices and weights for these sizes, scales and
align_corners), a column's two weights in the rows of its two source elements."""

from __future__ import annotations

import torch

from frontend.lowering.common import gemm, out_shape
from frontend.lowering.core import rule
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.upsample_nearest1d.vec, aten.upsample_nearest2d.vec, aten.upsample_nearest3d.vec,
      aten._upsample_nearest_exact1d.vec, aten._upsample_nearest_exact2d.vec,
      aten._upsample_nearest_exact3d.vec, aten.upsample_nearest1d.default,
      aten.upsample_nearest2d.default, aten.upsample_nearest3d.default)
def upsample_nearest(low, node, x, *args, **kwargs):
    ids = node.target(x.index.to(torch.float64), *args, **kwargs)
    return Ref(ids.to(torch.int64), x.dtype)


@rule(aten.upsample_bilinear2d.vec)
def upsample_bilinear2d(low, node, x, output_size, align_corners, scale_factors=None):
    scales = list(scale_factors) if scale_factors else [None, None]
    return _bilinear(low, node, x, align_corners, *scales)


@rule(aten.upsample_bilinear2d.default)
def upsample_bilinear2d_sizes(low, node, x, output_size, align_corners, scales_h=None,
                              scales_w=None):
    return _bilinear(low, node, x, align_corners, scales_h, scales_w)


def _bilinear(low, node, x, align_corners, scales_h, scales_w) -> Ref:
    n, c, h, w = x.shape
    oh, ow = out_shape(node)[2:4]
    # (h, oh): unit vector i along the height (width 1, kept by a scale of 1) -> column i
    a_h = aten.upsample_bilinear2d.default(torch.eye(h).reshape(h, 1, h, 1), [oh, 1],
                                           align_corners, scales_h, None)
    a_w = aten.upsample_bilinear2d.default(torch.eye(w).reshape(w, 1, 1, w), [1, ow],
                                           align_corners, None, scales_w)
    a_h, a_w = a_h.reshape(h, oh), a_w.reshape(w, ow)
    t = x.index.reshape(n * c * h, w)
    t = gemm(low, Ref(t), Const(a_w), suffix="_w")  # (N C H, OW)
    t = t.index.reshape(n * c, h, ow).transpose(1, 2).reshape(n * c * ow, h)
    y = gemm(low, Ref(t), Const(a_h), suffix="_h")  # (N C OW, OH)
    return Ref(y.index.reshape(n, c, ow, oh).transpose(2, 3), x.dtype)
