"""Powers with a tensor exponent: torch.pow(x, y) of two tensors (aten.pow.Tensor_Tensor:
x ** y, GeM pooling's x.pow(p) with p a parameter) and of a number base (aten.pow.Scalar:
2 ** x, 3.0 ** x). The scalar exponent, x ** 2.5 (aten.pow.Tensor_Scalar), is
`elementwise.pow_`.

- A constant exponent of one finite value that does not enlarge x (GeM's p of shape (1,),
  a 0-d tensor) is that number: `elementwise.pow_`, so products (and their reciprocal) for
  +-1..4, ones for 0, and exp(p log x) otherwise (`build_pow`, whose error grows with
  |p log x|); but not +-0.5, which `pow_` takes as sqrt and rsqrt: eager's two-tensor pow
  gives C99's pow(-0, 0.5) = +0 and pow(-inf, 0.5) = inf there, the scalar overload's
  sqrt -0 and NaN.
- Any other exponent: one "pow" stage of `build_binary_math` (`fabric.kernels.mathlib_pow`:
  within 3 ulps, torch's special values) with both operands broadcast to the output
  shape, a constant operand held on a resident tile (`binary_math.binary_math_stage`). An
  integer constant (base or exponent) is taken as fp32 numbers (exact below 2^24).
- A number base: 1 gives ones (1 ** NaN = 1, as torch), 2 the "exp2" unary kernel (within
  an ulp, exact at integers), any other the "pow" stage with the base a constant.

Integer and bool runtime tensors are refused (eager promotes a float base's integer
exponent to float and keeps integer ** integer integer; the fabric would need their int32
words converted, and integer powers beyond 2^24 lose digits in fp32)."""

from __future__ import annotations

import math
import numbers

import torch

from frontend.lowering.binary_math import binary_math_stage
from frontend.lowering.common import out_shape
from frontend.lowering.core import rule
from frontend.lowering.elementwise import pow_, unary_stage
from frontend.values import Const, Ref

aten = torch.ops.aten
EXACT_INTEGERS = 2**24  # integers below this are exact in fp32


@rule(aten.pow.Tensor_Tensor)
def pow_tensor(low, node, x, y):
    """x ** y, torch's broadcasting: a constant y of one value p that keeps x's shape as
    x ** p (`elementwise.pow_`; p not +-0.5); otherwise one "pow" stage of x and y
    broadcast."""
    x, y = low.materialized(x), low.materialized(y)
    _check_runtime(low, x, "base")
    _check_runtime(low, y, "exponent")
    x, y = _float_constant(low, x), _float_constant(low, y)
    p = _one_value(y)
    if (p is not None and math.isfinite(p) and abs(p) != 0.5 and isinstance(x, Ref)
            and tuple(x.shape) == out_shape(node)):
        return pow_(low, node, x, p)
    return binary_math_stage(low, "pow", x, y, out_shape(node))


@rule(aten.pow.Scalar)
def pow_scalar(low, node, base, x):
    """base ** x for a number base: ones for 1, exp2(x) for 2, else one "pow" stage with the
    base a constant."""
    x = low.materialized(x)
    if not isinstance(base, numbers.Real):
        raise low.unsupported(f"pow with a {type(base).__name__} base")
    if float(base) == 1.0:
        return Const(torch.ones(out_shape(node), dtype=node.meta["val"].dtype))
    _check_runtime(low, x, "exponent")
    if float(base) == 2.0:
        return unary_stage(low, x, "exp2")
    return binary_math_stage(low, "pow", float(base), x, out_shape(node))


def _check_runtime(low, v, what: str) -> None:
    """UnsupportedOpError for an integer or bool runtime tensor `v` (the `what` of pow)."""
    if isinstance(v, Ref) and not v.dtype.is_floating_point:
        raise low.unsupported(f"pow with a {v.dtype} {what} tensor (float tensors only: its "
                              "int32 words would need converting, and integer powers beyond "
                              "2^24 lose digits in fp32)")


def _float_constant(low, v):
    """An integer constant (base or exponent) as fp32 numbers, exact below 2^24 (beyond,
    refused); anything else as it is."""
    if not isinstance(v, Const) or v.value.is_floating_point() or v.value.dtype == torch.bool:
        return v
    if v.value.numel() and int(v.value.abs().max()) >= EXACT_INTEGERS:
        raise low.unsupported("pow with an integer constant beyond 2^24 (not exact as fp32)")
    return Const(v.value.to(torch.float32))


def _one_value(y) -> float | None:
    """The number a float constant of one repeated value stands for, else None."""
    if not isinstance(y, Const) or not y.value.is_floating_point() or not y.value.numel():
        return None
    v = y.value.detach().reshape(-1)
    return float(v[0]) if bool((v == v[0]).all()) else None
