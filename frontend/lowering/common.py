"""Helpers shared by the lowering rules: shapes of values, scalar arguments, and the
stages that rules of several families build on (elementwise maps, row reductions, GEMMs,
resident tiles, the static scatter-add, gathers of rows by runtime indices) with the index
maps they take (pooling windows).

Rule files import these from here and the mechanism from `core`; a rule file imports
another only for what that family defines: a rule it builds on (`norms.layer_norm`), or a
symbolic value (`backward.Compare`).
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from fabric.config import FabricConfig
from fabric.kernels import (
    build_affine,
    build_elementwise,
    build_gemm_summa,
    build_gemv,
    build_map,
    build_resident,
    build_rowdot,
    build_rowreduce,
    gelu_cycles,
    split,
    unary_cycles,
)
from frontend.lowering.core import Unavailable
from frontend.stages import Limits
from frontend.tile_shapes import SUMMA_BANK_AWARE
from frontend.values import Const, Gather, Ref, Symbolic

# Single-PE cycles per element of each kernel (fp32, on one WSE-2 PE, from the kernels' cycle
# models, rounded up): a stage's work, which sizes its tile against the others'.
_WSE2_PE = FabricConfig.small(1, 1)
_E = 1000  # elements: even, so that widths of 2 divide it


def cycles_per_element(cycles_of) -> int:
    """Single-PE cycles per element of a kernel on a WSE-2 PE, rounded up, from its cycle
    function cycles_of(config, e): what sizes its tile."""
    return math.ceil(cycles_of(_WSE2_PE, _E) / _E)


CYCLES_PER_ELEMENT = {
    "map": 1, "elementwise": 1, "affine": 2, "clamp": 2, "softmax": 19, "layernorm": 6,
    "gelu": cycles_per_element(lambda cfg, e: gelu_cycles(cfg, e, "tanh")),
    "gelu_erf": cycles_per_element(lambda cfg, e: gelu_cycles(cfg, e, "none")),
    **{fn: cycles_per_element(lambda cfg, e, fn=fn: unary_cycles(cfg, fn, e))
       for fn in ("tanh", "erf", "sin", "cos", "exp", "expm1", "log", "log1p", "reciprocal",
                  "sigmoid", "rsqrt", "sqrt", "abs", "itof", "signbit", "trunc", "floor",
                  "round", "tan", "atan", "asin", "acos", "sinh", "cosh", "exp2")},
}


# ---- shapes --------------------------------------------------------------------------------
def as2d(shape) -> tuple[int, int]:
    """(rows, cols) of a tensor seen as a matrix: the last dimension as columns."""
    shape = tuple(shape)
    if not shape:
        return 1, 1
    return max(1, math.prod(shape[:-1])), shape[-1]


def out_shape(node) -> tuple[int, ...]:
    """The shape of `node`'s output as traced (its first output for a multi-output op)."""
    val = node.meta["val"]
    if isinstance(val, (tuple, list)):
        val = val[0]
    return tuple(val.shape)


def relayout(value, fn, low=None):
    """Apply a layout function (view, permute, expand, ...) to a Const's tensor or a Ref's
    index map. With `low`, a Symbolic value that has a runtime form (a comparison,
    `Lowering.materialized`) is computed first, so `(x > 0).t()` is a mask's layout."""
    if low is not None:
        value = low.materialized(value)
    if isinstance(value, Const):
        return Const(fn(value.value))
    if isinstance(value, Ref):
        return Ref(fn(value.index), value.dtype)
    if isinstance(value, Symbolic):
        # a value rules only consume (max_pool1d's indices through a squeeze): an error
        # naming the node where it is used (or output)
        return Unavailable(f"{value.what} after a layout op")
    raise TypeError(f"cannot relayout {type(value).__name__}")


def expand_to(value, shape):
    """A Const or Ref broadcast to `shape` (materialized as a full index map / tensor)."""
    return relayout(value, lambda t: t.expand(shape).contiguous())


def shape_of(value) -> tuple[int, ...]:
    """The shape of a Const's tensor or a Ref's index map."""
    if isinstance(value, Const):
        return tuple(value.value.shape)
    return tuple(value.shape)


# ---- scalar arguments ----------------------------------------------------------------------
def scalar(v) -> bool:
    """True for one number: a Python number or a 0-d Const (shape ()); a Const of shape (1,)
    is a tensor, broadcast like one."""
    return isinstance(v, numbers.Number) or (isinstance(v, Const) and v.value.numel() == 1
                                             and v.value.dim() == 0)


def num(v) -> float:
    """The value of a `scalar` argument (a number or a 0-d Const) as a float."""
    return float(v.value) if isinstance(v, Const) else float(v)


def pair(v, default=None) -> tuple[int, int]:
    """A 2D window argument (kernel size, stride, padding, dilation) as (h, w): n -> (n, n),
    [n] -> (n, n), [h, w] -> (h, w); None or [] -> `default` (ATen's empty stride means the
    kernel size)."""
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return v, v
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def triple(v, default=None) -> tuple[int, int, int]:
    """A 3D window argument as (d, h, w), as `pair` does in 2D."""
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return v, v, v
    return (v[0],) * 3 if len(v) == 1 else (v[0], v[1], v[2])


# ---- elementwise stages --------------------------------------------------------------------
def column_blocks(low, values, shape: tuple[int, int]) -> list[tuple[int, int]] | None:
    """(first column, width) of each block when one of `values` (Consts or Refs of the
    matrix `shape`, (m, n)) is the outputs of two or more stages side by side, each whole
    (m, width) and in its own order: a GEMM cut into column blocks (`gemm`). None otherwise.

    An elementwise op over such a value runs as one stage per block, each reading one
    block's producer whole, so that it can ride below that producer on its tile shape
    (`frontend.companions`): one translation per block instead of a relayout of every
    block into one tile (Mixtral's expert weights looked up by a one-hot product in 4
    blocks of 1 x 21 PEs, then a 1 x 20 add: 8,759 cycles to move 3,280 words per PE)."""
    m, n = shape
    for value in values:
        if not isinstance(value, Ref):
            continue
        index, blocks, owners, j = value.index.reshape(m, n), [], set(), 0
        while j < n and (gid := int(index[0, j])) >= 0:
            t = low.owner(gid)  # a broadcast block repeats its owner: not side by side
            width = t.numel // m
            if t.kind != "stage" or t.name in owners or t.numel % m or j + width > n \
                    or not t.in_order(index[:, j:j + width]):
                break
            blocks.append((j, width))
            owners.add(t.name)
            j += width
        if j == n and len(blocks) > 1:
            return blocks
    return None


def per_column_block(low, values, shape, one) -> Ref | None:
    """An elementwise op over `values` (Consts or Refs of `shape`) as one stage per column
    block (`column_blocks` of the matrix as2d(shape)): `one(*blocks, (m, width))` makes a
    block's stage from the values' columns of that block; the blocks' Refs side by side,
    as a Ref of `shape`. None when no value is side-by-side stages' outputs."""
    m, n = as2d(shape)
    blocks = column_blocks(low, values, (m, n))
    if blocks is None:
        return None
    refs = [one(*[relayout(v, lambda t, j0=j0, w=w: t.reshape(m, n)[:, j0:j0 + w])
                  for v in values], (m, w)) for j0, w in blocks]
    return Ref(torch.cat([r.index for r in refs], dim=1).reshape(shape))


def map_(low, x: Ref, op: str, value: float, shape) -> Ref:
    """x op value elementwise (`build_map`: "add", "mul", "relu", ...) for a Ref x of
    `shape` (an expanded index map too: the data movement copies its repeated elements),
    computed as the matrix as2d(shape); a Ref of `shape`. (`map_`: `map` is a builtin.)
    One stage per block where x is side-by-side stages' outputs (`column_blocks`)."""
    return one_operand_stage(
        low, "map", x, shape, f"_{op}",
        lambda m, n: lambda cfg, rect, **fmt: build_map(cfg, rect, m, n, op, value, **fmt))


def negated(low, x, shape=None) -> Ref:
    """-x elementwise, exact (a `map_` by -1), of `shape` (default x's); a comparison is
    negated as its 0/1 mask."""
    x = low.materialized(x)
    return map_(low, x, "mul", -1.0, tuple(x.shape) if shape is None else shape)


def one_operand_stage(low, kind: str, x: Ref, shape, suffix: str, make) -> Ref:
    """A stage of `kind` (an elementwise kernel of one input "x" and output, two words per
    element) over a Ref x of `shape` (`blockwise_stage`)."""
    return blockwise_stage(low, kind, {"x": x}, shape, suffix, make,
                           CYCLES_PER_ELEMENT[kind], 2)


def blockwise_stage(low, kind: str, operands: dict, shape, suffix: str, make,
                    per_element: int, words_per_element: int) -> Ref:
    """A stage of `kind`, an elementwise kernel of the named inputs `operands` (Refs or
    Consts of `shape`, in the kernel's block layout), over `shape` seen as the matrix as2d(shape) =
    (m, n): make(m, n) gives its `build(cfg, rect, **fmt)`, per_element its single-PE
    cycles per element. One stage per block where an operand is side-by-side stages'
    outputs (`column_blocks`). A Ref of `shape`."""
    names = list(operands)

    def one(*blocks):
        return blockwise_stage(low, kind, dict(zip(names, blocks[:-1])), blocks[-1], suffix,
                               make, per_element, words_per_element)

    split = per_column_block(low, list(operands.values()), shape, one)
    if split is not None:
        return split
    m, n = as2d(shape)
    ref = low.stage(kind, (m, n), make(m, n),
                    [low.operand(name, v, (m, n)) for name, v in operands.items()],
                    m * n * per_element, Limits(m, n), words_per_element=words_per_element,
                    suffix=suffix)
    return Ref(ref.index.reshape(shape))


def binary(low, x, y, op: str, shape) -> Ref:
    """x op y elementwise (`build_elementwise`: "add", "sub", "mul", ...) for Consts or Refs
    x and y that broadcast to `shape` (PyTorch's rules; each is expanded to it first),
    computed as the matrix as2d(shape); a Ref of `shape`. One stage per block where x or y
    is side-by-side stages' outputs (`column_blocks`)."""
    m, n = as2d(shape)
    x, y = (expand_to(low.materialized(v), shape) for v in (x, y))
    split = per_column_block(low, [x, y], shape,
                             lambda xb, yb, s: binary(low, xb, yb, op, s))
    if split is not None:
        return split
    ref = low.stage("elementwise", (m, n),
                    lambda cfg, rect, **fmt: build_elementwise(cfg, rect, m, n, op, **fmt),
                    [low.operand("x", x, (m, n)), low.operand("y", y, (m, n))],
                    m * n * CYCLES_PER_ELEMENT["elementwise"], Limits(m, n), suffix=f"_{op}")
    return Ref(ref.index.reshape(shape))


def affine(low, x, scale, shift, shape) -> Ref:
    """x * scale + shift elementwise as one stage (`build_affine`: the product rounded, then
    the sum, as a mul and an add run apart) for a Ref x and Consts or Refs scale and shift
    that broadcast to `shape` (an eval batch norm's per-channel scale and shift, a group
    norm's weight and bias), computed as the matrix as2d(shape); a Ref of `shape`.
    Constants that repeat along every row (one value per row: a channel's over an NCHW
    tensor) or down every column are held once per row or column of a PE's block, not per
    element. One stage per block where an operand is side-by-side stages' outputs
    (`column_blocks`)."""
    m, n = as2d(shape)
    x, scale, shift = (expand_to(v, shape) for v in (x, scale, shift))
    split = per_column_block(low, [x, scale, shift], shape,
                             lambda xb, sb, tb, s: affine(low, xb, sb, tb, s))
    if split is not None:
        return split
    vector, (s, t) = _affine_vectors(scale, shift, (m, n))
    ref = low.stage("affine", (m, n),
                    lambda cfg, rect, **fmt: build_affine(cfg, rect, m, n, vector, **fmt),
                    [low.operand("x", x, (m, n)), low.operand("s", s, shape_of(s)),
                     low.operand("t", t, shape_of(t))],
                    m * n * CYCLES_PER_ELEMENT["affine"], Limits(m, n),
                    words_per_element=4 if vector == "full" else 2, suffix="_affine")
    return Ref(ref.index.reshape(shape))


def _affine_vectors(scale, shift, shape):
    """(`build_affine`'s vector, (s, t)): "col" with one value per row of the (m, n) matrix
    where both are constants equal along each row, "row" with one per column where equal
    down each column, else "full" with both as (m, n) matrices."""
    m, n = shape
    s, t = (relayout(v, lambda a: a.reshape(m, n)) for v in (scale, shift))
    if isinstance(s, Const) and isinstance(t, Const):
        a, b = s.value, t.value
        if bool((a == a[:, :1]).all() and (b == b[:, :1]).all()):
            return "col", (Const(a[:, 0].contiguous()), Const(b[:, 0].contiguous()))
        if bool((a == a[:1]).all() and (b == b[:1]).all()):
            return "row", (Const(a[0].contiguous()), Const(b[0].contiguous()))
    return "full", (s, t)


# ---- row reductions, pooling windows, the static scatter-add -------------------------------
def reduce_rows(low, rows: torch.Tensor, op: str, scale: float = 1.0) -> Ref:
    """op ("sum" | "max" | "prod" | "mean", the sum times `scale`) of every row of the
    index map `rows` (m, r) of global ids (-1 reads as zero), on a column of PEs
    (`build_rowreduce`); a Ref of shape (m,)."""
    m, r = rows.shape
    return low.stage("rowreduce", (m,),
                     lambda cfg, rect, **fmt: build_rowreduce(cfg, rect, m, r, op, scale, **fmt),
                     [low.operand("x", Ref(rows), (m, r))], m * r,
                     Limits(m, 1, cols_fixed=1), words_per_element=r + 1, suffix=f"_{op}")


def reduce(low, node, x: Ref, dims, keepdim, op: str) -> Ref:
    """op ("sum" | "mean" | "max" | "prod") of x over `dims` (None or empty: every dimension) as one
    `reduce_rows`: x's kept dimensions are the rows, its reduced ones the r = prod(their
    sizes) columns of a row; a Ref of `node`'s output shape (which has `keepdim`'s ones).
    A comparison (`(x > 0).sum(1)`, a count) is reduced as its 0/1 mask."""
    x = low.materialized(x)
    nd = len(x.shape)
    dims = sorted({d % nd for d in (dims or range(nd))}) if nd else []
    kept = [d for d in range(nd) if d not in dims]
    moved = x.index.permute(kept + dims) if nd else x.index.reshape(1)
    r = math.prod(x.shape[d] for d in dims) if dims else 1
    rows = moved.reshape(-1, r)
    out = reduce_rows(low, rows, op, 1.0 / r)
    return Ref(out.index.reshape(out_shape(node)))


def weighted_rows(low, rows, weights, bias=None) -> Ref:
    """Weighted sums of rows (`build_rowdot`): out[i] = bias[i] + sum_j rows[i, j] *
    weights[i, j], for Consts or Refs rows and weights of shape (m, r) (a Ref's -1 reads as
    zero) and an optional bias of shape (m,); the rows split over a whole P x Q tile, the
    products and sums in fp32 (16-bit storage rounds once, at the end); a Ref of shape
    (m,). Its work is the m r multiply-adds."""
    m, r = shape_of(rows)
    has_bias = bias is not None
    operands = [low.operand("x", rows, (m, r)), low.operand("w", weights, (m, r))]
    if has_bias:
        operands.append(low.operand("b", bias, (m,)))
    return low.stage("rowdot", (m,),
                     lambda cfg, rect, **fmt: build_rowdot(cfg, rect, m, r, has_bias, **fmt),
                     operands, m * r, Limits(m, m), fmas=m * r,
                     words_per_element=3 * r + 2, suffix="_rowdot")


def windows(index: torch.Tensor, kernel, stride, padding, dilation,
            out_hw=None) -> torch.Tensor:
    """(N, C, H, W) index map -> (N, C, OH, OW, kh * kw) windows; padding holds -1 (zero).
    out_hw: the output's (OH, OW) when given: windows that reach past the padded input's far
    edge (ceil_mode's last ones) read -1 there too, and the result has exactly OH x OW."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    extra_h = extra_w = 0
    if out_hw is not None:  # far-side padding so that OH x OW windows exist
        extra_h = max(0, (out_hw[0] - 1) * sh + span_h - (index.shape[2] + 2 * ph))
        extra_w = max(0, (out_hw[1] - 1) * sw + span_w - (index.shape[3] + 2 * pw))
    padded = F.pad(index, (pw, pw + extra_w, ph, ph + extra_h), value=-1)
    win = padded.unfold(2, span_h, sh).unfold(3, span_w, sw)[..., ::dh, ::dw]
    if out_hw is not None:
        win = win[:, :, :out_hw[0], :out_hw[1]]
    return win.reshape(*win.shape[:4], kh * kw)


def windows3d(index: torch.Tensor, kernel, stride, padding, dilation,
              out_dhw=None) -> torch.Tensor:
    """(N, C, D, H, W) index map -> (N, C, OD, OH, OW, kd kh kw) windows, as `windows` in
    three dimensions; padding (and, with `out_dhw`, ceil_mode's far side) holds -1."""
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    extra = [0, 0, 0]
    if out_dhw is not None:
        extra = [max(0, (o - 1) * s + span - (n + 2 * p)) for o, s, span, n, p
                 in zip(out_dhw, stride, spans, index.shape[2:], padding)]
    pads = [side for p, e in reversed(list(zip(padding, extra))) for side in (p, p + e)]
    win = F.pad(index, pads, value=-1)
    for dim, (span, s) in enumerate(zip(spans, stride)):
        win = win.unfold(2 + dim, span, s)
    win = win[..., ::dilation[0], ::dilation[1], ::dilation[2]]
    if out_dhw is not None:
        win = win[:, :, :out_dhw[0], :out_dhw[1], :out_dhw[2]]
    return win.reshape(*win.shape[:5], -1)


def positions(shape) -> torch.Tensor:
    """The flat position of every element of a tensor of `shape` (an index map of `shape`
    holding 0 .. numel - 1 in C order)."""
    return torch.arange(math.prod(shape)).reshape(shape)


def scatter_add(low, contrib: torch.Tensor, target: torch.Tensor, numel: int,
                scale: float = 1.0) -> Ref:
    """Sums of contributions into positions known at compile time (the backward of pooling
    and im2col, the gradient of a position embedding):

        out[p] = scale * sum of contrib[i] over target[i] == p

    contrib: global ids (any shape, -1 = zero); target: positions in [0, numel) or -1
    (dropped), same shape. Returns a Ref of shape (numel,): a layout (times `scale` by a
    `map_`) when every position gets at most one contribution, else a `reduce_rows` of
    (numel, most contributions) rows, each position's contributions padded with zeros
    (`scatter_rows`)."""
    rows = scatter_rows(contrib, target, numel)
    if rows.shape[1] <= 1:  # a layout (and a scale)
        out = Ref(rows[:, 0])
        return map_(low, out, "mul", scale, (numel,)) if scale != 1.0 else out
    if scale != 1.0:  # "mean" is the sum times `scale`
        return reduce_rows(low, rows, "mean", scale)
    return reduce_rows(low, rows, "sum")


def scatter_rows(contrib: torch.Tensor, target: torch.Tensor, numel: int) -> torch.Tensor:
    """The rows `scatter_add` sums: (numel, w) global ids, row p holding the contributions
    to position p in their order in `contrib` (w the most any position gets, at least 1),
    padded with -1 (zero). contrib, target: as `scatter_add`'s."""
    contrib, target = contrib.reshape(-1), target.reshape(-1)
    keep = (target >= 0) & (contrib >= 0)
    contrib, target = contrib[keep], target[keep]
    counts = torch.bincount(target, minlength=numel) if target.numel() else \
        torch.zeros(numel, dtype=torch.int64)
    width = int(counts.max()) if numel else 0
    rows = torch.full((numel, max(1, width)), -1, dtype=torch.int64)
    order = torch.argsort(target, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(target.numel()) - starts[target[order]]
    rows[target[order], slot] = contrib[order]
    return rows


# ---- matrices and resident tiles -----------------------------------------------------------
def gemm(low, a, b, suffix="", c0=None) -> Ref:
    """a @ b by SUMMA (`build_gemm_summa`) for 2D Consts or Refs a (m, k) and b (k, n); with
    `c0` (a Const or Ref that broadcasts to (m, n), e.g. a bias (n,)) c0 + a @ b, the sums
    starting from c0's elements in the kernel's accumulator (its input "C0": one stage, no
    add after it). A Ref of shape (m, n). Its work is the m k n multiply-adds.

    Where the lowering's `gemm_parts` cuts C's columns into blocks (pipelined mode,
    `frontend.gemm_split`), one stage per block (suffix "_n<i>"), each with B's and c0's
    columns of its block, and the Ref is their outputs side by side.

    A product of one row (m = 1: a classifier at batch 1, a recurrent step, a 1 x 1
    convolution at one pixel) is a matrix-vector product instead (`_gemv`): SUMMA would
    give each PE a block of one row, whose fmas of one element the main thread paces."""
    (m, k), (_, n) = shape_of(a), shape_of(b)
    if m == 1:
        return _gemv(low, a, b, suffix, c0)
    parts = low.gemm_parts(m, k, n) if low.gemm_parts is not None else 1
    if parts > 1:
        c0 = expand_to(c0, (m, n)) if c0 is not None else None
        blocks = []
        for i, (j0, width) in enumerate(split(n, parts)):
            cut = (lambda t, j0=j0, width=width: t[:, j0:j0 + width])
            blocks.append(_gemm(low, a, relayout(b, cut), f"{suffix}_n{i}",
                                None if c0 is None else relayout(c0, cut)))
        return Ref(torch.cat([blk.index for blk in blocks], dim=1))
    return _gemm(low, a, b, suffix, c0)


def _gemm(low, a, b, suffix, c0) -> Ref:
    """One SUMMA stage of a @ b (+ c0): `gemm` on one tile."""
    (m, k), (_, n) = shape_of(a), shape_of(b)
    operands = [low.operand("A", a, (m, k)), low.operand("B", b, (k, n))]
    if c0 is not None:  # an expanded index map: a bias element moves to each of its rows
        operands.append(low.operand("C0", expand_to(c0, (m, n)), (m, n)))
    with_c0 = c0 is not None
    orientation = low.gemm_orientation
    # "auto" may run C transposed, its rows over the tile's columns
    limits = Limits(m, n) if orientation == "rows" else Limits(max(m, n), max(m, n))
    return low.stage(
        "gemm_summa", (m, n),
        lambda cfg, rect, **fmt: build_gemm_summa(cfg, rect, m, k, n, with_c0=with_c0,
                                                  bank_aware=SUMMA_BANK_AWARE,
                                                  orientation=orientation, **fmt),
        operands, m * k * n, limits, fmas=m * k * n,
        words_per_element=max(3, 2 * k // max(1, min(m, n))), suffix=suffix)


def _gemv(low, a, b, suffix, c0) -> Ref:
    """a @ b (+ c0) for a of one row, (1, k) @ (k, n), as y = B^T x + c0 (`build_gemv`):
    its matrix is B transposed (n x k; a weight's transpose is folded at compile time, a
    runtime B's is a move like any relayout), its vector a's k elements, its bias c0's n
    (zeros without one: a bias of +0.0 leaves every sum as it is, and -0.0 + 0.0 is the
    only value it changes, to +0.0). The matrix's rows spread over the tile's rows and
    its columns over the tile's columns (a row reduction, one color or two); x enters on
    the tile's top row and one color multicasts it down; y ends on the tile's west
    column. On a P x Q tile a PE runs k / Q fmas of n / P elements each, which the
    datapath paces (SUMMA's blocks of one row ran one fma of one element per 12 cycles:
    20 to 30 times the cycles on the zoo's recurrent steps and classifier heads). A Ref of
    shape (1, n); its work is the k n multiply-adds."""
    (_, k), (_, n) = shape_of(a), shape_of(b)
    bias = expand_to(c0, (1, n)) if c0 is not None else Const(torch.zeros(n))
    operands = [low.operand("A", relayout(b, lambda t: t.t()), (n, k)),
                low.operand("x", a, (k,)), low.operand("b", bias, (n,))]
    y = low.stage("gemv", (n,), lambda cfg, rect, **fmt: build_gemv(cfg, rect, n, k, **fmt),
                  operands, k * n, Limits(n, k), fmas=k * n,
                  words_per_element=k + 3, suffix=suffix)
    return relayout(y, lambda t: t.reshape(1, n))


def resident(low, value, shape, suffix: str) -> Ref:
    """A tile holding `value` as an (m, n) = `shape` matrix (`build_resident`, one SRAM word
    per element): a constant, a runtime tensor written there, or a `Gather` whose elements
    move there on every call; a Ref of shape (m, n)."""
    m, n = shape
    return low.stage("resident", (m, n),
                     lambda cfg, rect, **fmt: build_resident(cfg, rect, m, n, **fmt),
                     [low.operand("x", value, (m, n))], m * n, Limits(m, n),
                     words_per_element=1, suffix=suffix)


def positive_zeros(v: torch.Tensor) -> bool:
    """Every element of v is +0 (or v is empty): words that read as zero whatever their
    kind, the index -1 with no tile (`constant`)."""
    v = v.to(torch.float32)
    return not bool((v != 0).any() or torch.signbit(v).any())


def constant(low, value: Const, suffix: str = "_const") -> Ref:
    """A compile-time constant as a runtime tensor, for the ops that mix its elements with
    runtime ones by index alone (cat with a class token, a pad value): a Ref of the value's
    shape. All +0.0 (zeros): the index -1, no stage. Otherwise its elements are held on a
    `resident` tile in the node's format (loaded with the weights, like every constant); a
    broadcast dimension (stride 0: a parameter expanded to the batch) is held once. An
    integer constant (a start token before token ids) is held as fp32 numbers, as computed
    integers are, exact below 2^24; a bool one as the 0.0 / 1.0 of a computed mask."""
    v = value.value.detach()
    if (not v.is_floating_point() and v.dtype != torch.bool and v.numel()
            and int(v.abs().max()) >= 2 ** 24):
        raise low.unsupported(f"a {v.dtype} constant among runtime tensors with values "
                              "beyond 2^24 (not exact as fp32)")
    # a broadcast dimension (stride 0) held once, its words fp32
    held = v[tuple(slice(0, 1) if st == 0 else slice(None) for st in v.stride())]
    held = held.to(torch.float32)
    if positive_zeros(held):
        return Ref(torch.full(v.shape, -1, dtype=torch.int64))
    ref = resident(low, Const(held.contiguous()), as2d(held.shape), suffix)
    return Ref(ref.index.reshape(held.shape).expand(v.shape))


# ---- per-call gathers (rows picked by runtime indices) -------------------------------------
def index_source(low, indices: Ref):
    """The user input tensor that all `indices` (a Ref of any shape) come from, so a per-call
    gather can read them there (else UnsupportedOpError)."""
    flat = indices.index.reshape(-1)
    src = low.owner(int(flat[0])) if flat.numel() and int(flat[0]) >= 0 else None
    if src is None or src.kind != "input" or bool((flat < src.base).any()) \
            or bool((flat >= src.base + src.numel).any()):
        raise low.unsupported("embedding indices computed on the fabric (they must come "
                              "from an input)")
    return src


def gather_rows(low, table_base: int, vocab: int, dim: int, indices: Ref,
                suffix: str = "") -> Ref:
    """table[indices] for a (vocab, dim) table materialized at global id `table_base` and
    indices of a user input (`index_source`): the picked rows move per call into a resident
    tile of (tokens, dim), tokens = indices.numel(); a Ref of shape (*indices.shape, dim)."""
    source = index_source(low, indices)
    tokens = indices.index.numel()
    gather = Gather(table_base, vocab, dim, source.name, indices.index - source.base,
                    tuple(indices.shape))
    out = resident(low, gather, (tokens, dim), suffix)
    return Ref(out.index.reshape(*indices.shape, dim))
