"""Values written at indices along one dimension, `base.scatter(d, index, value)` (DeepSeek-V3's
router marks the groups it keeps, `group_mask.scatter_(1, group_idx, 1)`):

    out[..., index[..., j, ...], ...] = value   (j < k, the index's size along d)

Every write is the same number, so indices that repeat write it once (no order to resolve).
A position is written where any of its row's indices names it:

    hot[r, j, c] = (index[r, j] - c == 0)       (R k, W): a subtraction, an `eq` mask
    hit[r, c]    = max over j of hot[r, j, c]   a row reduction over the k indices
    out          = where(hit, value, base)      a select

(R the positions of the other dimensions, W = base.shape[d].) `base.scatter(d, index, src)`
(Llama 4's router: its top-k logits written into -inf) writes src[r, j] where index[r, j]
names the position: a ranking's indices along a row are distinct, so that is one element,

    out = where(hit, max over j of where(hot[r, j, c], src[r, j], -inf), base)

(exact: infinities, NaN and signed zeros pass a max with -inf unchanged). These rules take
the indices of a ranking, topk / sort / argmax / max / min over W elements, in range by
construction; an integer
input's class indices make a one-hot target (`losses.scatter_value`), and other computed
indices are refused there, since one outside [0, W) would write nothing where eager raises.
"""

from __future__ import annotations

import math

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


def _positions(low, base, dim, index, what: str):
    """(shape, d, the one-hot of every index (rows W, k), per position and index j, and the
    bool mask of the positions written, of `shape`) for a scatter by a ranking's index."""
    shape = tuple(shape_of(base))
    if not isinstance(index, Ref):
        raise low.unsupported(f"{what} by a runtime index (other operands are not supported)")
    d = dim % len(shape)
    ishape = tuple(index.shape)
    if ishape[:d] + ishape[d + 1:] != shape[:d] + shape[d + 1:]:
        raise low.unsupported(f"scatter by an index of shape {ishape} into {shape}: the "
                              f"shapes must agree beyond dimension {d}")
    width, k = shape[d], ishape[d]
    moved = index.index.movedim(d, -1)  # (*rest, k)
    rows = moved.numel() // max(k, 1)
    hot = one_hot(low, moved.reshape(-1), width)  # (rows k, width)
    per_position = hot.index.reshape(rows, k, width).permute(0, 2, 1).reshape(rows * width, k)
    hit = reduce_rows(low, per_position, "max")  # (rows width,): 1 where written
    mask = Ref(hit.index.reshape(*moved.shape[:-1], width).movedim(-1, d), torch.bool)
    return shape, d, per_position, mask


def _onto(low, node, base, mask: Ref, scalars: dict, values: dict, shape) -> Ref:
    """where(mask, the written values, base): a base of one number as an immediate."""
    if isinstance(base, Const) and bool((base.value == base.value.reshape(-1)[0]).all()):
        scalars["b"] = float(base.value.reshape(-1)[0])  # new_zeros(...): one number
    else:
        values["b"] = constant(low, base, "_base") if isinstance(base, Const) else base
    return Ref(select(low, mask, values, scalars, shape).index, node.meta["val"].dtype)


@rule(aten.scatter.value, case=_by_ranking)
def scatter_by_ranking(low, node, base, dim, index, value):
    if not isinstance(value, (int, float)):
        raise low.unsupported("scatter of a number into a tensor by a runtime index (other "
                              "operands are not supported)")
    shape, _, _, mask = _positions(low, base, dim, index, "scatter of a number")
    return _onto(low, node, base, mask, {"a": float(value)}, {}, shape)


@rule(aten.scatter.src, case=_by_ranking)
def scatter_src_by_ranking(low, node, base, dim, index, src):
    """out[..., index[..., j, ...], ...] = src[..., j, ...]: a ranking's indices along a row
    are distinct, so each written position takes the one src element whose index names
    it, picked as the max of where(names it, src, -inf) over the row's k indices (exact,
    infinities, NaN and signed zeros included; Llama 4's router writes its top-k logits
    into -inf so)."""
    if not isinstance(src, (Ref, Const)):
        raise low.unsupported(f"scatter of a {type(src).__name__} by a runtime index")
    shape, d, per_position, mask = _positions(low, base, dim, index, "scatter of a tensor")
    ishape = tuple(index.shape)
    if isinstance(src, Const):
        src = constant(low, src, "_src")
    if any(a < b for a, b in zip(src.shape, ishape)) or len(src.shape) != len(ishape):
        raise low.unsupported(f"scatter of a source of shape {tuple(src.shape)} by an index "
                              f"of shape {ishape} (at least as large in every dimension)")
    used = src.index[tuple(slice(0, n) for n in ishape)].movedim(d, -1)  # (*rest, k)
    width, k = shape[d], ishape[d]
    rows = used.numel() // max(k, 1)
    each = Ref(used.reshape(rows, 1, k).expand(rows, width, k).reshape(rows * width, k))
    picked = select(low, Ref(per_position, torch.bool), {"a": each}, {"b": -math.inf},
                    (rows * width, k))
    value = reduce_rows(low, picked.index, "max")  # (rows width,)
    moved_shape = tuple(used.shape[:-1]) + (width,)
    written = Ref(value.index.reshape(moved_shape).movedim(-1, d))
    return _onto(low, node, base, mask, {}, {"a": written}, shape)
