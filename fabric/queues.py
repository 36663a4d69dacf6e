"""FIFO updates for the per-color buffers (router buffers and CE input queues).

A FIFO set is (data [R, C, K*RING], ctl [R, C, K]); color k's slots are k*RING .. k*RING+7,
and its control word holds count | head << 4 (see fabric.state). Pushes in one cycle go to
distinct colors (a color has one source per buffer), so they are written with one scatter;
control words change by one masked add per color.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from fabric import bits
from fabric.materialize import materialize
from fabric.state import CTL_MASK, HEAD_SHIFT, RING, fifo_count, fifo_head


def push_pop(config, data, ctl, push_colors, push_data, pop_mask, now, times=None):
    """Apply one cycle of pushes and pops.

    push_colors: int32 [R, C, N] (-1 = no push), push_data: uint32 [R, C, N],
    pop_mask: uint32 [R, C] colors whose head leaves. Returns (data, ctl, times).
    """
    K = config.num_colors
    color = jnp.maximum(push_colors, 0)
    word = jnp.take_along_axis(ctl, color, axis=-1)
    tail = (fifo_head(word) + fifo_count(word)) & (RING - 1)
    index = jnp.where(push_colors >= 0, color * RING + tail, K * RING)  # past the end: none
    push_mask = jnp.uint32(0)
    for n in range(push_colors.shape[-1]):
        push_mask = push_mask | bits.bit(push_colors[..., n])
    # the slot index passes through with the masks: the read of `ctl` it comes from is then
    # an ancestor of the update of `ctl`, which XLA therefore makes in place (no copy)
    push_mask, pop_mask, index = materialize((push_mask, pop_mask, index), now)
    rows = jnp.arange(data.shape[0])[:, None, None]
    cols = jnp.arange(data.shape[1])[None, :, None]
    data = data.at[rows, cols, index].set(push_data, mode="drop", unique_indices=True)
    if times is not None:
        times = times.at[rows, cols, index].set(jnp.broadcast_to(now, index.shape), mode="drop",
                                                unique_indices=True)
    # count += push - pop; head += pop, wrapping by the mask: a pop adds (1 << HEAD_SHIFT) - 1.
    # Few integer ops per color keep the update a memory-bound loop, which XLA:CPU runs on
    # one thread (a loop it splits over threads pays a thread hand-off in every cycle).
    shifts = jnp.arange(K, dtype=jnp.int32).reshape((1,) * push_mask.ndim + (K,))
    push, pop = (jnp.right_shift(lax.bitcast_convert_type(m, jnp.int32)[..., None], shifts) & 1
                 for m in (push_mask, pop_mask))
    ctl = (ctl + push + pop * ((1 << HEAD_SHIFT) - 1)) & CTL_MASK
    return data, ctl, times
