"""Elementwise ops: tensor-tensor (add, sub, mul, div by a constant) with PyTorch
broadcasting, tensor-scalar maps, relu and gelu (tanh form)."""

from __future__ import annotations

import numbers

import torch

from fabric.kernels import build_elementwise, build_gelu, build_map, build_unary
from frontend.lowering.common import CYCLES_PER_ELEMENT, as2d, expand_to, out_shape
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Const, Ref

aten = torch.ops.aten


def _map(low, x: Ref, op: str, scalar: float, shape):
    m, n = as2d(shape)
    ref = low.stage("map", (m, n),
                    lambda cfg, rect, **fmt: build_map(cfg, rect, m, n, op, scalar, **fmt),
                    [low.operand("x", x, (m, n))], m * n * CYCLES_PER_ELEMENT["map"],
                    Limits(m, n), words_per_element=2, suffix=f"_{op}")
    return Ref(ref.index.reshape(shape))


def _binary(low, x, y, op: str, shape):
    m, n = as2d(shape)
    x, y = expand_to(x, shape), expand_to(y, shape)
    ref = low.stage("elementwise", (m, n),
                    lambda cfg, rect, **fmt: build_elementwise(cfg, rect, m, n, op, **fmt),
                    [low.operand("x", x, (m, n)), low.operand("y", y, (m, n))],
                    m * n * CYCLES_PER_ELEMENT["elementwise"], Limits(m, n), suffix=f"_{op}")
    return Ref(ref.index.reshape(shape))


def _scalar(v) -> bool:
    return isinstance(v, numbers.Number) or (isinstance(v, Const) and v.value.numel() == 1
                                             and v.value.dim() == 0)


def _num(v) -> float:
    return float(v.value) if isinstance(v, Const) else float(v)


@rule(aten.add.Tensor, aten.add.Scalar)
def add(low, node, x, y, alpha=1):
    return _add_sub(low, node, x, y, alpha)


@rule(aten.sub.Tensor, aten.sub.Scalar)
def sub(low, node, x, y, alpha=1):
    return _add_sub(low, node, x, y, -alpha)


def _add_sub(low, node, x, y, alpha):
    shape = out_shape(node)
    if _scalar(y) and isinstance(x, Ref):
        return _map(low, Ref(x.index.expand(shape)), "add", alpha * _num(y), shape)
    if _scalar(x) and isinstance(y, Ref):  # s + alpha * y
        ys = _map(low, y, "mul", alpha, y.shape) if alpha != 1 else y
        return _map(low, Ref(ys.index.expand(shape)), "add", _num(x), shape)
    if alpha == 1:
        return _binary(low, x, y, "add", shape)
    if alpha == -1:
        return _binary(low, x, y, "sub", shape)
    if isinstance(y, Const):
        return _binary(low, x, Const(y.value * alpha), "add", shape)
    return _binary(low, x, _map(low, y, "mul", alpha, y.shape), "add", shape)


@rule(aten.mul.Tensor, aten.mul.Scalar)
def mul(low, node, x, y):
    shape = out_shape(node)
    if _scalar(y) and isinstance(x, Ref):
        return _map(low, Ref(x.index.expand(shape)), "mul", _num(y), shape)
    if _scalar(x) and isinstance(y, Ref):
        return _map(low, Ref(y.index.expand(shape)), "mul", _num(x), shape)
    return _binary(low, x, y, "mul", shape)


@rule(aten.div.Tensor, aten.div.Scalar)
def div(low, node, x, y):
    shape = out_shape(node)
    if isinstance(y, Ref):
        raise low.unsupported("division by a runtime tensor")
    if _scalar(y):
        return _map(low, Ref(x.index.expand(shape)), "mul", 1.0 / _num(y), shape)
    return _binary(low, x, Const(1.0 / y.value.to(torch.float32)), "mul", shape)


@rule(aten.neg.default)
def neg(low, node, x):
    return _map(low, x, "mul", -1.0, x.shape)


@rule(aten.relu.default)
def relu(low, node, x):
    return _map(low, x, "relu", 0.0, x.shape)


@rule(aten.gelu.default)
def gelu(low, node, x, approximate="none"):
    if approximate != "tanh":
        raise low.unsupported("gelu with approximate='none' (the fabric's gelu is the tanh "
                              "form; use approximate='tanh')")
    m, n = as2d(x.shape)
    ref = low.stage("gelu", (m, n), lambda cfg, rect, **fmt: build_gelu(cfg, rect, m, n, **fmt),
                    [low.operand("x", x, (m, n))], m * n * CYCLES_PER_ELEMENT["gelu"],
                    Limits(m, n), words_per_element=5)
    return Ref(ref.index.reshape(x.shape))


@rule(aten.tanh.default, aten.exp.default)
def unary(low, node, x):
    fn = "tanh" if node.target == aten.tanh.default else "exp"
    m, n = as2d(x.shape)
    ref = low.stage(fn, (m, n), lambda cfg, rect, **fmt: build_unary(cfg, rect, m, n, fn, **fmt),
                    [low.operand("x", x, (m, n))], m * n * CYCLES_PER_ELEMENT[fn],
                    Limits(m, n), words_per_element=6)
    return Ref(ref.index.reshape(x.shape))


@rule(aten.pow.Tensor_Scalar)
def pow_(low, node, x, exponent):
    """x ** k for a small positive integer k: k - 1 multiplications (x * x * ...)."""
    if not (float(exponent).is_integer() and 1 <= exponent <= 4):
        raise low.unsupported(f"pow with exponent {exponent} (integers 1..4)")
    y = x
    for _ in range(int(exponent) - 1):
        y = _binary(low, y, x, "mul", x.shape)
    return y


@rule(aten._assert_tensor_metadata.default)
def assert_metadata(low, node, *args, **kwargs):
    """A shape/dtype assertion the export left in the graph: true by construction."""
    return None
