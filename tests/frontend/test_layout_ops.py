"""Layout and pooling ops of real architectures (docs/frontend.md, section 2): cat with a
constant (ViT's class token), constant_pad_nd, max pooling with padding (ResNet's stem),
average pooling with several divisors and adaptive pooling, nearest and bilinear
upsampling. Each against eager PyTorch at assert_close's fp32 tolerances, with a kernel
before (the data comes from a tile) and after (the padded or concatenated map moves into
a kernel); the family once under mixed precision (validate's MIXED_ULPS bound)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from frontend import amp
from frontend.capture import capture_module
from tests.frontend.models import CONFIG


class ClassToken(nn.Module):
    """ViT's embeddings: a class token (a parameter expanded to the batch) before the
    patches, and a zero token after them."""

    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 4))

    def forward(self, x):  # (2, 3, 4)
        y = torch.relu(x)
        z = torch.cat((self.cls.expand(2, -1, -1), y, torch.zeros(2, 1, 4)), dim=1)
        return z * 2.0


class Pads(nn.Module):
    def forward(self, x):  # (1, 2, 4, 5)
        y = torch.relu(x)
        return (F.pad(y, (1, 2, 0, 1)) * 2.0,  # zeros: the index -1
                F.pad(y, (2, -1, 1, 1), value=-0.5) * 2.0,  # a value; a crop
                F.pad(y, (1, 1, 1, 1), mode="reflect") * 2.0)  # aten.index by constants


class Pools(nn.Module):
    def forward(self, x):  # (1, 2, 5, 5)
        y = x - 3.0  # mostly negative: a max pool padded with zeros would show
        return (F.max_pool2d(y, 3, 2, 1),  # ResNet's stem
                F.max_pool2d(y, 2, 2, ceil_mode=True),
                F.avg_pool2d(y, 3, 2, 1, count_include_pad=False),  # divisors 4, 6, 9
                F.adaptive_avg_pool2d(y, (3, 4)),  # windows of 2 x 2 and 3 x 2
                F.adaptive_avg_pool2d(y[:, :, 1:, 1:], (2, 2)),  # divisible: 2 x 2 each
                F.adaptive_max_pool2d(y, 3),
                # zeros padded before the pool take part in its max (BiT's stem)
                F.max_pool2d(F.pad(y, (1, 1, 1, 1)), 3, 2),
                F.adaptive_max_pool2d(F.pad(y, (0, 2, 0, 2)), 2))


class Upsample(nn.Module):
    def forward(self, x):  # (1, 2, 3, 4)
        y = torch.relu(x)
        return (F.interpolate(y, scale_factor=2, mode="nearest") * 2.0,
                F.interpolate(y, size=(5, 7), mode="bilinear", align_corners=False))


class Windows(nn.Module):
    """Sliding windows (`Tensor.unfold`): a time series' patches (PatchTSMixer's), windows
    that overlap, and windows along a middle dimension."""

    def forward(self, x):  # (1, 10, 3): time steps x channels
        y = torch.relu(x)
        patches = y.unfold(-2, 4, 2)  # (1, 4, 3, 4): steps 0-3, 2-5, 4-7, 6-9
        return (patches * 2.0,
                y.transpose(1, 2).unfold(2, 3, 3) + 1.0,  # (1, 3, 3, 3): step 9 dropped
                y.unfold(1, 5, 1).sum(-1))  # (1, 6, 3): a moving sum


def _check(model, x):
    cm = frontend.compile(model, (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), model(x))
    return cm


def _kinds(cm):
    return [s.kind for s in cm.lowered.stages]


def test_cat_with_a_class_token():
    torch.manual_seed(0)
    cm = _check(ClassToken(), torch.randn(2, 3, 4))
    # the token is held once (not per batch entry) on a resident tile; zeros take no stage
    assert _kinds(cm) == ["map", "resident", "map"]
    assert cm.lowered.stages[1].tensor.shape == (1, 4)


def test_constant_pad_nd():
    torch.manual_seed(0)
    cm = _check(Pads(), torch.randn(1, 2, 4, 5))
    # the pad value is one resident element; zeros, crops and reflections are index maps
    assert sorted(_kinds(cm)) == ["map"] * 4 + ["resident"]
    assert [s.tensor.shape for s in cm.lowered.stages if s.kind == "resident"] == [(1, 1)]


def test_pooling_with_padding_and_adaptive_windows():
    torch.manual_seed(0)
    cm = _check(Pools(), torch.randn(1, 2, 5, 5))
    # one row reduction per distinct divisor: 1 + 1 max pools, 3 + 2 + 1 means, 1 + 2 max
    assert _kinds(cm).count("rowreduce") == 11


def test_upsampling_nearest_and_bilinear():
    torch.manual_seed(0)
    cm = _check(Upsample(), torch.randn(1, 2, 3, 4))
    # nearest is an index map; bilinear two GEMMs by constant matrices
    assert sorted(_kinds(cm)) == ["gemm_summa"] * 2 + ["map"] * 2


def test_sliding_windows_are_index_maps():
    torch.manual_seed(0)
    cm = _check(Windows(), torch.randn(1, 10, 3))
    # the windows are index maps; the overlapping elements read twice from one word
    assert "map" in _kinds(cm)
    assert not {"gemm_summa", "gather"} & set(_kinds(cm))


class Mixed(nn.Module):
    """The family after a linear layer over channels (a 16-bit node under autocast)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2, bias=False)  # no fp32 bias: 16-bit onwards
        self.cls = nn.Parameter(torch.randn(1, 1, 2))

    def forward(self, x):  # (1, 6, 6, 3) channels last
        y = self.lin(x).permute(0, 3, 1, 2)  # (1, 2, 6, 6)
        y = F.pad(y, (1, 0, 0, 1), value=0.25)  # (1, 2, 7, 7)
        p = F.max_pool2d(y, 3, 2, 1)  # (1, 2, 4, 4)
        a = F.adaptive_avg_pool2d(y, (3, 2)).flatten(2).transpose(1, 2)  # (1, 6, 2)
        return (torch.cat((self.cls, a), dim=1),
                F.interpolate(p, scale_factor=2, mode="nearest") * 2.0,
                F.interpolate(p, size=(5, 6), mode="bilinear"))


def test_family_under_mixed_precision():
    torch.manual_seed(0)
    x = torch.randn(1, 6, 6, 3)
    cm = frontend.compile(Mixed().eval(), (x,), config=CONFIG, precision="mixed",
                          half="bfloat16")
    fmts = {r.node: r.fmt for r in cm.validate(x)}  # raises on a node beyond the bound
    # 16-bit from the linear layer on; the cat with an fp32 parameter is promoted to fp32
    half_nodes = ("constant_pad_nd", "getitem", "_adaptive_avg_pool2d", "upsample_nearest2d",
                  "upsample_bilinear2d")
    assert {fmts[n] for n in half_nodes} == {amp.half_dtype("bfloat16").fabric}
    assert fmts["cat"] == "f32"


class ConstantSelect(torch.nn.Module):
    """where with a condition known at compile time: a causal fill with a large negative
    constant (GPT-Neo's attention), zeros, and a select between two runtime tensors."""

    def __init__(self):
        super().__init__()
        self.register_buffer("causal", torch.tril(torch.ones(4, 4, dtype=torch.bool)))

    def forward(self, x):
        y = torch.where(self.causal, x, torch.tensor(-3.4e38))
        z = torch.where(self.causal, torch.zeros(()), x * 2.0)
        return y + z, torch.where(self.causal.T, x, x.transpose(0, 1) + 1.0)


def test_where_with_a_constant_condition_is_an_index_map():
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(3))
    cm = frontend.compile(ConstantSelect(), (x,), config=CONFIG)
    for got, want in zip(cm(x), ConstantSelect()(x)):
        torch.testing.assert_close(got, want, rtol=0.0, atol=0.0)
    assert {s.kind for s in cm.lowered.stages} <= {"resident", "map", "elementwise"}


class Assignments(nn.Module):
    """Assignments into slices and indices, functionalized to slice_scatter, copy and (an
    index replaced) a where by a constant mask (Funnel's attention shift, a token shifted
    into a buffer of zeros)."""

    def forward(self, x):  # (2, 5)
        y = torch.relu(x)
        z = torch.zeros(2, 6)
        z[:, 1:] = y  # into a constant: the zeros read as zero
        w = torch.select_scatter(y * 2.0, y[:, 4], 1, 0)  # one index replaced
        v = torch.full((2, 5), 0.5)
        v.copy_(y[:, :1])  # broadcast over a constant
        return z * 2.0, w * 1.0, v * 3.0


def test_assignments_into_slices_are_index_maps():
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(7))
    captured = capture_module(Assignments(), (x,))
    targets = {n.target for n in captured.graph.nodes}
    aten = torch.ops.aten
    assert {aten.slice_scatter.default, aten.copy.default} <= targets
    cm = frontend.compile(Assignments(), (x,), config=CONFIG)
    for got, want in zip(cm(x), Assignments()(x)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
