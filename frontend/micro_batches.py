"""A call on a larger batch than the model was compiled for, fed as micro-batches.

A model is compiled for its example inputs' shapes (static, as `torch.export` captures
them), batch b along dimension 0. Called on k * b samples (every input k times as long
along dimension 0, its other dimensions as compiled), it runs as a stream of k
micro-batches of b (`CompiledModel.stream`: in pipelined mode they follow each other
through the resident stages), and the outputs of the micro-batches are joined along
dimension 0, in order. An output without the batch along dimension 0 (a sum over the
batch, a shape that does not start with b) cannot be joined: such a model is refused on a
larger batch, with `cm.stream` named for it.

Example:
    >>> cm = frontend.compile(model, (torch.randn(4, 16),), mode="pipelined")  # b = 4
    >>> y = cm(torch.randn(32, 16))      # 8 micro-batches of 4, streamed   # doctest: +SKIP
    >>> cm.period                        # steady-state cycles per micro-batch
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from frontend.errors import FrontendError


def split(args: Sequence, compiled: Sequence[tuple[int, ...]]) -> list[tuple] | None:
    """The micro-batches of `args` (flat positional tensors) for inputs compiled as
    `compiled` (their shapes, in order); None when `args` is not k >= 2 micro-batches of
    them (the call is then checked as one)."""
    if len(args) != len(compiled) or not compiled:
        return None
    counts = set()
    for value, shape in zip(args, compiled):
        if not isinstance(value, torch.Tensor) or value.dim() != len(shape) or not shape:
            return None
        if tuple(value.shape[1:]) != tuple(shape[1:]) or shape[0] == 0 \
                or value.shape[0] % shape[0]:
            return None
        counts.add(value.shape[0] // shape[0])
    if len(counts) != 1 or (k := counts.pop()) < 2:
        return None
    parts = [torch.split(value, shape[0]) for value, shape in zip(args, compiled)]
    return [tuple(p[i] for p in parts) for i in range(k)]


def join(outputs: list, batch: int):
    """The outputs of the micro-batches (each the model's output structure) joined along
    dimension 0, each leaf of micro-batch size `batch` there.

    Raises FrontendError for a leaf that does not start with `batch`, naming it."""
    flat = [torch.utils._pytree.tree_flatten(out) for out in outputs]
    leaves, spec = flat[0]
    joined = []
    for i, first in enumerate(leaves):
        if not isinstance(first, torch.Tensor) or first.dim() == 0 or first.shape[0] != batch:
            shape = tuple(first.shape) if isinstance(first, torch.Tensor) else type(first)
            raise FrontendError(
                f"output {i} of the model is {shape}, without the micro-batch of {batch} "
                "along dimension 0, so the micro-batches' outputs cannot be joined: call the "
                "model on the batch it was compiled for, or cm.stream(samples) for each "
                "sample's outputs")
        joined.append(torch.cat([f[0][i] for f in flat], dim=0))
    return torch.utils._pytree.tree_unflatten(joined, spec)
