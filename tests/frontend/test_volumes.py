"""3D convolution and pooling (video clips, volumes) through `frontend.compile`, against
eager fp32: Conv3d with stride, padding, dilation, groups and depthwise, ConvTranspose3d;
max, average and adaptive 3D pools with padding, ceil_mode and count_include_pad;
local_response_norm (an avg_pool3d of the squares); the refusals.

Tolerances: max pools pick one element (exact); averages and convolutions sum in fp32 in
another order than eager's, within assert_close's fp32 defaults (rtol 1.3e-6, atol 1e-5)."""

import pytest
import torch
import torch.nn.functional as F

import frontend
from tests.frontend.models import CONFIG, Fn

CLIP = torch.randn(1, 4, 5, 6, 7, generator=torch.Generator().manual_seed(0))
EXACT = {"rtol": 0.0, "atol": 0.0}


@pytest.mark.parametrize("kwargs", [
    {},
    {"stride": 2, "padding": 1},
    {"padding": (0, 1, 1), "dilation": (1, 2, 1), "bias": False},
    {"groups": 2, "stride": (1, 2, 2)},
    {"groups": 4, "padding": 1},  # depthwise: weighted sums of the windows
])
def test_conv3d(kwargs):
    torch.manual_seed(0)
    out_channels = 4 if kwargs.get("groups") == 4 else 8
    conv = torch.nn.Conv3d(4, out_channels, 3, **kwargs).eval()
    cm = frontend.compile(conv, (CLIP,), config=CONFIG)
    with torch.no_grad():
        torch.testing.assert_close(cm(CLIP), conv(CLIP))
        torch.testing.assert_close(cm(CLIP * -2), conv(CLIP * -2))


@pytest.mark.parametrize("name, fn, exact", [
    ("max", lambda t: F.max_pool3d(t, 2), True),
    ("max padded, ceil", lambda t: F.max_pool3d(t, 3, stride=2, padding=1, ceil_mode=True),
     True),
    ("avg", lambda t: F.avg_pool3d(t, 2), False),
    ("avg padded, inside only",
     lambda t: F.avg_pool3d(t, 3, stride=2, padding=1, count_include_pad=False), False),
    ("avg ceil", lambda t: F.avg_pool3d(t, 2, ceil_mode=True), False),
    ("avg divisor", lambda t: F.avg_pool3d(t, 2, divisor_override=3), False),
    ("adaptive avg", lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), False),
    ("adaptive max", lambda t: F.adaptive_max_pool3d(t, (2, 2, 3)), True),
    # zeros padded before the pool take part in its max (the clip shifted to negatives)
    ("max of zero-padded", lambda t: F.max_pool3d(F.pad(t - 4.0, (1,) * 6), 3, 2), True),
    ("local response norm", lambda t: F.local_response_norm(t[:, :, 0], 3), False),
])
def test_pool3d(name, fn, exact):
    cm = frontend.compile(Fn(fn).eval(), (CLIP,), config=CONFIG)
    torch.testing.assert_close(cm(CLIP), fn(CLIP), **(EXACT if exact else {}))


@pytest.mark.parametrize("kwargs", [
    {"kernel_size": 2, "stride": 2},  # no two taps meet: a layout after the GEMM
    {"kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1},
    {"kernel_size": 3, "stride": (1, 2, 2), "padding": (0, 1, 1), "groups": 2,
     "bias": False},
    {"kernel_size": 2, "stride": 2, "dilation": 2},
])
def test_transposed_conv3d(kwargs):
    """The adjoint of the 3D convolution of the same geometry: a GEMM per group of each
    input element's contributions, then the sums of those an output element gets."""
    torch.manual_seed(0)
    deconv = torch.nn.ConvTranspose3d(4, 6, **kwargs).eval()
    clip = CLIP[:, :, :3, :4, :4]
    cm = frontend.compile(deconv, (clip,), config=CONFIG)
    with torch.no_grad():
        torch.testing.assert_close(cm(clip), deconv(clip))


def test_conv3d_is_one_gemm_per_depth_tap_chained_through_the_accumulator():
    """kd = 3: three GEMMs, each over the 3 x 3 windows of one depth slice, the second and
    third starting from the one before (their moves copy an element into 9 rows, not 27)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv3d(4, 8, 3, padding=1).eval()
    cm = frontend.compile(conv, (CLIP,), config=CONFIG)
    gemms = [p.stage for p in cm.prepared if p.stage.kind == "gemm_summa"]
    assert len(gemms) == 3
    # the runtime operands (the weights and the bias are constants): the windows, then the
    # running sum too
    assert [set(p.sources) for p in cm.prepared if p.stage.kind == "gemm_summa"] == \
        [{"A"}, {"A", "C0"}, {"A", "C0"}]
