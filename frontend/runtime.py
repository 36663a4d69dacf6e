"""Runs a placed, lowered graph on the simulated fabric.

Every stage is one engine run of its kernel's program on its tile (the rest of the fabric
idle); stages run one after another in graph order. Before a stage runs, its runtime inputs
arrive in its kernel's own layout: from the tiles of the stages that produced them, moved
over the mesh by a redistribution program (`fabric.kernels.redistribute`, simulated cycle
by cycle), or from the host for the model's inputs (host I/O). Between runs, each tile's
SRAM words carry over unchanged (the next program on those PEs starts from them).

Resident inputs: an input given as a `ResidentTensor` (its words already in PE memory, e.g.
a parameter the optimizer keeps on the fabric) is not written by the host: every operand it
feeds gets it over the mesh from where it lives (`CompiledModel.make_resident` plans those
moves once), and its move cycles count like any other.

Cycles: kernel cycles of every stage plus the cycles of every movement, summed (one input
flows through the layers one stage at a time); host I/O cycles apart.

Windows: a stage's program lies on its tile, a move's inside the box of its two tiles, so
each runs on a window of the fabric that holds it (`fabric.window_for`): the same cycles
and words, at the engine cost of the window's PEs rather than the wafer's. Host I/O is
charged as on the whole fabric. `Execution(..., windows=False)` runs every program on the
whole fabric instead (the reference the windows are tested against).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch

from fabric import (
    FabricConfig,
    Program,
    RunError,
    Simulator,
    Window,
    host_io_cycles,
    whole_fabric,
    window_for,
)
from fabric.kernels import (
    Kernel,
    Redistribution,
    WordMap,
    plan_redistribution,
    probe_inputs,
    probe_output,
    read_words,
    write_words,
)
from fabric.program import Rect
from frontend.build_keys import alike
from frontend.errors import PlacementError, StageRunError
from frontend.host_writes import unpack_plan
from frontend.sources import describe
from frontend.stages import Operand, Stage
from frontend.tables import MIN_TABLE_ROWS
from frontend.values import Tensor


@dataclasses.dataclass
class Source:
    """The part of one runtime operand that one materialized tensor supplies: `dst` maps
    the operand's kernel words to that tensor's elements; `plan` moves them (None for a
    user input, which the host writes). `unpack`: for a user input whose layout holds an
    element in several slots of a PE (or leaves gaps), the PEs' copies from what the host
    writes instead, each element once per PE (`frontend.host_writes`); None: the host
    writes `dst` as it is."""

    tensor: Tensor
    dst: WordMap
    plan: Redistribution | None
    unpack: Redistribution | None = None

    @property
    def written(self) -> WordMap:
        """The map of what the host writes for a user input: packed, or `dst`."""
        return self.unpack.src if self.unpack is not None else self.dst


@dataclasses.dataclass
class ResidentTensor:
    """A runtime input that lives in PE memory: its words there and their map."""

    map: WordMap
    words: dict[str, np.ndarray]


@dataclasses.dataclass
class PreparedStage:
    """A stage ready to run: `kernel` is built on the whole fabric at `rect` (table rows,
    SRAM per PE); `run_kernel` the same kernel on `window`, where it runs (both None: it
    runs `kernel` on the whole fabric)."""

    stage: Stage
    rect: Rect
    kernel: Kernel
    in_maps: dict[str, WordMap]
    out_map: WordMap
    consts: dict[str, np.ndarray]
    sources: dict[str, list[Source]]  # operand name -> its sources (static operands)
    window: Window | None = None
    run_kernel: Kernel | None = None
    # its programs built, on its window or not, by config and floor
    # (`fabric.build.build_once`): once per compiled model, not per call
    built: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def load_constants(self, sim: Simulator, kernel: Kernel | None = None) -> int:
        """`kernel`'s load (default the stage's `kernel`) into `sim`: its constants
        (weights), its runtime operands as zeros. Returns the host cycles it took."""
        zeros = {op.name: np.zeros(op.shape, np.float32) for op in self.stage.operands
                 if op.const is None}
        before = sim.host_cycles
        (kernel or self.kernel).load(sim, {**zeros, **self.consts})
        return sim.host_cycles - before


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One source of a stage's runtime operands in one call: `tensor` (a stage's output, a
    resident input, or a user input) came in `cycles`, over the mesh (`host` False) or
    written by the host, into `words` 32-bit words per PE of the stage's tile (at most).
    `local`: the last cycles of a host write, the PEs' copies unpacking it into the
    operand's slots (`Source.unpack`), while the host link is free again."""

    tensor: str
    cycles: int
    host: bool
    words: int = 0
    local: int = 0

    @property
    def link_cycles(self) -> int:
        """Cycles it holds the host link (a host write's, less its unpacking)."""
        return self.cycles - self.local


@dataclasses.dataclass
class StageResult:
    name: str
    kernel_cycles: int
    move_cycles: int
    host_cycles: int  # the load of its constants (weights) and the host's writes of inputs
    moved_words: int
    busy: float  # busy PE-cycles of the kernel run
    sram_bytes: int  # max SRAM bytes used per PE of the tile
    wall_s: float
    load_cycles: int = 0  # host cycles of its kernel's load (constants; part of host_cycles)
    transfers: list[Transfer] = dataclasses.field(default_factory=list)
    out_words: int = 0  # 32-bit words per PE its output takes (at most)


def prepare(stages: list[Stage], rects: dict[str, Rect], tensors: dict[str, Tensor],
            config: FabricConfig) -> list[PreparedStage]:
    out: dict[str, PreparedStage] = {}
    for s in stages:
        rect = rects[s.name]
        try:
            kernel = s.build(config, rect)
        except ValueError as exc:
            raise PlacementError(f"{describe(s.node)}: stage {s.name!r} ({s.kind}) does not "
                                 f"fit its tile {rect}: {exc}") from exc
        window = window_for(config, rect)
        if window.whole:  # runs on the fabric: probe on the tile, which costs less
            run_kernel = kernel
            in_maps, out_map = probe_on_tile(s, config, rect)
        else:  # the window's kernel, built once, is probed and run
            run_kernel = s.build(window.config, window.inner(rect))
            in_maps, out_map = probe_at(s, run_kernel, rect)
        if out_map.size != s.tensor.numel:
            raise AssertionError(f"{s.name}: kernel output {out_map.shape} vs {s.tensor.shape}")
        out_map = WordMap(s.tensor.shape, out_map.rect, out_map.symbols, out_map.dtypes)
        consts = {op.name: op.const for op in s.operands if op.const is not None}
        sources = {op.name: sources_of(op.index, in_maps[op.name], tensors, out, config)
                   for op in s.operands if op.index is not None}
        out[s.name] = PreparedStage(s, rect, kernel, in_maps, out_map, consts, sources,
                                    window, run_kernel)
    return list(out.values())


def probe_on_tile(stage: Stage, config: FabricConfig, rect: Rect
                  ) -> tuple[dict[str, WordMap], WordMap]:
    """(input maps, output map) of `stage`'s kernel placed at `rect`. The kernel is built and
    probed on a fabric the size of its tile (`FabricConfig.tile`), where its program and
    memory layout are the ones it has at `rect`, and the maps moved there: the probes' cost
    follows the tile, not the wafer."""
    tile, here = config.tile(rect.rows, rect.cols), Rect(0, 0, rect.rows, rect.cols)
    return _moved(_probed(stage, tile, here, lambda: stage.build(tile, here)), rect)


def probe_at(stage: Stage, kernel: Kernel, rect: Rect) -> tuple[dict[str, WordMap], WordMap]:
    """(input maps, output map) of `kernel`, `stage`'s kernel built on a tile or a window
    of the fabric, moved to `rect` of the fabric."""
    return _moved(_probed(stage, kernel.config, kernel.rect, lambda: kernel), rect)


def _probed(stage: Stage, grid: FabricConfig, rect: Rect, kernel: Callable[[], Kernel]
            ) -> tuple[dict[str, WordMap], WordMap]:
    """(input maps, output map) of the stage's kernel at `rect` of `grid` (`kernel()` makes
    it), probed once for the stages that build alike in one compile (`Stage.build_key`)."""
    shapes = {op.name: op.shape for op in stage.operands}

    def probe():
        built = kernel()
        return probe_inputs(built, shapes), probe_output(built)

    return alike("probes", stage.build_key, (tuple(shapes.items()), grid, rect), probe)


def _moved(maps: tuple[dict[str, WordMap], WordMap], rect: Rect
           ) -> tuple[dict[str, WordMap], WordMap]:
    in_maps, out_map = maps
    return {k: m.at(rect) for k, m in in_maps.items()}, out_map.at(rect)


def call_programs(prepared: list[PreparedStage]) -> list[Program]:
    """Every program a call runs: the stages' kernels on their windows and their static
    data movement (a model's table rows are sized over them, `frontend.tables.table_rows`,
    which builds each on its own grid: a window's program costs its window, not the
    wafer)."""
    programs = [(p.run_kernel or p.kernel).program for p in prepared]
    programs += [rnd.program for p in prepared for srcs in p.sources.values() for src in srcs
                 for plan in (src.plan, src.unpack) if plan is not None for rnd in plan.rounds]
    return programs


def _stage_failure(p: PreparedStage, exc: RunError, windows: bool) -> str:
    """The engine's message on a stage's run (or a move into it), prefixed with the stage,
    its FX node and the user's source line; PEs of the engine's report are in the
    coordinates of the grid it ran, which the message places on the fabric."""
    where = ""
    if windows and p.window is not None and not p.window.whole:
        r, c = p.window.corner
        where = (f" (the run's PEs are numbered in its {p.window.rect.rows} x "
                 f"{p.window.rect.cols} window, whose PE (0, 0) is PE ({r}, {c}) of the fabric)")
    return (f"{describe(p.stage.node)}: stage {p.stage.name!r} ({p.stage.kind}) on its tile "
            f"{p.rect} did not finish{where}: {exc}")


def _relabel(dst: WordMap, gids: np.ndarray, tensor: Tensor) -> WordMap | None:
    """`dst` (in the operand's elements) re-labelled in `tensor`'s elements, keeping only the
    words `tensor` supplies; None when it supplies none."""
    symbols, any_word = {}, False
    for name, a in dst.symbols.items():
        g = np.where(a >= 0, gids[np.maximum(a, 0)], -1)
        mine = tensor.owns(g)
        any_word |= bool(mine.any())
        symbols[name] = np.where(mine, g - tensor.base, -1)
    return WordMap(tensor.shape, dst.rect, symbols, dst.dtypes) if any_word else None


def sources_of(index: torch.Tensor, dst: WordMap, tensors: dict[str, Tensor],
               prepared: dict[str, PreparedStage], config: FabricConfig) -> list[Source]:
    """The sources that fill `dst`, a map of the elements of `index` (global ids of the
    model's tensors): one per materialized tensor it draws from, each with its move plan
    from the producing stage's output (None for a user input: the host writes it)."""
    gids = index.reshape(-1).numpy()
    out = []
    for t in tensors.values():
        if not t.owns(gids).any():
            continue
        m = _relabel(dst, gids, t)
        if m is None:
            continue
        if t.kind == "stage":
            out.append(Source(t, m, plan_redistribution(config, prepared[t.name].out_map, m)))
        else:  # a user input (or one made resident later, `CompiledModel.make_resident`)
            out.append(Source(t, m, None, unpack_plan(config, m)))
    return out


def _inside(window: Window, m: WordMap) -> WordMap:
    """`m` (on the fabric) in the window's coordinates."""
    return m.at(window.inner(m.rect))


def input_words(wmap: WordMap, value: torch.Tensor) -> dict[str, np.ndarray]:
    """The words of user input `value` in layout `wmap`: floats as fp32, integers (token
    ids) as int32, as the host writes them."""
    values = value.detach().contiguous()
    return wmap.to_words(values.to(torch.float32).numpy() if values.dtype.is_floating_point
                         else values.to(torch.int32).numpy())


class Execution:
    """One call: runs every stage, keeps the words of every materialized tensor.

    windows: run each stage and each move on its window of the fabric (the prepared
    stages' `window`, the plans'); False: every program on the whole fabric (the moves
    planned again there), with the same results, cycles and host cycles."""

    def __init__(self, config: FabricConfig, prepared: list[PreparedStage],
                 tensors: dict[str, Tensor], inputs: dict[str, torch.Tensor],
                 max_cycles: int, rows: tuple[int, int] = MIN_TABLE_ROWS,
                 resident: dict[str, ResidentTensor] | None = None, windows: bool = True):
        self.config = config
        self.windows = windows
        self.tensors = tensors
        self.inputs = inputs
        # words of every materialized tensor, resident inputs first (moves read them alike)
        self.words: dict[str, dict[str, np.ndarray]] = {
            k: r.words for k, r in (resident or {}).items()}
        self.maps: dict[str, WordMap] = {k: r.map for k, r in (resident or {}).items()}
        self.rows = rows  # every Simulator of the call: one compiled engine
        self.results: list[StageResult] = []
        for p in prepared:
            try:
                self.results.append(self._run(p, max_cycles))
            except RunError as exc:
                raise StageRunError(_stage_failure(p, exc, self.windows)) from exc

    def _run(self, p: PreparedStage, max_cycles: int) -> StageResult:
        t0 = time.perf_counter()
        if self.windows and p.run_kernel is not None:
            window, kernel = p.window, p.run_kernel
        else:
            window, kernel = whole_fabric(self.config), p.kernel
        # host transfers into the window cost what they cost on the whole fabric
        sim = Simulator(window.config, kernel.program, min_table_rows=self.rows,
                        built=p.built.setdefault(kernel is p.run_kernel, {}),
                        **window.simulator_args())
        host = load = p.load_constants(sim, kernel)
        move, moved = 0, 0
        transfers = []
        for op in p.stage.operands:
            if op.const is not None:
                continue
            sources = (self._gather_sources(p, op) if op.gather is not None
                       else p.sources.get(op.name, []))
            for src in sources:
                local = 0
                if src.plan is None:  # a user input: the host writes it
                    words = input_words(src.written, self.inputs[src.tensor.name])
                    cycles = host_io_cycles(self.config, p.rect, src.written.widest_sram_words)
                    host += cycles
                    if src.unpack is not None:  # and its PEs copy it into its slots
                        words, local, _ = self._plan(src.unpack).run(
                            words, min_table_rows=self.rows)
                        cycles += local
                else:
                    plan = self._plan(src.plan)
                    words, cycles, _ = plan.run(self.words[src.tensor.name],
                                                min_table_rows=self.rows)
                    move += cycles
                    moved += plan.remote_words + plan.local_words
                transfers.append(Transfer(src.tensor.name, cycles, src.plan is None,
                                          src.dst.widest_sram_words, local))
                write_words(sim, _inside(window, src.dst), words, mapped_only=True)
        kernel.launch(sim)
        stats = sim.run(max_cycles=max_cycles, progress=False) if p.stage.kind != "resident" \
            else sim.stats()
        self.words[p.stage.name] = read_words(sim, _inside(window, p.out_map))
        self.maps[p.stage.name] = p.out_map
        r = window.inner(p.rect)
        busy = float(stats.busy[r.row:r.row_end, r.col:r.col_end].sum())
        sram = int(stats.sram_bytes_used[r.row:r.row_end, r.col:r.col_end].max())
        return StageResult(p.stage.name, int(stats.cycles), move, host, moved, busy, sram,
                           time.perf_counter() - t0, load, transfers,
                           p.out_map.widest_sram_words)

    def _gather_sources(self, p: PreparedStage, op: Operand) -> list[Source]:
        """An embedding's rows: planned for this call's indices."""
        gids = op.gather.resolve(self.inputs).reshape(-1).numpy()
        table = next(t for t in self.tensors.values() if t.base == op.gather.table_base)
        dst = _relabel(p.in_maps[op.name], gids, table)
        plan = plan_redistribution(self.config, self.maps[table.name], dst,
                                   windowed=self.windows)
        return [Source(table, dst, plan)]

    def _plan(self, plan: Redistribution) -> Redistribution:
        """The plan as this call runs it: planned again on the whole fabric when the call
        runs without windows and the plan has one."""
        if self.windows or plan.window.whole:
            return plan
        return plan_redistribution(self.config, plan.src, plan.dst, windowed=False)

    def value(self, gids: torch.Tensor) -> torch.Tensor:
        """The tensor whose elements are the global ids `gids` (-1: zero)."""
        return tensor_value(self.tensors, self.maps, self.words, self.inputs, gids)

    def stage_figures(self) -> dict[str, tuple[int, int, int]]:
        """{stage: (kernel cycles, data-movement cycles, max SRAM bytes per PE)}."""
        return {r.name: (r.kernel_cycles, r.move_cycles, r.sram_bytes) for r in self.results}


def tensor_value(tensors: dict[str, Tensor], maps: dict[str, WordMap],
                 words: dict[str, dict[str, np.ndarray]], inputs: dict[str, torch.Tensor],
                 gids: torch.Tensor) -> torch.Tensor:
    """The tensor whose elements are the global ids `gids` (-1: zero), read from `words`
    ({tensor: its words}, laid out by `maps`) of the stages' outputs and resident inputs,
    or from the call's `inputs`."""
    flat = gids.reshape(-1).numpy()
    out = np.zeros(flat.shape, np.uint32)
    for t in tensors.values():
        mine = t.owns(flat)
        if not mine.any():
            continue
        if t.name in maps:  # a stage's output, or a resident input
            full = maps[t.name].from_words(words[t.name]).reshape(-1)
            out[mine] = full.view(np.uint32)[flat[mine] - t.base]
        elif t.kind == "input":
            src = inputs[t.name].detach().contiguous().to(torch.float32).numpy()
            out[mine] = src.reshape(-1).view(np.uint32)[flat[mine] - t.base]
        else:
            raise AssertionError(f"tensor {t.name!r} has not run yet")
    return torch.from_numpy(out.view(np.float32).reshape(tuple(gids.shape)).copy())
