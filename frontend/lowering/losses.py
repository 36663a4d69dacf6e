"""Cross-entropy and log-softmax: `F.cross_entropy(logits, target)` (integer class targets,
a runtime input) and `F.log_softmax` + `F.nll_loss`, forward and backward.

Core ATen writes the mean cross-entropy as

    logp  = _log_softmax(x, 1)
    t0    = where(t != -100, t, 0)                       (ignore_index masking)
    loss  = sum(where(t != -100, -gather(logp, 1, t0), 0)) / sum(t != -100)

and its backward as g = where(t != -100, dloss / count, 0), onehot = scatter(zeros, 1, t0,
-1.0), d = onehot * g, dx = d - exp(logp) * sum(d, 1). Every value op runs on the fabric:

- `_log_softmax` (max-subtracted, fp32): a row max, x - max, exp, a row sum, log (the
  `mathlib.log` kernel) and a subtraction, one stage each. `_log_softmax_backward_data`,
  when a graph holds it: grad - exp(out) * sum(grad).
- The integer targets are index bookkeeping planned per call, as the embedding's rows are
  (`lowering.embedding`): `where(pred, t, fill)` on targets is a `ClassIndex`; a gather by it
  moves the picked elements of the (materialized) logits to a resident tile; a scatter of a
  scalar by it, and a 0/1 mask of a target predicate, move elements of a two-element
  constant table [0, value]. Every slot of a per-call gather reads an element of its table
  (none is left to the zero id), so even a call whose targets are all ignored moves data.
- `where(pred, x, 0)` for a float x: x's elements and a zero on a resident tile, each output
  element moved per call from the one it selects (exact); the count of valid targets is the
  row sum of the 0/1 mask; a division by a runtime tensor (the count) is
  a multiplication by its reciprocal (`unary` "reciprocal", within 1 ulp of 1/y, so the
  quotient is within about 1.5 ulps of x / y).
Out-of-range targets other than the masked ones raise IndexError on the call, as torch does.
"""

from __future__ import annotations

import dataclasses

import torch

from fabric.kernels import build_unary
from frontend.lowering.backward_embedding import IndexPred
from frontend.lowering.common import (
    CYCLES_PER_ELEMENT,
    as2d,
    binary,
    expand_to,
    index_source,
    out_shape,
    reduce_rows,
    relayout,
    resident,
    shape_of,
)
from frontend.lowering.core import rule
from frontend.lowering.elementwise import mul
from frontend.lowering.masks import float_mask
from frontend.lowering.reductions import sum_, sum_all
from frontend.stages import Limits
from frontend.values import Const, Gather, Ref, Symbolic

aten = torch.ops.aten

CHECKS = {"ne": torch.ne, "eq": torch.eq, "ge": torch.ge, "gt": torch.gt, "lt": torch.lt,
          "le": torch.le}


# ---- fabric stages -----------------------------------------------------------------------
def unary(low, x: Ref, fn: str) -> Ref:
    """fn(x) elementwise on the fabric (`unary.build_unary`), fn "exp", "log", "reciprocal"."""
    m, n = as2d(x.shape)
    ref = low.stage(fn, (m, n), lambda cfg, rect, **fmt: build_unary(cfg, rect, m, n, fn, **fmt),
                    [low.operand("x", x, (m, n))], m * n * CYCLES_PER_ELEMENT[fn],
                    Limits(m, n), words_per_element=2 + (4 if fn == "log" else 2),
                    suffix=f"_{fn}")
    return Ref(ref.index.reshape(x.shape))


def reduce_dim(low, x: Ref, dim: int, op: str) -> Ref:
    """op ("max" | "sum") over dimension `dim` of x, keeping it (size 1)."""
    nd = len(x.shape)
    d = dim % nd
    kept = [i for i in range(nd) if i != d]
    rows = x.index.permute(kept + [d]).reshape(-1, x.shape[d])
    out = reduce_rows(low, rows, op)
    keep_shape = tuple(1 if i == d else s for i, s in enumerate(x.shape))
    return Ref(out.index.reshape([x.shape[i] for i in kept]).unsqueeze(d).reshape(keep_shape))


def log_softmax(low, x: Ref, dim: int) -> Ref:
    """x - max - log(sum(exp(x - max))) along `dim`, six stages."""
    shape = x.shape
    shifted = binary(low, x, expand_to(reduce_dim(low, x, dim, "max"), shape), "sub", shape)
    total = reduce_dim(low, unary(low, shifted, "exp"), dim, "sum")
    return binary(low, shifted, expand_to(unary(low, total, "log"), shape), "sub", shape)


def _check_float(low, x, what: str) -> Ref:
    if not isinstance(x, Ref) or not x.dtype.is_floating_point:
        raise low.unsupported(f"{what} of {type(x).__name__} (a runtime float tensor)")
    return x


@rule(aten._log_softmax.default)
def log_softmax_rule(low, node, x, dim, half_to_float=False):
    x = _check_float(low, x, "_log_softmax")
    if half_to_float and low.format != "f32":
        raise low.unsupported("_log_softmax with half_to_float in a 16-bit format")
    if not x.shape:
        raise low.unsupported("_log_softmax of a 0-d tensor")
    return log_softmax(low, x, dim)


@rule(aten._log_softmax_backward_data.default)
def log_softmax_backward(low, node, grad, out, dim, input_dtype=None):
    """grad - exp(out) * sum(grad, dim), out = log_softmax(x)."""
    grad = _check_float(low, grad, "_log_softmax_backward_data")
    out = _check_float(low, out, "_log_softmax_backward_data")
    shape = out.shape
    scaled = binary(low, unary(low, out, "exp"),
                    expand_to(reduce_dim(low, grad, dim, "sum"), shape), "mul", shape)
    return binary(low, grad, scaled, "sub", shape)


# ---- integer class indices, planned per call -------------------------------------------
@dataclasses.dataclass
class IndexCheck:
    """A predicate on an integer user input: every (op, scalar) check holds (negated: not)
    at the flat positions `pick` of input `name`."""

    name: str
    pick: torch.Tensor
    checks: tuple
    negated: bool = False

    @classmethod
    def of(cls, low, pred: IndexPred) -> IndexCheck:
        src = index_source(low, pred.source)
        return cls(src.name, pred.source.index - src.base, pred.checks, pred.negated)

    def expand(self, shape) -> IndexCheck:
        return dataclasses.replace(self, pick=self.pick.expand(shape))

    def holds(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        vals = read_ints(inputs, self.name, self.pick)
        ok = torch.ones(vals.shape, dtype=torch.bool)
        for op, s in self.checks:
            ok &= CHECKS[op](vals, s)
        return ~ok if self.negated else ok


def read_ints(inputs: dict[str, torch.Tensor], name: str, pick: torch.Tensor) -> torch.Tensor:
    """The integer input `name` at flat positions `pick` (int64, pick's shape)."""
    given = inputs[name]
    if given.dtype.is_floating_point or given.dtype == torch.bool:
        raise TypeError(f"class indices {name!r} must be integers, got {given.dtype}")
    return given.reshape(-1)[pick.reshape(-1)].to(torch.int64).reshape(pick.shape)


@dataclasses.dataclass
class ClassIndex(Symbolic):
    """where(check, idx, fill) on an integer input: input `name` at flat positions `pick`,
    replaced by `fill` where `check` fails (no check: the input itself)."""

    name: str
    pick: torch.Tensor
    check: IndexCheck | None = None
    fill: int = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.pick.shape)

    def relayout(self, fn) -> ClassIndex:
        check = self.check and dataclasses.replace(self.check, pick=fn(self.check.pick))
        return dataclasses.replace(self, pick=fn(self.pick), check=check)

    def values(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        vals = read_ints(inputs, self.name, self.pick)
        if self.check is None:
            return vals
        return torch.where(self.check.holds(inputs), vals, torch.tensor(self.fill))


def class_index(low, x) -> ClassIndex:
    if isinstance(x, ClassIndex):
        return x
    if isinstance(x, Ref) and not x.dtype.is_floating_point:
        src = index_source(low, x)
        return ClassIndex(src.name, x.index - src.base)
    raise low.unsupported(f"class indices of type {type(x).__name__} (an integer input)")


@dataclasses.dataclass
class PickAlong(Gather):
    """torch.gather(table, dim, idx) for a runtime ClassIndex idx: `ids` (the table's shape)
    holds the global ids of the table's elements, all in the stage tensor at `table_base`."""

    ids: torch.Tensor | None = None
    dim: int = 0
    idx: ClassIndex | None = None

    def resolve(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        idx = self.idx.values(inputs)
        size = self.ids.shape[self.dim]
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= size):
            raise IndexError(f"class index out of range [0, {size}) in input "
                             f"{self.idx.name!r}: min {int(idx.min())}, max {int(idx.max())}")
        return torch.gather(self.ids, self.dim, idx).reshape(-1)


@dataclasses.dataclass
class TwoValued(Gather):
    """Per element, the first (0) or the second (1) element of a two-element constant table
    at `table_base`, as `choice(inputs)` (0/1, the gather's shape) says."""

    def choice(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def resolve(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return (self.table_base + self.choice(inputs).to(torch.int64)).reshape(-1)


@dataclasses.dataclass
class CheckMask(TwoValued):
    """1 where a target predicate holds, else 0."""

    check: IndexCheck | None = None

    def choice(self, inputs):
        return self.check.holds(inputs)


@dataclasses.dataclass
class OneHot(TwoValued):
    """1 at the positions scatter(zeros, dim, idx, 1) sets, else 0."""

    idx: ClassIndex | None = None
    dim: int = 0

    def choice(self, inputs):
        picked = self.idx.values(inputs)
        size = self.idx_shape[self.dim]
        if picked.numel() and (int(picked.min()) < 0 or int(picked.max()) >= size):
            raise IndexError(f"class index out of range [0, {size}) in input "
                             f"{self.idx.name!r}: min {int(picked.min())}, "
                             f"max {int(picked.max())}")
        return torch.zeros(self.idx_shape, dtype=torch.int64).scatter_(self.dim, picked, 1)


def _materialize(low, gather: Gather, shape, suffix: str) -> Ref:
    """A resident tile receiving a per-call gather of `shape`."""
    m, n = as2d(shape)
    ref = resident(low, gather, (m, n), suffix)
    return Ref(ref.index.reshape(shape))


def _two_valued(low, second: float, cls, name: str, pick, shape, suffix: str, **fields) -> Ref:
    """A (shape) tensor of 0 and `second` chosen per call by the TwoValued subclass `cls`."""
    table = resident(low, Const(torch.tensor([[0.0, float(second)]])), (1, 2), suffix + "_values")
    base = int(table.index.reshape(-1)[0])
    return _materialize(low, cls(base, 2, 1, name, pick, tuple(shape), **fields), shape, suffix)


def check_mask(low, check: IndexCheck, shape) -> Ref:
    """The 0/1 float tensor of a target predicate, on the fabric."""
    check = check.expand(shape)
    return _two_valued(low, 1.0, CheckMask, check.name, check.pick, shape, "_mask", check=check)


@dataclasses.dataclass
class Select(Gather):
    """where(check, a, 0) per call: the table at `table_base` holds a's n elements (C order)
    and then a zero; `pos` (the output's shape) is each element's position in a."""

    check: IndexCheck | None = None
    pos: torch.Tensor | None = None

    def resolve(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        zero = self.table_base + self.table_rows - 1
        return torch.where(self.check.holds(inputs), self.table_base + self.pos,
                           torch.tensor(zero)).reshape(-1)


def select(low, a: Ref, check: IndexCheck, shape) -> Ref:
    """where(check, a, 0) of `shape` (a and check broadcast to it): a's elements and a zero
    are written to a resident tile once; per call each output element moves from the
    element it selects (exact, inf and NaN included)."""
    n = a.index.numel()
    ids = torch.cat([a.index.reshape(-1), torch.tensor([-1])]).reshape(1, n + 1)
    table = resident(low, Ref(ids), (1, n + 1), "_choices")
    pos = torch.arange(n).reshape(a.shape).expand(shape)
    try:
        check = check.expand(shape)
    except RuntimeError:
        raise low.unsupported(f"where with a class-index condition of shape "
                              f"{tuple(check.pick.shape)} and a result of {shape}") from None
    gather = Select(int(table.index.reshape(-1)[0]), n + 1, 1, check.name, check.pick,
                    tuple(shape), check, pos)
    return _materialize(low, gather, shape, "_select")


def _single_table(low, x: Ref) -> tuple[Ref, int]:
    """x with all its elements in one stage tensor (materialized first if they are not):
    (the Ref, that tensor's base)."""
    flat = x.index.reshape(-1)
    if flat.numel() and int(flat.min()) >= 0:
        t = low.owner(int(flat[0]))
        if t.kind == "stage" and int(flat.max()) < t.base + t.numel and int(flat.min()) >= t.base:
            return x, t.base
    m, n = as2d(x.shape)
    table = resident(low, x, (m, n), "_table")
    return Ref(table.index.reshape(x.shape)), int(table.index.reshape(-1)[0])


# ---- rules -----------------------------------------------------------------------------------
def _zero(v) -> bool:
    return isinstance(v, Const) and bool((v.value == 0).all())


def _masked_targets(cond, a, b) -> bool:
    """where(t != ignore, t, fill) on integer targets t."""
    return (isinstance(a, Ref) and not a.dtype.is_floating_point and isinstance(b, Const)
            and b.value.numel() == 1)


def _selects_by_targets(low, node, cond, a, b) -> bool:
    """A target predicate selecting masked targets or a float tensor against 0 (the other
    `where`s: `masks`, `backward`, `backward_embedding`)."""
    return isinstance(cond, IndexPred) and (
        _masked_targets(cond, a, b)
        or (isinstance(a, Ref) and a.dtype.is_floating_point and _zero(b)))


@rule(aten.where.self, case=_selects_by_targets)
def where(low, node, cond, a, b):
    shape = out_shape(node)
    if _masked_targets(cond, a, b):
        idx = class_index(low, a)
        check = IndexCheck.of(low, cond)
        try:
            idx, check = idx.relayout(lambda p: p.expand(shape)), check.expand(shape)
        except RuntimeError:
            raise low.unsupported("where on class indices with shapes that do not "
                                  f"broadcast to {shape}") from None
        return dataclasses.replace(idx, check=check, fill=int(b.value.reshape(())))
    return select(low, a, IndexCheck.of(low, cond), shape)


@rule(aten.gather.default)
def gather(low, node, x, dim, index, sparse_grad=False):
    """torch.gather by a runtime ClassIndex (`PickAlong`), or by a constant index (cross
    entropy of targets fixed in the model): a re-indexing, its range checked here."""
    x = _check_float(low, x, "gather")
    if isinstance(index, Const):
        return _gather_constant(low, x, dim, index.value)
    if not x.shape:
        raise low.unsupported("gather of a 0-d tensor by a runtime index")
    idx = class_index(low, index)
    if len(idx.shape) != len(x.shape):
        raise low.unsupported(f"gather with an index of rank {len(idx.shape)} on a tensor of "
                              f"rank {len(x.shape)}")
    d = dim % len(x.shape)
    table, base = _single_table(low, x)
    pick = PickAlong(base, x.shape[d], 1, idx.name, idx.pick, idx.shape, table.index, d, idx)
    return _materialize(low, pick, idx.shape, "_gather")


def _gather_constant(low, x, dim: int, index: torch.Tensor):
    """x.gather(dim, index) for an index known at compile time: out[..] = x[.. index ..],
    the picked elements' ids (an index outside is refused before, by eager's run of the
    node on the example inputs); a 0-d x (dim 0 or -1, as torch allows) gives its element."""
    d = dim % max(1, len(shape_of(x)))
    return relayout(x, lambda t: t.gather(d, index.to(torch.int64)), low)


@rule(aten.scatter.value)
def scatter_value(low, node, base, dim, index, value):
    """scatter(zeros, dim, idx, value) for a runtime ClassIndex idx: `value` at the picked
    positions, 0 elsewhere (the one-hot of the targets)."""
    if not _zero(base):
        raise low.unsupported("scatter into anything but zeros (a one-hot of class indices)")
    idx = class_index(low, index)
    shape = tuple(base.value.shape)
    d = dim % len(shape)
    if len(idx.shape) != len(shape):
        raise low.unsupported(f"scatter with an index of rank {len(idx.shape)} into rank "
                              f"{len(shape)}")

    return _two_valued(low, float(value), OneHot, idx.name, idx.pick, shape, "_onehot",
                       idx=idx, dim=d)


SUMS = {aten.sum.dim_IntList: sum_, aten.sum.default: sum_all}  # their general rules


@rule(*SUMS, case=lambda low, node, x, *args, **kwargs: isinstance(x, IndexPred))
def sum_of_checks(low, node, x, *args, **kwargs):
    """A count of the targets that pass: the sum of the predicate's 0/1 mask, moved in per
    call from the host's values, or with lookups "onehot" (whose models one fabric program
    holds) computed on the fabric from the input's words (`masks.float_mask`)."""
    if low.lookups == "onehot":
        x = Ref(float_mask(low, x).index, torch.float32)
    else:
        x = check_mask(low, IndexCheck.of(low, x), x.source.shape)
    return SUMS[node.target](low, node, x, *args, **kwargs)


@rule(aten.div.Tensor, case=lambda low, node, x, y: isinstance(y, Ref))
def div(low, node, x, y):
    """x / y for a runtime y: x * reciprocal(y) (by a constant: `elementwise.div`); the
    reciprocal's special values (1/+-0 = +-inf, 1/+-inf = +-0) give torch's x / 0 and
    x / inf."""
    return mul(low, node, x, unary(low, y, "reciprocal"))


@rule(aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.view.default,
      aten.reshape.default, aten.expand.default,
      case=lambda low, node, x, *args, **kwargs: isinstance(x, ClassIndex))
def class_index_layout(low, node, x, *args, **kwargs):
    """A layout op on class indices re-indexes their picks (on tensors: `layout`)."""
    return x.relayout(lambda p: node.target(p, *args, **kwargs))
