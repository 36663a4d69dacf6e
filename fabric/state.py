"""`FabricState`: the whole simulated fabric as one immutable pytree.

Every per-PE leaf has the grid (R, C) as its leading axes, so that the fabric can be split
over devices along rows and columns; SRAM and the FIFO data are stored PE-minor,
[R, W, C] and [R, KRING, C] (rows leading, columns last: see fabric.pe_minor). Axis
letters: R, C = grid; K = colors; KRING = K * RING FIFO slots; CTL = FIFO control planes;
Q = queue depth; W = SRAM words; G = registers; S = DSD slots (slot 0 = main thread, 1.. =
async microthreads); F = slot fields; O = operand record fields (O_*); P = link ports (N, S,
E, W).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Int32, UInt32

from fabric import queues
from fabric.config import FabricConfig
from fabric.queues import CTL_PLANES, RING

# ---- DSD slot fields ------------------------------------------------------------------------
# slot 0 holds the main thread's (synchronous) op; async ops take slots 1 .. S-1
SYNC_SLOT = 0
# operand classes held in a slot
CLS_NONE, CLS_MEM, CLS_FABIN, CLS_FABOUT, CLS_SCALAR = 0, 1, 2, 3, 4
# Fields written once at issue; whether a slot is active and how far its op has got live
# in `slot_active` / `slot_prog`, which change every cycle.
# S_FMT: the operand formats of the op (isa.I_FMT); a 16-bit memory operand's base and
# strides count half-words. S_TASK: the task that issued the op, so that a report can say
# whose an op on memory alone is when several programs share a PE (fabric.part_report).
HEAD_FIELDS = 9
S_OP, S_LEN, S_SIMD, S_DONE_KIND, S_DONE_TASK, S_SCALAR, S_ISSUED, S_FMT, S_TASK = range(
    HEAD_FIELDS)
OPERAND_FIELDS = 6  # class, base (or scalar bits), row length, stride, row stride, color
O_CLS, O_BASE, O_ROWLEN, O_STRIDE, O_ROWSTRIDE, O_COLOR = range(OPERAND_FIELDS)
S_DST, S_A, S_B = (HEAD_FIELDS + r * OPERAND_FIELDS for r in range(3))
SLOT_FIELDS = HEAD_FIELDS + 3 * OPERAND_FIELDS

# ---- slot readiness words -----------------------------------------------------------------
# Written at issue beside each slot's record, so that choosing the slot that advances reads
# one word per slot: for the operands dst, a, b (r = 0, 1, 2) bits 6r .. 6r+4 hold the
# color of a fabric operand plus one (0: not a fabric operand), bit 6r + 5 is set for a
# fabric output (its router buffer must have room) and clear for an input (its queue
# must hold a wavelet).
NEED_BITS = 6
NEED_OUT = 5


def need_word(dst, src_a, src_b):
    """uint32 [R, C]: the readiness word of an op with operand records [R, C, 6] (see
    NEED_BITS above); fabric operands name a color below 31 (config)."""
    need = jnp.uint32(0)
    for r, record in enumerate((dst, src_a, src_b)):
        cls = record[..., O_CLS]
        fabric = (cls == CLS_FABIN) | (cls == CLS_FABOUT)
        field = jnp.where(fabric, ((record[..., O_COLOR] & 31) + 1).astype(jnp.uint32)
                          | jnp.where(cls == CLS_FABOUT, jnp.uint32(1 << NEED_OUT),
                                      jnp.uint32(0)), jnp.uint32(0))
        need = need | jnp.left_shift(field, jnp.uint32(NEED_BITS * r))
    return need


# ---- runtime error codes ---------------------------------------------------------------------
ERR_NONE = 0
ERR_ADDRESS = 1  # a memory DSD reaches outside SRAM (info: first bad word address)
ERR_ROUTE_OUT = 2  # a fabric output on a color the router does not take from RAMP (info: color)
ERR_ROUTE_IN = 3  # a fabric input on a color the router does not deliver to RAMP (info: color)
ERR_FABIN_TASK = 4  # a fabric input on a color bound to a data task (info: color)
ERR_TASK = 5  # activate/block/unblock of a task the PE does not have (info: task id)
ERROR_TEXT = {
    ERR_ADDRESS: "memory DSD reaches outside SRAM (word {info})",
    ERR_ROUTE_OUT: "fabric output on color {info}, which this PE's router does not accept "
    "from RAMP (undefined color)",
    ERR_ROUTE_IN: "fabric input on color {info}, which this PE's router does not deliver to "
    "RAMP (undefined color)",
    ERR_FABIN_TASK: "fabric input on color {info}, which is bound to a data task",
    ERR_TASK: "undefined task id {info}",
}


class FabricState(eqx.Module):
    cycle: Int32[Array, ""]
    idle_cycles: Int32[Array, ""]  # cycles since anything last moved
    sram: UInt32[Array, "R W C"]  # PE-minor (fabric.pe_minor); host views are (R, C, W)
    # router buffers, one FIFO per color: slot (color * RING + i)
    rq_data: UInt32[Array, "R KRING C"]  # PE-minor (fabric.queues)
    rq_time: Int32[Array, "R KRING C"]  # cycle each wavelet entered the buffer
    rq_ctl: UInt32[Array, "R C CTL"]  # count and head bit planes (fabric.queues)
    rr: Int32[Array, "R C 5"]  # round-robin pointer of each output port
    # CE input queues, one FIFO per color, filled by the router through RAMP
    iq_data: UInt32[Array, "R KRING C"]
    iq_ctl: UInt32[Array, "R C CTL"]
    # compute engine
    regs: Int32[Array, "R C G"]
    pc: Int32[Array, "R C"]  # -1 = no task running
    task: Int32[Array, "R C"]
    wavelet: UInt32[Array, "R C"]
    activated: UInt32[Array, "R C"]
    blocked: UInt32[Array, "R C"]
    slots: Int32[Array, "R C S F"]
    slot_active: Int32[Array, "R C S"]  # 1 while the slot holds an unfinished op
    slot_prog: Int32[Array, "R C S"]  # elements of the op done so far
    slot_need: UInt32[Array, "R C S"]  # fabric queues the op needs (readiness word)
    slot_issued: Int32[Array, "R C S"]  # cycle the op was issued (its S_ISSUED field)
    owner: Int32[Array, "R C"]  # slot holding the datapath, -1 none
    op_record: Int32[Array, "R C F"]  # the record of the slot that advanced last
    bank_wait: Int32[Array, "R C"]  # slot whose element group made its first read, -1 none
    error: Int32[Array, "R C"]
    error_info: Int32[Array, "R C"]
    # counters
    busy: Int32[Array, "R C"]
    stall: Int32[Array, "R C"]
    bank_stall: Int32[Array, "R C"]  # cycles an op waited on a bank conflict
    link_count: Int32[Array, "R C P"]  # wavelets sent through each link port
    color_count: Int32[Array, "R C K"]  # wavelets of each color forwarded by the router
    injected: Int32[Array, "R C"]  # wavelets the CE sent into its router
    delivered: Int32[Array, "R C"]  # wavelets the router sent up the RAMP to the CE
    consumed: Int32[Array, "R C"]  # wavelets the CE took from its input queues
    forked: Int32[Array, "R C"]  # extra copies made by multicast

    @property
    def num_colors(self) -> int:
        return self.rq_data.shape[1] // RING

    @property
    def rq_count(self):
        """int32 [R, C, K] (numpy, a host read): wavelets in each router buffer."""
        return queues.counts(self.rq_ctl, self.num_colors)

    @property
    def rq_head(self):
        return queues.heads_now(self.rq_ctl, self.num_colors)

    @property
    def iq_count(self):
        """int32 [R, C, K] (numpy, a host read): wavelets in each CE input queue."""
        return queues.counts(self.iq_ctl, self.num_colors)

    @property
    def iq_head(self):
        return queues.heads_now(self.iq_ctl, self.num_colors)


def init_state(config: FabricConfig, tables) -> FabricState:
    """A fresh fabric: zeroed SRAM, empty buffers, registers and task bits from `tables`.
    One compiled call per config (fresh buffers every time: `run` donates them)."""
    return _fresh_state(config, jnp.asarray(tables.init_regs), jnp.asarray(tables.init_blocked))


@functools.partial(jax.jit, static_argnums=0)
def _fresh_state(config: FabricConfig, init_regs, init_blocked) -> FabricState:
    R, C, K = config.rows, config.cols, config.num_colors
    i32 = lambda *shape: jnp.zeros(shape, jnp.int32)  # noqa: E731
    u32 = lambda *shape: jnp.zeros(shape, jnp.uint32)  # noqa: E731
    return FabricState(
        cycle=jnp.int32(0),
        idle_cycles=jnp.int32(0),
        sram=u32(R, config.sram_words, C),
        rq_data=u32(R, K * RING, C),
        rq_time=i32(R, K * RING, C),
        rq_ctl=u32(R, C, CTL_PLANES),
        rr=i32(R, C, 5),
        iq_data=u32(R, K * RING, C),
        iq_ctl=u32(R, C, CTL_PLANES),
        regs=jnp.copy(init_regs),  # a buffer of its own: state buffers are donated to run
        pc=jnp.full((R, C), -1, jnp.int32),
        task=jnp.full((R, C), -1, jnp.int32),
        wavelet=u32(R, C),
        activated=u32(R, C),
        blocked=jnp.copy(init_blocked),
        slots=i32(R, C, config.num_async_slots + 1, SLOT_FIELDS),
        slot_active=i32(R, C, config.num_async_slots + 1),
        slot_prog=i32(R, C, config.num_async_slots + 1),
        slot_need=u32(R, C, config.num_async_slots + 1),
        slot_issued=i32(R, C, config.num_async_slots + 1),
        owner=jnp.full((R, C), -1, jnp.int32),
        op_record=i32(R, C, SLOT_FIELDS),
        bank_wait=jnp.full((R, C), -1, jnp.int32),
        error=i32(R, C),
        error_info=i32(R, C),
        busy=i32(R, C),
        stall=i32(R, C),
        bank_stall=i32(R, C),
        link_count=i32(R, C, 4),
        color_count=i32(R, C, K),
        injected=i32(R, C),
        delivered=i32(R, C),
        consumed=i32(R, C),
        forked=i32(R, C),
    )


def state_bytes(state: FabricState) -> int:
    """Device bytes of every leaf of the state."""
    return int(sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(state)))
