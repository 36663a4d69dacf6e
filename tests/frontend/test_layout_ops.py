"""Layout ops of real architectures (docs/frontend.md, section 2): cat with a constant
(ViT's class token), constant_pad_nd. Each against eager PyTorch at assert_close's fp32
tolerances, with a kernel before (the data comes from a tile) and after (the padded or
concatenated map moves into a kernel)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
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
