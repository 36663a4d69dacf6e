"""Whether the guard after a decomposed attention's softmax can change its result.

Decomposed scaled-dot-product attention (and torch's _safe_softmax) writes

    where(logical_not(any(logical_not(eq(s, -inf)), dim, keepdim)), 0, softmax(s))

which sets the rows of s that are all -inf to 0, where the softmax alone gives NaN. A row is
all -inf only where every one of its scores may be -inf. `rows_may_be_all_neginf` looks at
where each score comes from, at the element:
- a GEMM's output (q @ k^T): a product of finite values, plus its C0 where it has one (a
  constant C0 may be -inf where it holds one; a runtime C0 may be anything);
- an elementwise add or sub of such a product and a constant (a causal mask): -inf only
  where the constant holds an infinity (or NaN);
- anything else (a user's input, a select of a runtime mask, a value computed otherwise):
  may be -inf.
A causal mask leaves the diagonal finite in every row, so the guard is dropped there; a
runtime mask (a padding mask may cover a whole row) keeps it (`masks.where` computes it).
Assumed, as for every product: the GEMM's inputs are finite (an infinite q or k gives
-inf or NaN products that eager's guard would also meet).
"""

from __future__ import annotations

import numpy as np
import torch

from frontend.values import Ref

aten = torch.ops.aten
SUMS = (aten.add.Tensor, aten.sub.Tensor)


def rows_may_be_all_neginf(low, scores: Ref, dim: int) -> bool:
    """Whether some row of `scores` along `dim` may have -inf in every element (module
    docstring). `low`: the Lowering whose stages computed the scores."""
    if not scores.index.numel():
        return False
    stages = sorted(low.stages, key=lambda st: st.tensor.base)
    order = (stages, torch.tensor([st.tensor.base for st in stages], dtype=torch.int64))
    may = _may_be_neginf(order, scores.index, depth=0)
    d = dim % max(1, scores.index.dim())
    return bool(may.all(dim=d).any()) if scores.index.dim() else bool(may)


def _may_be_neginf(order, ids: torch.Tensor, depth: int) -> torch.Tensor:
    """A bool tensor of `ids`' shape: whether the element with each global id may be -inf
    (id -1 is a zero). order: (the Lowering's stages by the first id of their outputs,
    those ids)."""
    may = ids >= 0
    stages, bases = order
    if not stages:
        return may
    # the stage whose output each id may be in: the last one starting at or before it
    which = torch.searchsorted(bases, ids.clamp(min=0), right=True) - 1
    for i in which[may].unique().tolist():
        if i < 0:
            continue
        stage = stages[i]
        mine = may & (which == i) & stage.tensor.owns(ids)
        if bool(mine.any()):
            at = ids[mine] - stage.tensor.base  # flat positions in the stage's output
            may[mine] = _stage_may_be_neginf(order, stage, at, depth)
    return may


def _stage_may_be_neginf(order, stage, at: torch.Tensor, depth: int) -> torch.Tensor:
    """Whether stage `stage`'s output elements at flat positions `at` may be -inf."""
    operands = {op.name: op for op in stage.operands}
    if stage.kind.startswith("gemm"):
        c0 = operands.get("C0")
        if c0 is None:
            return torch.zeros(at.shape, dtype=torch.bool)
        return _operand_may_be_infinite(order, c0, at, depth, stage.tensor.numel)
    if (depth == 0 and stage.kind == "elementwise" and stage.node.target in SUMS
            and set(operands) == {"x", "y"}):
        return (_operand_may_be_infinite(order, operands["x"], at, depth, stage.tensor.numel)
                | _operand_may_be_infinite(order, operands["y"], at, depth, stage.tensor.numel))
    return torch.ones(at.shape, dtype=torch.bool)


def _operand_may_be_infinite(order, operand, at: torch.Tensor, depth: int, numel: int
                             ) -> torch.Tensor:
    """Whether an elementwise operand of `numel` elements (the stage's output's) may be
    infinite at flat positions `at`: a constant where it is (or NaN), a runtime operand
    where the stage computing it may give -inf (one level down: a GEMM's product)."""
    words = operand.const if operand.const is not None else operand.index
    if words is None or int(np.prod(words.shape)) != numel:  # not element for element
        return torch.ones(at.shape, dtype=torch.bool)
    if operand.const is not None:
        values = torch.from_numpy(operand.const.reshape(-1)[at.numpy()])
        return ~torch.isfinite(values)
    return _may_be_neginf(order, operand.index.reshape(-1)[at], depth + 1)
