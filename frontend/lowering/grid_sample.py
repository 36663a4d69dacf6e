"""grid_sample (F.grid_sample, 2D): every output point reads the input at a location its
grid gives, in [-1, 1] over the image. As a matrix per batch entry n,

    out[n] (T, C) = M (T, H W) @ x[n]^T (H W, C)        T = the grid's Ho Wo points

where row t of M holds point t's interpolation weights over the input's pixels.

- A constant grid (`F.affine_grid` of a constant theta, a fixed warp): M is read off the op
  itself on unit images (each pixel's one-hot image sampled by the grid: eager's own
  weights, any mode, padding and align_corners), one GEMM by a constant matrix.
- A grid computed at run time (a spatial transformer's, a flow field's): bilinear
  interpolation with zeros or border padding, M built on the fabric from the grid's
  coordinates. With ix the point's x in pixels (torch's unnormalization, `_pixels`),
  the bilinear weight of the pixel in column v is the tent max(0, 1 - |ix - v|), so

      M[t, (y, x)] = tent_y[t, y] * tent_x[t, x]          (T, H) x (T, W) -> (T, H W)

  (a subtraction, an abs, an affine and a relu per axis, one product and one GEMM): a
  point's four neighbours get eager's weights (1 - frac and frac, the same products), a
  neighbour outside the image has no column, as zeros padding reads it; border padding
  clamps ix into [0, W - 1] first. The GEMM adds the four weighted pixels in eager's order
  (the zeros exactly), each product fused into its sum where eager rounds it apart (an ulp
  or so of the output); the vectorized CPU kernel unnormalizes with a fused multiply-add
  where `_pixels` rounds twice (an ulp of ix). Nearest and bicubic modes and reflection
  padding of a runtime grid are refused.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from frontend.lowering.common import affine, binary, gemm, map_, relayout, shape_of
from frontend.lowering.core import rule
from frontend.lowering.elementwise import unary_stage
from frontend.values import Const, Ref

aten = torch.ops.aten

MODES = ("bilinear", "nearest", "bicubic")  # grid_sampler_2d's interpolation_mode ids
PADDINGS = ("zeros", "border", "reflection")  # and its padding_mode ids


@rule(aten.grid_sampler_2d.default)
def grid_sampler_2d(low, node, x, grid, interpolation_mode, padding_mode, align_corners):
    mode, padding = MODES[interpolation_mode], PADDINGS[padding_mode]
    n, c, h, w = shape_of(x)
    _, ho, wo, _ = shape_of(grid)
    outs = []
    for b in range(n):
        table = relayout(x, lambda t, b=b: t[b].reshape(c, h * w).t())  # (H W, C)
        g = relayout(grid, lambda t, b=b: t[b].reshape(ho * wo, 2))
        if isinstance(g, Const):
            weights = Const(_constant_weights(g.value, h, w, mode, padding, align_corners))
        elif mode != "bilinear" or padding == "reflection":
            raise low.unsupported(f"grid_sample of a runtime grid in mode {mode!r} with "
                                  f"padding {padding!r} (bilinear with zeros or border "
                                  "padding, or a constant grid, are supported)")
        else:
            weights = _runtime_weights(low, g, h, w, padding, align_corners)
        outs.append(gemm(low, weights, table, suffix="_grid_sample"))  # (T, C)
    index = torch.stack([o.index.t().reshape(c, ho, wo) for o in outs])
    return Ref(index, node.meta["val"].dtype)


def _constant_weights(grid: torch.Tensor, h: int, w: int, mode: str, padding: str,
                      align_corners: bool) -> torch.Tensor:
    """M (T, H W) of a constant grid (T, 2): eager's grid_sample of every pixel's unit
    image, pixel p's weights in column p."""
    units = torch.eye(h * w, dtype=torch.float32).reshape(1, h * w, h, w)
    sampled = F.grid_sample(units, grid.to(torch.float32).reshape(1, -1, 1, 2), mode=mode,
                            padding_mode=padding, align_corners=align_corners)
    return sampled.reshape(h * w, -1).t().contiguous()


def _runtime_weights(low, g: Ref, h: int, w: int, padding: str, align_corners: bool) -> Ref:
    """M (T, H W) of a runtime grid g (T, 2) (x, y in [-1, 1]): the tents of module
    docstring, bilinear."""
    t = shape_of(g)[0]
    tent_x = _tents(low, Ref(g.index[:, 0]), w, padding, align_corners)  # (T, W)
    tent_y = _tents(low, Ref(g.index[:, 1]), h, padding, align_corners)  # (T, H)
    product = binary(low, Ref(tent_y.index.reshape(t, h, 1)),
                     Ref(tent_x.index.reshape(t, 1, w)), "mul", (t, h, w))
    return Ref(product.index.reshape(t, h * w))


def _tents(low, coord: Ref, size: int, padding: str, align_corners: bool) -> Ref:
    """max(0, 1 - |i - v|) (T, size) for the T points' pixel coordinates i along an axis
    of `size` pixels and every pixel v of it."""
    t = shape_of(coord)[0]
    i = _pixels(low, coord, size, align_corners)
    if padding == "border":
        i = map_(low, map_(low, i, "max", 0.0, (t,)), "min", float(size - 1), (t,))
    columns = Const(torch.arange(size, dtype=torch.float32).expand(t, size))
    dist = unary_stage(low, binary(low, Ref(i.index.reshape(t, 1)), columns, "sub",
                                   (t, size)), "abs")
    return map_(low, affine(low, dist, Const(torch.tensor(-1.0)), Const(torch.tensor(1.0)),
                            (t, size)), "relu", 0.0, (t, size))


def _pixels(low, coord: Ref, size: int, align_corners: bool) -> Ref:
    """A normalized coordinate in pixels as torch's grid_sampler_unnormalize:
    ((c + 1) / 2) (size - 1) with align_corners, else ((c + 1) size - 1) / 2."""
    t = shape_of(coord)[0]
    one = map_(low, coord, "add", 1.0, (t,))
    if align_corners:
        return map_(low, map_(low, one, "mul", 0.5, (t,)), "mul", float(size - 1), (t,))
    scaled = map_(low, map_(low, one, "mul", float(size), (t,)), "add", -1.0, (t,))
    return map_(low, scaled, "mul", 0.5, (t,))
