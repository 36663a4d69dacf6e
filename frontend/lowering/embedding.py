"""Embedding: the table is resident on its own tile; on every call the rows the indices pick
move over the fabric to the embedding's output tile (the routes depend on the indices, so
the movement is planned per call; the engine does not recompile)."""

from __future__ import annotations

import torch

from frontend.lowering.common import resident
from frontend.lowering.core import rule
from frontend.values import Const, Gather, Ref

aten = torch.ops.aten


@rule(aten.embedding.default)
def embedding(low, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
              sparse=False):
    if not isinstance(indices, Ref):
        raise low.unsupported("embedding indices that are not a runtime input")
    index_source(low, indices)
    vocab, dim = weight.value.shape if isinstance(weight, Const) else weight.shape
    if isinstance(weight, Const):
        table = resident(low, weight, (vocab, dim), "_table")
        table_base = int(table.index.reshape(-1)[0])
    else:
        raise low.unsupported("an embedding table computed at run time")
    return gather_rows(low, table_base, vocab, dim, indices)


def index_source(low, indices: Ref):
    """The user input tensor that all `indices` come from (else UnsupportedOpError)."""
    flat = indices.index.reshape(-1)
    src = low.owner(int(flat[0])) if flat.numel() and int(flat[0]) >= 0 else None
    if src is None or src.kind != "input" or bool((flat < src.base).any()) \
            or bool((flat >= src.base + src.numel).any()):
        raise low.unsupported("embedding indices computed on the fabric (they must come "
                              "from an input)")
    return src


def gather_rows(low, table_base: int, vocab: int, dim: int, indices: Ref,
                suffix: str = "") -> Ref:
    """table[indices] for a (vocab, dim) table materialized at global id `table_base`: the
    picked rows move per call into a resident tile of (tokens, dim)."""
    source = index_source(low, indices)
    tokens = indices.index.numel()
    gather = Gather(table_base, vocab, dim, source.name, indices.index - source.base,
                    tuple(indices.shape))
    out = resident(low, gather, (tokens, dim), suffix)
    return Ref(out.index.reshape(*indices.shape, dim))
