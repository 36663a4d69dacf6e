"""Per-PE writes into a trailing axis, as one scatter.

Writing one entry per PE with a broadcast select (`where(index == arange(n), value, x)`)
lets XLA fuse the whole computation of `value` into a loop over every element of `x`,
recomputing it n times; a scatter keeps `value` computed once.
"""

from __future__ import annotations

import jax.numpy as jnp


def scatter_rows(x, index, value):
    """x[r, c, index[r, c]] = value[r, c] for every PE; an index of x.shape[2] (or any out of
    range) writes nothing.

    x: [R, C, N, ...]; index: int32 [R, C]; value: [R, C, ...] (x without the N axis).
    """
    rows = jnp.arange(x.shape[0])[:, None]
    cols = jnp.arange(x.shape[1])[None, :]
    return x.at[rows, cols, index].set(value.astype(x.dtype), mode="drop")
