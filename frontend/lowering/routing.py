"""Mixture-of-experts routing ops: division with a rounding mode (div.Tensor_mode,
div.Scalar_mode: `idx // k`), exact; trunc and floor of float tensors (`build_unary`
"trunc" / "floor": the fraction bits cleared with integer ops, exact for every fp32 value).

div(x, d, rounding_mode) for a constant d:

- x a float tensor, d = +-2^k (its reciprocal exact): the quotient q = x * (1 / d) is eager's
  true quotient (exact, up to the fabric's flush of subnormal results), and "trunc" is
  trunc(q), as eager's. "floor" is floor(q) + q * 0: eager computes a floor division
  through fmod (c10's div_floor), which equals floor of an exact quotient and gives NaN for
  an infinite x; q * 0 is NaN there and a zero of q's sign elsewhere, which keeps the floor
  and its signed zero. d = 0: eager's floor and trunc are x / 0 (+-inf, NaN), as here.
  Another divisor is refused: x * (1 / d) is not the rounded quotient, and its floor may
  differ from eager's (1 / 0.1 rounds to 10, eager's 1 // 0.1 is 9).
- x an integer tensor (int64 values: integer inputs read as numbers, computed integers) and
  d an integer: f = floor(x * fl(1 / d)) is within 1 of floor(x / d) (relative error below
  2^-23 on a quotient below 2^23 in magnitude), and the remainder r = x - d f (exact: integers
  below 2^24) corrects it: f - [r < 0] + [r >= d] (d > 0), f - [r > 0] + [r <= d] (d < 0).
  "trunc" adds 1 where the floor is negative and the remainder nonzero. Exact for |x| and
  |x| + |d| below 2^24 (the integers fp32 words hold exactly, as every computed integer
  here). d = 0 raises in eager (ZeroDivisionError): refused.

A runtime divisor is refused (x * reciprocal(y) is not the rounded quotient).

histc(x, bins, min, max) of a runtime float tensor, exact: eager puts x in bin
trunc((x - min) * bins / (max - min)) in fp32 (bins - 1 for that of max; x outside
[min, max] and NaN in none), a non-decreasing function of x, so bin b holds the x with
t_b <= x <= max and not x >= t_(b+1), t_b the least fp32 value eager puts in bin b or above.
The t_b are found at compile time by bisection over the fp32 values of [min, max] with
eager's histc of one value as the oracle (`bin_starts`); on the fabric, the (bins, n) mask
(x >= t_b) * (x <= max) (`relation`, exact) is summed per row (c_b, exact counts below
2^24) and count_b = c_b - c_(b+1). min == max (eager: the data's range) is refused. A
subnormal x reads as 0 (the fabric's flush, docs/numerics.md).

bucketize(x, boundaries, right) for K sorted boundaries, exact: eager's index is the count
of boundaries b with b < x (right: b <= x), which is K minus the count of x <= b (right:
x < b), so a NaN x (no comparison true) gets K, as eager's binary search gives it. The
(n, K) mask (`relation`) is summed per row. Constant boundaries are checked sorted when
compiling (eager's result for unsorted ones is unspecified: refused).
"""

from __future__ import annotations

import math

import torch

from frontend.lowering.common import (
    binary,
    map_,
    negated,
    num,
    out_shape,
    reduce_rows,
    scalar,
    shape_of,
)
from frontend.lowering.core import rule
from frontend.lowering.elementwise import div, numbers_of_int_words, unary_stage
from frontend.lowering.losses import div as runtime_div
from frontend.lowering.masks import relation
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.trunc.default, aten.floor.default)
def trunc_floor(low, node, x):
    """trunc(x) / floor(x) of a float tensor (`build_unary`, exact); of an integer tensor
    (eager: the tensor itself), x."""
    if not node.args[0].meta["val"].dtype.is_floating_point:
        return x
    return unary_stage(low, x, "trunc" if node.target is aten.trunc.default else "floor")


@rule(aten.ceil.default)
def ceil(low, node, x):
    """ceil(x) = -floor(-x), exact (negation is exact; ceil(-0.5) is -0 as eager); of an
    integer tensor, x."""
    if not node.args[0].meta["val"].dtype.is_floating_point:
        return x
    return negated(low, unary_stage(low, negated(low, x), "floor"))


def _power_of_two(d: float) -> bool:
    m, e = torch.frexp(torch.tensor(abs(d), dtype=torch.float64))
    return float(m) == 0.5 and -125 <= int(e) - 1 <= 126


@rule(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(low, node, x, y, *, rounding_mode=None):
    """x / y rounded toward zero ("trunc") or down ("floor"); the cases of the module
    docstring. rounding_mode None: true division (`elementwise.div`, by a runtime tensor
    `losses.div`)."""
    if rounding_mode is None:
        return (runtime_div if isinstance(y, Ref) else div)(low, node, x, y)
    if rounding_mode not in ("trunc", "floor"):
        raise low.unsupported(f"div with rounding_mode={rounding_mode!r}")
    if not isinstance(x, Ref):
        raise low.unsupported(f"div with rounding_mode of a {type(x).__name__} (a runtime "
                              "tensor by a constant)")
    if not scalar(y):
        raise low.unsupported("div with rounding_mode by a tensor (a constant number only: "
                              "x * reciprocal(y) is not the rounded quotient)")
    d = num(y)
    shape = out_shape(node)
    dtype = node.meta["val"].dtype
    if not node.args[0].meta["val"].dtype.is_floating_point:  # (a Ref may say float32)
        if not d.is_integer() or d == 0:
            raise low.unsupported(f"div with rounding_mode of an integer tensor by {d} "
                                  "(a nonzero integer)")
        return Ref(_int_div(low, x, int(d), rounding_mode, shape).index, dtype)
    if d == 0:
        return map_(low, Ref(x.index.expand(shape)), "mul", math.copysign(math.inf, d), shape)
    if not _power_of_two(d):
        raise low.unsupported(f"div with rounding_mode={rounding_mode!r} of a float tensor by "
                              f"{d} (x * (1 / d) is not the rounded quotient; a divisor "
                              "+-2^k runs)")
    q = map_(low, Ref(x.index.expand(shape)), "mul", 1.0 / d, shape)
    if rounding_mode == "trunc":
        return unary_stage(low, q, "trunc")
    zero = map_(low, q, "mul", 0.0, shape)  # NaN for +-inf (eager's fmod), else +-0
    return binary(low, unary_stage(low, q, "floor"), zero, "add", shape)


MAX_BINS = 64  # histc: one mask row per bin


def _ordered(v: float) -> int:
    """An fp32 value's place in the order of fp32 values (an int; -0 and +0 both 0)."""
    bits = int(torch.tensor([v], dtype=torch.float32).view(torch.int32))
    return bits if bits >= 0 else -(bits & 0x7FFFFFFF)


def _value(o: int) -> float:
    """The fp32 value at place o of `_ordered`."""
    bits = o if o >= 0 else (-o) | -0x80000000
    return float(torch.tensor([bits], dtype=torch.int32).view(torch.float32))


def bin_starts(bins: int, lo: float, hi: float) -> list[float]:
    """t_0 .. t_(bins-1) of the module docstring: t_b the least fp32 x in [lo, hi] that
    eager's histc puts in bin b or above (t_0 = lo)."""
    def bin_of(o):
        counts = torch.histc(torch.tensor([_value(o)]), bins=bins, min=lo, max=hi)
        return int(counts.argmax())

    first, last = _ordered(lo), _ordered(hi)
    starts = [_value(first)]
    for b in range(1, bins):
        a, z = _ordered(starts[-1]), last  # bin_of(z) = bins - 1 >= b
        while a < z:
            mid = (a + z) // 2
            if bin_of(mid) >= b:
                z = mid
            else:
                a = mid + 1
        starts.append(_value(a))
    return starts


@rule(aten.histc.default)
def histc(low, node, x, bins=100, min=0, max=0):
    """Counts of x's elements per bin of [min, max] (module docstring), a Ref (bins,)."""
    if not isinstance(x, Ref) or not node.args[0].meta["val"].dtype.is_floating_point:
        raise low.unsupported("histc of a non-float tensor (a runtime float tensor)")
    if float(min) >= float(max):
        raise low.unsupported(f"histc with min={min}, max={max} (a range given, min < max)")
    if bins > MAX_BINS:
        raise low.unsupported(f"histc with {bins} bins (at most {MAX_BINS})")
    flat = x.index.reshape(-1)
    n = flat.numel()
    starts = torch.tensor(bin_starts(bins, float(min), float(max)), dtype=torch.float32)
    hi = float(torch.tensor(float(max), dtype=torch.float32))
    ge = relation(low, Ref(flat.expand(bins, n)), Const(starts[:, None].expand(bins, n)), "ge",
                  (bins, n))
    le = relation(low, Ref(flat), hi, "le", (n,))
    inside = binary(low, ge, Ref(le.index.expand(bins, n)), "mul", (bins, n))
    c = reduce_rows(low, inside.index, "sum")
    above = Ref(torch.cat([c.index[1:], torch.tensor([-1])]))  # c_(b+1), c_bins = 0
    counts = binary(low, c, above, "sub", (bins,))
    return Ref(counts.index, node.meta["val"].dtype)


def _int_div(low, x: Ref, d: int, mode: str, shape) -> Ref:
    """floor / trunc of x / d for integer values x (module docstring), a Ref of `shape`."""
    if low.int_words(x):
        x = numbers_of_int_words(low, x)
    x = Ref(x.index.expand(shape))
    if abs(d) == 1:
        return map_(low, x, "mul", float(d), shape)
    f = unary_stage(low, map_(low, x, "mul", 1.0 / d, shape), "floor")

    def remainder(f):
        return binary(low, x, map_(low, f, "mul", float(-d), shape), "add", shape)

    r = remainder(f)
    below, above = (("lt", "ge") if d > 0 else ("gt", "le"))
    f = binary(low, f, relation(low, r, 0.0, below), "sub", shape)
    f = binary(low, f, relation(low, r, float(d), above), "add", shape)
    if mode == "floor":
        return f
    inexact = relation(low, remainder(f), 0.0, "ne")
    negative = relation(low, f, 0.0, "lt")
    return binary(low, f, binary(low, inexact, negative, "mul", shape), "add", shape)


@rule(aten.bucketize.Tensor)
def bucketize(low, node, x, boundaries, out_int32=False, right=False):
    """The bucket of every element of x among sorted `boundaries` (module docstring), a
    Ref of x's shape in eager's integer dtype."""
    if not isinstance(x, Ref):
        raise low.unsupported(f"bucketize of a {type(x).__name__} (a runtime tensor)")
    if not isinstance(boundaries, (Const, Ref)) or len(shape_of(boundaries)) != 1:
        raise low.unsupported("bucketize with boundaries that are not a 1-D tensor")
    if isinstance(boundaries, Const):
        b = boundaries.value.to(torch.float64)
        if bool((b[1:] < b[:-1]).any()) or bool(b.isnan().any()):
            raise low.unsupported(f"bucketize with unsorted boundaries {b.tolist()} (eager "
                                  "needs them sorted: its result for others is unspecified)")
    k = shape_of(boundaries)[0]
    flat = x.index.reshape(-1)
    n = flat.numel()
    if isinstance(boundaries, Const):
        others = Const(boundaries.value.to(torch.float32).reshape(1, k).expand(n, k))
    else:
        others = Ref(boundaries.index.reshape(1, k).expand(n, k), boundaries.dtype)
    below = relation(low, Ref(flat.reshape(n, 1).expand(n, k), x.dtype), others,
                     "lt" if right else "le", (n, k))
    count = reduce_rows(low, low.materialized(below).index, "sum")  # x <= b (right: x < b)
    out = map_(low, map_(low, count, "mul", -1.0, (n,)), "add", float(k), (n,))
    return Ref(out.index.reshape(x.shape), node.meta["val"].dtype)


@rule(aten.searchsorted.Tensor)
def searchsorted(low, node, sorted_sequence, values, out_int32=False, right=False,
                 side=None, sorter=None):
    """torch.searchsorted into a 1-D sorted sequence: `bucketize` of the values (the same
    index, eager's for both sides: side "right" is right=True); a batched sequence or a
    sorter is refused."""
    if sorter is not None:
        raise low.unsupported("searchsorted with a sorter")
    if len(shape_of(sorted_sequence)) != 1:
        raise low.unsupported("searchsorted into a sequence of more than one dimension "
                              "(one sorted 1-D sequence, as bucketize's boundaries, is "
                              "supported)")
    return bucketize(low, node, values, sorted_sequence, out_int32,
                     bool(right) or side == "right")
