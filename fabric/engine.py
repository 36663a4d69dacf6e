"""`step`: one cycle of the whole fabric; `run`: cycles until quiet, a limit, an error or a
deadlock.

step = route (plan every router from the start-of-cycle state) -> control (scheduler,
scalar ops, DSD issue) -> datapath (one DSD op element group per CE) -> commit (queues,
counters). Everything is pure and vectorized over the grid; there is no Python loop over
PEs or cycles.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from fabric import bits, control, datapath, queues, router
from fabric.grid_axes import ROW_AXIS, global_any, split_rows
from fabric.isa import D_KIND, I_A, I_A_KIND, I_B, I_B_KIND, I_FMT, OPPOSITE, DsdKind, Operand, Port
from fabric.materialize import materialize
from fabric.queues import push_pop
from fabric.scatter import scatter_rows
from fabric.shifts import arriving
from fabric.state import S_ISSUED, S_OP, FabricState

# incremented each time `run` / `run_recorded` is traced (compile-once tests)
TRACE_COUNT = {"run": 0, "run_recorded": 0}


def step(config, tables, state: FabricState, half_ops: bool = True) -> FabricState:
    """One cycle. half_ops (static): the program may have ops with a 16-bit operand; False
    compiles the fp32 datapath alone (see `has_half_ops`)."""
    K = config.num_colors
    # The router's decision leaves a cond as two words per PE (see router.plan), which
    # every consumer decodes instead of arbitrating again (see fabric.materialize).
    plan = router.plan(config, tables, state)
    ctl = control.step(config, tables, state)
    dp = datapath.step(config, state, ctl, half_ops)
    # The RAMP pushes pass through the same cond as the datapath's results: the CE input
    # queues' update then depends on every read of them (the datapath's and the control's),
    # so XLA updates them in place instead of copying them twice in every cycle.
    ramp_color = plan.send_color[..., Port.RAMP]
    merged = materialize(
        {"ramp_color": ramp_color,
         **{k: getattr(dp, k) for k in ("iq_pop", "push_color", "push_data", "advanced",
                                        "stalled", "owner", "activated", "blocked")}},
        state.cycle)
    ramp_color = merged.pop("ramp_color")
    dp = dp._replace(**merged)


    # ---- commit: router buffers ------------------------------------------------------------
    # What enters each PE through a link port was sent the opposite way by the neighbour.
    in_color, in_data = [], []
    for p in (Port.NORTH, Port.SOUTH, Port.EAST, Port.WEST):
        sent = plan.send_color[..., OPPOSITE[p]]
        in_color.append(arriving(sent + 1, p) - 1)
        in_data.append(arriving(plan.send_data[..., OPPOSITE[p]], p))
    push_colors = jnp.stack(in_color + [dp.push_color], axis=-1)
    push_data = jnp.stack(in_data + [dp.push_data], axis=-1)
    rq_data, rq_ctl, rq_time = push_pop(
        config, state.rq_data, state.rq_ctl, push_colors, push_data, plan.moved, state.cycle,
        times=state.rq_time if config.hop_latency > 1 else None)
    if rq_time is None:
        rq_time = state.rq_time

    # ---- commit: CE input queues ------------------------------------------------------------
    iq_data, iq_ctl, _ = push_pop(
        config, state.iq_data, state.iq_ctl, ramp_color[..., None],
        plan.send_data[..., Port.RAMP][..., None], ctl.iq_pop | dp.iq_pop, state.cycle)

    # ---- counters ---------------------------------------------------------------------------
    link_sent = (plan.send_color[..., :4] >= 0).astype(jnp.int32)
    port_sends = (plan.send_color >= 0).sum(-1, dtype=jnp.int32)
    moved_count = bits.popcount(plan.moved)
    busy = ctl.busy | dp.advanced
    stall = ~busy & (ctl.waiting | dp.stalled)
    consumed = bits.popcount(ctl.iq_pop | dp.iq_pop)
    # a group's first read under a bank conflict is progress too
    progress = global_any((moved_count > 0) | busy | (dp.push_color >= 0)
                          | (dp.bank_wait >= 0))
    return FabricState(
        cycle=state.cycle + 1,
        idle_cycles=jnp.where(progress, 0, state.idle_cycles + 1),
        sram=dp.sram,
        rq_data=rq_data,
        rq_time=rq_time,
        rq_ctl=rq_ctl,
        rr=plan.pointers,
        iq_data=iq_data,
        iq_ctl=iq_ctl,
        regs=scatter_rows(state.regs, ctl.reg_at, ctl.reg_value),
        pc=ctl.pc,
        task=ctl.task,
        wavelet=ctl.wavelet,
        activated=dp.activated,
        blocked=dp.blocked,
        slots=ctl.slots,
        slot_active=dp.slot_active,
        slot_prog=dp.slot_prog,
        slot_need=ctl.slot_need,
        slot_issued=ctl.slot_issued,
        owner=dp.owner,
        op_record=dp.op_record,
        bank_wait=dp.bank_wait,
        error=jnp.where(state.error != 0, state.error, ctl.error),
        error_info=jnp.where(state.error != 0, state.error_info, ctl.error_info),
        busy=state.busy + busy.astype(jnp.int32),
        stall=state.stall + stall.astype(jnp.int32),
        bank_stall=state.bank_stall + (dp.bank_wait >= 0).astype(jnp.int32),
        link_count=state.link_count + link_sent,
        color_count=state.color_count + bits.unpack(plan.moved, K),
        injected=state.injected + (dp.push_color >= 0).astype(jnp.int32),
        delivered=state.delivered + (ramp_color >= 0).astype(jnp.int32),
        consumed=state.consumed + consumed,
        forked=state.forked + port_sends - moved_count,
    )


def pending(tables, state: FabricState):
    """Scalar bool: some wavelet is buffered, some task runs or waits, or some op is active."""
    return (global_any(queues.nonempty(state.rq_ctl) != 0)
            | global_any(queues.nonempty(state.iq_ctl) != 0)
            | global_any(state.pc >= 0) | global_any(state.slot_active != 0)
            | global_any((state.activated & tables.task_defined) != 0))


def should_continue(config, tables, state, max_cycles):
    return ((state.cycle < max_cycles) & pending(tables, state)
            & (state.idle_cycles < config.deadlock_window) & ~global_any(state.error != 0))


def has_half_ops(tables) -> bool:
    """Whether some instruction of the program has a 16-bit operand (a host-side check of
    the built tables; the engine's `half_ops` flag)."""
    return bool(np.any(np.asarray(tables.instr)[:, I_FMT] != 0))


def has_read_pairs(tables) -> bool:
    """Whether some instruction of the program reads two memory sources (the only ops the
    bank read-pair rule can hold up; a host-side check of the built tables)."""
    instr, dsd = np.asarray(tables.instr), np.asarray(tables.dsd)
    if not len(instr) or not len(dsd):
        return False

    def in_memory(kind, index):
        is_dsd = instr[:, kind] == int(Operand.DSD)
        row = np.clip(np.where(is_dsd, instr[:, index], 0), 0, len(dsd) - 1)
        return is_dsd & (dsd[row, D_KIND] == int(DsdKind.MEM))

    return bool(np.any(in_memory(I_A_KIND, I_A) & in_memory(I_B_KIND, I_B)))


@functools.partial(jax.jit, static_argnums=(0, 4), donate_argnums=2)
def run(config, tables, state: FabricState, max_cycles, half_ops: bool = True) -> FabricState:
    """Step until nothing is pending, `max_cycles` is reached (absolute cycle number), a PE
    reports an error, or nothing moved for `config.deadlock_window` cycles.

    One executable serves every program of a table-size bucket and `half_ops` kind: tables
    and state are arguments, `max_cycles` is traced. half_ops (static): False for programs
    without 16-bit ops (`has_half_ops`), whose engine has the fp32 datapath alone and so
    pays nothing for 16-bit formats; results are the same either way. The caller inspects
    the returned state to tell why it stopped (see `fabric.host`).
    """
    TRACE_COUNT["run"] += 1
    return jax.lax.while_loop(
        lambda st: should_continue(config, tables, st, max_cycles),
        lambda st: step(config, tables, st, half_ops),
        state)


# ---- recording (opt-in; `run` above never calls anything below) --------------------------
def trace_frame(config, tables, old: FabricState, new: FabricState, window, links: bool):
    """What each PE of `window` = (row, col, rows, cols) did in the cycle `old` -> `new`.

    Returns a dict of int8 arrays, h, w = the window's rows and cols, S = DSD slots:
        task [h, w]: id of the task the main thread spent the cycle on (starting it,
            executing it or ending it), -1 none
        task_start [h, w]: 1 when that task started in this cycle
        op [h, w, S]: opcode of the DSD op each slot held in this cycle, -1 none
        op_start [h, w, S]: 1 when that op was issued in this cycle
        activity [h, w]: 1 busy, 2 stalled, 0 neither (the `busy`/`stall` counters' steps)
        link [h, w, 4] (when `links`): color sent through each link port N, S, E, W, -1 none
    """
    r0, c0, h, w = window

    def win(x):
        return x[r0:r0 + h, c0:c0 + w]

    i8 = jnp.int8
    ran = old.pc >= 0
    task = jnp.where(ran, old.task, new.task)  # a task ends with ret, starts a cycle later
    started = ~ran & (new.pc >= 0)
    # an op issued this cycle carries this cycle's number, and is active or has progressed
    # (an op of one element group finishes in the cycle it is issued)
    issued = ((new.slots[..., S_ISSUED] == old.cycle)
              & ((new.slot_active != 0) | (new.slot_prog > 0)))
    op = jnp.where((old.slot_active != 0) | issued, new.slots[..., S_OP], -1)
    busy = new.busy - old.busy
    stall = new.stall - old.stall
    frame = {
        "task": win(task).astype(i8),
        "task_start": win(started).astype(i8),
        "op": win(op).astype(i8),
        "op_start": win(issued).astype(i8),
        "activity": win(busy + 2 * stall).astype(i8),
    }
    if links:
        # the plan `step` made from `old`: a pure function of it, so the same sends
        frame["link"] = win(router.plan(config, tables, old).send_color[..., :4]).astype(i8)
    return frame


@functools.partial(jax.jit, static_argnums=(0, 4, 5, 6), donate_argnums=2)
def run_recorded(config, tables, state: FabricState, max_cycles, window, links: bool,
                 length: int):
    """`length` iterations of `run`'s loop, each recording a `trace_frame` of `window`.

    An iteration steps only while `run` would go on, so the final state is the one `run`
    reaches by `max_cycles` or by `length` cycles, whichever is first. Returns
    (state, (valid [length] bool: the iteration stepped, frames: dict of [length, ...])).
    """
    TRACE_COUNT["run_recorded"] += 1

    def body(st, _):
        go = should_continue(config, tables, st, max_cycles)
        new = jax.lax.cond(go, lambda s: step(config, tables, s), lambda s: s, st)
        return new, (go, trace_frame(config, tables, st, new, window, links))

    return jax.lax.scan(body, state, None, length=length)


def _row_specs(tree, replicated=()):
    """PartitionSpecs: per-PE leaves (grid leading, ndim >= 2) split by rows; scalars and
    the leaves named in `replicated` (global tables) on every device."""
    specs = {}
    for field in dataclasses.fields(tree):
        leaf = getattr(tree, field.name)
        split = leaf.ndim >= 2 and field.name not in replicated
        specs[field.name] = P(ROW_AXIS) if split else P()
    return type(tree)(**specs)


@functools.partial(jax.jit, static_argnums=(0, 4, 5), donate_argnums=2)
def run_split(config, tables, state: FabricState, max_cycles, devices: int,
              half_ops: bool = True) -> FabricState:
    """`run` with the grid's rows split in equal blocks over the first `devices` devices.

    Each device steps its block; rows at a split are exchanged with `ppermute` every
    cycle and the stop conditions are reduced over all devices, so the result is the same
    as `run` on one device, bit for bit.
    """
    TRACE_COUNT["run"] += 1
    mesh = Mesh(np.array(jax.devices()[:devices]), (ROW_AXIS,))

    def body(tables, state, max_cycles):
        with split_rows(devices):
            return jax.lax.while_loop(
                lambda st: should_continue(config, tables, st, max_cycles),
                lambda st: step(config, tables, st, half_ops),
                state)

    state_specs = _row_specs(state)
    return jax.shard_map(
        body, mesh=mesh,
        in_specs=(_row_specs(tables, replicated=("instr", "dsd")), state_specs, P()),
        out_specs=state_specs, check_vma=False)(tables, state, max_cycles)


def replace(state: FabricState, **changes) -> FabricState:
    return dataclasses.replace(state, **changes)
