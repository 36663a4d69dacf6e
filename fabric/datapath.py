"""The datapath of every compute engine for one cycle: advance one DSD op.

Rules (documented in docs/engine.md):
- One op advances per cycle per CE. The slot that advanced last keeps the datapath while it
  can go on; otherwise the lowest-numbered slot that can go on takes it.
- An op whose operands are all in memory (or scalars) processes up to its SIMD width of
  elements per cycle; an op with a fabric operand processes one element per cycle.
- An op stalls while a fabric input queue is empty or its fabric output buffer is full
  (start-of-cycle occupancy).
- With SRAM banks and `config.bank_conflicts`, an op reading two memory sources whose element
  groups start in banks equal mod 4 spends a first cycle on one read (`bank_wait` holds
  its slot) and processes the group in the next.
- When an async op finishes it activates or unblocks its `on_done` task.
- Each operand has a format (fp32 or a 16-bit one, `S_FMT`): 16-bit memory operands are
  half-words of SRAM words, 16-bit fabric and scalar operands the low half of their 32
  bits. Float ops widen their sources to fp32 exactly, compute in fp32 and round the result
  once to the destination's format; lanes writing the two halves of one word merge them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Int32, UInt32

from fabric import bits, pe_minor, queues
from fabric.control import ControlOut
from fabric.isa import FMT_MASK, FMT_SHIFT, PACKED_STRIDE, Done, Op
from fabric.materialize import materialize
from fabric.numerics.convert import decode_code, encode_code
from fabric.queues import RING
from fabric.state import (
    CLS_FABIN,
    CLS_FABOUT,
    CLS_MEM,
    NEED_BITS,
    NEED_OUT,
    O_BASE,
    O_CLS,
    O_COLOR,
    O_ROWLEN,
    O_ROWSTRIDE,
    O_STRIDE,
    OPERAND_FIELDS,
    S_A,
    S_B,
    S_DONE_KIND,
    S_DONE_TASK,
    S_DST,
    S_FMT,
    S_LEN,
    S_OP,
    S_SCALAR,
    S_SIMD,
)


class DatapathOut(NamedTuple):
    """The datapath phase's output: SRAM, slots and task bits after the cycle, and what the
    advancing op pushed into the router or popped from the CE input queues."""

    sram: UInt32[Array, "R W C"]  # PE-minor, like FabricState.sram
    slot_active: Int32[Array, "R C S"]
    slot_prog: Int32[Array, "R C S"]
    owner: Int32[Array, "R C"]  # slot holding the datapath, -1 none
    op_record: Int32[Array, "R C F"]  # the record of the slot that advanced
    activated: UInt32[Array, "R C"]
    blocked: UInt32[Array, "R C"]
    iq_pop: UInt32[Array, "R C"]  # colors read from the CE input queues
    push_color: Int32[Array, "R C"]  # color sent into the router, -1 none
    push_data: UInt32[Array, "R C"]
    advanced: Bool[Array, "R C"]
    stalled: Bool[Array, "R C"]  # an op is pending but none could advance
    bank_wait: Int32[Array, "R C"]  # slot that made a group's first read this cycle, -1 none


def max_lanes(config, only_32bit: bool = False) -> int:
    """Most elements any op (or any op on 32-bit operands only) processes per cycle."""
    return max(w for (_, dtype), w in config.simd if not (only_32bit and dtype == "f16"))


def _queue_blocked(need, iq_empty, rq_full):
    """uint32 [R, C], bit 0 set where some fabric operand of the op whose readiness word is
    `need` (fabric.state) cannot move one element this cycle (an input queue empty, an
    output buffer full); other bits are junk.

    iq_empty, rq_full: uint32 [R, C] color bitmasks of the start-of-cycle queues, shifted up
    by one (bit 0, "no fabric operand", is never set). Few integer ops per slot keep the
    caller's loop memory-bound, which XLA:CPU runs on one thread (a loop it splits over
    threads pays a thread hand-off in every cycle).
    """
    blocked = jnp.uint32(0)
    for r in range(3):
        color = jnp.right_shift(need, jnp.uint32(NEED_BITS * r)) & jnp.uint32(31)
        out = (jnp.right_shift(need, jnp.uint32(NEED_BITS * r + NEED_OUT)) & 1) != 0
        blocked = blocked | jnp.right_shift(jnp.where(out, rq_full, iq_empty), color)
    return blocked


def step(config, state, ctl: ControlOut, half_ops: bool = True) -> DatapathOut:
    """One cycle of every datapath, from the start-of-cycle `state` and the control phase's
    output `ctl` (its slots, with this cycle's issue, and task bits). half_ops (static): the
    program may issue ops with a 16-bit operand; False (no instruction has one) builds the
    fp32 datapath alone."""
    # the main thread's STORE of this cycle lands before the element group reads SRAM
    sram = pe_minor.write(state.sram, ctl.store_at, ctl.store_value)
    owner = state.owner  # int32 [R, C]: the slot that advanced last, -1 none
    Q = config.queue_depth
    S = ctl.slots.shape[-2]
    active = ctl.slot_active != 0
    # shifted up by one: bit c + 1 for color c (colors < 31, config)
    iq_empty = jnp.left_shift(~queues.nonempty(state.iq_ctl), jnp.uint32(1))
    rq_full = jnp.left_shift(queues.at_least(state.rq_ctl, Q), jnp.uint32(1))
    # The choice, slot by slot in one elementwise pass over the PEs: the slot that advanced
    # last if it can go on, else the ready op issued first (one issue per cycle, so issue
    # cycles are distinct): ops that share a fabric queue keep their order.
    owner_ready = jnp.zeros(owner.shape, dtype=bool)
    oldest = jnp.full(owner.shape, -1, jnp.int32)
    first = jnp.full(owner.shape, jnp.iinfo(jnp.int32).max, jnp.int32)
    for s in range(S):
        blocked_ops = _queue_blocked(ctl.slot_need[..., s], iq_empty, rq_full)
        ready = active[..., s] & ((blocked_ops & 1) == 0)
        owner_ready = owner_ready | (ready & (owner == s))
        older = ready & (ctl.slot_issued[..., s] < first)
        oldest = jnp.where(older, s, oldest)
        first = jnp.where(older, ctl.slot_issued[..., s], first)
    # computed once: every field read below depends on it (fabric.materialize)
    chosen = materialize(jnp.where(owner_ready, owner, oldest), state.cycle)
    advanced = chosen >= 0
    pick = jnp.arange(S)[None, None, :] == chosen[..., None]  # [R, C, S]
    # The chosen slot's fields. An op holds the datapath for many cycles, so the record of
    # the slot that advanced last is kept (`op_record`); the records of the PEs whose
    # datapath changes slot are gathered only in cycles where one does.
    at = jnp.maximum(chosen, 0)
    changed = advanced & (chosen != owner)

    def switch(record):
        gathered = jnp.take_along_axis(ctl.slots, at[..., None, None], axis=-2)[..., 0, :]
        return jnp.where(changed[..., None], gathered, record)

    sel = lax.cond(changed.any(), switch, lambda record: record, state.op_record)
    prog_sel = jnp.take_along_axis(ctl.slot_prog, at[..., None], axis=-1)[..., 0]
    # computed once for every lane and operand below
    prog_sel = materialize(prog_sel, state.cycle)
    # the datapath is the chosen op's (`advanced`: it holds it) but its group moves only
    # after both reads of a bank conflict (`moves`)
    bank_wait = jnp.full_like(owner, -1)
    moves = advanced
    if config.sram_banks and config.bank_conflicts:
        # the addresses are computed only in cycles where some advancing op reads two
        # memory sources (most cycles of most programs have none)
        pair = advanced & (sel[..., S_A + O_CLS] == CLS_MEM) & (sel[..., S_B + O_CLS] == CLS_MEM)
        first_read = lax.cond(
            pair.any(),
            lambda: pair & _bank_conflict(sel, prog_sel) & (state.bank_wait != chosen),
            lambda: jnp.zeros_like(pair))
        bank_wait = jnp.where(first_read, chosen, -1)
        moves = advanced & ~first_read
    # Cycles in which no advancing op has a 16-bit operand run the fp32 datapath: fewer
    # lanes (the fp32 widths) and no format conversion; the results are the same. A
    # program without 16-bit ops has only that datapath, and no per-cycle choice.
    lane_args = (state, sram, sel, prog_sel, moves)
    lanes32 = max_lanes(config, only_32bit=True)
    if half_ops:
        half = (moves & (sel[..., S_FMT] != 0)).any()
        index, new, push_data = lax.cond(
            half, lambda a: _lanes(config, *a, max_lanes(config), True),
            lambda a: _lanes(config, *a, lanes32, False, max_lanes(config)), lane_args)
    else:
        index, new, push_data = _lanes(config, *lane_args, lanes32, False, lanes32)
    # lanes writing one word write the same merged value (others point past SRAM: dropped)
    sram = pe_minor.write(sram, index, new)
    dst, src_a, src_b = (sel[..., s:s + OPERAND_FIELDS] for s in (S_DST, S_A, S_B))
    prog, length, width = prog_sel, sel[..., S_LEN], sel[..., S_SIMD]
    to_fabric = moves & (dst[..., O_CLS] == CLS_FABOUT)
    push_color = jnp.where(to_fabric, dst[..., O_COLOR], -1)
    iq_pop = jnp.uint32(0)
    for record in (src_a, src_b):
        popped = moves & (record[..., O_CLS] == CLS_FABIN)
        iq_pop = iq_pop | jnp.where(popped, bits.bit(record[..., O_COLOR]), jnp.uint32(0))

    new_prog = prog + width
    done = moves & (new_prog >= length)
    slot_prog = jnp.where(pick & moves[..., None], new_prog[..., None], ctl.slot_prog)
    slot_active = jnp.where(pick & done[..., None], 0, ctl.slot_active)
    done_bit = jnp.where(done, bits.bit(sel[..., S_DONE_TASK]), jnp.uint32(0))
    activated = ctl.activated | jnp.where(sel[..., S_DONE_KIND] == Done.ACTIVATE, done_bit, 0)
    blocked = ctl.blocked & ~jnp.where(sel[..., S_DONE_KIND] == Done.UNBLOCK, done_bit, 0)
    owner = jnp.where(advanced, jnp.where(done, -1, chosen), owner)
    stalled = active.any(axis=-1) & ~moves
    return DatapathOut(sram=sram, slot_active=slot_active, slot_prog=slot_prog, owner=owner,
                       op_record=sel, activated=activated, blocked=blocked, iq_pop=iq_pop,
                       push_color=push_color, push_data=push_data, advanced=moves,
                       stalled=stalled, bank_wait=bank_wait)


def _addresses(record, prog, lanes):
    """int32 [R, C, L]: element addresses (words, or half-words of a 16-bit operand) of the
    element group of `lanes` starting at element `prog` [R, C] of a memory operand.
    One division per operand; a group never spans more than one row end because issue caps
    the width at the shortest row (see control)."""
    row_length = jnp.maximum(record[..., O_ROWLEN], 1)
    row0 = prog // row_length
    col = (prog - row0 * row_length)[..., None] + lanes
    wrap = (col >= row_length[..., None]).astype(jnp.int32)
    col = col - wrap * row_length[..., None]
    return (record[..., O_BASE][..., None] + col * record[..., O_STRIDE][..., None]
            + (row0[..., None] + wrap) * record[..., O_ROWSTRIDE][..., None])


def _bank_conflict(sel, prog):
    """bool [R, C]: the op of record `sel` reads two memory sources whose element groups,
    from element `prog`, start in banks equal mod 4 (`FabricConfig.bank_class`: a 32-bit
    element at word w starts at half-word 2w, a 16-bit one at its half-word h; bank = that
    half-word mod 8)."""
    fmt = sel[..., S_FMT]
    first = jnp.zeros((1, 1, 1), jnp.int32)
    classes, in_memory = [], []
    for field, role in ((S_A, "a"), (S_B, "b")):
        record = sel[..., field:field + OPERAND_FIELDS]
        element = _addresses(record, prog, first)[..., 0]
        half = ((fmt >> FMT_SHIFT[role]) & FMT_MASK) != 0
        classes.append(jnp.where(half, element, 2 * element) & 3)
        in_memory.append(record[..., O_CLS] == CLS_MEM)
    return in_memory[0] & in_memory[1] & (classes[0] == classes[1])


def _lanes(config, state, sram, sel, prog, advanced, n_lanes, half_path, n_out=None):
    """The element group of the advancing op of every CE: what it reads, computes and writes.

    n_lanes: elements computed per CE (at least the op's width); half_path: handle 16-bit
    operands (False: every operand is 32-bit, as the caller has checked); n_out: lanes
    returned (the fp32 path pads its n_lanes to it with lanes that write nothing, so both
    branches of a cond agree; default n_lanes).
    Returns (SRAM word index [R, C, L] (sram_words: no write), word value [R, C, L],
    the first element's result [R, C] for a fabric output), L = n_out.
    """
    n_lanes_all = n_lanes if n_out is None else n_out
    K, W = config.num_colors, config.sram_words
    lanes = jnp.arange(n_lanes, dtype=jnp.int32)[None, None, :]
    length, width = sel[..., S_LEN], sel[..., S_SIMD]
    k = prog[..., None] + lanes  # [R, C, L]
    lane_ok = advanced[..., None] & (lanes < width[..., None]) & (k < length[..., None])

    def address(record):
        return _addresses(record, prog, lanes)

    def iq_head(color):
        index = color * RING + queues.head_of(state.iq_ctl, color)
        return pe_minor.read(state.iq_data, index)

    def word_of(addr, fmt):
        """(word address, bit shift) of element addresses [R, C, L]; 16-bit operands
        (fmt != 0) address half-words: element 2k low half of word k, 2k+1 the high half."""
        if not half_path:
            return addr, jnp.uint32(0)
        half = fmt != 0
        word = jnp.where(half, addr >> 1, addr)
        return word, jnp.where(half, (addr & 1) * 16, 0).astype(jnp.uint32)

    def read(record, mem):
        cls = record[..., O_CLS][..., None]
        color = jnp.clip(record[..., O_COLOR], 0, K - 1)
        fab = iq_head(color)[..., None]
        if half_path:  # a packed wavelet: lane 0 takes its low half, lane 1 its high half
            packed = (record[..., O_STRIDE] == PACKED_STRIDE)[..., None]
            fab = jnp.right_shift(fab, jnp.where(packed, lanes * 16, 0).astype(jnp.uint32))
        scalar = lax.bitcast_convert_type(record[..., O_BASE], jnp.uint32)[..., None]
        return jnp.where(cls == CLS_MEM, mem, jnp.where(cls == CLS_FABIN, fab, scalar))

    fmt = sel[..., S_FMT]
    f_dst, f_a, f_b, f_s = (((fmt >> FMT_SHIFT[r]) & FMT_MASK)[..., None]
                            for r in ("dst", "a", "b", "s"))
    dst, src_a, src_b = (sel[..., s:s + OPERAND_FIELDS] for s in (S_DST, S_A, S_B))
    # Both sources' SRAM words come from one gather, one pass over the PEs' SRAM: a source
    # not in memory reads the destination's word (or the other source's) instead, on a
    # line that pass or the write brings in anyway, never a line of its own.
    (word_a, shift_a), (word_b, shift_b) = (word_of(address(r), f) for r, f in
                                            ((src_a, f_a), (src_b, f_b)))
    is_mem = [(r[..., O_CLS] == CLS_MEM)[..., None] for r in (src_a, src_b)]
    word_a = jnp.where(is_mem[0], word_a, word_of(address(dst), f_dst)[0])
    word_b = jnp.where(is_mem[1], word_b, word_a)
    # the addresses computed once: fused into the gather, XLA:CPU would compute every
    # operand's address once per gathered index
    at = materialize(jnp.clip(jnp.concatenate([word_a, word_b], axis=-1), 0, W - 1),
                     state.cycle)
    words = pe_minor.read(sram, at)
    a_bits = read(src_a, jnp.right_shift(words[..., :n_lanes], shift_a))
    b_bits = read(src_b, jnp.right_shift(words[..., n_lanes:], shift_b))
    # 16-bit sources widen to fp32 exactly (decode_code leaves fp32 operands unchanged)
    s_bits = lax.bitcast_convert_type(sel[..., S_SCALAR], jnp.uint32)[..., None]
    if half_path:
        a_bits32, b_bits32, s_bits = (decode_code(x, f) for x, f in
                                      ((a_bits, f_a), (b_bits, f_b), (s_bits, f_s)))
    else:
        a_bits32, b_bits32 = a_bits, b_bits
    fa, fb, fs = (lax.bitcast_convert_type(x, jnp.float32) for x in (a_bits32, b_bits32, s_bits))
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
    # the one rounding of a float result to a 16-bit destination; a MOV within one format
    # copies bits, a MOV across formats converts
    rounded_value = lax.bitcast_convert_type(value, jnp.uint32)
    if half_path:
        rounded_value = encode_code(rounded_value, f_dst)
    result = jnp.select(
        [op == Op.MOV, op == Op.IADDV, op == Op.ISUBV, op == Op.SHL, op == Op.SHR,
         op == Op.FTOI],
        [jnp.where(f_a == f_dst, a_bits, rounded_value), a_bits + b_bits, a_bits - b_bits,
         jnp.left_shift(a_bits, shift), jnp.right_shift(a_bits, shift),
         lax.bitcast_convert_type(rounded, jnp.uint32)],
        rounded_value)
    if not half_path:
        index = jnp.where(lane_ok & (dst[..., O_CLS] == CLS_MEM)[..., None], address(dst), W)
        pad = n_lanes_all - n_lanes  # the fp32 path fills the 16-bit path's lanes with nothing
        if pad:
            index = jnp.concatenate([index, jnp.full(index.shape[:-1] + (pad,), W,
                                                     index.dtype)], -1)
            result = jnp.concatenate([result, jnp.zeros(result.shape[:-1] + (pad,),
                                                        result.dtype)], -1)
        return index, result, result[..., 0]
    result = jnp.where(f_dst != 0, result & jnp.uint32(0xFFFF), result)

    # memory destination: scatter the valid lanes (others point past SRAM and are dropped).
    # Every lane writes a whole word: the word as read, with the bits of each lane that
    # targets it (one or two 16-bit halves, or all 32 bits) replaced.
    to_mem = lane_ok & (dst[..., O_CLS] == CLS_MEM)[..., None]
    word, wshift = word_of(address(dst), f_dst)
    mask = jnp.where(f_dst != 0, jnp.left_shift(jnp.uint32(0xFFFF), wshift),
                     jnp.uint32(0xFFFFFFFF))
    put = jnp.left_shift(result, wshift)
    new = _merge_words(sram, to_mem, word, mask, put, state.cycle)
    # a packed fabric output sends lanes 0 and 1 in one wavelet
    pair = result[..., 0] | jnp.where(lane_ok[..., 1], result[..., 1] << 16, jnp.uint32(0))
    packed_out = (dst[..., O_CLS] == CLS_FABOUT) & (dst[..., O_STRIDE] == PACKED_STRIDE)
    return jnp.where(to_mem, word, W), new, jnp.where(packed_out, pair, result[..., 0])


def _merge_words(sram, to_mem, word, mask, put, cycle):
    """The word each lane writes: the word as it is in SRAM with the bits (`mask`) of every
    lane that writes it replaced by that lane's bits (`put`), so lanes writing the two halves
    of one word agree on its new value. All [R, C, L]; returns uint32 [R, C, L]."""
    # computed once: each lane's word, mask and value feed every other lane's merge
    to_mem, word, mask, put = materialize((to_mem, word, mask, put), cycle)
    merged_mask = jnp.zeros_like(put)
    merged = jnp.zeros_like(put)
    for j in range(word.shape[-1]):
        same = to_mem[..., j:j + 1] & (word[..., j:j + 1] == word)
        merged_mask = merged_mask | jnp.where(same, mask[..., j:j + 1], jnp.uint32(0))
        merged = merged | jnp.where(same, put[..., j:j + 1], jnp.uint32(0))
    old = pe_minor.read(sram, jnp.clip(word, 0, sram.shape[1] - 1))
    return (old & ~merged_mask) | merged
