"""Products of complex tensors, as rotary position embeddings written with complex numbers
compute them (Llama 4's and Meta's reference code: the head's pairs as complex numbers,
times the positions' unit phasors, back to pairs), on `spectral.Complex` values (the real
and imaginary part as real tensors; no complex word is ever stored):

    view_as_complex(x)         Complex(x[..., 0], x[..., 1]): x's last dimension of 2
    mul(z, w)                  (a + ib)(c + id) = (ac - bd) + i(ad + bc), w a Complex, a
                               complex constant, a real tensor or a number; products with
                               a zero part left out
    view_as_real(z) as a tensor  the parts side by side along a new last dimension (an
                               index map: no word moves), (*shape, 2)

Each part is one fp32 rounding of each product and one of their sum or difference, as
eager's complex multiply on a CPU computes it (within an ulp of each product where an
implementation fuses one of them).
"""

from __future__ import annotations

import torch

from frontend.lowering.common import binary, constant, expand_to, map_, shape_of
from frontend.lowering.core import materializer, rule
from frontend.lowering.spectral import COMPLEX, Complex, ComplexParts
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.view_as_complex.default)
def view_as_complex(low, node, x):
    """The last dimension's two elements as the real and imaginary part."""
    if not isinstance(x, (Ref, Const)):
        raise low.unsupported(f"view_as_complex of a {type(x).__name__}")
    shape = tuple(shape_of(x))
    if not shape or shape[-1] != 2:
        raise low.unsupported(f"view_as_complex of a tensor of shape {shape} (its last "
                              "dimension of size 2)")
    if isinstance(x, Const):
        return Complex(Const(x.value[..., 0]), Const(x.value[..., 1]), shape[:-1])
    return Complex(Ref(x.index[..., 0]), Ref(x.index[..., 1]), shape[:-1])


def _parts(v) -> tuple:
    """(re, im) of a Complex, a complex constant or a real tensor (its imaginary part
    None: zero)."""
    if isinstance(v, Complex):
        return v.re, v.im
    if isinstance(v, Const) and v.value.dtype in COMPLEX:
        return Const(v.value.real.float()), Const(v.value.imag.float())
    return v, None


def _complex_product(low, node, a, b) -> bool:
    return isinstance(a, Complex) or isinstance(b, Complex)


@rule(aten.mul.Tensor, aten.mul.Scalar, case=_complex_product)
def complex_mul(low, node, a, b):
    """(a + ib)(c + id), broadcast to the product's shape (module docstring); a number
    scales each part."""
    if not all(isinstance(v, (Complex, Ref, Const, int, float)) for v in (a, b)):
        kinds = ", ".join(type(v).__name__ for v in (a, b))
        raise low.unsupported(f"a complex product of {kinds} (of complex or real tensors)")
    shape = tuple(node.meta["val"].shape)
    (ar, ai), (br, bi) = _parts(a), _parts(b)

    def product(x, y):
        if x is None or y is None:
            return None
        if isinstance(y, (int, float)) or isinstance(x, (int, float)):
            x, y = (x, y) if isinstance(y, (int, float)) else (y, x)
            return map_(low, expand_to(x, shape), "mul", float(y), shape)
        return binary(low, x, y, "mul", shape)

    def combine(x, y, op):  # x op y with a None for zero
        if y is None:
            return x
        if x is None:
            return y if op == "add" else binary(low, Const(torch.zeros(())), y, "sub", shape)
        return binary(low, x, y, op, shape)

    re = combine(product(ar, br), product(ai, bi), "sub")
    im = combine(product(ar, bi), product(ai, br), "add")
    return Complex(re, im, shape)


@materializer(ComplexParts)
def parts_side_by_side(low, parts: ComplexParts) -> Ref:
    """view_as_real used as a tensor: (*shape, 2), the real part at [..., 0]; a constant or
    zero part held resident."""
    z = parts.value

    def as_ref(part):
        if part is None:
            part = Const(torch.zeros(z.shape))
        if isinstance(part, Const):
            part = constant(low, Const(part.value.expand(z.shape).contiguous()))
        return part.index.expand(z.shape)

    return Ref(torch.stack([as_ref(z.re), as_ref(z.im)], -1))
