"""The host side: a `Simulator` session holds a built program and its fabric state, moves
data in and out of PE memory by symbol, launches tasks and runs the engine.

Host transfers cost the cycles of `fabric.host_io.host_io_cycles` (through the fabric's
edge), reported as `host_cycles`, apart from kernel cycles.

Example:
    >>> sim = Simulator(config, program)          # doctest: +SKIP
    >>> sim.memcpy_h2d("x", np.ones((4, 4, 8)))   # doctest: +SKIP
    >>> sim.launch("main")                        # doctest: +SKIP
    >>> stats = sim.run()                         # doctest: +SKIP
    >>> y = sim.memcpy_d2h("y")                   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from fabric import engine, queues
from fabric.build import build, build_once
from fabric.checkpoint import read_checkpoint, restore_checkpoint, save_checkpoint
from fabric.config import FabricConfig
from fabric.errors import CycleLimitError, DeadlockError, RunError
from fabric.host_io import host_io_cycles
from fabric.interrupts import HeldInterrupts
from fabric.numerics.packing import from_words, to_words, words_for
from fabric.part_watch import Watch, run_watched
from fabric.program import Program, Rect
from fabric.report import deadlock_report, error_report
from fabric.state import FabricState, init_state, state_bytes
from fabric.stats import Stats
from fabric.trace import DEFAULT_CHUNK, Trace
from fabric.trace import record as record_trace

# whether work is left (`engine.pending`), asked after every run: one compiled call instead
# of some twenty small eager ones
_pending = eqx.filter_jit(engine.pending)


@eqx.filter_jit
def _status(tables, state):
    """(a PE in error, work left, idle cycles, the cycle) after a run: what `_raise_if_stuck`
    reads, in one compiled call and one transfer (a host polling every few cycles pays
    each small call and each read of a device value on every poll)."""
    return (jnp.any(state.error != 0), engine.pending(tables, state), state.idle_cycles,
            state.cycle)


@eqx.filter_jit
def _stats_fields(state):
    """What `Simulator.stats` reads, in one compiled call (one transfer)."""
    colors = state.num_colors
    in_flight = (queues.counts_traced(state.rq_ctl, colors).sum()
                 + queues.counts_traced(state.iq_ctl, colors).sum())
    return dict(cycles=state.cycle, busy=state.busy, stall=state.stall,
                bank_stall=state.bank_stall, link_count=state.link_count,
                color_count_per_pe=state.color_count, injected=state.injected.sum(),
                delivered=state.delivered.sum(), consumed=state.consumed.sum(),
                forked=state.forked.sum(), in_flight=in_flight)


_COMPILED: dict = {}
# `run` calls the engine in chunks of cycles that each take about CHUNK_S of wall time, so
# that Ctrl-C, which waits for the chunk in flight, stops a run within a fraction of a
# second. A chunk's cost is its cycles times a per-cycle cost that depends on the executable
# alone (every PE steps every cycle), so the chunk size found is kept per executable
# (_CHUNK_CYCLES) and later runs start with it: a run shorter than one chunk, as the
# frontend's are, makes one engine call.
CHUNK_S = 0.1
FIRST_CHUNK_PE_CYCLES = 2**18  # about 0.1 s at the 2e6 PE-cycles/s of one CPU core
MAX_FIRST_CHUNK = 4096  # small grids: their per-cycle cost is mostly fixed overhead
MAX_GROWTH = 8  # a first, short chunk measures mostly call overhead: grow step by step
_CHUNK_CYCLES: dict = {}


def _engine_key(config, tables, devices, half_ops):
    return (config, tables.instr.shape, tables.dsd.shape, devices, half_ops)


def compiled_run(config, tables, state, max_cycles, devices: int = 1, half_ops: bool = True):
    """The engine executable for this config, table bucket, device count and kind of
    program (`half_ops`: with 16-bit ops or not, see `engine.run`), compiled once; returns
    (executable, compile seconds spent now)."""
    key = _engine_key(config, tables, devices, half_ops)
    if devices == 1:
        return _compiled_once(key, engine.run, config, tables, state, max_cycles, half_ops)
    return _compiled_once(key, engine.run_split, config, tables, state, max_cycles, devices,
                          half_ops)


def _compiled_once(key, function, *args) -> tuple[object, float]:
    """(the executable kept under `key`: jitted `function` lowered for `args` and compiled
    the first time; the compile seconds spent now)."""
    if key in _COMPILED:
        return _COMPILED[key], 0.0
    start = time.perf_counter()
    _COMPILED[key] = function.lower(*args).compile()
    return _COMPILED[key], time.perf_counter() - start


class Simulator:
    """A loaded program on a simulated fabric."""

    def __init__(self, config: FabricConfig, program: Program, devices: int = 1,
                 min_table_rows: tuple[int, int] = (0, 0),
                 parent: FabricConfig | None = None, corner: tuple[int, int] = (0, 0),
                 built: dict | None = None):
        """devices: split the grid's rows over this many devices (1: one device). The
        rows must divide evenly; results are identical whatever the count.
        min_table_rows: (instruction, DSD) table rows the build gives at least: programs of
        different sizes built with the same floor share one compiled engine (the stages of
        a model, see `fabric.build`); results are identical whatever the floor.
        parent, corner: `config` is a window of the larger fabric `parent`
        (`parent.tile(config.rows, config.cols)`, see `fabric.window`) whose PE (0, 0) is
        the parent's PE `corner`: host transfers cost what they cost on the parent, where
        their rectangle lies at `corner` + its place here (the fabric's edges decide it);
        kernel cycles and words are the window's own.
        built: a dict its owner keeps beside `program` (a stage or a move run once per
        call): the program is built once for each config and floor and kept there
        (`fabric.build.build_once`); None: built now.

        Example:
            >>> w = window_for(big_config, Rect(2, 26, 3, 3))      # doctest: +SKIP
            >>> sim = Simulator(w.config, program, parent=big_config,
            ...                 corner=w.corner)                       # doctest: +SKIP
        """
        available = len(jax.devices())
        if devices < 1 or devices > available:
            raise ValueError(f"devices={devices}: this machine has {available} JAX device(s)")
        if config.rows % devices:
            raise ValueError(f"devices={devices} does not divide the {config.rows} rows of "
                             f"{config.name}")
        if parent is not None:
            _check_window(config, parent, corner)
        self.devices = devices
        self.config = config
        self.parent = parent
        self.corner = corner
        self.program = program
        self.tables, self.info = (build(config, program, min_table_rows) if built is None
                                  else build_once(config, program, min_table_rows, built))
        # programs without 16-bit ops run an engine with the fp32 datapath alone; those
        # without an op reading two memory sources one without the bank read-pair check
        # (none of their ops can meet it: the same cycles, bit for bit)
        self.half_ops = engine.has_half_ops(self.tables)
        self.engine_config = (config if engine.has_read_pairs(self.tables)
                              else config.replace(bank_conflicts=False))
        # the device state is made on first use: a session that only moves words between
        # the host and SRAM (a layout probe) never allocates the whole fabric's state
        self._state: FabricState | None = None
        self._sram_host: np.ndarray | None = None  # host writes not yet on the device
        self._sram_read: tuple | None = None  # (device sram, its host copy)
        self.host_cycles = 0
        self.compile_s = 0.0
        self.last_run_cycles = 0
        self.last_wall_s = 0.0

    # ---- state and the host's view of SRAM ------------------------------------------------
    # Host I/O works on a numpy copy of SRAM: consecutive writes (a kernel's load, the
    # frontend's operands) change the copy, which goes to the device once, when the state is
    # next used; reads of an unchanged device SRAM share one copy. The copy keeps the
    # device's PE-minor layout (rows, words, cols); the host sees it as (rows, cols, words)
    # through a transposed view.
    @property
    def state(self) -> FabricState:
        if self._state is None:
            self._state = init_state(self.config, self.tables)
        if self._sram_host is not None:
            self._state = engine.replace(self._state, sram=jnp.asarray(self._sram_host))
            self._sram_host = None
        return self._state

    @state.setter
    def state(self, value: FabricState) -> None:
        self._sram_host = None
        self._state = value

    def host_sram(self) -> np.ndarray:
        """A writable host copy (rows, cols, words) of SRAM; writes reach the device when
        the state is next used."""
        if self._sram_host is None:
            # before the device state exists SRAM is all zeros: np.zeros maps pages lazily,
            # so a large fabric costs only the pages the host writes
            self._sram_host = (np.zeros(self._sram_shape(), np.uint32) if self._state is None
                               else np.array(self._device_sram()))
        return self._sram_host.transpose(0, 2, 1)

    def sram_view(self) -> np.ndarray:
        """SRAM (rows, cols, words) as numpy, for reading only."""
        if self._sram_host is not None or self._state is None:
            return self.host_sram()
        return self._device_sram().transpose(0, 2, 1)

    def _sram_shape(self) -> tuple[int, int, int]:
        return self.config.rows, self.config.sram_words, self.config.cols

    def _device_sram(self) -> np.ndarray:
        """SRAM as the device holds it (rows, words, cols), read-only, one copy per state."""
        device = self.state.sram
        if self._sram_read is None or self._sram_read[0] is not device:
            self._sram_read = (device, np.asarray(device))
        return self._sram_read[1]

    # ---- host I/O -----------------------------------------------------------------------
    def _symbol_grid(self, name: str, rect: Rect | None):
        """(rect, symbol info, word address per PE [rows, cols])."""
        if rect is None:
            holders = [p.rect for p, syms in zip(self.info.placements, self.info.symbols)
                       if name in syms]
            if len(holders) != 1:
                where = ", ".join(str(r) for r in holders) or "no tile"
                raise ValueError(f"symbol {name!r} is held by {where}; pass rect=")
            rect = holders[0]
        address = np.zeros((rect.rows, rect.cols), np.int64)
        info = None
        for r, c in rect.pes():
            i = self.info.placement_index(r, c)
            syms = self.info.symbols[i] if i is not None else {}
            if name not in syms:
                raise ValueError(f"PE ({r}, {c}) has no symbol {name!r}")
            s = syms[name]
            if info is not None and (s.shape, s.dtype) != (info.shape, info.dtype):
                raise ValueError(f"symbol {name!r} differs across {rect}: {info.shape} "
                                 f"{info.dtype} vs {s.shape} {s.dtype} at PE ({r}, {c})")
            info = s
            address[r - rect.row, c - rect.col] = s.address
        return rect, info, address

    def memcpy_h2d(self, name: str, data, rect: Rect | None = None) -> None:
        """Write `data` into symbol `name` on every PE of `rect`.

        data: shape (rect.rows, rect.cols, *symbol.shape), or symbol.shape (same on every PE).
            A 16-bit symbol takes np.float16 (f16) or ml_dtypes.bfloat16 (bf16) data as is;
            other data is cast to fp32 and rounded to nearest even. Two 16-bit values travel
            and sit in one 32-bit word (fabric.numerics.packing).
        """
        rect, sym, address = self._symbol_grid(name, rect)
        arr = np.asarray(data)
        full = (rect.rows, rect.cols, *sym.shape)
        if arr.shape == sym.shape:
            arr = np.broadcast_to(arr, full)
        if arr.shape != full:
            raise ValueError(f"memcpy_h2d({name!r}): data has shape {arr.shape}; expected "
                             f"{full} or {sym.shape}")
        words = to_words(arr.reshape(rect.rows, rect.cols, -1), sym.dtype)
        n = words.shape[-1]
        cols_idx = address[..., None] + np.arange(n)
        r_idx = np.arange(rect.row, rect.row_end)[:, None, None]
        c_idx = np.arange(rect.col, rect.col_end)[None, :, None]
        # on the host, with numpy: an eager device scatter would compile once per shape
        self.host_sram()[r_idx, c_idx, cols_idx] = words
        self.host_cycles += self._host_io_cycles(rect, n)

    def _host_io_cycles(self, rect: Rect, words_per_pe: int) -> int:
        """A host transfer's cycles, on the parent fabric when this is a window of one."""
        if self.parent is None:
            return host_io_cycles(self.config, rect, words_per_pe)
        r, c = self.corner
        return host_io_cycles(self.parent, Rect(rect.row + r, rect.col + c, rect.rows,
                                                rect.cols), words_per_pe)

    def memcpy_d2h(self, name: str, rect: Rect | None = None) -> np.ndarray:
        """Read symbol `name` from every PE of `rect`: shape (rect.rows, rect.cols, *shape).

        16-bit symbols come back as np.float16 (f16), ml_dtypes.bfloat16 (bf16) or the exact
        fp32 values (cb16, which has no numpy dtype)."""
        rect, sym, address = self._symbol_grid(name, rect)
        size = int(np.prod(sym.shape))
        n = words_for(sym.dtype, size)
        cols_idx = address[..., None] + np.arange(n)
        r_idx = np.arange(rect.row, rect.row_end)[:, None, None]
        c_idx = np.arange(rect.col, rect.col_end)[None, :, None]
        words = self.sram_view()[r_idx, c_idx, cols_idx]
        self.host_cycles += self._host_io_cycles(rect, n)
        values = from_words(words, sym.dtype, size)
        return values.reshape(rect.rows, rect.cols, *sym.shape).copy()

    def launch(self, task: str, rect: Rect | None = None) -> None:
        """Activate local task `task` on every PE of `rect` (default: every PE with it)."""
        mask = np.zeros((self.config.rows, self.config.cols), np.uint32)
        found = False
        for placement, ids in zip(self.info.placements, self.info.task_ids):
            if task not in ids:
                continue
            tile = placement.tile
            if tile.tasks[task].kind != "local":
                raise ValueError(f"task {task!r} of tile {tile.name!r} is a data task; only "
                                 "local tasks can be launched")
            region = placement.rect
            if rect is not None:
                r0, r1 = max(rect.row, region.row), min(rect.row_end, region.row_end)
                c0, c1 = max(rect.col, region.col), min(rect.col_end, region.col_end)
                if r0 >= r1 or c0 >= c1:
                    continue
            else:
                r0, r1, c0, c1 = region.row, region.row_end, region.col, region.col_end
            mask[r0:r1, c0:c1] |= np.uint32(1 << ids[task])
            found = True
        if rect is not None:
            for r, c in rect.pes():
                i = self.info.placement_index(r, c)
                if i is None or task not in self.info.task_ids[i]:
                    raise ValueError(f"launch({task!r}): PE ({r}, {c}) has no task {task!r}")
        if not found:
            raise ValueError(f"launch({task!r}): no tile has a task {task!r}")
        self._activate(mask)

    def launch_each(self, starts) -> None:
        """Activate, on each PE, its own local tasks: `starts` {(row, col): task names},
        in one update (a host that starts a part PE by PE, as each PE's inputs arrive).

        Raises ValueError for a PE without one of its tasks, or a data task."""
        mask = np.zeros((self.config.rows, self.config.cols), np.uint32)
        for (r, c), tasks in starts.items():
            i = self.info.placement_index(r, c)
            ids = self.info.task_ids[i] if i is not None else {}
            for task in tasks:
                if task not in ids:
                    raise ValueError(f"launch_each: PE ({r}, {c}) has no task {task!r}")
                if self.info.placements[i].tile.tasks[task].kind != "local":
                    raise ValueError(f"launch_each: task {task!r} on PE ({r}, {c}) is a "
                                     "data task; only local tasks can be launched")
                mask[r, c] |= np.uint32(1 << ids[task])
        if mask.any():  # nothing to start: the state stays as it is
            self._activate(mask)

    def _activate(self, mask: np.ndarray) -> None:
        """Set the task bits of `mask` (rows, cols) in the activated state."""
        self.state = engine.replace(self.state,
                                    activated=self.state.activated | jnp.asarray(mask))

    # ---- running ------------------------------------------------------------------------
    def run(self, max_cycles: int = 1_000_000, raise_on_limit: bool = True,
            progress: bool | None = None, chunk_cycles: int | None = None) -> Stats:
        """Run until the fabric is quiet (nothing buffered, running or activated).

        The engine runs in chunks of cycles of about `CHUNK_S` of wall time each (sized by
        measuring them); chunking never changes the results. Ctrl-C (KeyboardInterrupt)
        stops the run at the end of the chunk in flight, with `state`, `stats()` and
        `last_run_cycles` those of the cycles run so far: `run` again goes on from there,
        to the same final state as an uninterrupted run, or `save` keeps it.

        progress: show a tqdm bar of cycles run, with PE-cycles/s (default: only when
            stderr is a terminal).
        chunk_cycles: run in chunks of exactly this many cycles instead.

        Raises:
            RunError: a PE did something invalid (named with its task and instruction).
            DeadlockError: work was pending but nothing moved for `deadlock_window` cycles.
            CycleLimitError: `max_cycles` more cycles passed first (unless raise_on_limit
                is False, in which case the partial run's stats are returned).
            KeyboardInterrupt: Ctrl-C; the simulator holds the state of the last chunk.

        Example:
            >>> sim.run(max_cycles=10_000, progress=True)  # doctest: +SKIP
            42%|████▏     | 4200/10000 [00:01<00:01, 3.9e+03cycle/s, 2.5e+05 PE-cycles/s]
        """
        if progress is None:
            progress = sys.stderr.isatty()
        start_cycle = int(self.state.cycle)
        limit = start_cycle + max_cycles
        exe, compile_s = compiled_run(self.engine_config, self.tables, self.state,
                                      jnp.int32(limit), self.devices, self.half_ops)
        self.compile_s += compile_s
        bar = tqdm(total=max_cycles, unit="cycle", file=sys.stderr) if progress \
            else contextlib.nullcontext()
        with HeldInterrupts() as interrupts, bar:
            self._run_chunks(exe, start_cycle, limit, chunk_cycles, bar if progress else None,
                             interrupts)
        self._raise_if_stuck(max_cycles, raise_on_limit)
        return self.stats()

    def advance(self, max_cycles: int, raise_on_limit: bool = True) -> None:
        """`run` for a host that looks at the fabric every few cycles: up to `max_cycles`
        more cycles in one engine call, stopping where `run` would (quiet, error or
        deadlock) with the same state and errors, but no statistics gathered (`stats()`
        gives them) and no chunks, bar or held Ctrl-C: a few cycles cost the engine call
        alone."""
        start = int(self.state.cycle)
        limit = np.int32(start + max_cycles)  # a host scalar: no small device op per poll
        exe, compile_s = compiled_run(self.engine_config, self.tables, self.state, limit,
                                      self.devices, self.half_ops)
        self.compile_s += compile_s
        self.state = exe(self.tables, self.state, limit)
        self.last_run_cycles = self._raise_if_stuck(max_cycles, raise_on_limit) - start

    def advance_watched(self, max_cycles: int, watch: Watch, parts: int, poll: int,
                        raise_on_limit: bool = True) -> tuple[np.ndarray, ...]:
        """`advance` for a host watching a merged program's parts (`fabric.part_watch`):
        steps of `poll` cycles up to `max_cycles` more, stopping after the first step whose
        look differs from the look at the call (or where `advance` would stop). Returns
        that look, read in one transfer with the run's status: (bool [R * C, parts] the
        parts with work on each PE's CE, bool [parts] those with work anywhere, uint32 [W]
        the watched words). Raises as `advance`, the cycle limit only where it was reached
        (`raise_on_limit`)."""
        if self.devices != 1:
            raise ValueError("advance_watched runs on one device")
        start = int(self.state.cycle)
        limit = np.int32(start + max_cycles)
        key = (_engine_key(self.engine_config, self.tables, 1, self.half_ops),
               watch.word_rows.shape, poll, parts)
        exe, compile_s = _compiled_once(key, run_watched, self.engine_config, self.tables,
                                        self.state, limit, watch, poll, parts, self.half_ops)
        self.compile_s += compile_s
        self.state, seen, status = exe(self.tables, self.state, limit, watch)
        seen, status = jax.device_get((seen, status))
        reached = int(status[3]) >= start + max_cycles
        self.last_run_cycles = self._raise_if_stuck(max_cycles, raise_on_limit and reached,
                                                    status) - start
        return seen

    def wait(self, cycles: int) -> Stats:
        """Let `cycles` cycles pass while the host holds back what the fabric waits for
        (a transfer still on the host link): the engine runs them as `run` does, but
        nothing moving is no deadlock here (the window starts again each time it fills,
        every counter goes on as in those cycles) and a quiet fabric's clock just goes on
        (nothing in it changes). Stops early on an error.

        Raises RunError: a PE did something invalid."""
        target = int(self.state.cycle) + max(0, cycles)
        exe, compile_s = compiled_run(self.engine_config, self.tables, self.state,
                                      jnp.int32(target), self.devices, self.half_ops)
        self.compile_s += compile_s
        with HeldInterrupts() as interrupts:
            while int(self.state.cycle) < target:
                if not bool(_pending(self.tables, self.state)):
                    self.state = engine.replace(self.state, cycle=jnp.int32(target))
                    break
                self.state = engine.replace(self.state, idle_cycles=jnp.int32(0))
                self._run_chunks(exe, int(self.state.cycle), target, None, None, interrupts)
                if bool((self.state.error != 0).any()):
                    raise RunError(error_report(self.info, self.state))
        return self.stats()

    def _run_chunks(self, exe, start_cycle, limit, chunk_cycles, bar, interrupts):
        """The engine up to absolute cycle `limit` in chunks of `chunk_cycles` (None: sized
        to take about CHUNK_S each). Each call stops where one long call would have gone on
        from, so the state is the same bit for bit; the loop ends with the first call that
        stops short of its end (quiet, error or deadlock) or reaches `limit`. A chunk that
        ends just as the fabric turns quiet costs one more call, which steps nothing.
        After each call the simulator's state and `last_*` figures are those of the cycles
        run so far, and a held Ctrl-C is delivered."""
        key = _engine_key(self.engine_config, self.tables, self.devices, self.half_ops)
        if chunk_cycles is not None:
            chunk = max(1, chunk_cycles)
        else:
            chunk = _CHUNK_CYCLES.get(key) or max(1, min(
                MAX_FIRST_CHUNK, FIRST_CHUNK_PE_CYCLES // self.config.num_pes))
        t0 = time.perf_counter()
        cycle = start_cycle
        while True:
            end = min(cycle + chunk, limit)
            t_call = time.perf_counter()
            self.state = exe(self.tables, self.state, np.int32(end))
            cycle = int(self._state.cycle)  # waits for the call
            now = time.perf_counter()
            self.last_run_cycles = cycle - start_cycle
            self.last_wall_s = now - t0
            if bar is not None:
                rate = self.last_run_cycles * self.config.num_pes / max(now - t0, 1e-9)
                bar.set_postfix_str(f"{rate:.3g} PE-cycles/s", refresh=False)
                bar.update(self.last_run_cycles - bar.n)
            interrupts.deliver()
            if cycle < end or end == limit:
                return
            if chunk_cycles is None:  # a whole chunk ran: aim the next one at CHUNK_S
                aimed = int(chunk * CHUNK_S / max(now - t_call, 1e-9))
                chunk = _CHUNK_CYCLES[key] = max(1, min(MAX_GROWTH * chunk, aimed))

    def record(self, rect: Rect | None = None, links: bool = False,
               max_cycles: int = 1_000_000, raise_on_limit: bool = True,
               chunk_cycles: int = DEFAULT_CHUNK, progress: bool | None = None) -> Trace:
        """`run`, recording what every PE of `rect` does in every cycle; returns a
        `fabric.trace.Trace` (its `.stats` is what `run` returns; `.save(path)` writes
        Chrome trace-event JSON for ui.perfetto.dev or chrome://tracing).

        rect: PEs to record (default: the whole fabric). links: also record every wavelet
            sent through a link of those PEs. chunk_cycles: cycles per engine call.
        Results, cycle counts and counters are the same as `run`'s, bit for bit. An error
        `run` would raise is raised with the trace up to it as `err.trace`.

        Example:
            >>> trace = sim.record(rect=Rect(0, 0, 2, 4), links=True)  # doctest: +SKIP
            >>> trace.save("trace.json")                                 # doctest: +SKIP
        """
        return record_trace(self, rect, links, max_cycles, raise_on_limit, chunk_cycles,
                            progress)

    # ---- checkpoints ----------------------------------------------------------------------
    def save(self, path) -> None:
        """Write a checkpoint (see `fabric.checkpoint.save_checkpoint`)."""
        save_checkpoint(self, path)

    @staticmethod
    def load(path, config: FabricConfig, program: Program, devices: int = 1) -> Simulator:
        """A session resumed from a checkpoint (see `fabric.checkpoint`).

        Example:
            >>> sim = Simulator.load("run.ckpt", config, program)  # doctest: +SKIP
        """
        saved = read_checkpoint(path, config)
        sim = Simulator(config, program, devices=devices, min_table_rows=saved.table_rows)
        return restore_checkpoint(sim, saved)

    def _raise_if_stuck(self, max_cycles, raise_on_limit, status=None) -> int:
        """Raise where the run stopped on an error, a deadlock or (raise_on_limit) its
        cycle limit with work left; else the cycle it stopped at. status: `_status` of the
        state, already read."""
        st = self.state
        if status is None:
            status = jax.device_get(_status(self.tables, st))
        error, pending, idle, cycle = (x.item() for x in status)
        if error:
            raise RunError(error_report(self.info, st))
        if not pending:
            return cycle
        if idle >= self.config.deadlock_window:
            report = deadlock_report(self.config, self.info, st)
            raise DeadlockError(
                f"deadlock at cycle {cycle}: work is pending but nothing moved for "
                f"{self.config.deadlock_window} cycles\n{report}", report)
        if raise_on_limit:
            raise CycleLimitError(
                f"cycle limit reached: {max_cycles} cycles ran (now at cycle {cycle}) "
                "and the fabric is still busy; raise max_cycles")
        return cycle

    def stats(self) -> Stats:
        fields = jax.device_get(_stats_fields(self.state))
        for name in ("cycles", "injected", "delivered", "consumed", "forked", "in_flight"):
            fields[name] = int(fields[name])
        return Stats(
            **fields,
            run_cycles=self.last_run_cycles,
            sram_bytes_used=4 * self.info.sram_used_words,
            host_cycles=self.host_cycles,
            compile_s=self.compile_s,
            wall_s=self.last_wall_s,
            sram_bytes_per_pe=self.config.sram_bytes,
        )

    @property
    def state_bytes_per_pe(self) -> float:
        return state_bytes(self.state) / self.config.num_pes


def _check_window(config: FabricConfig, parent: FabricConfig, corner: tuple[int, int]):
    r, c = corner
    if config != parent.tile(config.rows, config.cols):
        raise ValueError(f"{config.name} is not a window of {parent.name}: expected "
                         f"parent.tile({config.rows}, {config.cols})")
    if r < 0 or c < 0 or r + config.rows > parent.rows or c + config.cols > parent.cols:
        raise ValueError(f"a {config.rows}x{config.cols} window at corner {corner} leaves the "
                         f"{parent.rows}x{parent.cols} fabric {parent.name}")


def load_checkpoint(path, config: FabricConfig, program: Program,
                    devices: int = 1) -> Simulator:
    """A new `Simulator` for `program` on `config`, resumed from the checkpoint at `path`
    (`Simulator.load`).

    Raises:
        CheckpointError: `path` is not a checkpoint, is truncated or corrupt, has another
            format version, or was saved under another config or program.
    """
    return Simulator.load(path, config, program, devices)
