"""What a graph value is during lowering.

- `Const`: a tensor known at compile time (a parameter, a buffer, a folded constant such as
  the causal mask). Constants reach kernels through host I/O when the model is loaded, as
  weights do on a wafer.
- `Ref`: a runtime tensor as an index map into the global element space of materialized
  tensors (the user's inputs and the outputs of kernels): `index` has the value's shape and
  holds, per element, the global id of the element it equals (-1: the value 0, e.g. a
  convolution's padding). Layout-only ops (view, permute, expand, slice, ...) act on the
  index map alone, so they cost nothing until a kernel needs the data in another layout;
  then the data moves on the fabric (`fabric.kernels.redistribute`).
- `Gather`: a runtime tensor whose index map depends on the values of an integer user input
  (embedding): resolved on every call. `IndexRange`: the check of such indices that the
  host makes before a call.
"""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass
class Const:
    value: torch.Tensor


@dataclasses.dataclass
class Ref:
    index: torch.Tensor  # int64, the value's shape; global element ids, -1 = zero
    dtype: torch.dtype = torch.float32

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.index.shape)


@dataclasses.dataclass
class Gather:
    """table[idx]: rows of the materialized 2D table (global base `table_base`, row length
    `row`) picked by the integer user input `idx_name`; shape = idx shape + (row,)."""

    table_base: int
    table_rows: int
    row: int
    idx_name: str
    idx_pick: torch.Tensor  # flat positions in the input `idx_name` of the indices used
    idx_shape: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.idx_shape, self.row)

    def indices(self, inputs: dict[str, torch.Tensor], limit: int) -> torch.Tensor:
        """This call's indices at the picked positions (int64, flat), each checked to lie
        in [0, limit)."""
        return IndexRange(self.idx_name, self.idx_pick, limit).values(inputs)

    def resolve(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Global ids (tokens, row) of the picked rows for this call's inputs."""
        idx = self.indices(inputs, self.table_rows)
        return self.table_base + idx[:, None] * self.row + torch.arange(self.row)


@dataclasses.dataclass(frozen=True)
class IndexRange:
    """The indices an embedding reads from integer user input `name` (at the flat
    positions `pick`), each to lie in [0, `limit`): eager raises IndexError for one outside,
    so the host checks them before a call, whether the rows move per call (`Gather`) or
    are looked up on the fabric (a one-hot product, where such an index gives no row)."""

    name: str
    pick: torch.Tensor
    limit: int

    def values(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """This call's indices (int64, flat); raises TypeError for a float or bool input,
        IndexError for an index outside [0, limit)."""
        given = inputs[self.name]
        if given.dtype.is_floating_point or given.dtype == torch.bool:
            raise TypeError(f"embedding indices {self.name!r} must be integers, got "
                            f"{given.dtype}")
        idx = given.reshape(-1)[self.pick.reshape(-1)].to(torch.int64)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.limit):
            raise IndexError(f"embedding index out of range [0, {self.limit}) in input "
                             f"{self.name!r}: min {int(idx.min())}, max {int(idx.max())}")
        return idx


@dataclasses.dataclass
class Tensor:
    """A materialized tensor of the global element space: a user input or a stage's
    output. Its elements have global ids base .. base + numel - 1 (C order)."""

    name: str
    base: int
    shape: tuple[int, ...]
    kind: str  # "input" | "stage"

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def ref(self) -> Ref:
        return Ref(self.base + torch.arange(self.numel).reshape(self.shape))

    def owns(self, ids):
        """Which of the global ids `ids` (a torch or numpy array, any shape) are this
        tensor's elements: a boolean mask of their shape."""
        return (ids >= self.base) & (ids < self.base + self.numel)

    def in_order(self, index: torch.Tensor) -> bool:
        """Whether global ids `index` (any shape) are all of this tensor's elements, in
        their order."""
        flat = index.reshape(-1)
        return (flat.numel() == self.numel and (not self.numel or int(flat[0]) == self.base)
                and bool(torch.equal(flat, torch.arange(self.base, self.base + self.numel))))


class Symbolic:
    """Base of runtime values that are neither tensors nor constants (the predicates of
    the attention mask guard, see `lowering.masks`). `what` names one in errors."""

    what = "a value the lowering keeps symbolic"
