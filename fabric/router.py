"""One cycle of every router, decided from the start-of-cycle state (pure, vectorized).

Rules (documented in docs/engine.md):
- Each PE has one FIFO per color (depth Q). A color is accepted from exactly one rx port.
- The head wavelet of a color moves to all of its tx ports at once (multicast) when every
  target buffer has room at the start of the cycle and it wins every port it needs.
- Each output port (N, S, E, W links and the RAMP up to the CE) passes at most one wavelet
  per cycle; colors competing for a port are served round-robin, starting after the color
  that last used it.
- A port granted to a multicast color that lost another of its ports is offered again, in
  the same cycle, to the single-port colors that want it. The ports of the multicast colors
  that failed then restart their round-robin at the lowest such color, so that next cycle
  every one of its ports puts it first: two multicast colors can never hold each other's
  ports forever.
- A wavelet may leave a buffer `hop_latency` cycles after it entered it.
Colors are handled as uint32 bitmasks, so the cost per PE does not depend on how many
colors a program uses.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from fabric import bits
from fabric.isa import Port
from fabric.shifts import from_neighbour
from fabric.state import RING, fifo_head


class RouterPlan(NamedTuple):
    send_color: jnp.ndarray  # int32 [R, C, 5]: color sent through each port, -1 none
    send_data: jnp.ndarray  # uint32 [R, C, 5]
    moved: jnp.ndarray  # uint32 [R, C]: colors whose head left this cycle
    pointers: jnp.ndarray  # int32 [R, C, 5]: round-robin pointers for the next cycle


def plan(config, tables, state) -> RouterPlan:
    K, Q = config.num_colors, config.queue_depth
    ready = bits.pack(state.rq_count > 0, K)
    if config.hop_latency > 1:
        head_slot = jnp.arange(K, dtype=jnp.int32)[None, None, :] * RING + state.rq_head
        entered = jnp.take_along_axis(state.rq_time, head_slot, axis=2)
        ready &= bits.pack(entered + config.hop_latency <= state.cycle, K)
    full = bits.pack(state.rq_count >= Q, K)
    iq_full = bits.pack(state.iq_count >= Q, K)
    # full mask of the buffer each port feeds: the neighbour's, or the CE input queue
    target_full = [from_neighbour(full, Port(p)) for p in range(4)] + [iq_full]
    tx = [tables.tx_mask[..., p] for p in range(5)]
    blocked = jnp.uint32(0)
    for p in range(5):
        blocked = blocked | (tx[p] & target_full[p])
    candidates = ready & ~blocked
    grant = [bits.round_robin(candidates & tx[p], state.rr[..., p], K) for p in range(5)]
    granted = [bits.bit(g) for g in grant]
    missing = jnp.uint32(0)
    any_grant = jnp.uint32(0)
    seen_once, multicast = jnp.uint32(0), jnp.uint32(0)
    for p in range(5):
        missing = missing | (tx[p] & ~granted[p])
        any_grant = any_grant | granted[p]
        multicast = multicast | (seen_once & tx[p])
        seen_once = seen_once | tx[p]
    moved = any_grant & ~missing
    failed = any_grant & ~moved  # multicast colors that won some ports but not all
    send_color = jnp.stack(
        [jnp.where((granted[p] & moved) != 0, grant[p], -1) for p in range(5)], axis=-1)

    def reoffer(send_color):
        # a port wasted on a failed multicast serves a single-port color instead
        send = []
        for p in range(5):
            unicast = bits.round_robin(candidates & tx[p] & ~multicast & ~moved,
                                       state.rr[..., p], K)
            wasted = (send_color[..., p] < 0) & ((granted[p] & failed) != 0)
            send.append(jnp.where(wasted, unicast, send_color[..., p]))
        return jnp.stack(send, axis=-1)

    # rare (two multicast colors contending), so only computed in cycles where it happens
    send_color = lax.cond((failed != 0).any(), reoffer, lambda s: s, send_color)
    for p in range(5):
        moved = moved | bits.bit(send_color[..., p])
    head = fifo_head(jnp.take_along_axis(state.rq_ctl, jnp.maximum(send_color, 0), axis=2))
    send_data = jnp.take_along_axis(state.rq_data, jnp.maximum(send_color, 0) * RING + head,
                                    axis=2)
    restart = jnp.stack([(tables.tx_mask[..., p] & failed) != 0 for p in range(5)], axis=-1)
    pointers = jnp.where(send_color >= 0, (send_color + 1) % K,
                         jnp.where(restart, bits.lowest(failed)[..., None], state.rr))
    return RouterPlan(send_color, send_data, moved, pointers)
