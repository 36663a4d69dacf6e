"""The lowered graph: stages (one fabric kernel instance each) and their operands.

A `Stage` materializes one tensor (its kernel's output, in C order: the global ids
`tensor.base ..`) on a tile of PEs chosen by the placement. Its `Operand`s say where each
kernel input comes from: a compile-time constant (loaded with the weights) or an index map
into the global element space (moved on the fabric from the tiles that hold it, or written
by the host for the user's inputs).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable

import numpy as np
import torch
import torch.fx

from fabric.config import FabricConfig
from fabric.kernels import Kernel
from fabric.program import Rect
from frontend.build_keys import build_key
from frontend.values import Gather, Tensor


@dataclasses.dataclass
class Operand:
    """Kernel input `name` of shape `shape`: `const` (numpy fp32), or `index` (global ids,
    int64 of `shape`, -1 = zero), or `gather` (an embedding's rows, resolved per call)."""

    name: str
    shape: tuple[int, ...]
    const: np.ndarray | None = None
    index: torch.Tensor | None = None
    gather: Gather | None = None

    @property
    def runtime(self) -> bool:
        return self.const is None


@dataclasses.dataclass(frozen=True)
class Limits:
    """What tile shapes a kernel accepts: at most `rows` x `cols` PEs (its tensor must give
    every PE a block), `cols_fixed` (1 for one-column kernels). Colors are the placement's
    concern (SUMMA needs one per tile row and column)."""

    rows: int
    cols: int
    cols_fixed: int | None = None


@dataclasses.dataclass
class Stage:
    name: str
    node: torch.fx.Node
    kind: str  # the kernel's name, e.g. "gemm_summa"
    tensor: Tensor
    build: Callable[[FabricConfig, Rect], Kernel]
    operands: list[Operand]
    work: int  # elements or multiply-adds: what sizes the tile
    limits: Limits
    fmas: int = 0
    words_per_element: int = 3  # SRAM words per output element the kernel needs (sizing)
    dtype: str = "f32"  # the kernel's storage format (inputs and output)

    @functools.cached_property
    def build_key(self) -> Hashable | None:
        """What its kernel is built from (`frontend.build_keys`): stages of equal keys
        build equal kernels on equal tiles; None where that cannot be told."""
        return build_key(self.build)
