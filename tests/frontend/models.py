"""The frontend tests' fabric and models (the models live in `frontend.zoo`)."""

import torch

from fabric import FabricConfig
from frontend.zoo import MLP, Attention, Block, LeNet, TinyGPT

CONFIG = FabricConfig.small(12, 12)  # one fabric for every frontend test (one compile)

__all__ = ["CONFIG", "MLP", "Attention", "Block", "LeNet", "TinyGPT", "lenet_with_statistics"]


def lenet_with_statistics() -> LeNet:
    """A LeNet whose batch norm has non-trivial running statistics (mean in [-0.5, 0.5],
    variance in [0.5, 2]) drawn from the current seed, so that eval mode's normalization
    is not the identity."""
    model = LeNet()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model
