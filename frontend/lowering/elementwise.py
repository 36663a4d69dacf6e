"""Elementwise ops: tensor-tensor (add, sub, mul, div by a constant) with PyTorch
broadcasting, tensor-scalar maps, relu, gelu (both forms), the unary math of `build_unary`
(tanh, exp, expm1, exp2, erf, sin, cos, tan, atan, asin, acos, sinh, cosh, sigmoid, rsqrt,
sqrt, log, log1p, abs, round), and the order-based ops of
`build_extremum`: maximum and minimum of two tensors (broadcast), clamp with tensor
bounds, leaky_relu; ELU (SELU and CELU too) and powers by `fabric.kernels.unary_params`.

SiLU (nn.SiLU, F.silu) reaches the lowering as aten.sigmoid and aten.mul (core ATen
decomposes aten.silu), RMSNorm as pow, mean, add, aten.rsqrt and mul; hardswish and
hardsigmoid as add, clamp (one `build_clamp` stage), mul and div by 6, which are their
eager formulas (x * clamp(x + 3, 0, 6) / 6 and clamp(x + 3, 0, 6) / 6)."""

from __future__ import annotations

import math

import torch

from fabric.kernels import (
    ELU_SCRATCH,
    GELU_WORDS,
    UNARY_WORDS,
    build_clamp,
    build_elu,
    build_extremum,
    build_gelu,
    build_pow,
    build_unary,
    pow_scratch,
)
from frontend.lowering.common import (
    CYCLES_PER_ELEMENT,
    as2d,
    binary,
    constant,
    expand_to,
    map_,
    negated,
    num,
    one_operand_stage,
    out_shape,
    per_column_block,
    scalar,
)
from frontend.lowering.core import Unavailable, int_words_converter, rule
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
    return negated(low, x)


@rule(aten.relu.default)
def relu(low, node, x):
    return map_(low, x, "relu", 0.0, x.shape)


@rule(aten.clamp.default)
def clamp(low, node, x, lo=None, hi=None):
    """min(max(x, lo), hi), as torch.clamp: with both bounds one stage (`build_clamp`: the
    max, then the min, on the same PEs), with one a max or a min map (`build_map`); NaN
    stays NaN. (Integer indices: `backward_embedding`.)"""
    if not isinstance(x, Ref):
        raise low.unsupported(f"clamp of a {type(x).__name__}")
    for bound in (lo, hi):
        if bound is not None and not isinstance(bound, (int, float)):
            raise low.unsupported(f"clamp with a bound of type {type(bound).__name__}")
    if lo is None or hi is None:
        y = x if lo is None else map_(low, x, "max", float(lo), x.shape)
        return y if hi is None else map_(low, y, "min", float(hi), x.shape)
    lo, hi = float(lo), float(hi)
    return one_operand_stage(
        low, "clamp", x, x.shape, "_clamp",
        lambda m, n: lambda cfg, rect, **fmt: build_clamp(cfg, rect, m, n, lo, hi, **fmt))


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
    split = per_column_block(low, [x], x.shape, lambda b, s: gelu(low, node, b, approximate))
    if split is not None:
        return split
    m, n = as2d(x.shape)
    ref = low.stage(kind, (m, n),
                    lambda cfg, rect, **fmt: build_gelu(cfg, rect, m, n,
                                                        approximate=approximate, **fmt),
                    [low.operand("x", x, (m, n))], m * n * CYCLES_PER_ELEMENT[kind],
                    Limits(m, n), words_per_element=GELU_WORDS[approximate])
    return Ref(ref.index.reshape(x.shape))


UNARY = {aten.tanh.default: "tanh", aten.exp.default: "exp", aten.expm1.default: "expm1",
         aten.erf.default: "erf", aten.sin.default: "sin", aten.cos.default: "cos",
         aten.sigmoid.default: "sigmoid",
         aten.rsqrt.default: "rsqrt", aten.sqrt.default: "sqrt", aten.log.default: "log",
         aten.log1p.default: "log1p", aten.abs.default: "abs",
         aten.reciprocal.default: "reciprocal", aten.tan.default: "tan",
         aten.atan.default: "atan", aten.asin.default: "asin", aten.acos.default: "acos",
         aten.sinh.default: "sinh", aten.cosh.default: "cosh", aten.exp2.default: "exp2",
         aten.round.default: "round"}
# log2 and log10: log(x) times the constant 1 / ln(base), rounded (within LOG_ULPS + 1 of
# the exact value: the product's rounding, and the constant's relative 2^-25)
LOG_BASES = {aten.log2.default: 1 / math.log(2.0), aten.log10.default: 1 / math.log(10.0)}
# single-PE cycles per element of `build_extremum` (WSE-2: maximum and minimum one max,
# leaky_relu a mul and a max) and of `unary_params` (elu; pow, at most), beside the unary
# kernels' (`common.CYCLES_PER_ELEMENT`): what sizes their tiles
CYCLES = {**CYCLES_PER_ELEMENT, "maximum": 1, "minimum": 1, "leaky_relu": 2, "elu": 38,
          "pow": 78}


@rule(*UNARY)
def unary(low, node, x):
    """fn(x) elementwise (`build_unary`): its fp32 code, or widened from and rounded to the
    node's 16-bit format in mixed precision."""
    return unary_stage(low, x, UNARY[node.target])


@rule(aten.round.decimals)
def round_decimals(low, node, x, decimals=0):
    """torch.round(x, decimals=d) as eager computes it: round(x * 10^d) / 10^d, or for d < 0
    round(x / 10^-d) * 10^-d; the divisions are products by the reciprocal (`div`), within
    an ulp of eager's quotient, so a value that lands within an ulp of a tie may round to
    the other side."""
    if not decimals:
        return unary_stage(low, x, "round")
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return map_(low, unary_stage(low, map_(low, x, "mul", scale, x.shape), "round"),
                    "mul", 1.0 / scale, x.shape)
    return map_(low, unary_stage(low, map_(low, x, "mul", 1.0 / scale, x.shape), "round"),
                "mul", scale, x.shape)


@rule(*LOG_BASES)
def log_base(low, node, x):
    """log2(x), log10(x): log(x) * (1 / ln base) (LOG_BASES)."""
    return map_(low, unary_stage(low, x, "log"), "mul", LOG_BASES[node.target], x.shape)


def unary_stage(low, x, fn: str) -> Ref:
    """fn(x) for a runtime float tensor x (`build_unary`; "itof": x holds int32 words, an
    integer input, read as numbers), a Ref of x's shape."""
    if fn == "itof":  # int32 words have no 16-bit form: fp32 storage in every format
        def build(m, n, cfg, rect, **fmt):
            return build_unary(cfg, rect, m, n, fn)
    else:
        def build(m, n, cfg, rect, **fmt):
            return build_unary(cfg, rect, m, n, fn, **fmt)
    return blockwise_stage(low, x, fn, build, UNARY_WORDS[fn], int_words=fn == "itof")


@int_words_converter
def numbers_of_int_words(low, x: Ref) -> Ref:
    """An integer input's int32 words as fp32 numbers (`unary` "itof"), exact below 2^24;
    the values keep x's dtype (an integer result of them comes back as integers)."""
    return Ref(unary_stage(low, x, "itof").index, x.dtype)


def extremum(low, x, z, op: str, shape, slope: float | None = None) -> Ref:
    """maximum(x, z) / minimum(x, z) of Refs or Consts broadcast to `shape` (a non-scalar
    constant is held on a resident tile), or leaky_relu(x, slope) (z None), on the fabric
    (`build_extremum`); a Ref of `shape`."""
    names = ("x",) if z is None else ("x", "z")
    values = [expand_to(v if isinstance(v, Ref) else constant(low, v), shape)
              for v in ((x,) if z is None else (x, z))]

    def block(*parts):  # the values' columns of one block, then its shape
        *cols, block_shape = parts
        return extremum(low, cols[0], cols[1] if z is not None else None, op, block_shape,
                        slope)

    split = per_column_block(low, values, shape, block)
    if split is not None:
        return split
    m, n = as2d(shape)
    operands = [low.operand(name, v, (m, n)) for name, v in zip(names, values)]
    ref = low.stage(op, (m, n),
                    lambda cfg, rect, **fmt: build_extremum(cfg, rect, m, n, op, slope,
                                                            dtype=fmt.get("dtype", "f32")),
                    operands, m * n * CYCLES[op], Limits(m, n),
                    words_per_element=len(names) + 2, suffix=f"_{op}")
    return Ref(ref.index.reshape(shape))


def _float_operand(low, v, what: str):
    """v if it is a float tensor, constant or number; UnsupportedOpError otherwise."""
    if isinstance(v, Ref) and v.dtype.is_floating_point:
        return v
    if isinstance(v, Const) and v.value.is_floating_point() or isinstance(v, (int, float)):
        return v
    kind = f"a {v.dtype} tensor" if isinstance(v, Ref) else type(v).__name__
    raise low.unsupported(f"{what} of {kind} (float tensors)")


@rule(aten.maximum.default, aten.minimum.default)
def maximum(low, node, x, y):
    """maximum / minimum of two tensors with broadcasting (NaN propagates, as torch): a max
    (min) map when one side is a number, else `build_extremum` of both."""
    op = "maximum" if node.target is aten.maximum.default else "minimum"
    x, y = (_float_operand(low, v, op) for v in (x, y))
    shape = out_shape(node)
    if scalar(y) and isinstance(x, Ref):
        x, y = y, x
    if scalar(x) and isinstance(y, Ref):
        return map_(low, Ref(y.index.expand(shape)), op[:3], num(x), shape)
    return extremum(low, x, y, op, shape)


@rule(aten.clamp.Tensor)
def clamp_tensor(low, node, x, lo=None, hi=None):
    """min(max(x, lo), hi) with tensor bounds (broadcast), each left out when None."""
    shape = out_shape(node)
    y = _float_operand(low, x, "clamp")
    for bound, op in ((lo, "maximum"), (hi, "minimum")):
        if bound is None:
            continue
        bound = _float_operand(low, bound, "clamp")
        if scalar(bound) and isinstance(y, Ref):  # a 0-d bound: a map
            y = map_(low, Ref(y.index.expand(shape)), op[:3], num(bound), shape)
        else:
            y = extremum(low, y, bound, op, shape)
    return y


@rule(aten.leaky_relu.default)
def leaky_relu(low, node, x, negative_slope=0.01):
    """x where x > 0, else negative_slope * x (rounded once, as torch): max(x, s x) for
    s <= 1, min(x, s x) above (`build_extremum`); s = 0 is relu."""
    x = _float_operand(low, x, "leaky_relu")
    if float(negative_slope) == 0.0:
        return map_(low, x, "relu", 0.0, x.shape)
    return extremum(low, x, None, "leaky_relu", x.shape, float(negative_slope))


@rule(aten.rrelu_with_noise_functional.default)
def rrelu(low, node, x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """Randomized leaky ReLU in eval mode: leaky_relu with the slope (lower + upper) / 2,
    as eager; in training mode its slopes are random draws, refused."""
    if training:
        raise low.unsupported("rrelu in training mode (random slopes; call model.eval())")
    slope = (float(lower) + float(upper)) / 2.0
    return leaky_relu(low, node, x, slope), Unavailable("rrelu's noise")


@rule(aten.pow.Tensor_Scalar)
def pow_(low, node, x, exponent):
    """x ** p as eager PyTorch computes the common exponents: p = 1..4 by p - 1
    multiplications (x * x * ...), -1..-4 the reciprocal of that product, 0.5 and -0.5
    sqrt and rsqrt, 0 ones; any other finite p exp(p log x) (`build_pow`: its error grows
    with |p log x|, `fabric.kernels.unary_params`)."""
    p = float(exponent)
    if p == 0:
        return Const(torch.ones(out_shape(node), dtype=node.meta["val"].dtype))
    if p.is_integer() and 1 <= abs(p) <= 4:
        y = x
        for _ in range(int(abs(p)) - 1):
            y = binary(low, y, x, "mul", x.shape)
        return y if p > 0 else unary_stage(low, y, "reciprocal")
    if abs(p) == 0.5:
        return unary_stage(low, x, "sqrt" if p > 0 else "rsqrt")
    if not math.isfinite(p):
        raise low.unsupported(f"pow with exponent {exponent}")
    return blockwise_stage(low, x, "pow", lambda m, n, cfg, rect, **fmt: build_pow(
        cfg, rect, m, n, p, **fmt), 2 + pow_scratch(p))


@rule(aten.elu.default)
def elu(low, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """ELU, and SELU and CELU, which PyTorch writes as ELUs (`build_elu`)."""
    if not float(input_scale) > 0:
        raise low.unsupported(f"elu with input_scale {input_scale} (positive only)")
    return blockwise_stage(low, x, "elu", lambda m, n, cfg, rect, **fmt: build_elu(
        cfg, rect, m, n, float(alpha), float(scale), float(input_scale), **fmt), 2 + ELU_SCRATCH)


def blockwise_stage(low, x, kind: str, build, words: int, int_words: bool = False) -> Ref:
    """One stage of a blockwise kernel (`unary.build_blockwise`: the unary functions, and
    `unary_params`' with parameters) over a runtime float tensor x (int32 words of an
    integer input with `int_words`): build(m, n, cfg, rect, **fmt) makes it for x seen as
    the (m, n) matrix; `words` fp32 words per element (x, y and the scratch vectors). One
    stage per block where x is side-by-side stages' outputs (`column_blocks`)."""
    if not isinstance(x, Ref) or (not int_words and not x.dtype.is_floating_point):
        what = type(x).__name__ if not isinstance(x, Ref) else f"a {x.dtype} tensor"
        raise low.unsupported(f"{kind} of {what} (a runtime float tensor)")
    split = per_column_block(low, [x], x.shape, lambda b, s: blockwise_stage(
        low, b, kind, build, words, int_words))
    if split is not None:
        return split
    m, n = as2d(x.shape)
    ref = low.stage(kind, (m, n), lambda cfg, rect, **fmt: build(m, n, cfg, rect, **fmt),
                    [low.operand("x", x, (m, n), int_words=int_words)], m * n * CYCLES[kind],
                    Limits(m, n), words_per_element=words, suffix=f"_{kind}")
    return Ref(ref.index.reshape(x.shape))


@rule(aten._assert_tensor_metadata.default)
def assert_metadata(low, node, *args, **kwargs):
    """A shape/dtype assertion the export left in the graph: true by construction."""
    return None
