"""Force XLA to compute per-PE values once before they are broadcast over a wider axis.

XLA:CPU fuses an elementwise producer into every consumer loop, so a per-PE mask that feeds
a [R, C, K] update is recomputed K times together with everything it depends on. A value
that leaves a conditional is a real buffer, so passing it through a `lax.cond` whose
predicate XLA cannot fold (the cycle counter is never negative) makes it computed once.
`lax.optimization_barrier` does not do this on the CPU backend.

The cond copies each of its outputs once per call, and every copy is one more step of the
compiled loop: the leaves are therefore packed into one uint32 array [R, C, N] (each leaf
flattened behind the grid axes, its bits widened to 32) that crosses the cond as a
single buffer and is sliced back into the leaves afterwards, where the slices fuse into
their consumers.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

_UNSIGNED = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}


def _to_words(x, lead):
    """x [*lead, ...] -> uint32 [*lead, n]: bools as 0 / 1, other leaves by their bits
    (narrower ones zero-extended), exactly undone by `_from_words`."""
    flat = x.reshape(lead + (-1,))
    if x.dtype == jnp.bool_:
        return flat.astype(jnp.uint32)
    return lax.bitcast_convert_type(flat, _UNSIGNED[x.dtype.itemsize]).astype(jnp.uint32)


def _from_words(words, like):
    if like.dtype == jnp.bool_:
        return (words != 0).reshape(like.shape)
    narrow = words.astype(_UNSIGNED[like.dtype.itemsize])
    return lax.bitcast_convert_type(narrow, like.dtype).reshape(like.shape)


def _through_cond(tree, cycle):
    # the branches differ, so XLA cannot merge them away; the second is never taken
    return lax.cond(cycle >= 0, lambda t: t, lambda t: jax.tree.map(jnp.zeros_like, t), tree)


def materialize(tree, cycle):
    """`tree` unchanged, computed into one buffer before its consumers run.

    tree: a pytree of per-PE arrays that share their leading grid axes [R, C] (anything
    else: each leaf crosses the cond as its own buffer); cycle: int32 scalar, never
    negative."""
    leaves, treedef = jax.tree.flatten(tree)
    lead = leaves[0].shape[:2] if leaves and leaves[0].ndim >= 2 else None
    packable = (lead is not None and len(leaves) > 1
                and all(x.ndim >= 2 and x.shape[:2] == lead and x.dtype.itemsize in _UNSIGNED
                        for x in leaves))
    if not packable:
        return _through_cond(tree, cycle)
    sizes = [math.prod(x.shape[2:]) for x in leaves]
    packed = _through_cond(jnp.concatenate([_to_words(x, lead) for x in leaves], axis=-1),
                           cycle)
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        out.append(_from_words(packed[..., start:start + n], x))
        start += n
    return jax.tree.unflatten(treedef, out)
