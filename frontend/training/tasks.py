"""Fixed synthetic tasks to train on: the same batches for every run of a seed, so that a
fabric run and an eager run (or a resumed run) see identical data.

    regression(d_in, d_out, batch, batches, seed): x ~ N(0, 1) of shape (batch, d_in),
        y = tanh(x @ W) with a fixed random teacher W (d_in, d_out) / sqrt(d_in).
    tokens(vocab, block, batch, batches, seed, target): sequences that follow a fixed random
        successor table (token t is followed by succ[t]); input ids (batch, block), targets
        the next ids (batch, block) for cross-entropy, or their one-hot rows (batch, block,
        vocab) for a regression loss (target="onehot").

Each returns (train, val): lists of (input, target) batches; val has `val_batches` batches
drawn after the training ones.
"""

from __future__ import annotations

import math

import torch


def regression(d_in: int = 16, d_out: int = 8, batch: int = 8, batches: int = 50,
               seed: int = 0, val_batches: int = 2):
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(d_in, d_out, generator=g) / math.sqrt(d_in)

    def one():
        x = torch.randn(batch, d_in, generator=g)
        return x, torch.tanh(x @ teacher)

    train = [one() for _ in range(batches)]
    return train, [one() for _ in range(val_batches)]


def tokens(vocab: int = 32, block: int = 4, batch: int = 2, batches: int = 20, seed: int = 0,
           val_batches: int = 2, target: str = "ids"):
    if target not in ("ids", "onehot"):
        raise ValueError(f"tokens: target must be 'ids' or 'onehot', got {target!r}")
    g = torch.Generator().manual_seed(seed)
    succ = torch.randperm(vocab, generator=g)

    def one():
        seq = torch.empty(batch, block + 1, dtype=torch.int64)
        seq[:, 0] = torch.randint(0, vocab, (batch,), generator=g)
        for t in range(block):
            seq[:, t + 1] = succ[seq[:, t]]
        x, y = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        if target == "onehot":
            y = torch.nn.functional.one_hot(y, vocab).to(torch.float32)
        return x, y

    train = [one() for _ in range(batches)]
    return train, [one() for _ in range(val_batches)]


TASKS = {"regression": regression, "tokens": tokens}
