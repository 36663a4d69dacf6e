"""Fourier transforms of real tensors whose real or imaginary part the model keeps
(`frontend.lowering.spectral`) against eager PyTorch: fftn over two dimensions (FNet's
token mixing), fft with each normalization, rfft and rfft2 (one-sided), an inverse FFT (a
conjugate), the magnitude, a product of two transforms, and the refusal of a complex
output.

Tolerances: each output element sums n fp32 products of the DFT matrix (n <= 12 here, two
passes for a 2D transform) where eager's FFT (pocketfft, fp32) takes another order; the
errors are a few ulps of the sum of |x| over a row, which is up to about 12 times the
largest output: rtol 1e-5 and atol 1e-5 (atol for outputs that cancel to near zero)."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, Fn

X = torch.randn(2, 8, 12, generator=torch.Generator().manual_seed(0))
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("name, fn", [
    ("fftn real", lambda t: torch.fft.fftn(t, dim=(1, 2)).real),
    ("fft imag ortho", lambda t: torch.fft.fft(t, norm="ortho").imag),
    ("fft forward, dim 1", lambda t: torch.fft.fft(t, dim=1, norm="forward").real),
    ("rfft real", lambda t: torch.fft.rfft(t).real * 2),
    ("rfft2 imag", lambda t: torch.fft.rfft2(t).imag),
    ("ifft real", lambda t: torch.fft.ifft(t, dim=1).real),
    ("magnitude", lambda t: torch.fft.rfft(t).abs()),
])
def test_transform_against_eager(name, fn):
    cm = frontend.compile(Fn(fn).eval(), (X,), config=CONFIG)
    for x in (X, X * 3 - 1):
        torch.testing.assert_close(cm(x), fn(x), **TOL)


def test_a_real_input_has_no_imaginary_part():
    """The imaginary part of a real tensor cast to complex is an exact zero, no stage."""
    def fn(t):
        return torch.view_as_real(t.to(torch.complex64))[..., 1] + t

    cm = frontend.compile(Fn(fn).eval(), (X,), config=CONFIG)
    torch.testing.assert_close(cm(X), fn(X), rtol=0, atol=0)


def test_complex_results_are_refused():
    with pytest.raises(frontend.UnsupportedOpError, match="cannot be a model output"):
        frontend.compile(Fn(lambda t: torch.fft.fft(t)).eval(), (X,), config=CONFIG)


def test_a_product_of_transforms():
    """A spectrum squared (`complex_values`): its parts' products of two transforms, each
    a few ulps of eager's, to within the products' magnitude (up to about 12^2 times |x|^2
    here): atol 1e-3."""
    def fn(t):
        z = torch.fft.rfft(t)
        return (z * z).real

    cm = frontend.compile(Fn(fn).eval(), (X,), config=CONFIG)
    torch.testing.assert_close(cm(X), fn(X), rtol=1e-5, atol=1e-3)
