"""The per-color FIFOs of every PE (router buffers and CE input queues): control planes,
slot reads and one cycle's pushes and pops.

A FIFO set is (data [R, K*RING, C], ctl [R, C, CTL_PLANES]); color k's slots are
k*RING .. k*RING+7. The data is stored PE-minor (fabric.pe_minor). The control is
bit-sliced: bit k of plane j (j < COUNT_PLANES) is bit j of color k's count, bit k of plane
COUNT_PLANES + j is bit j of its head slot. The questions a cycle asks of every color at
once (which are non-empty, which are full) are then a few integer ops per PE instead of a
pass over K words, and one color's count or head is read by shifts, without a gather.
Pushes in one cycle go to distinct colors (a color has one source per buffer), so they are
written with one scatter.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from fabric import bits, pe_minor
from fabric.materialize import materialize

# ---- FIFO control planes ------------------------------------------------------------------
# Each FIFO set (router buffers, CE input queues) keeps its control as CTL_PLANES uint32 bit
# planes per PE: planes 0-3 hold the bits of every color's count (0 .. queue_depth <= 8),
# planes 4-6 the bits of its head slot. The data ring has RING slots per
# color (a power of two, so the head wraps by masking), of which `queue_depth` are usable.
RING = 8
COUNT_PLANES = 4
HEAD_PLANES = 3
CTL_PLANES = COUNT_PLANES + HEAD_PLANES


def _value_at(ctl, first: int, n: int, index):
    """int32 [R, C, ...]: the n-bit value held at bit `index` (int32, same shape, >= 0)
    of planes first .. first + n - 1."""
    shift = index.astype(jnp.uint32)
    value = jnp.uint32(0)
    for j in range(n):
        plane = ctl[..., first + j]
        if index.ndim > plane.ndim:
            plane = plane[..., None]
        value = value | jnp.left_shift(jnp.right_shift(plane, shift) & jnp.uint32(1),
                                       jnp.uint32(j))
    return value.astype(jnp.int32)


def count_of(ctl, color):
    """Count of the FIFO of `color` (int32 [R, C, ...], >= 0) of every PE."""
    return _value_at(ctl, 0, COUNT_PLANES, color)


def head_of(ctl, color):
    """Head slot (0 .. RING-1) of the FIFO of `color` of every PE."""
    return _value_at(ctl, COUNT_PLANES, HEAD_PLANES, color)


def nonempty(ctl):
    """uint32 [R, C]: colors whose FIFO holds a wavelet."""
    mask = ctl[..., 0]
    for j in range(1, COUNT_PLANES):
        mask = mask | ctl[..., j]
    return mask


def at_least(ctl, n: int):
    """uint32 [R, C]: colors whose count is at least `n` (a static int), compared bit by
    bit from the top: a count is below n where its first bit that differs from n's is 0."""
    below = jnp.uint32(0)
    equal = jnp.uint32(0xFFFFFFFF)
    for j in reversed(range(COUNT_PLANES)):
        plane = ctl[..., j]
        if (n >> j) & 1:
            below = below | (equal & ~plane)
            equal = equal & plane
        else:
            equal = equal & ~plane
    if n >> COUNT_PLANES:
        return jnp.zeros_like(below)
    return ~below


def _decode(ctl, first: int, n: int, colors: int):
    index = jnp.broadcast_to(jnp.arange(colors, dtype=jnp.int32), ctl.shape[:-1] + (colors,))
    return _value_at(ctl, first, n, index)


def _decode_now(ctl, first: int, n: int, colors: int) -> np.ndarray:
    """`_decode` of a concrete state in numpy (one host copy of the planes, a few array ops;
    eager jax would dispatch some twenty small ops per call)."""
    planes = np.asarray(ctl)[..., first:first + n]  # uint32 [R, C, n]
    bit = (planes[..., None, :] >> np.arange(colors, dtype=np.uint32)[:, None]) & 1
    return (bit << np.arange(n, dtype=np.uint32)).sum(axis=-1).astype(np.int32)


def counts(ctl, colors: int) -> np.ndarray:
    """int32 [R, C, colors]: every color's count, for readers outside the cycle (numpy)."""
    return _decode_now(ctl, 0, COUNT_PLANES, colors)


def counts_traced(ctl, colors: int):
    """int32 [R, C, colors]: every color's count, inside a traced function (jax)."""
    return _decode(ctl, 0, COUNT_PLANES, colors)


def heads(ctl, colors: int):
    """int32 [R, C, colors]: every color's head slot (inside the cycle: jax)."""
    return _decode(ctl, COUNT_PLANES, HEAD_PLANES, colors)


def heads_now(ctl, colors: int) -> np.ndarray:
    """`heads` for readers outside the cycle (numpy)."""
    return _decode_now(ctl, COUNT_PLANES, HEAD_PLANES, colors)


def _add_planes(planes, mask, up: bool):
    """planes (bits of one number per color) plus (up) or minus one where `mask` is set,
    with a ripple carry (borrow) through the planes; wraps past the top plane."""
    carry = mask
    out = []
    for plane in planes:
        out.append(plane ^ carry)
        carry = (plane & carry) if up else (~plane & carry)
    return out


def push_pop(config, data, ctl, push_colors, push_data, pop_mask, now, times=None):
    """Apply one cycle of pushes and pops.

    push_colors: int32 [R, C, N] (-1 = no push), push_data: uint32 [R, C, N],
    pop_mask: uint32 [R, C] colors whose head leaves. Returns (data, ctl, times).
    """
    K = config.num_colors
    color = jnp.maximum(push_colors, 0)
    tail = (head_of(ctl, color) + count_of(ctl, color)) & (RING - 1)
    index = jnp.where(push_colors >= 0, color * RING + tail, K * RING)  # past the end: none
    push_mask = jnp.uint32(0)
    for n in range(push_colors.shape[-1]):
        push_mask = push_mask | bits.bit(push_colors[..., n])
    # computed once, before the data scatter and the plane update that both use them
    push_mask, pop_mask, index = materialize((push_mask, pop_mask, index), now)
    data = pe_minor.write(data, index, push_data, unique=True)
    if times is not None:
        times = pe_minor.write(times, index, jnp.broadcast_to(now, index.shape), unique=True)
    # count += push - pop (a color pushed and popped keeps its count); head += pop, mod RING
    count = [ctl[..., j] for j in range(COUNT_PLANES)]
    count = _add_planes(count, push_mask & ~pop_mask, up=True)
    count = _add_planes(count, pop_mask & ~push_mask, up=False)
    head = _add_planes([ctl[..., COUNT_PLANES + j] for j in range(HEAD_PLANES)], pop_mask,
                       up=True)
    planes = count + head
    assert len(planes) == CTL_PLANES
    return data, jnp.stack(planes, axis=-1), times
