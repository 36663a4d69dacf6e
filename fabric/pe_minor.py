"""Per-PE reads and writes of arrays stored PE-minor, [R, X, C]: rows leading, columns last.

SRAM and the FIFO data are stored so that one address (word, or FIFO slot) of the PEs of
a row is contiguous. PEs running in step, as most kernels do, then touch the same cache
lines instead of one line each, a whole per-PE block apart; on a large fabric, where a
cycle is bound by memory traffic, that is most of the cost of these reads and writes.
Indices are flat (one component per index), which XLA:CPU gathers and scatters fastest.
"""

from __future__ import annotations

import jax.numpy as jnp


def _flat_index(data, at):
    """Flat indices into data [R, X, C] of address `at` (int32 [R, C] or [R, C, N]) of every
    PE; an address outside 0 .. X-1 gives an index past the end (dropped by writes)."""
    R, X, C = data.shape
    extra = (None,) * (at.ndim - 2)
    rows = jnp.arange(R, dtype=jnp.int32)[(slice(None), None) + extra]
    cols = jnp.arange(C, dtype=jnp.int32)[(None, slice(None)) + extra]
    return jnp.where((at >= 0) & (at < X), (rows * X + at) * C + cols, R * X * C)


def read(data, at):
    """data [R, X, C] at address `at` (int32 [R, C] or [R, C, N], within 0 .. X-1) of every
    PE; same shape as `at`."""
    return data.reshape(-1)[_flat_index(data, at)]


def write(data, at, values, unique: bool = False):
    """data [R, X, C] with `values` written at address `at` of every PE (an address outside
    0 .. X-1 writes nothing). unique: the addresses of one PE are distinct."""
    flat = data.reshape(-1).at[_flat_index(data, at)].set(
        values.astype(data.dtype), mode="drop", unique_indices=unique)
    return flat.reshape(data.shape)
