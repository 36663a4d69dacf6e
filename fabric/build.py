"""Lower a `Program` to dense tables the engine interprets.

`build(config, program)` validates the program (routes, colors, tasks, registers, SRAM
capacity), allocates SRAM per PE and writes:

- a global instruction table (I x I_FIELDS) and DSD table (D x D_FIELDS), padded to a
  power-of-two bucket so that programs of one bucket share one compiled engine;
- per-PE tables with the grid as leading axes: routes as port bitmasks, task entry points,
  initial registers and task bits.

Axis letters: R, C = grid rows, cols; K = colors; T = task ids; G = registers.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int32, UInt32

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.encode import encode_task
from fabric.errors import BuildError
from fabric.isa import (
    D_FIELDS,
    I_FIELDS,
    I_OP,
    NUM_PORTS,
    OPPOSITE,
    STEP,
    Op,
    Port,
)
from fabric.program import Placement, Program

MIN_BUCKET = 64


class Tables(eqx.Module):
    """Everything the engine reads about a program (device arrays only)."""

    instr: Int32[Array, "I F"]
    dsd: Int32[Array, "D F"]
    tx_mask: UInt32[Array, "R C 5"]  # bit k: color k leaves through this port
    rx_mask: UInt32[Array, "R C 5"]  # bit k: color k is accepted from this port
    task_entry: Int32[Array, "R C T"]  # first instruction row of each task, -1 if none
    task_defined: UInt32[Array, "R C"]  # bit t: the PE has task t
    task_data: UInt32[Array, "R C"]  # bit t: task t is a data task (bound to color t)
    init_blocked: UInt32[Array, "R C"]
    init_regs: Int32[Array, "R C G"]


@dataclasses.dataclass(frozen=True)
class SymbolInfo:
    tile: str
    name: str
    dtype: str
    shape: tuple
    address: int  # word address on every PE of the placement


@dataclasses.dataclass(frozen=True)
class ProgramInfo:
    """Host-side facts about a built program: where symbols live, task ids, names."""

    placements: tuple
    symbols: tuple  # per placement: dict name -> SymbolInfo
    task_ids: tuple  # per placement: dict task name -> id
    sram_used_words: np.ndarray  # (R, C)
    num_instructions: int
    num_dsds: int
    instr_origin: tuple  # per instruction row: (tile, task, index in task code)
    registers: tuple = ()  # per placement: dict register name -> index

    def placement_index(self, row: int, col: int) -> int | None:
        for i, p in enumerate(self.placements):
            if p.rect.contains(row, col):
                return i
        return None

    def task_name(self, row: int, col: int, task_id: int) -> str:
        i = self.placement_index(row, col)
        if i is None:
            return f"task {task_id}"
        for name, tid in self.task_ids[i].items():
            if tid == task_id:
                return name
        return f"task {task_id}"


def bucket(n: int) -> int:
    """Table length used for n rows: the next power of two, at least MIN_BUCKET."""
    size = MIN_BUCKET
    while size < n:
        size *= 2
    return size


def build_once(config: FabricConfig, program: Program, min_table_rows: tuple[int, int],
               built: dict) -> tuple[Tables, ProgramInfo]:
    """`build`, kept in `built` (a dict its owner keeps beside `program`, which it does not
    change after building) by config and floor: a program run again and again (a model's
    stage, once per call) is lowered once. Tables and info are only read by a simulator."""
    key = (config, tuple(min_table_rows))
    if key not in built:
        built[key] = build(config, program, min_table_rows)
    return built[key]


def build(config: FabricConfig, program: Program,
          min_table_rows: tuple[int, int] = (0, 0)) -> tuple[Tables, ProgramInfo]:
    """Validate `program` and lower it to `Tables` plus a host-side `ProgramInfo`.

    min_table_rows: at least this many (instruction, DSD) table rows, so that programs of
    different sizes can share one bucket (one compiled engine).

    Raises:
        BuildError: naming the PE, tile, task, color or symbol at fault.
    """
    if program.config != config:
        raise BuildError(f"program was written for {program.config.name}, not {config.name}")
    R, C, K = config.rows, config.cols, config.num_colors
    rx_port, tx_ports = _route_grids(config, program)
    _check_routes(config, rx_port, tx_ports)

    instr_rows: list[list[int]] = []
    dsd_rows: list[list[int]] = []
    origins: list[tuple] = []
    task_entry = np.full((R, C, config.num_task_ids), -1, np.int32)
    task_defined = np.zeros((R, C), np.uint32)
    task_data = np.zeros((R, C), np.uint32)
    init_blocked = np.zeros((R, C), np.uint32)
    init_regs = np.zeros((R, C, config.num_registers), np.int32)
    sram_used = np.zeros((R, C), np.int64)
    symbols, task_ids, registers = [], [], []

    for placement in program.placements:
        tile, rect = placement.tile, placement.rect
        sym_info, ids, regs = _lay_out(config, placement)
        _check_colors(config, placement, rx_port, tx_ports,
                      routed=not program.merged_from)
        entries = _encode_tasks(config, tile, ids, regs, sym_info, instr_rows, dsd_rows,
                                origins)
        r0, r1, c0, c1 = rect.row, rect.row_end, rect.col, rect.col_end
        for name, tid in ids.items():
            task_entry[r0:r1, c0:c1, tid] = entries[name]
            task_defined[r0:r1, c0:c1] |= np.uint32(1 << tid)
            if tile.tasks[name].kind == "data":
                task_data[r0:r1, c0:c1] |= np.uint32(1 << tid)
            if tile.tasks[name].blocked:
                init_blocked[r0:r1, c0:c1] |= np.uint32(1 << tid)
        for name, arr in placement.params.items():
            init_regs[r0:r1, c0:c1, regs[name]] = _as_bits(arr, f"param {name!r} of tile "
                                                           f"{tile.name!r}")
        sram_used[r0:r1, c0:c1] = max((s.address + tile.symbols[s.name].words
                                       for s in sym_info.values()), default=0)
        symbols.append(sym_info)
        task_ids.append(ids)
        registers.append(dict(regs))

    n_instr, n_dsd = len(instr_rows), len(dsd_rows)
    instr = np.zeros((bucket(max(n_instr, min_table_rows[0])), I_FIELDS), np.int32)
    instr[:, I_OP] = Op.RET  # padding rows end a task if ever reached
    if n_instr:
        instr[:n_instr] = np.asarray(instr_rows, np.int32)
    dsd = np.zeros((bucket(max(n_dsd, min_table_rows[1])), D_FIELDS), np.int32)
    if n_dsd:
        dsd[:n_dsd] = np.asarray(dsd_rows, np.int32)

    tables = Tables(
        instr=jnp.asarray(instr),
        dsd=jnp.asarray(dsd),
        tx_mask=jnp.asarray(_port_masks(tx_ports, K)),
        rx_mask=jnp.asarray(_port_masks(_rx_as_sets(rx_port), K)),
        task_entry=jnp.asarray(task_entry),
        task_defined=jnp.asarray(task_defined),
        task_data=jnp.asarray(task_data),
        init_blocked=jnp.asarray(init_blocked),
        init_regs=jnp.asarray(init_regs),
    )
    info = ProgramInfo(
        placements=tuple(program.placements),
        symbols=tuple(symbols),
        task_ids=tuple(task_ids),
        sram_used_words=sram_used,
        num_instructions=n_instr,
        num_dsds=n_dsd,
        instr_origin=tuple(origins),
        registers=tuple(registers),
    )
    return tables, info


def program_table_rows(config: FabricConfig, program: Program) -> tuple[int, int]:
    """The (instruction, DSD) table rows `build(config, program)` gives, bucketed, from its
    tiles' code alone: no routes, no per-PE arrays, so sizing the engine for many programs
    (a model's moves) costs their encoding only. Raises BuildError as `build` does for
    the tiles (SRAM, task ids, registers, code); routes are checked when the program is
    built."""
    if program.config != config:
        raise BuildError(f"program was written for {program.config.name}, not {config.name}")
    n_instr = n_dsd = 0
    rows_of: dict[int, tuple[int, int]] = {}  # id of a tile placed before -> its rows
    for placement in program.placements:
        tile = placement.tile
        if id(tile) not in rows_of:  # a tile placed on several rectangles: encoded once
            sym_info, ids, regs = _lay_out(config, placement)
            instr_rows: list[list[int]] = []
            dsd_rows: list[list[int]] = []
            _encode_tasks(config, tile, ids, regs, sym_info, instr_rows, dsd_rows, [])
            rows_of[id(tile)] = len(instr_rows), len(dsd_rows)
        n_instr, n_dsd = n_instr + rows_of[id(tile)][0], n_dsd + rows_of[id(tile)][1]
    return bucket(n_instr), bucket(n_dsd)


def _lay_out(config, placement):
    """A tile's SRAM symbols, task ids (the generation's binding rule checked) and register
    indices: (symbols, task ids, registers)."""
    sym_info = _allocate(config, placement)
    ids = _task_ids(config, placement.tile)
    hardware_task_ids(config, placement.tile)
    regs = _register_indices(config, placement.tile)
    return sym_info, ids, regs


def _encode_tasks(config, tile, ids, regs, sym_info, instr_rows, dsd_rows, origins) -> dict:
    """Append the rows of every task of `tile` (and their origins); {task: its first
    instruction row}."""
    entries = {}
    for task in tile.tasks.values():
        entries[task.name] = len(instr_rows)
        origins.extend(encode_task(config, tile, task, ids, regs, sym_info, instr_rows,
                                   dsd_rows))
    return entries


# ---- routes ---------------------------------------------------------------------------------
def _route_grids(config, program):
    """Per PE and color: the rx port (-1 none) and the set of tx ports (bitmask over ports)."""
    R, C, K = config.rows, config.cols, config.num_colors
    rx_port = np.full((R, C, K), -1, np.int8)
    tx_ports = np.zeros((R, C, K), np.uint8)
    for route in program.routes:
        rect = route.rect
        sl = (slice(rect.row, rect.row_end), slice(rect.col, rect.col_end), route.color)
        rx_port[sl] = int(route.rx)
        tx_ports[sl] = sum(1 << int(p) for p in route.tx)
    return rx_port, tx_ports


def _check_routes(config, rx_port, tx_ports):
    R, C = config.rows, config.cols
    for port, (dr, dc) in STEP.items():
        sends = (tx_ports >> int(port)) & 1
        rows, cols, colors = np.nonzero(sends)
        for r, c, k in zip(rows, cols, colors):
            nr, nc = r + dr, c + dc
            if not (0 <= nr < R and 0 <= nc < C):
                raise BuildError(
                    f"color {k} at PE ({r}, {c}) is sent {port.name} but leaves the "
                    f"{R}x{C} fabric there")
            want = int(OPPOSITE[port])
            if rx_port[nr, nc, k] != want:
                got = rx_port[nr, nc, k]
                got_s = "no route" if got < 0 else f"rx={Port(int(got)).name}"
                raise BuildError(
                    f"color {k} is sent {port.name} from PE ({r}, {c}) but PE ({nr}, {nc}) "
                    f"does not accept it from {Port(want).name} ({got_s})")


def _rx_as_sets(rx_port):
    out = np.zeros(rx_port.shape, np.uint8)
    has = rx_port >= 0
    out[has] = (1 << rx_port[has].astype(np.int64)).astype(np.uint8)
    return out


def _port_masks(port_sets, K):
    """(R, C, K) port bitmasks -> (R, C, 5) color bitmasks."""
    R, C, _ = port_sets.shape
    masks = np.zeros((R, C, NUM_PORTS), np.uint32)
    for p in range(NUM_PORTS):
        bits = ((port_sets >> p) & 1).astype(np.uint32)
        masks[..., p] = (bits << np.arange(K, dtype=np.uint32)).sum(-1, dtype=np.uint64).astype(
            np.uint32)
    return masks


def tile_colors(tile) -> dict[int, set[tuple[str, str]]]:
    """The colors `tile` uses and how: {color: {(direction, user)}}, direction "in" (a data
    task bound to it, or code reading it through a `FabIn`) or "out" (code writing it
    through a `FabOut`), user naming the task (e.g. "data task 'recv'"). The colors a PE
    running the tile needs in its router and CE, whatever its routes say.

    Raises BuildError when a task reads a `FabOut`.

    Example:
        >>> t = Tile("t"); t.data_task("d", 5, [])   # doctest: +SKIP
        >>> tile_colors(t)                             # doctest: +SKIP
        {5: {('in', "data task 'd'")}}
    """
    used: dict[int, set[tuple[str, str]]] = {}
    for task in tile.tasks.values():
        if task.kind == "data":
            used.setdefault(task.color, set()).add(("in", f"data task {task.name!r}"))
        for item in task.code:
            if isinstance(item, ins.Instr):
                for opnd, role in ((item.dst, "out"), (item.a, "in"), (item.b, "in")):
                    if isinstance(opnd, ins.FabIn):
                        used.setdefault(opnd.color, set()).add(("in", f"task {task.name!r}"))
                    elif isinstance(opnd, ins.FabOut):
                        if role != "out":
                            raise BuildError(f"tile {tile.name!r}, task {task.name!r}: a "
                                             f"FabOut of color {opnd.color} is used as a source")
                        used.setdefault(opnd.color, set()).add(("out", f"task {task.name!r}"))
    return used


def check_routed_colors(program: Program) -> None:
    """Every color each tile of `program` reads or sends is routed to or from RAMP on at
    least one PE of the tile (else BuildError: an undefined color). `build` checks this for
    a program written as one; `merge_programs` checks each part on its own, since a part's
    tile split over merged tiles need not route a color on every piece."""
    rx_port, tx_ports = _route_grids(program.config, program)
    for placement in program.placements:
        _check_colors(program.config, placement, rx_port, tx_ports)


def _check_colors(config, placement: Placement, rx_port, tx_ports, routed: bool = True):
    """Every color a tile uses must be a program color and, when `routed`, routed on at
    least one of its PEs, and the right way."""
    tile, rect = placement.tile, placement.rect
    sl = (slice(rect.row, rect.row_end), slice(rect.col, rect.col_end))
    used = tile_colors(tile)
    for color, uses in sorted(used.items()):
        where = ", ".join(sorted(u for _, u in uses))
        if not 0 <= color < config.num_colors:
            raise BuildError(f"tile {tile.name!r} at {rect}: color {color} ({where}) is not a "
                             f"color of {config.name} (0..{config.num_colors - 1})")
        if (why := config.reserved_color_error(color)) is not None:
            raise BuildError(f"tile {tile.name!r} at {rect}, PE ({rect.row}, {rect.col}) "
                             f"first: {where} uses {why}")
        directions = {d for d, _ in uses} if routed else set()
        if "in" in directions and not ((tx_ports[sl][..., color] >> int(Port.RAMP)) & 1).any():
            raise BuildError(f"tile {tile.name!r} at {rect}: color {color} is read by {where} "
                             f"but no PE of the tile routes it to RAMP (undefined color)")
        if "out" in directions and not (rx_port[sl][..., color] == int(Port.RAMP)).any():
            raise BuildError(f"tile {tile.name!r} at {rect}: color {color} is sent by {where} "
                             f"but no PE of the tile accepts it from RAMP (undefined color)")


# ---- symbols, tasks, registers --------------------------------------------------------------
def _allocate(config, placement):
    tile, rect = placement.tile, placement.rect
    addresses = tile.addresses(config.sram_words)
    out = {sym.name: SymbolInfo(tile.name, sym.name, sym.dtype, sym.shape, addresses[sym.name])
           for sym in tile.symbols.values()}
    address = max(addresses[s.name] + s.words for s in tile.symbols.values()) if out else 0
    if address > config.sram_words:
        sizes = ", ".join(f"{s.name}: {s.nbytes} B" for s in tile.symbols.values())
        raise BuildError(
            f"tile {tile.name!r} needs {4 * address} B of SRAM per PE but PE "
            f"({rect.row}, {rect.col}) (and every PE of {rect}) has {config.sram_bytes} B; "
            f"symbols: {sizes}")
    return out


def _task_ids(config, tile):
    """The engine's task id of each task of `tile`: a data task's is its color; local tasks
    take the ids above the colors (24..30) in declaration order. A tile with more local
    tasks than those ids takes, in declaration order, the free ids above its highest data
    task's color instead (as WSE-2 lets a local task take an id whose color no data task
    is bound to), so every local id stays above every data id. An id is free when its color
    is not reserved and the tile neither binds a data task to it nor names it in a fabric
    DSD."""
    ids, by_color = {}, {}
    local = []
    for task in tile.tasks.values():
        if task.kind == "data":
            if not 0 <= task.color < config.num_colors:
                raise BuildError(f"tile {tile.name!r}: data task {task.name!r} is bound to color "
                                 f"{task.color}, not a color of {config.name} "
                                 f"(0..{config.num_colors - 1})")
            if (why := config.reserved_color_error(task.color)) is not None:
                raise BuildError(f"tile {tile.name!r}: data task {task.name!r} is bound to "
                                 f"{why}")
            if task.color in by_color:
                raise BuildError(f"tile {tile.name!r}: data tasks {by_color[task.color]!r} and "
                                 f"{task.name!r} are both bound to color {task.color}")
            by_color[task.color] = task.name
            ids[task.name] = task.color
        else:
            local.append(task.name)
    free = list(range(config.num_colors, config.num_task_ids))
    if len(local) > len(free):
        taken = set(tile_colors(tile)) | set(config.reserved_colors)
        free = [i for i in range(max(by_color, default=-1) + 1, config.num_task_ids)
                if i >= config.num_colors or i not in taken]
        if len(local) > len(free):
            raise BuildError(
                f"tile {tile.name!r} has {len(local)} local tasks but {len(free)} free task "
                f"ids: {config.num_local_tasks} above the colors, and colors above its highest "
                f"data task's color ({max(by_color, default='none')}) that are neither "
                f"reserved {config.reserved_colors} nor used by the tile")
    ids.update(zip(local, free))
    return ids


def hardware_task_ids(config, tile) -> dict:
    """The task ids `tile`'s tasks have on the hardware of `config.generation`.

    "color" binding (WSE-2): the engine's own ids: a data task's id is its color, local
    tasks take the ids above the colors, or free ids above the tile's data tasks when it
    has more local tasks than that (`_task_ids`). "queue" binding (WSE-3): data tasks are
    bound to input queues 0..num_input_queues-1, which the build gives them in ascending
    color order, and local tasks take the ids after the queues (8..30 on WSE-3). The engine
    schedules with its own ids (data id = color, local ids above the data ids): both orders
    agree, since queues follow colors and every local id is above every data id.

    Raises BuildError when a tile binds more data tasks than there are input queues.

    Example:
        >>> t = Tile("t"); t.data_task("d", 5, []); t.local_task("main", [])  # doctest: +SKIP
        >>> hardware_task_ids(FabricConfig.small(1, 1, "wse3"), t)          # doctest: +SKIP
        {'d': 0, 'main': 8}
    """
    data = sorted((t.color, t.name) for t in tile.tasks.values() if t.kind == "data")
    local = [t.name for t in tile.tasks.values() if t.kind != "data"]
    if config.task_binding == "color":
        return _task_ids(config, tile)
    if len(data) > config.num_input_queues:
        listed = ", ".join(f"{name!r} (color {color})" for color, name in data)
        raise BuildError(
            f"tile {tile.name!r} binds {len(data)} data tasks, but {config.name} binds a data "
            f"task to an input queue and has {config.num_input_queues} "
            f"(0..{config.num_input_queues - 1}): {listed}")
    if len(local) > config.num_task_ids - config.num_input_queues:
        raise BuildError(f"tile {tile.name!r} has {len(local)} local tasks, but {config.name} "
                         f"has {config.num_task_ids - config.num_input_queues} local task ids "
                         f"({config.num_input_queues}..{config.num_task_ids - 1})")
    return {**{name: q for q, (_, name) in enumerate(data)},
            **{name: config.num_input_queues + i for i, name in enumerate(local)}}


def _register_indices(config, tile):
    names = tile.used_registers()
    if len(names) > config.num_registers:
        raise BuildError(f"tile {tile.name!r} uses {len(names)} registers {names}; a PE has "
                         f"{config.num_registers}")
    tile.register(*names)
    return {n: i for i, n in enumerate(names)}


def _as_bits(arr, what):
    arr = np.asarray(arr)
    if np.issubdtype(arr.dtype, np.floating):
        return arr.astype(np.float32).view(np.int32)
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        return arr.astype(np.int64).astype(np.int32)
    raise BuildError(f"{what} has dtype {arr.dtype}; use an integer or float array")


# ---- instruction encoding -------------------------------------------------------------------
