"""Layout-only ops: they change how elements are indexed, not their values, so they act on
the index map (`Ref`) and move nothing until a kernel needs the data in its own layout."""

from __future__ import annotations

import math

import torch

from frontend.amp import FABRIC_FORMATS
from frontend.lowering.common import (
    binary,
    constant,
    map_,
    out_shape,
    positive_zeros,
    relayout,
    shape_of,
)
from frontend.lowering.core import rule
from frontend.lowering.elementwise import numbers_of_int_words
from frontend.lowering.embedding import lookup
from frontend.values import Const, Ref

aten = torch.ops.aten


@rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(low, node, x, shape):
    return relayout(x, lambda t: t.reshape(shape), low)


@rule(aten.permute.default)
def permute(low, node, x, dims):
    return relayout(x, lambda t: t.permute(dims), low)


@rule(aten.t.default)
def t(low, node, x):
    return relayout(x, lambda v: v.t(), low)


@rule(aten.transpose.int)
def transpose(low, node, x, d0, d1):
    return relayout(x, lambda t: t.transpose(d0, d1), low)


@rule(aten.expand.default)
def expand(low, node, x, shape, implicit=False):
    return relayout(x, lambda t: t.expand(shape), low)


@rule(aten.flip.default)
def flip(low, node, x, dims):
    return relayout(x, lambda t: t.flip(dims), low)


@rule(aten.repeat.default)
def repeat(low, node, x, repeats):
    """Tiled copies (torch.tile too): the index map repeated, its elements moved to every
    copy's place when a kernel reads them."""
    return relayout(x, lambda t: t.repeat(repeats), low)


@rule(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default)
def identity(low, node, x, **kwargs):
    return x


@rule(aten._to_copy.default)
def to_copy(low, node, x, dtype=None, **kwargs):
    """A cast of a runtime tensor (an index check's: `backward_embedding`). From a float
    tensor: to fp32 only (the identity). From an integer one (the traced source dtype, as
    elementwise results of integers are fp32 Refs): the identity on values a kernel
    computed (fp32 words that hold integers, exact up to 2^24), now of `dtype`; an integer
    input's int32 words stay integers (a cast to float is refused: no kernel converts
    them there). A comparison cast to an integer dtype is its 0/1 mask."""
    if dtype is not None:
        x = low.materialized(x)
    if not isinstance(x, Ref) or dtype is None:
        return x
    source = node.args[0].meta["val"].dtype
    if source.is_floating_point:
        return _float_cast(low, x, source, dtype)
    if dtype.is_floating_point and low.int_words(x):
        raise low.unsupported(f"a cast of an integer input to {dtype}")
    return Ref(x.index, dtype)


def _float_cast(low, x: Ref, source: torch.dtype, dtype: torch.dtype) -> Ref:
    """A cast between float dtypes: to fp32 the identity (a kernel of fp32 reading a 16-bit
    value widens it exactly); to a 16-bit dtype, in a node of that format (a model of
    16-bit tensors, `amp.traced_formats`, or mixed precision), a map by 1 whose kernel
    stores the rounded values (the receiving side rounds to nearest even)."""
    if dtype == torch.float32:
        return Ref(x.index, dtype)
    if FABRIC_FORMATS.get(dtype) != low.format:
        raise low.unsupported(f"a cast of a {source} tensor to {dtype} (fp32, and the 16-bit "
                              f"format the model stores: {low.format} here)")
    return Ref(map_(low, x, "mul", 1.0, tuple(x.shape)).index, dtype)


@rule(aten.slice.Tensor)
def slice_(low, node, x, dim=0, start=None, end=None, step=1):
    return relayout(x, lambda t: aten.slice.Tensor(t, dim, start, end, step), low)


@rule(aten.select.int)
def select(low, node, x, dim, index):
    return relayout(x, lambda t: t.select(dim, index), low)


@rule(aten.diagonal.default)
def diagonal(low, node, x, offset=0, dim1=0, dim2=1):
    return relayout(x, lambda t: torch.diagonal(t, offset, dim1, dim2), low)


@rule(aten.unfold.default)
def unfold(low, node, x, dim, size, step):
    """Sliding windows along `dim` (a time series' patches, `Tensor.unfold`): the windows
    replace `dim` and each window's `size` elements are a new last dimension; elements
    shared by overlapping windows are read twice from the one word."""
    return relayout(x, lambda t: t.unfold(dim, size, step), low)


@rule(aten.unsqueeze.default)
def unsqueeze(low, node, x, dim):
    return relayout(x, lambda t: t.unsqueeze(dim), low)


@rule(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def squeeze(low, node, x, dim=None):
    return relayout(x, lambda t: node.target(t) if dim is None else node.target(t, dim), low)


@rule(aten.split_with_sizes.default, aten.split.Tensor)
def split(low, node, x, sizes, dim=0):
    parts = node.target(x.value if isinstance(x, Const) else x.index, sizes, dim)
    wrap = (lambda p: Const(p)) if isinstance(x, Const) else (lambda p: Ref(p, x.dtype))
    return tuple(wrap(p) for p in parts)


@rule(aten.cat.default)
def cat(low, node, tensors, dim=0):
    """Runtime tensors and constants (a class token): each constant's elements are held on
    a resident tile (`common.constant`), so the result is an index map over runtime ones."""
    tensors = [low.materialized(v) for v in tensors]  # comparisons as their masks
    if not all(isinstance(v, (Ref, Const)) for v in tensors):
        raise low.unsupported("cat of values other than tensors and constants")
    dtype = next(v.dtype for v in tensors if isinstance(v, Ref))
    parts = [v if isinstance(v, Ref) else constant(low, v, f"_const{i}")
             for i, v in enumerate(_words_alike(low, tensors))]
    return Ref(torch.cat([v.index for v in parts], dim), dtype)


def _constant_condition(low, node, cond, a, b) -> bool:
    """where(c, a, b) with c known at compile time and a runtime branch (the other `where`s:
    `masks`, `backward`, `backward_embedding`, `losses`)."""
    return (isinstance(cond, Const) and all(isinstance(v, (Ref, Const)) for v in (a, b))
            and any(isinstance(v, Ref) for v in (a, b)))


@rule(aten.where.self, case=_constant_condition)
def where(low, node, cond, a, b):
    """A selection known at compile time is an index map: each element is a's or b's (a
    causal mask filling with a constant, GPT-Neo's attention). A constant branch of zeros
    reads as zero (index -1); another constant's elements are held on a resident tile
    (`common.constant`)."""
    shape = out_shape(node)
    keep = cond.value.to(torch.bool).expand(shape)
    dtype = next(v.dtype for v in (a, b) if isinstance(v, Ref))
    a, b = _words_alike(low, (a, b))
    return Ref(torch.where(keep, _index(low, a, shape, "_then"), _index(low, b, shape, "_else")),
               dtype)


def _words_alike(low, values) -> list:
    """`values` (Refs and Consts) about to be joined into one tensor by index, with every
    integer input's elements among them as fp32 numbers (`numbers_of_int_words`, exact
    below 2^24) where fp32 words would sit beside their int32 words: a constant other than
    zeros (held as fp32 numbers) or a computed value (BART's decoder tokens, the input's
    ids shifted right beside the start token). Zeros read alike either way."""
    values = list(values)

    def kind(v):  # True: int32 words, False: fp32 words, None: zeros only
        if isinstance(v, Const):
            return None if positive_zeros(v.value) else False
        return low.int_words(v) if bool((v.index >= 0).any()) else None

    kinds = [kind(v) for v in values]
    if True not in kinds or False not in kinds:
        return values
    return [numbers_of_int_words(low, v) if k else v for v, k in zip(values, kinds)]


def _index(low, v, shape, suffix: str) -> torch.Tensor:
    """The index map of a Ref or Const `v` broadcast to `shape`: a Ref's own; a constant's
    (`common.constant`: +0s read as zero, index -1; other elements held on a resident tile,
    integers as exact fp32 numbers or refused)."""
    if isinstance(v, Ref):
        return v.index.expand(shape)
    return constant(low, Const(v.value.expand(shape)), suffix).index


def _scatter_case(low, node, x, src, *args) -> bool:
    """slice_scatter and copy with a runtime tensor among their two."""
    return (all(isinstance(v, (Ref, Const)) for v in (x, src))
            and any(isinstance(v, Ref) for v in (x, src)))


@rule(aten.slice_scatter.default, case=_scatter_case)
def slice_scatter(low, node, x, src, *args):
    """x with a slice along a dimension replaced by src (an assignment into a slice,
    functionalized: Funnel's attention shift): an index map, both as indices."""
    base, part = shape_of(x), shape_of(src)
    x, src = _words_alike(low, (x, src))
    index = node.target(_index(low, x, base, "_base"), _index(low, src, part, "_src"), *args)
    return Ref(index, next(v.dtype for v in (x, src) if isinstance(v, Ref)))


@rule(aten.copy.default, case=_scatter_case)
def copy(low, node, x, src, non_blocking=False):
    """x's shape filled with src, broadcast (an assignment x[...] = src functionalized:
    BART's shift of the decoder's tokens); src's values in x's dtype, refused where that
    changes them (a float src into an integer x)."""
    dtype = node.meta["val"].dtype
    src_dtype = src.dtype if isinstance(src, Ref) else src.value.dtype
    if src_dtype.is_floating_point and not dtype.is_floating_point:
        raise low.unsupported(f"a copy of a {src_dtype} tensor into a {dtype} one")
    return Ref(_index(low, src, shape_of(x), "_src").contiguous(), dtype)


@rule(aten.constant_pad_nd.default)
def constant_pad_nd(low, node, x, pad, value=0.0):
    """Padding (or cropping, pad < 0) by a value: zeros are the index -1; another value is
    one element held on a resident tile that every padding position indexes."""
    fill = -1
    if any(p > 0 for p in pad) and (value != 0 or math.copysign(1.0, value) < 0):
        x = _words_alike(low, (x, Const(torch.tensor(float(value)))))[0]
        fill = int(constant(low, Const(torch.tensor(float(value))), "_value").index)
    return Ref(aten.constant_pad_nd.default(x.index, list(pad), fill), x.dtype)


@rule(aten.index.Tensor, aten._unsafe_index.Tensor)
def index(low, node, x, indices):
    """Advanced indexing. By compile-time indices (reflection and replication padding
    decompose to it): a re-indexing. By one runtime index tensor (the other entries None):
    a lookup along that dimension (`take_along`)."""
    runtime = [k for k, i in enumerate(indices) if i is not None and not isinstance(i, Const)]
    if runtime:
        if len(runtime) > 1:
            raise low.unsupported("indexing by two runtime index tensors (one runtime index "
                                  "tensor, beside constant ones and ':', runs)")
        if any(i is not None for k, i in enumerate(indices) if k != runtime[0]):
            return take_by_mixed(low, node, x, indices)
        return take_along(low, node, x, runtime[0], indices[runtime[0]])
    if not isinstance(x, Ref):
        raise low.unsupported(f"indexing {type(x).__name__}")
    picks = [None if i is None else i.value for i in indices]
    return Ref(node.target(x.index, picks), x.dtype)


def take_by_mixed(low, node, x, indices) -> Ref:
    """x[..., a, r, ...] by adjacent index tensors, one computed at run time (r) and the
    others constants (CLIP's pooled token, x[arange(B), ids.argmax(-1)]): the indexed
    dimensions flattened to one, r times its stride there plus the constants' offsets (a
    map and an add on the fabric) picks along it (`take_along`: a one-hot product, an
    index outside its dimension giving a row of -inf)."""
    shape = shape_of(x)
    ks = [k for k, i in enumerate(indices) if i is not None]
    k0, k1 = ks[0], ks[-1]
    if ks != list(range(k0, k1 + 1)):
        raise low.unsupported("index tensors separated by ':' beside a runtime one (adjacent "
                              "ones run)")
    sizes = shape[k0:k1 + 1]
    strides = [math.prod(sizes[j + 1:]) for j in range(len(sizes))]
    picks = torch.broadcast_shapes(*(shape_of(indices[k]) for k in ks))
    offset = torch.zeros(picks, dtype=torch.int64)
    for j, k in enumerate(ks):
        i = indices[k]
        if isinstance(i, Ref):
            runtime, stride = Ref(i.index.expand(picks), i.dtype), strides[j]
            continue
        v = i.value
        if v.dtype == torch.bool or bool((v < -sizes[j]).any()) or bool((v >= sizes[j]).any()):
            raise low.unsupported(f"a constant index of dtype {v.dtype} or outside "
                                  f"[-{sizes[j]}, {sizes[j]}) beside a runtime one")
        offset = offset + (v.to(torch.int64) % sizes[j]).expand(picks) * strides[j]
    if low.int_words(runtime):  # an integer input's words: numbers to compute with
        runtime = numbers_of_int_words(low, runtime)
    flat = runtime if stride == 1 else map_(low, runtime, "mul", float(stride), picks)
    if bool(offset.any()):
        flat = binary(low, flat, Const(offset.to(torch.float32)), "add", picks)
    table = relayout(x, lambda t: t.reshape(*shape[:k0], math.prod(sizes), *shape[k1 + 1:]))
    return take_along(low, node, table, k0, Ref(flat.index, torch.int64))


@rule(aten.index_select.default)
def index_select(low, node, x, dim, index):
    """x's slices along `dim` picked by a runtime index vector (`take_along`); by a
    constant one, a re-indexing."""
    if not shape_of(x):
        raise low.unsupported("index_select of a 0-d tensor")
    d = dim % len(shape_of(x))
    if isinstance(index, Const):
        return relayout(x, lambda t: t.index_select(d, index.value.to(torch.int64)), low)
    return take_along(low, node, x, d, index)


def take_along(low, node, x, dim: int, index) -> Ref:
    """x[:, ..., index, ...] at dimension `dim` for a runtime index tensor of shape S: x
    seen as a (size(dim), D) table of its slices, `embedding.lookup` picks rows (a
    per-call gather for an integer input's indices, which checks their range; a one-hot
    product for computed ones), and the result is laid out as PyTorch's:
    x.shape[:dim] + S + x.shape[dim + 1:]."""
    if not isinstance(index, Ref) or not isinstance(x, (Ref, Const)):
        raise low.unsupported(f"indexing {type(x).__name__} by {type(index).__name__}")
    shape = shape_of(x)
    table = relayout(x, lambda t: t.movedim(dim, 0).reshape(shape[dim], -1))
    rest = shape[:dim] + shape[dim + 1:]
    rows = lookup(low, table, shape[dim], math.prod(rest), index)  # (*S, D)
    s = len(index.shape)
    out = rows.index.reshape(*index.shape, *rest)
    # (*S, *pre, *post) -> (*pre, *S, *post)
    order = list(range(s, s + dim)) + list(range(s)) + list(range(s + dim, s + len(rest)))
    return Ref(out.permute(order), node.meta["val"].dtype)


@rule(aten.as_strided.default)
def as_strided(low, node, x, size, stride, storage_offset=None):
    """A view by strides (what decompositions leave of views: adaptive pooling's reshape,
    window partitions): x's elements are placed in the storage its traced strides and
    offset describe, and the output reads that storage at `stride` from `storage_offset`
    (None: x's own). An index map when every position read holds one element of x;
    reading a position x does not hold (memory beyond the tensor) or one that holds two
    different elements is refused."""
    if not isinstance(x, Ref):
        raise low.unsupported(f"as_strided of {type(x).__name__}")
    src = node.args[0].meta["val"]
    index = x.index.expand(tuple(src.shape)).reshape(-1)
    offset = src.storage_offset() if storage_offset is None else int(storage_offset)
    # positions of x's elements in its storage: (src.shape) int64
    pos = torch.as_strided(torch.arange(_span(src.shape, src.stride(), src.storage_offset())),
                           tuple(src.shape), src.stride(), src.storage_offset())
    end = max(_span(size, stride, offset), int(pos.max()) + 1 if pos.numel() else 0)
    # per storage position, the smallest and largest id of x there (-2: none)
    pos = pos.reshape(-1)
    low_id = torch.full((end,), -2, dtype=torch.int64).scatter_reduce(
        0, pos, index, "amin", include_self=False)
    high_id = torch.full((end,), -2, dtype=torch.int64).scatter_reduce(
        0, pos, index, "amax", include_self=False)
    storage, clash = low_id, low_id != high_id
    out_pos = torch.as_strided(torch.arange(end), tuple(size), tuple(stride), offset)
    if bool((storage[out_pos] == -2).any()):
        raise low.unsupported(f"as_strided(size={list(size)}, stride={list(stride)}, "
                              f"offset={offset}) reading memory its input of shape "
                              f"{tuple(src.shape)} and strides {src.stride()} does not hold")
    if bool(clash[out_pos].any()):
        raise low.unsupported("as_strided reading a position that holds two different "
                              "elements of its input")
    return Ref(storage[out_pos], x.dtype)


def _span(size, stride, offset: int) -> int:
    """Storage length a view of `size`, `stride` from `offset` needs (its last position +
    1; `offset` for an empty view)."""
    if any(s == 0 for s in size):
        return offset
    return offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1

