"""A value written at indices along one dimension, `base.scatter(d, index, value)` (DeepSeek-V3's
router marks the groups it keeps, `group_mask.scatter_(1, group_idx, 1)`):

    out[..., index[..., j, ...], ...] = value   (j < k, the index's size along d)

Every write is the same number, so indices that repeat write it once (no order to resolve).
A position is written where any of its row's indices names it:

    hot[r, j, c] = (index[r, j] - c == 0)       (R k, W): a subtraction, an `eq` mask
    hit[r, c]    = max over j of hot[r, j, c]   a row reduction over the k indices
    out          = where(hit, value, base)      a select

(R the positions of the other dimensions, W = base.shape[d].) This rule takes the indices
of a ranking, topk / sort / argmax over W elements, in range by construction; an integer
input's class indices make a one-hot target (`losses.scatter_value`), and other computed
indices are refused there, since one outside [0, W) would write nothing where eager raises.
"""

from __future__ import annotations

import torch

from frontend.lowering.common import constant, reduce_rows, shape_of
from frontend.lowering.core import rule
from frontend.lowering.embedding import one_hot
from frontend.lowering.masks import select
from frontend.lowering.ranking import ranked_by
from frontend.values import Const, Ref

aten = torch.ops.aten


def _by_ranking(low, node, base, dim, index, value) -> bool:
    """The index is a ranking's over as many elements as the dimension it writes
    (`ranking.ranked_by`)."""
    shape = shape_of(base) if isinstance(base, (Const, Ref)) else ()
    ranked = ranked_by(node.args[2])
    return bool(shape) and ranked is not None and ranked[1] == shape[dim % len(shape)]


@rule(aten.scatter.value, case=_by_ranking)
def scatter_by_ranking(low, node, base, dim, index, value):
    shape = tuple(shape_of(base))
    if not isinstance(index, Ref) or not isinstance(value, (int, float)):
        raise low.unsupported("scatter of a number into a tensor by a runtime index (other "
                              "operands are not supported)")
    d = dim % len(shape)
    ishape = tuple(index.shape)
    if ishape[:d] + ishape[d + 1:] != shape[:d] + shape[d + 1:]:
        raise low.unsupported(f"scatter by an index of shape {ishape} into {shape}: the "
                              f"shapes must agree beyond dimension {d}")
    width, k = shape[d], ishape[d]
    moved = index.index.movedim(d, -1)  # (*rest, k)
    rows = moved.numel() // max(k, 1)
    ids = moved.reshape(-1)
    hot = one_hot(low, ids, width)  # (rows k, width)
    per_position = hot.index.reshape(rows, k, width).permute(0, 2, 1).reshape(rows * width, k)
    hit = reduce_rows(low, per_position, "max")  # (rows width,): 1 where written
    mask = Ref(hit.index.reshape(*moved.shape[:-1], width).movedim(-1, d), torch.bool)
    scalars, values = {"a": float(value)}, {}
    if isinstance(base, Const) and bool((base.value == base.value.reshape(-1)[0]).all()):
        scalars["b"] = float(base.value.reshape(-1)[0])  # new_zeros(...): one number
    else:
        values["b"] = constant(low, base, "_base") if isinstance(base, Const) else base
    return Ref(select(low, mask, values, scalars, shape).index, node.meta["val"].dtype)
