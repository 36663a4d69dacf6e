"""Bitmask helpers: per-PE uint32 masks over colors, ports or task ids.

Router and scheduler control state is kept as one uint32 per PE so that choosing a color
or a task costs a handful of integer ops, whatever the number of colors.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def bit(index):
    """1 << index as uint32 (index < 0 gives 0)."""
    index = jnp.asarray(index)
    shift = jnp.maximum(index, 0).astype(jnp.uint32)
    return jnp.where(index >= 0, jnp.left_shift(jnp.uint32(1), shift), jnp.uint32(0))


def pack(flags, n: int):
    """bool[..., n] -> uint32[...] with bit k = flags[..., k]."""
    weights = jnp.left_shift(jnp.uint32(1), jnp.arange(n, dtype=jnp.uint32))
    weights = weights.reshape((1,) * (flags.ndim - 1) + (n,))
    return jnp.sum(jnp.where(flags, weights, jnp.uint32(0)), axis=-1, dtype=jnp.uint32)


def unpack(mask, n: int):
    """uint32[...] -> int32[..., n] of 0/1."""
    shifts = jnp.arange(n, dtype=jnp.uint32).reshape((1,) * mask.ndim + (n,))
    return (jnp.right_shift(mask[..., None], shifts) & jnp.uint32(1)).astype(jnp.int32)


def lowest(mask):
    """Index of the lowest set bit of each mask, -1 where the mask is 0."""
    low = mask & (~mask + jnp.uint32(1))
    index = lax.population_count(low - jnp.uint32(1)).astype(jnp.int32)
    return jnp.where(mask != 0, index, -1)


def round_robin(mask, pointer, n: int):
    """First set bit of `mask` at or after `pointer`, cyclically over n bits; -1 if none."""
    full = jnp.uint32((1 << n) - 1)
    p = pointer.astype(jnp.uint32)
    rotated = (jnp.right_shift(mask, p) | jnp.left_shift(mask, jnp.uint32(n) - p)) & full
    first = lowest(rotated)
    return jnp.where(first >= 0, (first + pointer) % n, -1)


def popcount(mask):
    return lax.population_count(mask).astype(jnp.int32)
