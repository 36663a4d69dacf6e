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
from jaxtyping import Array, Int32, UInt32

from fabric import bits, pe_minor, queues
from fabric.isa import Port
from fabric.queues import RING
from fabric.shifts import from_neighbour

# The router's decision words. Word 0: bits 5p .. 5p + 4 = color sent through port p,
# plus one (colors < 31; 0 = none); bits 25 + p: port p restarts its round-robin; bit 31
# (first pass only): some multicast color failed. Word 1: bits 3p .. 3p + 2 = FIFO head slot
# of the color sent through port p (RING = 8); bits 15 .. 19: lowest failed color, plus one.
PORT_BITS = 5
RESTART_SHIFT = 25
FAILED_BIT = 31
HEAD_BITS = 3
LOWEST_SHIFT = 15


class RouterPlan(NamedTuple):
    """The route phase's output, per port in the order N, S, E, W, RAMP."""

    send_color: Int32[Array, "R C 5"]  # color sent through each port, -1 none
    send_data: UInt32[Array, "R C 5"]
    moved: UInt32[Array, "R C"]  # colors whose head left this cycle
    pointers: Int32[Array, "R C 5"]  # round-robin pointers for the next cycle


def _decide(config, tables, state):
    """The first arbitration pass: (tx masks per port, candidates, grant per port, granted
    bits per port, multicast colors, moved, failed), all per PE."""
    K, Q = config.num_colors, config.queue_depth
    ready = queues.nonempty(state.rq_ctl)
    if config.hop_latency > 1:
        head_slot = (jnp.arange(K, dtype=jnp.int32)[None, None, :] * RING
                     + queues.heads(state.rq_ctl, K))
        entered = pe_minor.read(state.rq_time, head_slot)
        ready &= bits.pack(entered + config.hop_latency <= state.cycle, K)
    full = queues.at_least(state.rq_ctl, Q)
    iq_full = queues.at_least(state.iq_ctl, Q)
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
    return tx, candidates, grant, granted, multicast, moved, failed


def _encode(send_color):
    """Colors sent through the 5 ports ([-1, K) each) as one uint32, 5 bits per port."""
    code = jnp.uint32(0)
    for p, color in enumerate(send_color):
        code = code | jnp.left_shift((color + 1).astype(jnp.uint32), jnp.uint32(PORT_BITS * p))
    return code


def _heads(state, code):
    """The head slot of the FIFO of each color `code` sends, 3 bits per port in one uint32."""
    heads = jnp.uint32(0)
    for p in range(5):
        color = jnp.maximum(_field(code, PORT_BITS * p, PORT_BITS) - 1, 0)
        heads = heads | jnp.left_shift(queues.head_of(state.rq_ctl, color).astype(jnp.uint32),
                                       jnp.uint32(HEAD_BITS * p))
    return heads


def _field(word, shift: int, width: int):
    """int32: bits shift .. shift + width - 1 of a uint32 word."""
    return (jnp.right_shift(word, jnp.uint32(shift)) & jnp.uint32((1 << width) - 1)).astype(
        jnp.int32)


def plan(config, tables, state) -> RouterPlan:
    """The router decision is computed once per PE into one word (the first pass's sends and
    whether a multicast color failed), then leaves a cond as two words per PE: the sends,
    the ports to restart, the FIFO heads of the sent colors and the color they restart at.
    Every consumer decodes them instead of arbitrating again. The FIFO heads are read inside
    the cond, so the read of the control words is an ancestor of their update (no copy)."""
    K = config.num_colors
    tx, candidates, grant, granted, multicast, moved, failed = _decide(config, tables, state)
    first = _encode([jnp.where((granted[p] & moved) != 0, grant[p], -1) for p in range(5)])
    first = first | jnp.where(failed != 0, jnp.uint32(1 << FAILED_BIT), jnp.uint32(0))

    def usual(first):
        # no multicast color failed anywhere: nothing to reoffer or restart
        code = first & jnp.uint32((1 << RESTART_SHIFT) - 1)
        return jnp.stack([code, _heads(state, code)], axis=-1)

    def reoffer(first):
        # a port wasted on a failed multicast serves a single-port color instead; rare (two
        # multicast colors contending), so computed only in cycles where it happens, by
        # arbitrating again from the state (the first pass kept one word only)
        tx, candidates, grant, granted, multicast, moved, failed = _decide(config, tables,
                                                                            state)
        send = []
        for p in range(5):
            unicast = bits.round_robin(candidates & tx[p] & ~multicast & ~moved,
                                       state.rr[..., p], K)
            sent = jnp.where((granted[p] & moved) != 0, grant[p], -1)
            wasted = (sent < 0) & ((granted[p] & failed) != 0)
            send.append(jnp.where(wasted, unicast, sent))
        # the ports of the failed multicast colors restart their round-robin at the lowest
        restart = jnp.uint32(0)
        for p in range(5):
            restart = restart | jnp.where((tx[p] & failed) != 0,
                                          jnp.uint32(1 << (RESTART_SHIFT + p)), jnp.uint32(0))
        code = _encode(send)
        low = (bits.lowest(failed) + 1).astype(jnp.uint32)
        return jnp.stack([code | restart,
                          _heads(state, code) | jnp.left_shift(low, jnp.uint32(LOWEST_SHIFT))],
                         axis=-1)

    words = lax.cond((first >= jnp.uint32(1 << FAILED_BIT)).any(), reoffer, usual, first)
    send_color = jnp.stack([_field(words[..., 0], PORT_BITS * p, PORT_BITS) - 1
                            for p in range(5)], axis=-1)
    # the colors that moved are exactly those sent through some port
    moved = jnp.uint32(0)
    for p in range(5):
        moved = moved | bits.bit(send_color[..., p])
    head = jnp.stack([_field(words[..., 1], HEAD_BITS * p, HEAD_BITS) for p in range(5)],
                     axis=-1)
    send_data = pe_minor.read(state.rq_data, jnp.maximum(send_color, 0) * RING + head)
    restart = jnp.stack([_field(words[..., 0], RESTART_SHIFT + p, 1) != 0 for p in range(5)],
                        axis=-1)
    lowest_failed = _field(words[..., 1], LOWEST_SHIFT, PORT_BITS) - 1
    pointers = jnp.where(send_color >= 0, (send_color + 1) % K,
                         jnp.where(restart, lowest_failed[..., None], state.rr))
    return RouterPlan(send_color=send_color, send_data=send_data, moved=moved,
                      pointers=pointers)
