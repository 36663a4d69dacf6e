"""Small models of every kind the frontend handles, for the demo, the Trainer's built-in
tasks, the benchmarks and the tests: an MLP, a LeNet-like CNN with batch norm, and a
nanoGPT-like decoder (token and position embeddings, causal self-attention, tanh gelu).

`build(name, **kwargs)` makes one by name ("mlp", "lenet", "gpt"), as a YAML training
config names it."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """Two linear layers with a relu, scaled, plus a residual of the first d_out inputs."""

    def __init__(self, d_in=16, hidden=24, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) * 0.5 + x[:, : self.fc2.out_features]


class LeNet(nn.Module):
    """conv 3x3 (1 -> 4 channels), batch norm, relu, max pool, avg pool, linear; inputs
    (B, 1, 8, 8)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        x = F.avg_pool2d(x, 2)
        return self.fc(x.flatten(1)) + x.mean(dim=(2, 3)).sum(dim=1, keepdim=True)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TinyGPT(nn.Module):
    """Token ids (B, T <= block) -> logits (B, T, vocab)."""

    def __init__(self, vocab=32, d=16, heads=2, layers=2, block=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


MODELS = {"mlp": MLP, "lenet": LeNet, "gpt": TinyGPT}


def build(name: str, **kwargs) -> nn.Module:
    """A zoo model by name, seeded by the caller (torch.manual_seed) for fixed weights."""
    if name not in MODELS:
        raise ValueError(f"no model {name!r} in frontend.zoo; choose one of {sorted(MODELS)}")
    return MODELS[name](**kwargs)
