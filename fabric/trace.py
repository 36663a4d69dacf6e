"""Recording what the PEs of a rectangle do, cycle by cycle, as a Chrome trace-event timeline
that Perfetto (ui.perfetto.dev) and chrome://tracing open.

`Simulator.record(rect, links)` runs the engine in chunks of `lax.scan` that each return a
small per-cycle frame of the rectangle (`engine.trace_frame`); the host turns the frames into
events here, with numpy. The plain `Simulator.run` never records.

Timeline layout: one process per PE (`pid` = 1 + row * cols + col), named "PE (r, c) tile",
with one thread (track) per kind of activity:
    tid 0            task: the task the main thread runs, from its start to its `ret`
    tid 1            busy / stall: runs of busy cycles and of stalled cycles
    tid 2 + s        DSD op in slot s (0 = main thread, 1.. = async microthreads)
    tid 2 + S + p    link p (N, S, E, W) when links are recorded: one event per wavelet
Every event is a complete event ("ph": "X") whose `ts` and `dur` count simulated cycles
(the viewers show them as microseconds: 1 us on the timeline = 1 cycle).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from fabric import engine
from fabric.errors import FabricError
from fabric.interrupts import HeldInterrupts
from fabric.isa import LINK_PORTS, Op
from fabric.program import Rect

TID_TASK, TID_ACTIVITY, TID_OP = 0, 1, 2
ACTIVITY_NAMES = {1: "busy", 2: "stall"}
DEFAULT_CHUNK = 1024  # cycles per engine call while recording (one compile per length)

_COMPILED: dict = {}


@dataclasses.dataclass
class Trace:
    """A recorded timeline of the PEs of `rect` over cycles [start_cycle, end_cycle).

    events: Chrome trace events (dicts), metadata ("ph": "M") first.
    stats: the run's `Stats` (None when the run raised; the error then carries the trace
        as `err.trace`).
    """

    rect: Rect
    links: bool
    start_cycle: int
    end_cycle: int
    events: list
    other: dict
    stats: object = None

    def cycles_per_pe(self, name: str = "busy") -> np.ndarray:
        """Cycles covered by `name` ("busy" or "stall") events per PE of `rect`:
        int64 (rect.rows, rect.cols); equals the `busy` / `stall` counters' growth."""
        out = np.zeros((self.rect.rows, self.rect.cols), np.int64)
        cols = self.other["grid"][1]
        for e in self.events:
            if e["ph"] == "X" and e["cat"] == "activity" and e["name"] == name:
                r, c = divmod(e["pid"] - 1, cols)
                out[r - self.rect.row, c - self.rect.col] += e["dur"]
        return out

    def to_json(self) -> dict:
        """The trace-event JSON object: {"traceEvents": [...], "otherData": {...}}."""
        return {"traceEvents": self.events, "otherData": self.other}

    def save(self, path) -> Path:
        """Write the JSON to `path` (folders created); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            json.dump(self.to_json(), f, separators=(",", ":"))
        return path


class _Segments:
    """Runs of equal values along the time axis of N tracks, fed chunk by chunk.

    A run starts where a track's value becomes >= 0, changes, or its start flag is set,
    and ends where the value drops below 0 or the next run starts. Runs still open at the
    end of a chunk go on into the next one.
    """

    def __init__(self, n: int):
        self.last = np.full(n, -1, np.int64)  # value in the last cycle fed
        self.begin = np.zeros(n, np.int64)  # start cycle of the open run

    def feed(self, values, starts, first_cycle: int):
        """values, starts: [T, N] for cycles first_cycle .. first_cycle + T - 1.

        Returns the runs that ended: lists (track, value, start cycle, end cycle exclusive).
        """
        values = values.astype(np.int64)
        prev = np.concatenate([self.last[None], values[:-1]])
        opens = (values >= 0) & ((starts != 0) | (values != prev))
        closes = (prev >= 0) & ((values < 0) | opens)
        # transitions of every track in time order, a close before an open in one cycle
        cn, ct = np.nonzero(closes.T)
        on, ot = np.nonzero(opens.T)
        track = np.concatenate([cn, on])
        t = np.concatenate([ct, ot])
        kind = np.concatenate([np.zeros_like(cn), np.ones_like(on)])
        order = np.lexsort((kind, t, track))
        out_track, out_value, out_t0, out_t1 = [], [], [], []
        begin = self.begin
        for n, ti, k in zip(track[order].tolist(), t[order].tolist(), kind[order].tolist()):
            if k == 0:
                out_track.append(n)
                out_value.append(int(prev[ti, n]))
                out_t0.append(int(begin[n]))
                out_t1.append(first_cycle + ti)
            else:
                begin[n] = first_cycle + ti
        self.last = values[-1].copy()
        return out_track, out_value, out_t0, out_t1

    def close(self, end_cycle: int):
        """The runs still open, ended at `end_cycle`."""
        (open_,) = np.nonzero(self.last >= 0)
        runs = (open_.tolist(), self.last[open_].tolist(), self.begin[open_].tolist(),
                [end_cycle] * len(open_))
        self.last[:] = -1
        return runs


class _Recorder:
    """Frames of a window of PEs -> trace events."""

    def __init__(self, sim, rect: Rect, links: bool):
        self.rect, self.links = rect, links
        self.cols = sim.config.cols
        self.slots = sim.config.num_async_slots + 1
        h, w, S = rect.rows, rect.cols, self.slots
        self.tracks = {"task": _Segments(h * w), "activity": _Segments(h * w),
                       "op": _Segments(h * w * S)}
        if links:
            self.tracks["link"] = _Segments(h * w * len(LINK_PORTS))
        self.info = sim.info
        self.events: list = []
        self.used: set = set()  # (pid, tid) with events

    def _pe(self, index: int):
        """(row, col, pid) of PE `index` of the window (row-major)."""
        r = self.rect.row + index // self.rect.cols
        c = self.rect.col + index % self.rect.cols
        return r, c, 1 + r * self.cols + c

    def feed(self, frames: dict, first_cycle: int):
        T = frames["task"].shape[0]
        flat = {k: v.reshape(T, -1) for k, v in frames.items()}
        activity = np.where(flat["activity"] > 0, flat["activity"], -1)
        self._emit("task", self.tracks["task"].feed(flat["task"], flat["task_start"],
                                                    first_cycle))
        self._emit("activity", self.tracks["activity"].feed(activity, np.zeros_like(activity),
                                                            first_cycle))
        self._emit("op", self.tracks["op"].feed(flat["op"], flat["op_start"], first_cycle))
        if self.links:
            # every wavelet is an event of its own, even right after one of its color
            self._emit("link", self.tracks["link"].feed(flat["link"], flat["link"] >= 0,
                                                        first_cycle))

    def close(self, end_cycle: int):
        for kind, segments in self.tracks.items():
            self._emit(kind, segments.close(end_cycle))

    def _emit(self, kind: str, runs):
        S, P = self.slots, len(LINK_PORTS)
        for n, value, t0, t1 in zip(*runs):
            if kind == "task":
                r, c, pid = self._pe(n)
                tid, name, args = TID_TASK, self.info.task_name(r, c, value), {"task_id": value}
            elif kind == "activity":
                r, c, pid = self._pe(n)
                tid, name, args = TID_ACTIVITY, ACTIVITY_NAMES[value], {}
            elif kind == "op":
                r, c, pid = self._pe(n // S)
                tid, name, args = TID_OP + n % S, Op(value).name.lower(), {"slot": n % S}
            else:
                r, c, pid = self._pe(n // P)
                port = LINK_PORTS[n % P]
                tid, name = TID_OP + S + n % P, f"color {value}"
                args = {"color": value, "port": port.name}
            self.used.add((pid, tid))
            self.events.append({"name": name, "cat": kind, "ph": "X", "ts": t0,
                                "dur": t1 - t0, "pid": pid, "tid": tid, "args": args})

    def metadata(self) -> list:
        """Process and thread names (and sort order) of the tracks that have events."""
        meta = []
        S = self.slots
        for index in range(self.rect.rows * self.rect.cols):
            r, c, pid = self._pe(index)
            i = self.info.placement_index(r, c)
            tile = self.info.placements[i].tile.name if i is not None else "(no tile)"
            meta.append({"name": "process_name", "ph": "M", "pid": pid,
                         "args": {"name": f"PE ({r}, {c}) {tile}"}})
            meta.append({"name": "process_sort_index", "ph": "M", "pid": pid,
                         "args": {"sort_index": pid}})
        for pid, tid in sorted(self.used):
            if tid == TID_TASK:
                name = "task"
            elif tid == TID_ACTIVITY:
                name = "busy / stall"
            elif tid < TID_OP + S:
                s = tid - TID_OP
                name = "op (main thread)" if s == 0 else f"op (async {s})"
            else:
                name = f"link {LINK_PORTS[tid - TID_OP - S].name}"
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                         "args": {"name": name}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                         "args": {"sort_index": tid}})
        return meta


def check_rect(config, rect: Rect) -> None:
    if rect.row < 0 or rect.col < 0 or rect.row_end > config.rows or rect.col_end > config.cols:
        raise ValueError(f"trace rect {rect} reaches outside the {config.rows} x {config.cols} "
                         f"fabric of {config.name}")


def _compiled(config, tables, state, limit, window, links, length):
    """The recording executable for this config, bucket, window and chunk; compile seconds."""
    key = (config, tables.instr.shape, tables.dsd.shape, window, links, length)
    if key in _COMPILED:
        return _COMPILED[key], 0.0
    start = time.perf_counter()
    exe = engine.run_recorded.lower(config, tables, state, limit, window, links,
                                    length).compile()
    _COMPILED[key] = exe
    return exe, time.perf_counter() - start


def record(sim, rect: Rect | None = None, links: bool = False, max_cycles: int = 1_000_000,
           raise_on_limit: bool = True, chunk_cycles: int = DEFAULT_CHUNK,
           progress: bool | None = None) -> Trace:
    """Run `sim` like `Simulator.run`, recording the PEs of `rect` (default: every PE).

    See `Simulator.record`. Results, cycle counts and counters are those of `run`.
    """
    config = sim.config
    if sim.devices != 1:
        raise ValueError(f"recording runs on one device; this Simulator splits its rows over "
                         f"{sim.devices}")
    rect = Rect(0, 0, config.rows, config.cols) if rect is None else rect
    check_rect(config, rect)
    if chunk_cycles < 1:
        raise ValueError(f"chunk_cycles must be >= 1, got {chunk_cycles}")
    if progress is None:
        progress = sys.stderr.isatty()
    window = (rect.row, rect.col, rect.rows, rect.cols)
    start_cycle = int(sim.state.cycle)
    limit = jnp.int32(start_cycle + max_cycles)
    exe, compile_s = _compiled(config, sim.tables, sim.state, limit, window, links,
                               chunk_cycles)
    sim.compile_s += compile_s
    recorder = _Recorder(sim, rect, links)
    t0 = time.perf_counter()
    bar = tqdm(total=max_cycles, unit="cycle", disable=not progress, file=sys.stderr)
    with HeldInterrupts() as interrupts, bar:
        while True:
            first = int(sim.state.cycle)
            sim.state, (valid, frames) = exe(sim.tables, sim.state, limit)
            # the iterations that stepped are a prefix: once `run` stops, it stays stopped
            stepped = int(np.asarray(valid).sum())
            if stepped:
                recorder.feed({k: np.asarray(v)[:stepped] for k, v in frames.items()}, first)
            done = int(sim.state.cycle) - start_cycle
            sim.last_run_cycles = done
            rate = done * config.num_pes / max(time.perf_counter() - t0, 1e-9)
            bar.set_postfix_str(f"{rate:.3g} PE-cycles/s", refresh=False)
            bar.update(done - bar.n)
            interrupts.deliver()  # Ctrl-C: the state is that of the last whole chunk
            if not bool(engine.should_continue(config, sim.tables, sim.state, limit)):
                break
    jax.block_until_ready(sim.state)
    sim.last_wall_s = time.perf_counter() - t0
    end_cycle = int(sim.state.cycle)
    sim.last_run_cycles = end_cycle - start_cycle
    recorder.close(end_cycle)
    other = {
        "time_unit": "ts and dur are simulated cycles (shown as microseconds)",
        "config": config.name, "clock_hz": config.clock_hz,
        "grid": [config.rows, config.cols], "pid": "1 + row * grid cols + col",
        "rect": [rect.row, rect.col, rect.rows, rect.cols], "links": links,
        "start_cycle": start_cycle, "end_cycle": end_cycle,
    }
    trace = Trace(rect, links, start_cycle, end_cycle, recorder.metadata() + recorder.events,
                  other)
    try:
        sim._raise_if_stuck(max_cycles, raise_on_limit)
    except FabricError as err:
        err.trace = trace  # the timeline up to the failure is what explains it
        raise
    trace.stats = sim.stats()
    return trace
