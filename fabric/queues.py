"""FIFO updates for the per-color buffers (router buffers and CE input queues).

A FIFO set is (data [R, C, K*Q], head [R, C, K], count [R, C, K]); slot `color * Q + i`.
Pushes in one cycle go to distinct colors (a color has one source per buffer), so they are
written with one scatter; counts and heads change by bitmask.
"""

from __future__ import annotations

import jax.numpy as jnp

from fabric import bits


def push_pop(config, data, head, count, push_colors, push_data, pop_mask, times=None, now=None):
    """Apply one cycle of pushes and pops.

    push_colors: int32 [R, C, N] (-1 = no push), push_data: uint32 [R, C, N],
    pop_mask: uint32 [R, C] colors whose head leaves. Returns (data, head, count, times).
    """
    K, Q = config.num_colors, config.queue_depth
    color = jnp.maximum(push_colors, 0)
    tail = (jnp.take_along_axis(head, color, axis=-1)
            + jnp.take_along_axis(count, color, axis=-1)) % Q
    index = jnp.where(push_colors >= 0, color * Q + tail, K * Q)  # K*Q lies past the end
    rows = jnp.arange(data.shape[0])[:, None, None]
    cols = jnp.arange(data.shape[1])[None, :, None]
    data = data.at[rows, cols, index].set(push_data, mode="drop", unique_indices=True)
    if times is not None:
        times = times.at[rows, cols, index].set(jnp.broadcast_to(now, index.shape), mode="drop",
                                                unique_indices=True)
    push_mask = jnp.uint32(0)
    for n in range(push_colors.shape[-1]):
        push_mask = push_mask | bits.bit(push_colors[..., n])
    popped = bits.unpack(pop_mask, K)
    count = count + bits.unpack(push_mask, K) - popped
    head = (head + popped) % Q
    return data, head, count, times
