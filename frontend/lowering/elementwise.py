"""Elementwise ops: tensor-tensor (add, sub, mul, div by a constant) with PyTorch
broadcasting, tensor-scalar maps, relu, gelu (both forms) and the unary math of
`build_unary` (tanh, exp, sigmoid, rsqrt, sqrt).

SiLU (nn.SiLU, F.silu) reaches the lowering as aten.sigmoid and aten.mul (core ATen
decomposes aten.silu), RMSNorm as pow, mean, add, aten.rsqrt and mul."""

from __future__ import annotations

import math

import torch

from fabric.kernels import GELU_WORDS, UNARY_WORDS, build_gelu, build_unary
from frontend.lowering.common import CYCLES_PER_ELEMENT, as2d, binary, map_, num, out_shape, scalar
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.add.Tensor, aten.add.Scalar)
def add(low, node, x, y, alpha=1):
    return _add_sub(low, node, x, y, alpha)


@rule(aten.sub.Tensor, aten.sub.Scalar)
def sub(low, node, x, y, alpha=1):
    return _add_sub(low, node, x, y, -alpha)


def _add_sub(low, node, x, y, alpha):
    shape = out_shape(node)
    if scalar(y) and isinstance(x, Ref):
        return map_(low, Ref(x.index.expand(shape)), "add", alpha * num(y), shape)
    if scalar(x) and isinstance(y, Ref):  # s + alpha * y
        ys = map_(low, y, "mul", alpha, y.shape) if alpha != 1 else y
        return map_(low, Ref(ys.index.expand(shape)), "add", num(x), shape)
    if alpha == 1:
        return binary(low, x, y, "add", shape)
    if alpha == -1:
        return binary(low, x, y, "sub", shape)
    if isinstance(y, Const):
        return binary(low, x, Const(y.value * alpha), "add", shape)
    return binary(low, x, map_(low, y, "mul", alpha, y.shape), "add", shape)


@rule(aten.mul.Tensor, aten.mul.Scalar)
def mul(low, node, x, y):
    shape = out_shape(node)
    if scalar(y) and isinstance(x, Ref):
        return map_(low, Ref(x.index.expand(shape)), "mul", num(y), shape)
    if scalar(x) and isinstance(y, Ref):
        return map_(low, Ref(y.index.expand(shape)), "mul", num(x), shape)
    return binary(low, x, y, "mul", shape)


# 1 / y below FLT_MIN (|y| > 2^126) would be flushed to 0: such factors are taken as
# (2^64 / y) then 2^-64 (both exact scalings of a normal number)
RECIPROCAL_SCALE = 2.0**64
FLT_MIN = torch.finfo(torch.float32).tiny


@rule(aten.div.Tensor, aten.div.Scalar)
def div(low, node, x, y):
    """x / y for a constant y: a multiplication by 1 / y, or by 2^64 / y then 2^-64 where
    1 / y is subnormal (x / 1e38 = 1 for x = 1e38); by a runtime y: the case rule of
    `losses.div`, x * reciprocal(y)."""
    shape = out_shape(node)
    if scalar(y):
        r = 1.0 / num(y) if num(y) != 0 else math.copysign(math.inf, num(y))
        if 0 < abs(r) < FLT_MIN:
            scaled = map_(low, Ref(x.index.expand(shape)), "mul", r * RECIPROCAL_SCALE, shape)
            return map_(low, scaled, "mul", 1 / RECIPROCAL_SCALE, shape)
        return map_(low, Ref(x.index.expand(shape)), "mul", r, shape)
    r = 1.0 / y.value.to(torch.float64)
    tiny = (r != 0) & (r.abs() < FLT_MIN)
    if not bool(tiny.any()):
        return binary(low, x, Const(r.to(torch.float32)), "mul", shape)
    scaled = binary(low, x, Const(torch.where(tiny, r * RECIPROCAL_SCALE, r).to(torch.float32)),
                    "mul", shape)
    undo = torch.where(tiny, 1 / RECIPROCAL_SCALE, 1.0).to(torch.float32)
    return binary(low, scaled, Const(undo.expand(shape)), "mul", shape)


@rule(aten.neg.default)
def neg(low, node, x):
    return map_(low, x, "mul", -1.0, x.shape)


@rule(aten.relu.default)
def relu(low, node, x):
    return map_(low, x, "relu", 0.0, x.shape)


@rule(aten.clamp.default)
def clamp(low, node, x, lo=None, hi=None):
    """min(max(x, lo), hi), as torch.clamp: a max and a min map (`build_map`), each left
    out when its bound is None; NaN stays NaN. (Integer indices: `backward_embedding`.)"""
    if not isinstance(x, Ref):
        raise low.unsupported(f"clamp of a {type(x).__name__}")
    for bound in (lo, hi):
        if bound is not None and not isinstance(bound, (int, float)):
            raise low.unsupported(f"clamp with a bound of type {type(bound).__name__}")
    y = x if lo is None else map_(low, x, "max", float(lo), x.shape)
    return y if hi is None else map_(low, y, "min", float(hi), x.shape)


@rule(aten.hardtanh.default)
def hardtanh(low, node, x, min_val=-1.0, max_val=1.0):
    """hardtanh (ReLU6 is hardtanh(0, 6)): clamp to [min_val, max_val]."""
    return clamp(low, node, x, min_val, max_val)


@rule(aten.gelu.default)
def gelu(low, node, x, approximate="none"):
    """Both of PyTorch's forms: approximate="none" (exact, erf) or "tanh" (`build_gelu`)."""
    if approximate not in ("none", "tanh"):
        raise low.unsupported(f"gelu with approximate={approximate!r}")
    kind = "gelu" if approximate == "tanh" else "gelu_erf"
    m, n = as2d(x.shape)
    ref = low.stage(kind, (m, n),
                    lambda cfg, rect, **fmt: build_gelu(cfg, rect, m, n,
                                                        approximate=approximate, **fmt),
                    [low.operand("x", x, (m, n))], m * n * CYCLES_PER_ELEMENT[kind],
                    Limits(m, n), words_per_element=GELU_WORDS[approximate])
    return Ref(ref.index.reshape(x.shape))


UNARY = {aten.tanh.default: "tanh", aten.exp.default: "exp", aten.sigmoid.default: "sigmoid",
         aten.rsqrt.default: "rsqrt", aten.sqrt.default: "sqrt"}


@rule(*UNARY)
def unary(low, node, x):
    """fn(x) elementwise (`build_unary`): its fp32 code, or widened from and rounded to the
    node's 16-bit format in mixed precision."""
    fn = UNARY[node.target]
    m, n = as2d(x.shape)
    ref = low.stage(fn, (m, n), lambda cfg, rect, **fmt: build_unary(cfg, rect, m, n, fn, **fmt),
                    [low.operand("x", x, (m, n))], m * n * CYCLES_PER_ELEMENT[fn],
                    Limits(m, n), words_per_element=UNARY_WORDS[fn])
    return Ref(ref.index.reshape(x.shape))


@rule(aten.pow.Tensor_Scalar)
def pow_(low, node, x, exponent):
    """x ** k for a small positive integer k: k - 1 multiplications (x * x * ...)."""
    if not (float(exponent).is_integer() and 1 <= exponent <= 4):
        raise low.unsupported(f"pow with exponent {exponent} (integers 1..4)")
    y = x
    for _ in range(int(exponent) - 1):
        y = binary(low, y, x, "mul", x.shape)
    return y


@rule(aten._assert_tensor_metadata.default)
def assert_metadata(low, node, *args, **kwargs):
    """A shape/dtype assertion the export left in the graph: true by construction."""
    return None
