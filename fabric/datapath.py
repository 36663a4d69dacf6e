"""The datapath of every compute engine for one cycle: advance one DSD op.

Rules (documented in docs/engine.md):
- One op advances per cycle per CE. The slot that advanced last keeps the datapath while it
  can go on; otherwise the lowest-numbered slot that can go on takes it.
- An op whose operands are all in memory (or scalars) processes up to its SIMD width of
  elements per cycle; an op with a fabric operand processes one element per cycle.
- An op stalls while a fabric input queue is empty or its fabric output buffer is full
  (start-of-cycle occupancy).
- When an async op finishes it activates or unblocks its `on_done` task.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from fabric import bits
from fabric.isa import Done, Op
from fabric.materialize import materialize
from fabric.state import (
    CLS_FABIN,
    CLS_FABOUT,
    CLS_MEM,
    O_BASE,
    O_CLS,
    O_COLOR,
    O_ROWLEN,
    O_ROWSTRIDE,
    O_STRIDE,
    OPERAND_FIELDS,
    RING,
    S_A,
    S_B,
    S_DONE_KIND,
    S_DONE_TASK,
    S_DST,
    S_ISSUED,
    S_LEN,
    S_OP,
    S_SCALAR,
    S_SIMD,
    fifo_head,
)


class DatapathOut(NamedTuple):
    sram: jnp.ndarray
    slot_active: jnp.ndarray
    slot_prog: jnp.ndarray
    owner: jnp.ndarray
    activated: jnp.ndarray
    blocked: jnp.ndarray
    iq_pop: jnp.ndarray  # uint32 [R, C]: colors read from the CE input queues
    push_color: jnp.ndarray  # int32 [R, C]: color sent into the router, -1 none
    push_data: jnp.ndarray  # uint32 [R, C]
    advanced: jnp.ndarray  # bool [R, C]
    stalled: jnp.ndarray  # bool [R, C]: an op is pending but none could advance


def max_lanes(config) -> int:
    """Most elements any fp32 op processes per cycle under `config`."""
    return max(w for (_, dtype), w in config.simd if dtype == "f32")


def _operand(slots, start):
    return slots[..., start:start + OPERAND_FIELDS]


def _queue_ok(record, iq_empty, rq_full):
    """bool [R, C, S]: the fabric side of an operand can move one element this cycle.

    iq_empty, rq_full: uint32 [R, C] color bitmasks of the start-of-cycle queues.
    """
    cls, color = record[..., O_CLS], record[..., O_COLOR]
    shift = jnp.clip(color, 0, 31).astype(jnp.uint32)
    empty = (jnp.right_shift(iq_empty[..., None], shift) & 1) != 0
    full = (jnp.right_shift(rq_full[..., None], shift) & 1) != 0
    return ~(((cls == CLS_FABIN) & empty) | ((cls == CLS_FABOUT) & full))


def step(config, state, sram, slots, slot_active, slot_prog, owner, activated,
         blocked) -> DatapathOut:
    K, Q, W = config.num_colors, config.queue_depth, config.sram_words
    S = slots.shape[-2]
    active = slot_active != 0
    ready = active
    iq_empty = ~bits.pack(state.iq_count > 0, K)
    rq_full = bits.pack(state.rq_count >= Q, K)
    for start in (S_DST, S_A, S_B):
        ready = ready & _queue_ok(_operand(slots, start), iq_empty, rq_full)
    ready_mask = bits.pack(ready, S)
    owner_ready = (owner >= 0) & ((ready_mask & bits.bit(owner)) != 0)
    # otherwise the op issued first (one issue per cycle, so issue cycles are distinct):
    # ops that share a fabric queue keep their order
    issued = jnp.where(ready, slots[..., S_ISSUED], jnp.iinfo(jnp.int32).max)
    oldest = jnp.argmin(issued, axis=-1).astype(jnp.int32)
    chosen = jnp.where(owner_ready, owner, jnp.where(ready_mask != 0, oldest, -1))
    advanced = chosen >= 0
    # the chosen slot's fields, by a one-hot sum over the few slots (cheaper than a gather)
    pick = jnp.arange(S)[None, None, :] == chosen[..., None]  # [R, C, S]
    sel = jnp.sum(jnp.where(pick[..., None], slots, 0), axis=-2)
    prog_sel = jnp.sum(jnp.where(pick, slot_prog, 0), axis=-1)

    lanes = jnp.arange(max_lanes(config), dtype=jnp.int32)[None, None, :]
    # computed once for every lane and operand below (fabric.materialize)
    sel, prog_sel, chosen, advanced, pick = materialize(
        (sel, prog_sel, chosen, advanced, pick), state.cycle)
    prog, length, width = prog_sel, sel[..., S_LEN], sel[..., S_SIMD]
    k = prog[..., None] + lanes  # [R, C, L]
    lane_ok = advanced[..., None] & (lanes < width[..., None]) & (k < length[..., None])

    def address(record):
        # one division per operand; a group never spans more than one row end because
        # issue caps the width at the shortest row (see control)
        row_length = jnp.maximum(record[..., O_ROWLEN], 1)
        row0 = prog // row_length
        col = (prog - row0 * row_length)[..., None] + lanes
        wrap = (col >= row_length[..., None]).astype(jnp.int32)
        col = col - wrap * row_length[..., None]
        return (record[..., O_BASE][..., None] + col * record[..., O_STRIDE][..., None]
                + (row0[..., None] + wrap) * record[..., O_ROWSTRIDE][..., None])

    def iq_head(color):
        word = jnp.take_along_axis(state.iq_ctl, color[..., None], axis=-1)[..., 0]
        index = color * RING + fifo_head(word)
        return jnp.take_along_axis(state.iq_data, index[..., None], axis=-1)[..., 0]

    def read(record):
        cls = record[..., O_CLS][..., None]
        color = jnp.clip(record[..., O_COLOR], 0, K - 1)
        mem = jnp.take_along_axis(sram, jnp.clip(address(record), 0, W - 1), axis=-1)
        fab = iq_head(color)[..., None]
        scalar = lax.bitcast_convert_type(record[..., O_BASE], jnp.uint32)[..., None]
        return jnp.where(cls == CLS_MEM, mem, jnp.where(cls == CLS_FABIN, fab, scalar))

    dst, src_a, src_b = (sel[..., s:s + OPERAND_FIELDS] for s in (S_DST, S_A, S_B))
    a_bits, b_bits = read(src_a), read(src_b)
    fa = lax.bitcast_convert_type(a_bits, jnp.float32)
    fb = lax.bitcast_convert_type(b_bits, jnp.float32)
    fs = lax.bitcast_convert_type(sel[..., S_SCALAR], jnp.float32)[..., None]
    op = sel[..., S_OP][..., None]
    value = jnp.select(
        [op == Op.ADD, op == Op.SUB, op == Op.MUL, op == Op.FMA, op == Op.MAX, op == Op.MIN,
         op == Op.ITOF],
        [fa + fb, fa - fb, fa * fb, fa + fb * fs, jnp.maximum(fa, fb), jnp.minimum(fa, fb),
         lax.bitcast_convert_type(a_bits, jnp.int32).astype(jnp.float32)], fa)
    shift = jnp.minimum(b_bits, jnp.uint32(31))
    # round half to even, saturating at the int32 range (NaN gives 0)
    rounded = jnp.clip(jnp.round(fa), -2.0**31, 2.0**31 - 128)
    rounded = jnp.where(jnp.isnan(fa), 0.0, rounded).astype(jnp.int32)
    result = jnp.select(
        [op == Op.MOV, op == Op.IADDV, op == Op.ISUBV, op == Op.SHL, op == Op.SHR,
         op == Op.FTOI],
        [a_bits, a_bits + b_bits, a_bits - b_bits, jnp.left_shift(a_bits, shift),
         jnp.right_shift(a_bits, shift), lax.bitcast_convert_type(rounded, jnp.uint32)],
        lax.bitcast_convert_type(value, jnp.uint32))

    # memory destination: scatter the valid lanes (others point past SRAM and are dropped)
    to_mem = lane_ok & (dst[..., O_CLS] == CLS_MEM)[..., None]
    rows = jnp.arange(sram.shape[0])[:, None, None]
    cols = jnp.arange(sram.shape[1])[None, :, None]
    sram = sram.at[rows, cols, jnp.where(to_mem, address(dst), W)].set(result, mode="drop")
    to_fabric = advanced & (dst[..., O_CLS] == CLS_FABOUT)
    push_color = jnp.where(to_fabric, dst[..., O_COLOR], -1)
    push_data = result[..., 0]
    iq_pop = jnp.uint32(0)
    for record in (src_a, src_b):
        popped = advanced & (record[..., O_CLS] == CLS_FABIN)
        iq_pop = iq_pop | jnp.where(popped, bits.bit(record[..., O_COLOR]), jnp.uint32(0))

    new_prog = prog + width
    done = advanced & (new_prog >= length)
    slot_prog = jnp.where(pick, new_prog[..., None], slot_prog)
    slot_active = jnp.where(pick & done[..., None], 0, slot_active)
    done_bit = jnp.where(done, bits.bit(sel[..., S_DONE_TASK]), jnp.uint32(0))
    activated = activated | jnp.where(sel[..., S_DONE_KIND] == Done.ACTIVATE, done_bit, 0)
    blocked = blocked & ~jnp.where(sel[..., S_DONE_KIND] == Done.UNBLOCK, done_bit, 0)
    owner = jnp.where(advanced, jnp.where(done, -1, chosen), owner)
    stalled = active.any(axis=-1) & ~advanced
    return DatapathOut(sram, slot_active, slot_prog, owner, activated, blocked, iq_pop,
                       push_color, push_data, advanced, stalled)
