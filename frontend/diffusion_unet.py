"""A denoising U-Net of the kind diffusion models use, in plain torch, for the model zoo
(`frontend.architectures`): the noise level's sinusoidal embedding through an MLP, added
to the features of every block; group norms and SiLU before each convolution; one level
down (a strided convolution) and back up (nearest upsampling), the skip joined by
concatenation.

    x (N, 3, H, W), t (N,)  ->  predicted noise (N, 3, H, W)
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

TIME_FEATURES = 16  # sinusoids of the noise level: 8 frequencies, sine and cosine


def time_features(t: torch.Tensor, count: int = TIME_FEATURES) -> torch.Tensor:
    """(N,) noise levels -> (N, count): sin and cos of t at frequencies 10000^(-i / half)."""
    half = count // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    angles = t[:, None] * freqs[None]
    return torch.cat([angles.sin(), angles.cos()], -1)


def _block(channels_in: int, channels_out: int, groups: int = 4) -> nn.Sequential:
    return nn.Sequential(nn.GroupNorm(groups, channels_in), nn.SiLU(),
                         nn.Conv2d(channels_in, channels_out, 3, padding=1))


class DiffusionUNet(nn.Module):
    """Widths c and 2c on two levels (c = `width`), one block per level and direction."""

    def __init__(self, width: int = 16, channels: int = 3):
        super().__init__()
        self.time = nn.Sequential(nn.Linear(TIME_FEATURES, width), nn.SiLU(),
                                  nn.Linear(width, width))
        self.stem = nn.Conv2d(channels, width, 3, padding=1)
        self.down_block = _block(width, width)
        self.down = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1)
        self.middle = _block(2 * width, 2 * width)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.up_conv = nn.Conv2d(2 * width, width, 3, padding=1)
        self.out = _block(2 * width, channels)

    def forward(self, x, t):
        emb = self.time(time_features(t))  # (N, width)
        skip = self.down_block(self.stem(x)) + emb[:, :, None, None]
        h = self.middle(self.down(skip))
        h = self.up_conv(self.up(h))
        return self.out(torch.cat([h, skip], 1))


def unet_inputs(size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """A noisy 3-channel image of size x size and its noise level."""
    return (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1)),
            torch.tensor([10.0]))
