"""Masks: comparisons of runtime tensors, their logical combinations, and `where` (and
masked_fill, which core ATen writes as where(mask, value, x)) with a runtime condition.

A mask is a `Ref` of dtype torch.bool whose elements are 0.0 / 1.0 words, computed by the
exact comparison kernel `build_relation` (IEEE: -0 == +0, NaN unordered, infinities and
subnormals by value; an integer input is compared as integers). A bool user input is held
as the int32 words 0 / 1 the host writes (`Lowering.int_words`); the select reads any nonzero word
as true, and logical ops first turn such an input into a 0.0 / 1.0 mask.

- eq, ne, gt, ge, lt, le (Tensor overloads, eq / ne Scalar): one `relation` stage. The
  gt / lt / ge / le Scalar overloads are `backward.Compare`s (pooling's backward
  multiplies by their 0/1 mask); comparisons of integer inputs with numbers are
  `backward_embedding.IndexPred`s; both become masks here where a kernel or an output
  needs one (`core.materializer`), computed by `build_relation`.
- logical_and = a b, logical_or = max(a, b), logical_xor = (a - b)^2, logical_not = a <= 0
  on 0 / 1 masks (exact); the bitwise ops of bool tensors are the same; any (over a
  dimension, a list or all) a row max; isnan x != x, isinf |x| == inf; sign
  (x > 0) - (x < 0); signbit the sign bit (`unary` "signbit").
- where(c, a, b): the bitwise select `build_select` (exact for every value, inf and NaN
  included), a scalar branch an immediate of the kernel.

The guard that decomposed scaled-dot-product attention puts after its softmax:

    where(logical_not(any(logical_not(eq(s, -inf)), dim=-1, keepdim)), 0, softmax(s))

sets rows whose scores are all -inf to 0. Its predicates are symbolic values here (`Pred`);
the `where` of that exact pattern lowers to the softmax itself where no row of the scores
can be all -inf (`attention_guard`: products plus a constant mask that leaves every row a
finite score, a causal mask), and else to where(any(s != -inf) along the row, softmax, 0)
(a relation, a row max and a select: a runtime mask, which may cover a whole row, or
torch's _safe_softmax of the model's input). A `Pred` used anywhere else is computed as a
mask.
"""

from __future__ import annotations

import dataclasses

import torch

from fabric.kernels import build_relation, build_select
from frontend.lowering.attention_guard import rows_may_be_all_neginf
from frontend.lowering.backward import Compare
from frontend.lowering.backward import mask as compare_mask
from frontend.lowering.backward_embedding import IndexPred
from frontend.lowering.common import (
    as2d,
    binary,
    constant,
    expand_to,
    num,
    out_shape,
    reduce,
    reduce_rows,
    scalar,
)
from frontend.lowering.core import materializer, rule
from frontend.lowering.elementwise import extremum, numbers_of_int_words, unary_stage
from frontend.stages import Limits
from frontend.values import Const, Ref, Symbolic

aten = torch.ops.aten

# single-PE cycles per element (WSE-2, the models of `build_relation` and `build_select`:
# 41 ops, 26.5 e for two tensors; 14 e with a scalar; 12 integer ops, 6 e, for the select)
CYCLES = {"relation": 27, "relation_scalar": 14, "select": 6}
MIRROR = {"eq": "eq", "ne": "ne", "gt": "lt", "lt": "gt", "ge": "le", "le": "ge"}


@dataclasses.dataclass
class Pred(Symbolic):
    kind: str  # "isneginf" | "not" | "any"
    arg: object
    dim: int | None = None
    keepdim: bool = False


# ---- masks on the fabric -------------------------------------------------------------------
def relation(low, x, other, op: str, shape=None) -> Ref:
    """The mask x op other (a bool Ref of `shape`, default x's): x a Ref, other a Ref, a
    Const (held on a resident tile) or a number (an immediate of the kernel)."""
    shape = tuple(shape if shape is not None else x.shape)
    kind = "int" if low.int_words(x) else "float"
    if isinstance(other, Ref) and low.int_words(other) != (kind == "int"):
        raise low.unsupported(f"{op} of an integer and a float tensor")
    s = None
    if scalar(other):
        s = num(other)
        if kind == "int":
            if not s.is_integer():
                raise low.unsupported(f"{op} of an integer tensor with {s}")
            s = int(s)
    elif isinstance(other, Const):
        if kind == "int":  # compared as numbers (one_hot's ids == arange), exact below 2^24
            x, kind = numbers_of_int_words(low, x), "float"
        other = constant(low, other)
    m, n = as2d(shape)
    ints = kind == "int"
    operands = [low.operand("x", expand_to(x, shape), (m, n), int_words=ints)]
    if s is None:
        operands.append(low.operand("z", expand_to(other, shape), (m, n), int_words=ints))
    cost = CYCLES["relation" if s is None else "relation_scalar"]
    ref = low.stage("relation", (m, n),
                    # int32 words have no 16-bit form: integers compare in fp32 storage
                    lambda cfg, rect, **fmt: build_relation(
                        cfg, rect, m, n, op, s, kind,
                        dtype=fmt.get("dtype", "f32") if kind == "float" else "f32"),
                    operands, m * n * cost, Limits(m, n), words_per_element=10,
                    suffix=f"_{op}")
    return Ref(ref.index.reshape(shape), torch.bool)


@materializer(Compare, Pred, IndexPred)
def as_mask(low, v) -> Ref:
    """A comparison as a bool Ref (a computed mask, or a bool input as it is)."""
    if isinstance(v, Ref):
        if v.dtype != torch.bool:
            raise low.unsupported(f"a {v.dtype} tensor as a condition (bool)")
        return v
    if isinstance(v, Compare):
        return relation(low, v.x, v.scalar, v.op)
    if isinstance(v, IndexPred):
        masks = [relation(low, v.source, s, op) for op, s in v.checks]
        out = masks[0]
        for m in masks[1:]:
            out = _bool(binary(low, out, m, "mul", out.shape))
        return not_(low, out) if v.negated else out
    if isinstance(v, Pred):
        if v.kind == "isneginf":
            return relation(low, v.arg, float("-inf"), "eq")
        if v.kind == "not":
            return not_(low, as_mask(low, v.arg))
        return any_of(low, float_mask(low, v.arg), v.dim, v.keepdim)
    raise low.unsupported(f"a {type(v).__name__} as a condition")


def any_of(low, m: Ref, dim: int, keepdim: bool) -> Ref:
    """The bool Ref of any(m, dim, keepdim) for a 0.0 / 1.0 mask m: a row max."""
    shape = list(m.shape)
    if not shape:  # a 0-d tensor (dim 0 or -1, as torch allows): its one element
        return _bool(m)
    d = dim % len(shape)
    kept = [i for i in range(len(shape)) if i != d]
    out = reduce_rows(low, m.index.permute(kept + [d]).reshape(-1, shape[d]), "max")
    index = out.index.reshape([shape[i] for i in kept])
    return Ref(index.unsqueeze(d) if keepdim else index, torch.bool)


def float_mask(low, v) -> Ref | Const:
    """A comparison or a tensor's truth as 0.0 / 1.0 words: a bool input converted, and a
    number tensor's nonzero elements true (NaN included), as the logical ops read them."""
    if isinstance(v, Const):  # known at compile time: its truth too
        return Const((v.value != 0).to(torch.float32))
    if isinstance(v, Ref) and v.dtype != torch.bool:
        return relation(low, v, 0, "ne")
    m = as_mask(low, v)
    return relation(low, m, 0, "ne") if low.int_words(m) else m


def not_(low, m: Ref) -> Ref:
    """1 where the mask is 0 (`build_compare` le 0 on its 0.0 / 1.0 words: 5 ops)."""
    if low.int_words(m):
        return relation(low, m, 0, "eq")
    return _bool(compare_mask(low, Compare(m, "le", 0.0)))


def _bool(r: Ref) -> Ref:
    return Ref(r.index, torch.bool)


# ---- rules ------------------------------------------------------------------------------------
def _compare_rule(op):
    def lower_compare(low, node, x, other):
        """x op other for a runtime x or other (a Ref, a comparison, a Const, a number)."""
        if isinstance(x, (Compare, Pred, IndexPred)) or getattr(x, "dtype", None) == torch.bool:
            x = float_mask(low, x)
        if isinstance(other, (Compare, Pred, IndexPred)) or (
                isinstance(other, Ref) and other.dtype == torch.bool):
            other = float_mask(low, other)
        if not isinstance(x, Ref):
            if not isinstance(other, Ref):
                raise low.unsupported(f"{op} of {type(x).__name__} and "
                                      f"{type(other).__name__}")
            x, other, op_ = other, x, MIRROR[op]
        else:
            op_ = op
        return relation(low, x, other, op_, out_shape(node))

    return lower_compare


for _op in MIRROR:
    rule(getattr(aten, _op).Tensor)(_compare_rule(_op))
rule(aten.ne.Scalar)(_compare_rule("ne"))  # on integer inputs: `backward_embedding`


@rule(aten.eq.Scalar)
def eq(low, node, x, value):
    """eq(s, -inf) of float scores: the attention guard's `Pred` (a mask where used)."""
    if isinstance(x, Ref) and x.dtype.is_floating_point and value == float("-inf"):
        return Pred("isneginf", x)
    return _compare_rule("eq")(low, node, x, value)


def _is_bool(low, node, what: str):
    val = node.meta.get("val")
    if val is not None and val.dtype != torch.bool:
        raise low.unsupported(f"{what} of {val.dtype} tensors (bool masks only)")


@rule(aten.logical_and.default, aten.bitwise_and.Tensor)
def logical_and(low, node, a, b):
    _is_bool(low, node, "bitwise and")
    shape = out_shape(node)
    return _bool(binary(low, float_mask(low, a), float_mask(low, b), "mul", shape))


@rule(aten.logical_or.default, aten.bitwise_or.Tensor)
def logical_or(low, node, a, b):
    _is_bool(low, node, "bitwise or")
    return _bool(extremum(low, float_mask(low, a), float_mask(low, b), "maximum",
                          out_shape(node)))


@rule(aten.logical_xor.default, aten.bitwise_xor.Tensor)
def logical_xor(low, node, a, b):
    _is_bool(low, node, "bitwise xor")
    shape = out_shape(node)
    d = binary(low, float_mask(low, a), float_mask(low, b), "sub", shape)
    return _bool(binary(low, d, d, "mul", shape))


@rule(aten.logical_not.default, aten.bitwise_not.default)  # on index checks: `backward_embedding`
def logical_not(low, node, x):
    _is_bool(low, node, "bitwise not")
    if isinstance(x, Pred):
        return Pred("not", x)
    if isinstance(x, Ref) and x.dtype != torch.bool:  # a number tensor: its zeros
        return relation(low, x, 0, "eq")
    return not_(low, as_mask(low, x))


@rule(aten.any.dim)
def any_(low, node, x, dim, keepdim=False):
    """True where some element along `dim` is: a row max of the 0 / 1 mask."""
    if isinstance(x, Pred):
        return Pred("any", x, dim, keepdim)
    return any_of(low, float_mask(low, x), dim, keepdim)


@rule(aten.any.default, aten.any.dims)
def any_all(low, node, x, dim=None, keepdim=False):
    """any over every dimension (or the list `dim`): a row max of the 0 / 1 mask. (all()
    reaches the lowering as not(any(not x)).)"""
    dims = list(dim) if dim is not None else None
    return _bool(reduce(low, node, float_mask(low, x), dims, keepdim, "max"))


@rule(aten.isnan.default)
def isnan(low, node, x):
    """x != x (`build_relation`: NaN is unordered)."""
    return relation(low, x, x, "ne")


@rule(aten.isinf.default)
def isinf(low, node, x):
    """|x| == inf."""
    return relation(low, unary_stage(low, x, "abs"), float("inf"), "eq")


@rule(aten.signbit.default)
def signbit(low, node, x):
    """The sign bit of a float tensor as a mask (-0 and negative NaNs included)."""
    return _bool(unary_stage(low, x, "signbit"))


@rule(aten.sign.default)
def sign(low, node, x):
    """(x > 0) - (x < 0): 1, -1, and 0 for +-0 and NaN, as torch.sign."""
    shape = tuple(x.shape)
    return binary(low, relation(low, x, 0.0, "gt"), relation(low, x, 0.0, "lt"), "sub", shape)


@rule(aten.full_like.default)
def full_like(low, node, x, value, **kwargs):
    """A constant of x's shape, in the node's dtype (bool for isreal, say)."""
    val = node.meta.get("val")
    return Const(torch.full(x.shape, value, dtype=torch.float32 if val is None else val.dtype))


def _attention_guard(cond, a, b) -> bool:
    return (isinstance(cond, Pred) and cond.kind == "not" and cond.arg.kind == "any"
            and cond.arg.arg.kind == "not" and cond.arg.arg.arg.kind == "isneginf"
            and isinstance(a, Const) and bool((a.value == 0).all()) and isinstance(b, Ref))


@rule(aten.where.self)
def where(low, node, cond, a, b):
    """where(cond, a, b) with a runtime condition: the attention guard (module docstring),
    else the bitwise select of a and b (Refs, Consts or numbers; broadcast)."""
    if _attention_guard(cond, a, b):
        scores, dim = cond.arg.arg.arg.arg, cond.arg.dim
        if not rows_may_be_all_neginf(low, scores, dim):
            return b
        # a row of all -inf scores is 0 (the softmax alone gives NaN there): where(any(s
        # != -inf) along the row, softmax, 0)
        alive = any_of(low, relation(low, scores, float("-inf"), "ne"), dim, keepdim=True)
        return Ref(select(low, alive, {"a": b}, {"b": 0.0}, out_shape(node)).index, b.dtype)
    c = as_mask(low, cond)
    if low.format != "f32" and low.int_words(c):  # a bool input into 16-bit storage
        c = float_mask(low, c)
    shape = out_shape(node)
    dtype = node.meta["val"].dtype
    if not dtype.is_floating_point and dtype != torch.bool:
        # integer branches (BART's decoder tokens with -100 replaced): the select's words
        # are computed values, fp32 numbers, so an integer input's int32 words become
        # numbers first (exact below 2^24)
        a, b = (numbers_of_int_words(low, v) if isinstance(v, Ref) and low.int_words(v)
                else v for v in (a, b))
    branches, names, values = {}, [], []
    for name, v in (("a", a), ("b", b)):
        if scalar(v):
            branches[name] = num(v)
            continue
        if isinstance(v, Const):
            v = constant(low, v, f"_{name}")
        elif isinstance(v, (Compare, Pred, IndexPred)) or (
                isinstance(v, Ref) and v.dtype == torch.bool):
            v = float_mask(low, v)
        elif isinstance(v, Ref) and low.int_words(v):
            # an integer input's int32 words beside a float branch: numbers first (exact
            # below 2^24); computed integers (heaviside's where(x < 0, 0, 1)) are numbers
            v = numbers_of_int_words(low, v)
        elif not isinstance(v, Ref):
            raise low.unsupported(f"where with a branch of type {type(v).__name__}")
        names.append(name)
        values.append(v)
    return Ref(select(low, c, dict(zip(names, values)), branches, shape).index, dtype)


def select(low, cond: Ref, values: dict, scalars: dict, shape) -> Ref:
    """where(cond, a, b) on the fabric (`build_select`): branch "a" and "b" each a Ref in
    `values` or a number in `scalars`, everything broadcast to `shape`; a Ref of `shape`."""
    m, n = as2d(shape)
    # the select reads any nonzero word as true: a bool input's int32 words serve as they are
    operands = [low.operand("c", expand_to(cond, shape), (m, n), int_words=True)]
    operands += [low.operand(name, expand_to(v, shape), (m, n)) for name, v in values.items()]
    ref = low.stage("select", (m, n),
                    lambda cfg, rect, **fmt: build_select(cfg, rect, m, n, **scalars,
                                                          dtype=fmt.get("dtype", "f32")),
                    operands, m * n * CYCLES["select"], Limits(m, n),
                    words_per_element=len(operands) + 3, suffix="_select")
    return Ref(ref.index.reshape(shape))


def _converts_to_float(low, node, x, dtype=None, **kwargs) -> bool:
    """A comparison or an integer / bool tensor cast to a float dtype (other casts:
    `layout.to_copy`)."""
    if dtype is None or not dtype.is_floating_point:
        return False
    return isinstance(x, (Compare, Pred)) or (isinstance(x, Ref)
                                              and not x.dtype.is_floating_point)


@rule(aten._to_copy.default, case=_converts_to_float)
def to_float(low, node, x, dtype=None, **kwargs):
    """mask.float(), idx.float(): a computed mask's words are 0.0 / 1.0 already; an input's
    int32 words are converted (`unary` "itof", exact below 2^24)."""
    if isinstance(x, Ref) and low.int_words(x):
        return unary_stage(low, x, "itof")
    return Ref(as_mask(low, x).index if not isinstance(x, Ref) else x.index, torch.float32)


def _float_to_bool(low, node, x, dtype=None, **kwargs) -> bool:
    return (dtype == torch.bool and isinstance(x, Ref)
            and node.args[0].meta["val"].dtype.is_floating_point)


@rule(aten._to_copy.default, case=_float_to_bool)
def float_to_bool(low, node, x, dtype=None, **kwargs):
    """x.bool() of a computed float tensor (DeepSeek-V3's group mask): x != 0, NaN true as
    in eager."""
    return relation(low, x, 0.0, "ne")


def check_mask(mask: torch.Tensor) -> None:
    """A ValueError if an additive attention mask has a row of only -inf."""
    full = torch.isneginf(mask).all(dim=-1)
    if bool(full.any()):
        raise ValueError("the attention mask hides every key of some query row")
