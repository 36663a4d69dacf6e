"""2D convolution as a GEMM over im2col: the im2col matrix is an index map of the input
(its duplicated and padded elements are laid out by the data movement into the GEMM's tile),
the weight a (C k_h k_w, C_out) matrix, the bias a broadcast add."""

from __future__ import annotations

import torch

from frontend.lowering.common import binary, gemm, out_shape, pair, relayout, windows
from frontend.lowering.core import rule
from frontend.values import Ref

aten = torch.ops.aten


@rule(aten.convolution.default)
def convolution(low, node, x, weight, bias, stride, padding, dilation, transposed,
                output_padding, groups):
    if transposed:
        raise low.unsupported("transposed convolution")
    if groups != 1:
        raise low.unsupported(f"convolution with groups={groups}")
    if len(x.shape) != 4:
        raise low.unsupported(f"a {len(x.shape) - 2}D convolution (2D only)")
    cout, cin, kh, kw = weight.value.shape if hasattr(weight, "value") else weight.shape
    shape = out_shape(node)
    n, _, oh, ow = shape
    win = windows(x.index, (kh, kw), pair(stride), pair(padding), pair(dilation))
    # (N, C, OH, OW, kh*kw) -> rows (N, OH, OW), columns (C, kh, kw) as the weight flattens
    cols = win[:, :, :oh, :ow].permute(0, 2, 3, 1, 4).reshape(n * oh * ow, cin * kh * kw)
    w = relayout(weight, lambda t: t.reshape(cout, cin * kh * kw).t().contiguous())
    y = gemm(low, Ref(cols), w, suffix="_gemm")
    if bias is not None:
        y = binary(low, y, relayout(bias, lambda t: t.reshape(1, cout)), "add",
                   (n * oh * ow, cout))
    return Ref(y.index.reshape(n, oh, ow, cout).permute(0, 3, 1, 2))
