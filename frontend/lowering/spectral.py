"""Discrete Fourier transforms of real tensors whose real or imaginary part the model keeps
(FNet's token mixing, `torch.fft.fftn(x, dim=(1, 2)).real`; spectral features,
`torch.fft.rfft(x).imag`): the complex values never leave the lowering. A complex tensor
is the symbolic pair `Complex(re, im)` of real Refs or Consts (None: zero), and

    _to_copy(x, complex64)            Complex(x, None)
    _fft_c2c(z, dims, norm, forward)  one pass per dimension d of size n (below)
    _fft_r2c(x, dims, norm, onesided) the same from Complex(x, None); onesided keeps the
                                      last dimension's first n // 2 + 1 frequencies
    view_as_real(z)[..., 0] / [..., 1]   re / im (a `ComplexParts` until the select)
    _conj(z)                          Complex(re, -im) (an inverse FFT of a real tensor)
    abs(z)                            hypot(re, im), one kernel (`binary_math_stage`)

A pass along d multiplies the tensor, d moved last and the rest flattened to rows (m, n),
by the DFT matrix W[j, k] = exp(-+2 pi i j k / n) = C + i S (float64, rounded once to
fp32; norm "backward" 1, "ortho" 1 / sqrt(n), "forward" 1 / n folded in):

    re' = re @ C - im @ S        im' = re @ S + im @ C

as GEMMs, the second of each pair starting from the first's output (its accumulator, `c0`:
no add), and only the products of parts that are not zero (a real input's first pass is
two GEMMs). Each output element sums n fp32 products: within a few ulps of n |x| of
eager's FFT (pocketfft in fp32), not bit for bit.

Anything else on a complex tensor (a product with another, its angle, a complex output)
is refused with the node and the reason.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from frontend.lowering.binary_math import binary_math_stage
from frontend.lowering.common import gemm, map_, relayout, shape_of
from frontend.lowering.core import rule
from frontend.values import Const, Ref, Symbolic

aten = torch.ops.aten

COMPLEX = (torch.complex64, torch.complex128, torch.complex32)
# aten's fft normalization codes: the scale of the forward transform by n
NORMS = {0: lambda n: 1.0, 1: lambda n: 1.0 / math.sqrt(n), 2: lambda n: 1.0 / n}


@dataclasses.dataclass
class Complex(Symbolic):
    """A complex tensor of `shape` as its real and imaginary parts (Ref, Const or None for
    zero)."""

    re: Ref | Const | None
    im: Ref | Const | None
    shape: tuple[int, ...]


@dataclasses.dataclass
class ComplexParts(Symbolic):
    """view_as_real of a `Complex`: (*shape, 2), the parts along the last dimension."""

    value: Complex


def _to_complex(low, node, x, dtype=None, **kwargs) -> bool:
    return dtype in COMPLEX and isinstance(x, (Ref, Const))


@rule(aten._to_copy.default, case=_to_complex)  # other casts: `layout.to_copy`
def to_complex(low, node, x, dtype=None, **kwargs):
    source = node.args[0].meta["val"].dtype
    if not source.is_floating_point or source in COMPLEX:
        raise low.unsupported(f"a cast of a {source} tensor to {dtype} (from a real float "
                              "tensor only)")
    return Complex(x, None, shape_of(x))


@rule(aten._fft_c2c.default)
def fft_c2c(low, node, z, dims, normalization, forward):
    if not isinstance(z, Complex):
        raise low.unsupported(f"an FFT of a {type(z).__name__} (of a real tensor cast to "
                              "complex only)")
    for d in dims:
        z = _pass(low, z, d % len(z.shape), normalization, forward)
    return z


@rule(aten._fft_r2c.default)
def fft_r2c(low, node, x, dims, normalization, onesided):
    if not isinstance(x, (Ref, Const)):
        raise low.unsupported(f"a real FFT of a {type(x).__name__}")
    z = Complex(x, None, shape_of(x))
    dims = [d % len(z.shape) for d in dims]
    for k, d in enumerate(dims):
        keep = z.shape[d] // 2 + 1 if onesided and k == len(dims) - 1 else None
        z = _pass(low, z, d, normalization, True, keep)
    return z


def _pass(low, z: Complex, d: int, normalization: int, forward: bool,
          keep: int | None = None) -> Complex:
    """The DFT of z along dimension d (module docstring); keep: the first `keep` output
    frequencies only (a one-sided real FFT)."""
    if normalization not in NORMS:
        raise low.unsupported(f"an FFT with normalization code {normalization}")
    n = z.shape[d]
    out = keep if keep is not None else n
    j, k = np.meshgrid(np.arange(n), np.arange(out), indexing="ij")  # (n, out)
    angle = (-2.0 if forward else 2.0) * np.pi * ((j * k) % n) / n
    scale = NORMS[normalization](n)
    cos = Const(torch.from_numpy(np.cos(angle) * scale).to(torch.float32))
    sin = Const(torch.from_numpy(np.sin(angle) * scale).to(torch.float32))
    neg_sin = Const(-sin.value)
    shape = tuple(z.shape[:d]) + (out,) + tuple(z.shape[d + 1:])

    def rows(part):  # (..., n at d, ...) -> (rest, n)
        return relayout(part, lambda t: t.movedim(d, -1).reshape(-1, n))

    def back(y: Ref) -> Ref:  # (rest, out) -> the output's layout
        moved = tuple(z.shape[:d]) + tuple(z.shape[d + 1:]) + (out,)
        return Ref(y.index.reshape(moved).movedim(-1, d))

    def combine(a, wa, b, wb):  # a @ wa + b @ wb, zero parts left out
        y = None
        for part, w in ((a, wa), (b, wb)):
            if part is not None:
                y = gemm(low, rows(part), w, suffix="_dft", c0=y)
        return None if y is None else back(y)

    re = combine(z.re, cos, z.im, neg_sin)
    im = combine(z.re, sin, z.im, cos)
    return Complex(re, im, shape)


@rule(aten.view_as_real.default)
def view_as_real(low, node, z):
    if not isinstance(z, Complex):
        raise low.unsupported(f"view_as_real of a {type(z).__name__}")
    return ComplexParts(z)


@rule(aten.select.int, case=lambda low, node, x, *args: isinstance(x, ComplexParts))
def select_part(low, node, parts, dim, index):
    z = parts.value
    if dim % (len(z.shape) + 1) != len(z.shape):
        raise low.unsupported("a select of a complex tensor's parts along another dimension "
                              "than the last (its real / imaginary part)")
    part = z.re if index % 2 == 0 else z.im
    if part is None:  # an exact zero part
        return Const(torch.zeros(z.shape))
    return part


@rule(aten._conj.default, case=lambda low, node, z: isinstance(z, Complex))
def conj(low, node, z):
    """The conjugate: the imaginary part negated (an inverse FFT of a real tensor is the
    conjugate of the forward one of its conjugate)."""
    im = None if z.im is None else map_(low, z.im, "mul", -1.0, z.shape)
    return Complex(z.re, im, z.shape)


@rule(aten.abs.default, case=lambda low, node, z: isinstance(z, Complex))
def magnitude(low, node, z):
    """|z| = hypot(re, im) (`binary_math_stage`: no overflow of the squares, within an
    ulp), a zero part as a constant zero."""
    zero = Const(torch.zeros(z.shape))
    return binary_math_stage(low, "hypot", zero if z.re is None else z.re,
                             zero if z.im is None else z.im, z.shape)
