"""Per-PE reads and writes of arrays stored PE-minor, [R, X, C]: rows leading, columns last.

SRAM and the FIFO data are stored so that one address (word, or FIFO slot) of the PEs of
a row is contiguous. PEs running in step, as most kernels do, then touch the same cache
lines instead of one line each, a whole per-PE block apart; on a large fabric, where a
cycle is bound by memory traffic, that is most of the cost of these reads and writes.
Indices are flat (one component per index), which XLA:CPU gathers and scatters fastest,
while the array's size fits int32; beyond (SRAM of a whole wafer, 996 x 12288 x 757
words) they are (row, offset within the row), two components.
"""

from __future__ import annotations

import jax.numpy as jnp

FLAT_LIMIT = 2**31  # arrays of at least this many elements are indexed by (row, offset)


def _index(data, at):
    """Indices into data [R, X, C] of address `at` (int32 [R, C] or [R, C, N]) of every PE:
    (flat index,) or (row, offset in the row); an address outside 0 .. X-1 gives an index
    past the end (dropped by writes)."""
    R, X, C = data.shape
    extra = (None,) * (at.ndim - 2)
    rows = jnp.arange(R, dtype=jnp.int32)[(slice(None), None) + extra]
    cols = jnp.arange(C, dtype=jnp.int32)[(None, slice(None)) + extra]
    inside = (at >= 0) & (at < X)
    if R * X * C < FLAT_LIMIT:
        return (jnp.where(inside, (rows * X + at) * C + cols, R * X * C),)
    return (jnp.broadcast_to(rows, at.shape), jnp.where(inside, at * C + cols, X * C))


def _view(data, index):
    R, X, C = data.shape
    return data.reshape(-1) if len(index) == 1 else data.reshape(R, X * C)


def read(data, at):
    """data [R, X, C] at address `at` (int32 [R, C] or [R, C, N], within 0 .. X-1) of every
    PE; same shape as `at`."""
    index = _index(data, at)
    return _view(data, index)[index]


def write(data, at, values, unique: bool = False):
    """data [R, X, C] with `values` written at address `at` of every PE (an address outside
    0 .. X-1 writes nothing). unique: the addresses of one PE are distinct."""
    index = _index(data, at)
    out = _view(data, index).at[index].set(values.astype(data.dtype), mode="drop",
                                           unique_indices=unique)
    return out.reshape(data.shape)
