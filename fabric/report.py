"""Readable reports of a stopped fabric: runtime errors and deadlocks, naming PEs, colors,
tasks and the instruction each PE is at."""

from __future__ import annotations

import numpy as np

from fabric.isa import Op
from fabric.state import (
    CLS_FABIN,
    CLS_FABOUT,
    ERROR_TEXT,
    O_CLS,
    O_COLOR,
    S_A,
    S_B,
    S_DST,
    S_OP,
)

MAX_LINES = 12


def _where(info, st, r, c) -> str:
    pc = int(st.pc[r, c])
    if pc >= 0 and int(st.slot_active[r, c, 0]):
        pc -= 1  # a synchronous DSD op in progress: the pc is already past its instruction
    i = info.placement_index(r, c)
    tile = info.placements[i].tile.name if i is not None else "no tile"
    if pc < 0 or pc >= len(info.instr_origin):
        return f"PE ({r}, {c}) tile {tile!r}"
    _, task_name, index = info.instr_origin[pc]
    return f"PE ({r}, {c}) tile {tile!r}, task {task_name!r}, instruction {index}"


def error_report(info, st) -> str:
    error = np.asarray(st.error)
    pes = np.argwhere(error != 0)
    lines = [f"{len(pes)} PE(s) stopped on an error:"]
    for r, c in pes[:MAX_LINES]:
        text = ERROR_TEXT[int(error[r, c])].format(info=int(st.error_info[r, c]))
        lines.append(f"  {_where(info, st, r, c)}: {text}")
    if len(pes) > MAX_LINES:
        lines.append(f"  ... and {len(pes) - MAX_LINES} more")
    return "\n".join(lines)


def deadlock_report(config, info, st) -> str:
    """Stuck PEs (what each waits on), colors holding wavelets, and blocked activated tasks."""
    slots = np.asarray(st.slots)
    active = np.asarray(st.slot_active)
    pc = np.asarray(st.pc)
    rq = np.asarray(st.rq_count)
    iq = np.asarray(st.iq_count)
    lines = []
    stuck = np.argwhere((pc >= 0) | (active != 0).any(-1))
    lines.append(f"stuck PEs ({len(stuck)}):")
    for r, c in stuck[:MAX_LINES]:
        waits = []
        for s in np.nonzero(active[r, c])[0]:
            op = Op(int(slots[r, c, s, S_OP])).name
            for start in (S_DST, S_A, S_B):
                cls, color = slots[r, c, s, start + O_CLS], slots[r, c, s, start + O_COLOR]
                if cls == CLS_FABIN and iq[r, c, color] == 0:
                    waits.append(f"{op} waits for input on color {color}")
                elif cls == CLS_FABOUT and rq[r, c, color] >= config.queue_depth:
                    waits.append(f"{op} waits for room to send color {color}")
        what = "; ".join(waits) if waits else "waiting"
        lines.append(f"  {_where(info, st, r, c)}: {what}")
    if len(stuck) > MAX_LINES:
        lines.append(f"  ... and {len(stuck) - MAX_LINES} more")
    held = np.argwhere(rq > 0)
    lines.append(f"router buffers holding wavelets ({len(held)}):")
    for r, c, k in held[:MAX_LINES]:
        lines.append(f"  PE ({r}, {c}) color {k}: {rq[r, c, k]} wavelet(s)")
    queued = np.argwhere(iq > 0)
    lines.append(f"CE input queues holding wavelets ({len(queued)}):")
    for r, c, k in queued[:MAX_LINES]:
        lines.append(f"  PE ({r}, {c}) color {k}: {iq[r, c, k]} wavelet(s) no task consumed")
    act = np.asarray(st.activated) & np.asarray(st.blocked)
    waiting_tasks = np.argwhere(act != 0)
    if len(waiting_tasks):
        lines.append(f"activated but blocked tasks ({len(waiting_tasks)} PEs):")
        for r, c in waiting_tasks[:MAX_LINES]:
            ids = [t for t in range(32) if (int(act[r, c]) >> t) & 1]
            names = ", ".join(info.task_name(r, c, t) for t in ids)
            lines.append(f"  PE ({r}, {c}): {names}")
    return "\n".join(lines)
