"""The main thread of every compute engine for one cycle: task scheduling, scalar
instructions, branches, task bits, and the issue of DSD ops into slots.

Rules (documented in docs/engine.md):
- An idle CE starts the ready task with the lowest id (data task ids = their color;
  a data task is ready when a wavelet of its color waits in the CE input queue; a local
  task when activated); starting a task takes one cycle and, for a data task, pops the
  wavelet into the WAVELET register.
- A running task executes one instruction per cycle. A synchronous DSD op occupies slot 0
  and the main thread waits until it finishes; an async one takes the lowest free slot
  among 1..S-1 (waiting while none is free) and the task goes on.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Int32, UInt32

from fabric import bits, pe_minor, queues
from fabric.isa import (
    D_BASE,
    D_BASE_REG,
    D_COLOR,
    D_KIND,
    D_LENGTH,
    D_LENGTH_REG,
    D_ROW_LENGTH,
    D_ROW_STRIDE,
    D_STRIDE,
    FMT_MASK,
    FMT_SHIFT,
    I_A,
    I_A_KIND,
    I_ASYNC,
    I_B,
    I_B_KIND,
    I_DONE_KIND,
    I_DONE_TASK,
    I_DST,
    I_DST_KIND,
    I_FMT,
    I_OP,
    I_S,
    I_S_KIND,
    I_SIMD,
    I_TARGET,
    PACKED_STRIDE,
    Op,
    Operand,
    Port,
)
from fabric.queues import RING
from fabric.scatter import scatter_rows
from fabric.state import (
    CLS_FABIN,
    CLS_FABOUT,
    CLS_MEM,
    CLS_NONE,
    CLS_SCALAR,
    ERR_ADDRESS,
    ERR_FABIN_TASK,
    ERR_NONE,
    ERR_ROUTE_IN,
    ERR_ROUTE_OUT,
    ERR_TASK,
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
    S_ISSUED,
    S_LEN,
    S_OP,
    S_SCALAR,
    S_SIMD,
    S_TASK,
    SLOT_FIELDS,
    SYNC_SLOT,
    need_word,
)


class ControlOut(NamedTuple):
    """The control phase's output: the main threads' state after the cycle, the slots with
    this cycle's issue, and the per-PE writes and counters the engine applies."""

    reg_at: Int32[Array, "R C"]  # register the instruction writes (num_registers: none)
    reg_value: Int32[Array, "R C"]  # registers stay out of the lax.cond, like SRAM
    pc: Int32[Array, "R C"]  # -1 = no task running
    task: Int32[Array, "R C"]
    wavelet: UInt32[Array, "R C"]
    activated: UInt32[Array, "R C"]
    blocked: UInt32[Array, "R C"]
    slots: Int32[Array, "R C S F"]
    slot_active: Int32[Array, "R C S"]
    slot_prog: Int32[Array, "R C S"]
    slot_need: UInt32[Array, "R C S"]
    slot_issued: Int32[Array, "R C S"]
    error: Int32[Array, "R C"]  # this cycle's error code (ERR_NONE: none)
    error_info: Int32[Array, "R C"]
    iq_pop: UInt32[Array, "R C"]  # color popped by a data task start
    busy: Bool[Array, "R C"]  # the main thread did something
    waiting: Bool[Array, "R C"]  # a task runs but the main thread could not proceed
    store_at: Int32[Array, "R C"]  # SRAM word a STORE writes (sram_words: none);
    store_value: UInt32[Array, "R C"]  # SRAM itself stays out of the lax.cond


def _gather(table, index):
    """table[..., index] with index [R, C] (clipped to the table)."""
    index = jnp.clip(index, 0, table.shape[-1] - 1)
    return jnp.take_along_axis(table, index[..., None], axis=-1)[..., 0]


def _scalar(kind, value, regs, wavelet):
    """Value (int32 bits) of a scalar operand."""
    return jnp.where(kind == Operand.IMM, value,
                     jnp.where(kind == Operand.REG, _gather(regs, value),
                               jnp.where(kind == Operand.WAVELET,
                                         lax.bitcast_convert_type(wavelet, jnp.int32), 0)))


def _is_fabric(record):
    """bool [R, C]: the operand record [R, C, OPERAND_FIELDS] is a fabric input or output."""
    return (record[..., O_CLS] >= CLS_FABIN) & (record[..., O_CLS] <= CLS_FABOUT)


def _f32(x):
    return lax.bitcast_convert_type(x, jnp.float32)


def _i32(x):
    return lax.bitcast_convert_type(x, jnp.int32)


def _resolve(config, tables, kind, value, regs, wavelet):
    """Operand record [R, C, 6] (class, base, row length, stride, row stride, color) and
    its length [R, C] at issue time."""
    row = tables.dsd[jnp.clip(value, 0, tables.dsd.shape[0] - 1)]
    is_dsd = kind == Operand.DSD
    cls = jnp.where(is_dsd, row[..., D_KIND],
                    jnp.where(kind == Operand.NONE, CLS_NONE, CLS_SCALAR))
    base_reg = row[..., D_BASE_REG]
    base = row[..., D_BASE] + jnp.where(base_reg >= 0, _gather(regs, base_reg), 0)
    base = jnp.where(is_dsd, base, _scalar(kind, value, regs, wavelet))
    length_reg = row[..., D_LENGTH_REG]
    length = jnp.where(length_reg >= 0, _gather(regs, length_reg), row[..., D_LENGTH])
    row_length = jnp.where(row[..., D_ROW_LENGTH] > 0, row[..., D_ROW_LENGTH],
                           jnp.maximum(length, 1))
    fields = {O_CLS: cls, O_BASE: base, O_ROWLEN: row_length, O_STRIDE: row[..., D_STRIDE],
              O_ROWSTRIDE: row[..., D_ROW_STRIDE], O_COLOR: row[..., D_COLOR]}
    record = jnp.stack([fields[f] for f in range(OPERAND_FIELDS)], axis=-1)
    return record, length


def _address_error(config, record, length, half):
    """(bad, first bad word) for a memory operand reaching outside SRAM; a 16-bit operand
    (`half`) counts its addresses in half-words."""
    base, row_length, stride, row_stride = (
        record[..., f] for f in (O_BASE, O_ROWLEN, O_STRIDE, O_ROWSTRIDE))
    inner = (jnp.minimum(row_length, length) - 1) * stride
    outer = ((length + row_length - 1) // row_length - 1) * row_stride
    lo = base + jnp.minimum(inner, 0) + jnp.minimum(outer, 0)
    hi = base + jnp.maximum(inner, 0) + jnp.maximum(outer, 0)
    limit = jnp.where(half, 2 * config.sram_words, config.sram_words)
    bad = (record[..., O_CLS] == CLS_MEM) & (length > 0) & ((lo < 0) | (hi >= limit))
    first = jnp.where(lo < 0, lo, hi)
    return bad, jnp.where(half, first // 2, first)


def step(config, tables, state) -> ControlOut:
    """One cycle of every main thread. When no CE can execute an instruction or start a task
    (all are idle or waiting on a synchronous DSD op, as in long streaming phases), the
    whole phase is skipped: the result is the same, computed for free."""
    running = state.pc >= 0
    execute = running & (state.slot_active[..., SYNC_SLOT] == 0)
    ready = (((queues.nonempty(state.iq_ctl) & tables.task_data)
              | (state.activated & ~tables.task_data)) & ~state.blocked & tables.task_defined)
    work = (execute | (~running & (ready != 0))).any()
    return lax.cond(work, lambda t, s: _step(config, t, s),
                    lambda t, s: _unchanged(config, s), tables, state)


def _unchanged(config, state) -> ControlOut:
    return ControlOut(
        reg_at=jnp.full_like(state.pc, config.num_registers),
        reg_value=jnp.zeros_like(state.pc),
        pc=state.pc,
        task=state.task,
        wavelet=state.wavelet,
        activated=state.activated,
        blocked=state.blocked,
        slots=state.slots,
        slot_active=state.slot_active,
        slot_prog=state.slot_prog,
        slot_need=state.slot_need,
        slot_issued=state.slot_issued,
        error=jnp.zeros_like(state.error),
        error_info=jnp.zeros_like(state.error_info),
        iq_pop=jnp.zeros_like(state.activated),
        busy=jnp.zeros_like(state.pc, dtype=bool),
        waiting=state.pc >= 0,
        store_at=jnp.full_like(state.pc, config.sram_words),
        store_value=jnp.zeros_like(state.wavelet),
    )


class _Operands(NamedTuple):
    """The instruction's operands resolved at issue time (records: O_* fields)."""

    dst: Int32[Array, "R C O"]
    src_a: Int32[Array, "R C O"]
    src_b: Int32[Array, "R C O"]
    length: Int32[Array, "R C"]  # elements of the op: the destination's length


class _Writes(NamedTuple):
    """Per-PE writes of a scalar instruction, applied by the caller through scatters."""

    reg_at: Int32[Array, "R C"]  # register written (num_registers: none)
    reg_value: Int32[Array, "R C"]
    store_at: Int32[Array, "R C"]  # SRAM word a STORE writes (sram_words: none)
    store_value: UInt32[Array, "R C"]


class _Issued(NamedTuple):
    """The slots after this cycle's issue."""

    slots: Int32[Array, "R C S F"]
    slot_active: Int32[Array, "R C S"]
    slot_prog: Int32[Array, "R C S"]
    slot_need: UInt32[Array, "R C S"]
    slot_issued: Int32[Array, "R C S"]
    no_slot: Bool[Array, "R C"]  # an async op finds no free slot: the task waits


class _Started(NamedTuple):
    """What an idle CE's task start changes."""

    start: Bool[Array, "R C"]
    pc: Int32[Array, "R C"]
    task: Int32[Array, "R C"]
    wavelet: UInt32[Array, "R C"]  # a data task's wavelet, popped from its input queue
    iq_pop: UInt32[Array, "R C"]
    activated: UInt32[Array, "R C"]  # a local task's activation is consumed by its start


def _step(config, tables, state) -> ControlOut:
    """The main threads' phases in order, each reading the start-of-cycle state."""
    running = state.pc >= 0
    execute = running & (state.slot_active[..., SYNC_SLOT] == 0)
    row = tables.instr[jnp.maximum(state.pc, 0)]  # [R, C, I_FIELDS]
    op = row[..., I_OP]
    a = _scalar(row[..., I_A_KIND], row[..., I_A], state.regs, state.wavelet)
    b = _scalar(row[..., I_B_KIND], row[..., I_B], state.regs, state.wavelet)
    is_dsd = execute & (op >= Op.MOV) & (op <= Op.LAST_DSD)
    is_mem = execute & ((op == Op.LOAD) | (op == Op.STORE))

    result = _register_op(op, a, b)
    activated, blocked, bad_task = _task_bits(tables, state, op, a, execute)
    ops = _operands(config, tables, state, row)
    writes = _scalar_memory(config, state, row, op, a, result, execute, ops)
    error, info = _errors(config, tables, row, ops, a, is_dsd, is_mem, bad_task)
    ok = error == ERR_NONE
    issued = _issue(config, state, row, op, ops, is_dsd, ok)
    stalled = issued.no_slot | ~ok
    pc, task = _next_pc(state, row, op, a, b, execute, stalled)
    started = _schedule(config, tables, state, activated, blocked, pc, task)

    busy = (execute & ~stalled) | started.start
    return ControlOut(
        reg_at=writes.reg_at,
        reg_value=writes.reg_value,
        pc=started.pc,
        task=started.task,
        wavelet=started.wavelet,
        activated=started.activated,
        blocked=blocked,
        slots=issued.slots,
        slot_active=issued.slot_active,
        slot_prog=issued.slot_prog,
        slot_need=issued.slot_need,
        slot_issued=issued.slot_issued,
        error=error,
        error_info=info,
        iq_pop=started.iq_pop,
        busy=busy,
        waiting=running & ~busy,
        store_at=writes.store_at,
        store_value=writes.store_value,
    )


# ---- scalar register ops ------------------------------------------------------------------
def _register_op(op, a, b):
    """int32 [R, C]: the result of a register instruction (SET .. FMUL) on a, b (int32
    bits); 0 for other instructions."""
    fa, fb = _f32(a), _f32(b)
    return jnp.select(
        [op == Op.SET, op == Op.IADD, op == Op.ISUB, op == Op.IMUL,
         op == Op.FADD, op == Op.FSUB, op == Op.FMUL],
        [a, a + b, a - b, a * b, _i32(fa + fb), _i32(fa - fb), _i32(fa * fb)], 0)


# ---- task bits ----------------------------------------------------------------------------
def _task_bits(tables, state, op, a, execute):
    """(activated, blocked) uint32 [R, C] after activate / block / unblock of task a, and
    bool [R, C]: task a is not defined on the PE."""
    task_bit = bits.bit(a)
    task_op = execute & ((op == Op.ACTIVATE) | (op == Op.BLOCK) | (op == Op.UNBLOCK))
    bad_task = task_op & ((task_bit & tables.task_defined) == 0)
    activated = state.activated | jnp.where(execute & (op == Op.ACTIVATE), task_bit, 0)
    blocked = state.blocked | jnp.where(execute & (op == Op.BLOCK), task_bit, 0)
    blocked = blocked & ~jnp.where(execute & (op == Op.UNBLOCK), task_bit, 0)
    return activated, blocked, bad_task


# ---- operands -----------------------------------------------------------------------------
def _operands(config, tables, state, row) -> _Operands:
    """The destination and sources of the instruction at `row` (int32 [R, C, I_FIELDS])."""
    regs, wavelet = state.regs, state.wavelet
    dst, length = _resolve(config, tables, row[..., I_DST_KIND], row[..., I_DST], regs, wavelet)
    src_a, _ = _resolve(config, tables, row[..., I_A_KIND], row[..., I_A], regs, wavelet)
    src_b, _ = _resolve(config, tables, row[..., I_B_KIND], row[..., I_B], regs, wavelet)
    return _Operands(dst=dst, src_a=src_a, src_b=src_b, length=length)


# ---- scalar memory access and register writes ---------------------------------------------
def _scalar_memory(config, state, row, op, a, result, execute, ops: _Operands) -> _Writes:
    """LOAD reads the word at operand a's base; STORE writes a to the destination's base;
    `result` (of a register op) or the loaded word goes to register I_DST."""
    G, W = config.num_registers, config.sram_words
    loaded = pe_minor.read(state.sram, jnp.clip(ops.src_a[..., O_BASE], 0, W - 1))
    result = jnp.where(op == Op.LOAD, _i32(loaded), result)
    writes = execute & (((op >= Op.SET) & (op <= Op.FMUL)) | (op == Op.LOAD))
    # Per-PE writes go through scatters (index past the end = no write), applied by the
    # caller: written as a broadcast select, XLA fuses and recomputes the whole instruction
    # once per element, and registers that crossed the cond would be copied every cycle.
    # (No DSD op writes a register, so the op `_issue` issues reads the same registers.)
    store_word = ops.dst[..., O_BASE]
    store_at = jnp.where(execute & (op == Op.STORE) & (store_word >= 0) & (store_word < W),
                         store_word, W)
    return _Writes(reg_at=jnp.where(writes, row[..., I_DST], G), reg_value=result,
                   store_at=store_at, store_value=lax.bitcast_convert_type(a, jnp.uint32))


# ---- runtime errors -----------------------------------------------------------------------
def _errors(config, tables, row, ops: _Operands, a, is_dsd, is_mem, bad_task):
    """(error code, info) int32 [R, C]: the first error of the instruction, checked operand
    by operand (dst, a, b: address, route out, route in, data task color), then the task
    id of a task instruction."""
    error, info = jnp.full_like(a, ERR_NONE), jnp.zeros_like(a)
    for record, role in ((ops.dst, "dst"), (ops.src_a, "a"), (ops.src_b, "b")):
        half = ((row[..., I_FMT] >> FMT_SHIFT[role]) & FMT_MASK) != 0
        bad, where_ = _address_error(config, record, jnp.where(is_mem, 1, ops.length), half)
        color = record[..., O_COLOR]
        cbit = bits.bit(color)
        cls = record[..., O_CLS]
        out_bad = (cls == CLS_FABOUT) & ((tables.rx_mask[..., Port.RAMP] & cbit) == 0)
        in_bad = (cls == CLS_FABIN) & ((tables.tx_mask[..., Port.RAMP] & cbit) == 0)
        task_bad = (cls == CLS_FABIN) & ((tables.task_data & cbit) != 0)
        for flag, code, val in ((bad, ERR_ADDRESS, where_), (out_bad, ERR_ROUTE_OUT, color),
                                (in_bad, ERR_ROUTE_IN, color), (task_bad, ERR_FABIN_TASK, color)):
            new = (is_dsd | is_mem) & flag & (error == ERR_NONE)
            error = jnp.where(new, code, error)
            info = jnp.where(new, val, info)
    new = bad_task & (error == ERR_NONE)
    return jnp.where(new, ERR_TASK, error), jnp.where(new, a, info)


# ---- DSD op issue -------------------------------------------------------------------------
def _width(row, ops: _Operands):
    """int32 [R, C]: elements the op processes per cycle."""
    dst, src_a, src_b = ops.dst, ops.src_a, ops.src_b
    # a memory destination of stride 0 accumulates into one word: one element per cycle
    fabric = _is_fabric(dst) | ((dst[..., O_CLS] == CLS_MEM) & (dst[..., O_STRIDE] == 0))
    for record in (src_a, src_b):
        fabric = fabric | _is_fabric(record)
    # an element group never spans more than one row end of a 2D operand
    width = jnp.where(fabric, 1, row[..., I_SIMD])
    for record in (dst, src_a, src_b):
        in_memory = record[..., O_CLS] == CLS_MEM
        width = jnp.where(in_memory, jnp.minimum(width, record[..., O_ROWLEN]), width)
    width = jnp.maximum(width, 1)
    # a packed fabric operand (two 16-bit values per wavelet) moves a pair per cycle
    packed = jnp.zeros_like(fabric)
    for record in (dst, src_a, src_b):
        packed = packed | (_is_fabric(record) & (record[..., O_STRIDE] == PACKED_STRIDE))
    return jnp.where(packed, 2, width)


def _issue(config, state, row, op, ops: _Operands, is_dsd, ok) -> _Issued:
    """Issue the DSD op where it has no error (`ok`): a synchronous op into slot 0, an
    async one into the lowest free async slot (none free: `no_slot`, the task waits)."""
    S = config.num_async_slots + 1
    dst, src_a, src_b = ops.dst, ops.src_a, ops.src_b
    is_async = row[..., I_ASYNC] != 0
    active = state.slot_active != 0  # [R, C, S]
    free_async = bits.pack(~active[..., 1:], S - 1)
    first_free = bits.lowest(free_async)
    slot = jnp.where(is_async, first_free + 1, SYNC_SLOT)
    no_slot = is_dsd & is_async & (first_free < 0)
    issue = is_dsd & ok & ~no_slot & (ops.length > 0)
    head = {S_OP: op, S_LEN: ops.length, S_SIMD: _width(row, ops),
            S_DONE_KIND: jnp.where(is_async, row[..., I_DONE_KIND], 0),
            S_DONE_TASK: row[..., I_DONE_TASK],
            S_SCALAR: _scalar(row[..., I_S_KIND], row[..., I_S], state.regs, state.wavelet),
            S_ISSUED: jnp.broadcast_to(state.cycle, op.shape), S_FMT: row[..., I_FMT],
            S_TASK: state.task}
    # the operand records follow the head fields, in the order dst, a, b
    assert (S_DST, S_A, S_B) == tuple(S_DST + r * OPERAND_FIELDS for r in range(3))
    new_slot = jnp.concatenate([jnp.stack([head[f] for f in range(S_DST)], axis=-1),
                                dst, src_a, src_b], axis=-1)  # [R, C, SLOT_FIELDS]
    assert new_slot.shape[-1] == SLOT_FIELDS
    issued = issue[..., None] & (jnp.arange(S)[None, None, :] == slot[..., None])  # [R, C, S]
    return _Issued(
        slots=scatter_rows(state.slots, jnp.where(issue, slot, S), new_slot),
        slot_active=jnp.where(issued, 1, state.slot_active),
        slot_prog=jnp.where(issued, 0, state.slot_prog),
        slot_need=jnp.where(issued, need_word(dst, src_a, src_b)[..., None], state.slot_need),
        slot_issued=jnp.where(issued, state.cycle, state.slot_issued),
        no_slot=no_slot,
    )


# ---- control flow -------------------------------------------------------------------------
def _next_pc(state, row, op, a, b, execute, stalled):
    """(pc, task) int32 [R, C] after the instruction: a branch, ret (pc and task -1), the
    next instruction, or the same one while it stalls."""
    taken = ((op == Op.JUMP) | ((op == Op.BZ) & (a == 0)) | ((op == Op.BNZ) & (a != 0))
             | ((op == Op.BLT) & (a < b)))
    pc = state.pc
    next_pc = jnp.where(op == Op.RET, -1,
                        jnp.where(taken, row[..., I_TARGET], jnp.where(stalled, pc, pc + 1)))
    return (jnp.where(execute, next_pc, pc),
            jnp.where(execute & (op == Op.RET), -1, state.task))


# ---- scheduler on idle CEs ----------------------------------------------------------------
def _schedule(config, tables, state, activated, blocked, pc, task) -> _Started:
    """An idle CE starts its ready task with the lowest id (after this cycle's task bits)."""
    K = config.num_colors
    # a data task is ready when a wavelet of its color waits, a local task when activated;
    # a local task may hold the id of a color no data task of its PE is bound to
    data = tables.task_data
    ready = ((queues.nonempty(state.iq_ctl) & data) | (activated & ~data)) \
        & ~blocked & tables.task_defined
    chosen = bits.lowest(ready)
    start = (state.pc < 0) & (chosen >= 0)
    entry = _gather(tables.task_entry, chosen)
    data_start = start & ((data & bits.bit(chosen)) != 0)
    color = jnp.clip(chosen, 0, K - 1)
    slot_index = color * RING + queues.head_of(state.iq_ctl, color)
    head_data = pe_minor.read(state.iq_data, slot_index)
    return _Started(
        start=start,
        pc=jnp.where(start, entry, pc),
        task=jnp.where(start, chosen, task),
        wavelet=jnp.where(data_start, head_data, state.wavelet),
        iq_pop=jnp.where(data_start, bits.bit(chosen), jnp.uint32(0)),
        activated=activated & ~jnp.where(start & ~data_start, bits.bit(chosen),
                                         jnp.uint32(0)),
    )
