"""The frontend tests' fabric and models (the models live in `frontend.zoo`)."""

import torch

from fabric import FabricConfig
from frontend.zoo import MLP, Attention, Block, LeNet, TinyGPT

CONFIG = FabricConfig.small(12, 12)  # one fabric for every frontend test (one compile)

__all__ = ["CONFIG", "MLP", "Attention", "Block", "Fn", "LeNet", "TinyGPT",
           "lenet_with_statistics", "words_apart"]


class Fn(torch.nn.Module):
    """A module whose forward is `fn` of its inputs: one op or a few, compiled alone."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class LengthsChecked(torch.nn.Module):
    """XLM's check of its lengths counted from the ids (here, not in a test module: pytest
    rewrites a test module's assert statements, which export then cannot tell from other
    data-dependent branches)."""

    def forward(self, ids, x):
        lengths = (ids != 2).sum(dim=1)
        assert lengths.max().item() <= ids.shape[1] - 1
        return x * lengths[:, None]


def lenet_with_statistics() -> LeNet:
    """A LeNet whose batch norm has non-trivial running statistics (mean in [-0.5, 0.5],
    variance in [0.5, 2]) drawn from the current seed, so that eval mode's normalization
    is not the identity."""
    model = LeNet()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model


def words_apart(cm, xs) -> list[dict]:
    """For each input x of `xs`, every stage's output words of a call `cm(x)`, its parts
    run apart: what a stream of `xs` through the one fabric program must give, bit for
    bit (`ProgramStream.same_words`)."""
    apart = []
    for x in xs:
        cm(x)
        apart.append({stage: dict(words) for stage, words in cm.last.words.items()})
    return apart
