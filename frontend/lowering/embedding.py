"""Embedding: the table is resident on its own tile; on every call the rows the indices pick
move over the fabric to the embedding's output tile (the routes depend on the indices, so
the movement is planned per call; the engine does not recompile)."""

from __future__ import annotations

import torch

from frontend.lowering.common import gather_rows, index_source, resident
from frontend.lowering.core import rule
from frontend.values import Const, Ref

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
