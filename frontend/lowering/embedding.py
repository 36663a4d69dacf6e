"""Embedding: the table is resident on its own tile; on every call the rows the indices pick
move over the fabric to the embedding's output tile (the routes depend on the indices, so
the movement is planned per call; the engine does not recompile)."""

from __future__ import annotations

import torch

from fabric.kernels.resident import build_resident
from frontend.lowering.core import rule
from frontend.stages import Limits
from frontend.values import Const, Gather, Ref

aten = torch.ops.aten


@rule(aten.embedding.default)
def embedding(low, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
              sparse=False):
    if not isinstance(indices, Ref):
        raise low.unsupported("embedding indices that are not a runtime input")
    sources = {low.owner(int(g)).name for g in indices.index.reshape(-1)[:1]} \
        if indices.index.numel() else set()
    source = low.tensors[next(iter(sources))] if sources else None
    if source is None or source.kind != "input" or bool((indices.index < source.base).any()) \
            or bool((indices.index >= source.base + source.numel).any()):
        raise low.unsupported("embedding indices computed on the fabric (they must come "
                              "from an input)")
    vocab, dim = weight.value.shape if isinstance(weight, Const) else weight.shape
    if isinstance(weight, Const):
        table = low.stage("resident", (vocab, dim),
                          lambda cfg, rect, **fmt: build_resident(cfg, rect, vocab, dim, **fmt),
                          [low.operand("x", weight, (vocab, dim))], vocab * dim,
                          Limits(vocab, dim), words_per_element=1, suffix="_table")
        table_base = int(table.index.reshape(-1)[0])
    else:
        raise low.unsupported("an embedding table computed at run time")
    tokens = indices.index.numel()
    gather = Gather(table_base, vocab, dim, source.name, indices.index - source.base,
                    tuple(indices.shape))
    out = low.stage("resident", (tokens, dim),
                    lambda cfg, rect, **fmt: build_resident(cfg, rect, tokens, dim, **fmt),
                    [low.operand("x", gather, (tokens, dim))], tokens * dim,
                    Limits(tokens, dim), words_per_element=1)
    return Ref(out.index.reshape(*indices.shape, dim))
