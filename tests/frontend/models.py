"""The frontend tests' fabric and models (the models live in `frontend.zoo`)."""

from fabric import FabricConfig
from frontend.zoo import MLP, Attention, Block, LeNet, TinyGPT

CONFIG = FabricConfig.small(12, 12)  # one fabric for every frontend test (one compile)

__all__ = ["CONFIG", "MLP", "Attention", "Block", "LeNet", "TinyGPT"]
