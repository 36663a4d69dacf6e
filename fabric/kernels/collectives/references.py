"""Numpy references of the reductions: the fabric's order of operations in float32, so that
a kernel's result compares bit-exact.

Example:
    >>> reduce_reference(np.ones((4, 8, 16)), along="row", algo="tree")[0, 0]
    np.float32(8.0)
"""

from __future__ import annotations

import numpy as np

from fabric.kernels.collectives.geometry import ROOTS
from fabric.kernels.collectives.lines import tree_schedule

NP_OPS = {"add": np.add, "max": np.maximum, "min": np.minimum}


def line_reduce_reference(v: np.ndarray, algo: str = "chain", op: str = "add") -> np.ndarray:
    """The fabric's reduction of the vectors v[i] (shape (L, n), i = line index from the
    root) in float32, in the fabric's order."""
    f = NP_OPS[op]
    v = np.asarray(v, np.float32)
    L = v.shape[0]
    if algo == "chain":
        acc = v[L - 1]
        for i in range(L - 2, -1, -1):
            acc = f(v[i], acc)
        return acc
    acc = v.copy()
    for round_pairs in tree_schedule(L)[0]:
        for a, b in round_pairs:
            acc[a] = f(acc[a], acc[b])
    return acc[0]


def _to_lines(x: np.ndarray, along: str, root: str) -> np.ndarray:
    """(P, Q, n) grid order -> (lines, L, n) in line-index order."""
    lines = x if along == "row" else x.transpose(1, 0, 2)
    return lines[:, ::-1] if root in ("east", "south") else lines



def reduce_reference(x: np.ndarray, along: str = "row", algo: str = "chain", op: str = "add",
                     root=None) -> np.ndarray:
    """What `build_reduce` returns for x of shape (P, Q, n): (P, n) for rows, (Q, n) for
    columns, (n,) for the rectangle."""
    x = np.asarray(x, np.float32)
    if along == "rect":
        row_root, col_root = root or ("west", "north")
        per_row = reduce_reference(x, "row", algo, op, row_root)  # (P, n)
        return reduce_reference(per_row[:, None, :], "col", algo, op, col_root)[0]
    lines = _to_lines(x, along, root or ROOTS[along][0])
    return np.stack([line_reduce_reference(v, algo, op) for v in lines])


def allreduce_reference(x: np.ndarray, along: str = "row", algo: str = "chain",
                        op: str = "add") -> np.ndarray:
    """What `build_allreduce` returns: every PE's vector replaced by its group's result."""
    x = np.asarray(x, np.float32)
    red = reduce_reference(x, along, algo, op)
    if along == "row":
        return np.broadcast_to(red[:, None, :], x.shape).copy()
    if along == "col":
        return np.broadcast_to(red[None, :, :], x.shape).copy()
    return np.broadcast_to(red, x.shape).copy()
