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
from fabric.errors import BuildError
from fabric.isa import (
    D_BASE,
    D_BASE_REG,
    D_COLOR,
    D_FIELDS,
    D_KIND,
    D_LENGTH,
    D_LENGTH_REG,
    D_ROW_LENGTH,
    D_ROW_STRIDE,
    D_STRIDE,
    DSD_OPS,
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
    I_FIELDS,
    I_FMT,
    I_OP,
    I_S,
    I_S_KIND,
    I_SIMD,
    I_TARGET,
    NUM_PORTS,
    OPPOSITE,
    PACKED_STRIDE,
    SIMD_CONVERT,
    SIMD_MIXED,
    SIMD_NAME,
    SIMD_NAME_HALF,
    STEP,
    DsdKind,
    Op,
    Operand,
    Port,
)
from fabric.numerics.convert import to_half
from fabric.numerics.formats import FORMATS, code_of
from fabric.program import DTYPES, Placement, Program

MIN_BUCKET = 64


class Tables(eqx.Module):
    """Everything the engine reads about a program (device arrays only)."""

    instr: Int32[Array, "I F"]
    dsd: Int32[Array, "D F"]
    tx_mask: UInt32[Array, "R C 5"]  # bit k: color k leaves through this port
    rx_mask: UInt32[Array, "R C 5"]  # bit k: color k is accepted from this port
    task_entry: Int32[Array, "R C T"]  # first instruction row of each task, -1 if none
    task_defined: UInt32[Array, "R C"]  # bit t: the PE has task t
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


def build(config: FabricConfig, program: Program,
          min_rows: tuple[int, int] = (0, 0)) -> tuple[Tables, ProgramInfo]:
    """Validate `program` and lower it to `Tables` plus a host-side `ProgramInfo`.

    min_rows: at least this many (instruction, DSD) table rows, so that programs of
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
    init_blocked = np.zeros((R, C), np.uint32)
    init_regs = np.zeros((R, C, config.num_registers), np.int32)
    sram_used = np.zeros((R, C), np.int64)
    symbols, task_ids = [], []

    for placement in program.placements:
        tile, rect = placement.tile, placement.rect
        sym_info = _allocate(config, placement)
        ids = _task_ids(config, tile)
        regs = _register_indices(config, tile)
        _check_colors(config, placement, rx_port, tx_ports)
        entries = {}
        for task in tile.tasks.values():
            entries[task.name] = len(instr_rows)
            origins.extend(_encode_task(config, tile, task, ids, regs, sym_info, instr_rows,
                                        dsd_rows))
        r0, r1, c0, c1 = rect.row, rect.row_end, rect.col, rect.col_end
        for name, tid in ids.items():
            task_entry[r0:r1, c0:c1, tid] = entries[name]
            task_defined[r0:r1, c0:c1] |= np.uint32(1 << tid)
            if tile.tasks[name].blocked:
                init_blocked[r0:r1, c0:c1] |= np.uint32(1 << tid)
        for name, arr in placement.params.items():
            init_regs[r0:r1, c0:c1, regs[name]] = _as_bits(arr, f"param {name!r} of tile "
                                                           f"{tile.name!r}")
        sram_used[r0:r1, c0:c1] = sum(s.words for s in tile.symbols.values())
        symbols.append(sym_info)
        task_ids.append(ids)

    n_instr, n_dsd = len(instr_rows), len(dsd_rows)
    instr = np.zeros((bucket(max(n_instr, min_rows[0])), I_FIELDS), np.int32)
    instr[:, I_OP] = Op.RET  # padding rows end a task if ever reached
    if n_instr:
        instr[:n_instr] = np.asarray(instr_rows, np.int32)
    dsd = np.zeros((bucket(max(n_dsd, min_rows[1])), D_FIELDS), np.int32)
    if n_dsd:
        dsd[:n_dsd] = np.asarray(dsd_rows, np.int32)

    tables = Tables(
        instr=jnp.asarray(instr),
        dsd=jnp.asarray(dsd),
        tx_mask=jnp.asarray(_port_masks(tx_ports, K)),
        rx_mask=jnp.asarray(_port_masks(_rx_as_sets(rx_port), K)),
        task_entry=jnp.asarray(task_entry),
        task_defined=jnp.asarray(task_defined),
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
    )
    return tables, info


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


def _check_colors(config, placement: Placement, rx_port, tx_ports):
    """Every color a tile uses must be routed on at least one of its PEs, and the right way."""
    tile, rect = placement.tile, placement.rect
    sl = (slice(rect.row, rect.row_end), slice(rect.col, rect.col_end))
    used = {}
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
    for color, uses in sorted(used.items()):
        where = ", ".join(sorted(u for _, u in uses))
        if not 0 <= color < config.num_colors:
            raise BuildError(f"tile {tile.name!r} at {rect}: color {color} ({where}) is not a "
                             f"color of {config.name} (0..{config.num_colors - 1})")
        directions = {d for d, _ in uses}
        if "in" in directions and not ((tx_ports[sl][..., color] >> int(Port.RAMP)) & 1).any():
            raise BuildError(f"tile {tile.name!r} at {rect}: color {color} is read by {where} "
                             f"but no PE of the tile routes it to RAMP (undefined color)")
        if "out" in directions and not (rx_port[sl][..., color] == int(Port.RAMP)).any():
            raise BuildError(f"tile {tile.name!r} at {rect}: color {color} is sent by {where} "
                             f"but no PE of the tile accepts it from RAMP (undefined color)")


# ---- symbols, tasks, registers --------------------------------------------------------------
def _allocate(config, placement):
    tile, rect = placement.tile, placement.rect
    address, out = 0, {}
    for sym in tile.symbols.values():
        out[sym.name] = SymbolInfo(tile.name, sym.name, sym.dtype, sym.shape, address)
        address += sym.words
    if address > config.sram_words:
        sizes = ", ".join(f"{s.name}: {s.nbytes} B" for s in tile.symbols.values())
        raise BuildError(
            f"tile {tile.name!r} needs {4 * address} B of SRAM per PE but PE "
            f"({rect.row}, {rect.col}) (and every PE of {rect}) has {config.sram_bytes} B; "
            f"symbols: {sizes}")
    return out


def _task_ids(config, tile):
    ids, next_local = {}, config.num_colors
    by_color = {}
    for task in tile.tasks.values():
        if task.kind == "data":
            if not 0 <= task.color < config.num_colors:
                raise BuildError(f"tile {tile.name!r}: data task {task.name!r} is bound to color "
                                 f"{task.color}, not a color of {config.name} "
                                 f"(0..{config.num_colors - 1})")
            if task.color in by_color:
                raise BuildError(f"tile {tile.name!r}: data tasks {by_color[task.color]!r} and "
                                 f"{task.name!r} are both bound to color {task.color}")
            by_color[task.color] = task.name
            ids[task.name] = task.color
        else:
            if next_local >= config.num_task_ids:
                raise BuildError(f"tile {tile.name!r} has more than {config.num_local_tasks} "
                                 f"local tasks")
            ids[task.name] = next_local
            next_local += 1
    return ids


def _register_indices(config, tile):
    names = list(tile.registers)
    for task in tile.tasks.values():
        for item in task.code:
            for reg in _registers_of(item):
                if reg not in names:
                    names.append(reg)
    if len(names) > config.num_registers:
        raise BuildError(f"tile {tile.name!r} uses {len(names)} registers {names}; a PE has "
                         f"{config.num_registers}")
    tile.register(*names)
    return {n: i for i, n in enumerate(names)}


def _registers_of(item):
    if not isinstance(item, ins.Instr):
        return
    for opnd in (item.dst, item.a, item.b, item.s):
        if isinstance(opnd, ins.Reg):
            yield opnd.name
        elif isinstance(opnd, ins.Mem):
            if opnd.offset_reg:
                yield opnd.offset_reg
            if opnd.length_reg:
                yield opnd.length_reg
        elif isinstance(opnd, (ins.FabIn, ins.FabOut)) and opnd.length_reg:
            yield opnd.length_reg


def _as_bits(arr, what):
    arr = np.asarray(arr)
    if np.issubdtype(arr.dtype, np.floating):
        return arr.astype(np.float32).view(np.int32)
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        return arr.astype(np.int64).astype(np.int32)
    raise BuildError(f"{what} has dtype {arr.dtype}; use an integer or float array")


# ---- instruction encoding -------------------------------------------------------------------
def _encode_task(config, tile, task, ids, regs, syms, instr_rows, dsd_rows):
    """Append the rows of one task (its code plus a final RET); return their origins."""
    where = f"tile {tile.name!r}, task {task.name!r}"
    labels, body = {}, []
    for item in task.code:
        if isinstance(item, ins.Label):
            if item.name in labels:
                raise BuildError(f"{where}: label {item.name!r} is defined twice")
            labels[item.name] = len(body)
        elif isinstance(item, ins.Instr):
            body.append(item)
        else:
            raise BuildError(f"{where}: {item!r} is not an instruction")
    body.append(ins.ret())
    start = len(instr_rows)
    origins = []
    for index, item in enumerate(body):
        at = f"{where}, instruction {index} ({item.op.name})"
        row = [0] * I_FIELDS
        row[I_OP] = int(item.op)
        if item.op in DSD_OPS:
            _encode_dsd_op(config, item, row, at, ids, regs, syms, dsd_rows)
        elif item.op in (Op.LOAD, Op.STORE):
            _encode_memory_op(config, item, row, at, regs, syms, dsd_rows)
        else:
            _encode_scalar_op(config, item, row, at, ids, regs)
        if item.target is not None:
            if item.target not in labels:
                raise BuildError(f"{at}: undefined label {item.target!r}; "
                                 f"labels: {sorted(labels)}")
            row[I_TARGET] = start + labels[item.target]
        instr_rows.append(row)
        origins.append((tile.name, task.name, index))
    return origins


def _encode_scalar_op(config, item, row, at, ids, regs):
    if item.op in (Op.ACTIVATE, Op.BLOCK, Op.UNBLOCK):
        if item.a not in ids:
            raise BuildError(f"{at}: undefined task {item.a!r}; tasks: {sorted(ids)}")
        if item.op == Op.ACTIVATE and ids[item.a] < config.num_colors:
            raise BuildError(f"{at}: task {item.a!r} is a data task (it runs when a wavelet "
                             "of its color arrives); only local tasks can be activated")
        row[I_A_KIND], row[I_A] = Operand.IMM, ids[item.a]
        return
    if item.op in (Op.SET, Op.IADD, Op.ISUB, Op.IMUL, Op.FADD, Op.FSUB, Op.FMUL):
        if not isinstance(item.dst, ins.Reg):
            raise BuildError(f"{at}: destination must be a register, got {item.dst!r}")
        row[I_DST_KIND], row[I_DST] = Operand.REG, regs[item.dst.name]
    for opnd, kcol, vcol in ((item.a, I_A_KIND, I_A), (item.b, I_B_KIND, I_B)):
        if opnd is None:
            continue
        row[kcol], row[vcol] = _scalar_operand(opnd, at, regs)


def _encode_memory_op(config, item, row, at, regs, syms, dsd_rows):
    """LOAD r <- mem / STORE mem <- scalar: one word at the DSD's first element."""
    mem = item.a if item.op == Op.LOAD else item.dst
    if not isinstance(mem, ins.Mem):
        raise BuildError(f"{at}: needs a memory DSD, got {mem!r}")
    sym = syms.get(mem.symbol)
    if sym is not None and sym.dtype in FORMATS:
        raise BuildError(f"{at}: load/store move one 32-bit word, but symbol {mem.symbol!r} "
                         f"holds 16-bit {sym.dtype} values; use a DSD op (mov) instead")
    mem = dataclasses.replace(mem, length=1, row_length=None, row_stride=None,
                              length_reg=None)
    dsd_row, _ = _encode_dsd(config, mem, at, regs, syms)
    index = len(dsd_rows)
    dsd_rows.append(dsd_row)
    if item.op == Op.LOAD:
        row[I_DST_KIND], row[I_DST] = Operand.REG, regs[item.dst.name]
        row[I_A_KIND], row[I_A] = Operand.DSD, index
    else:
        row[I_DST_KIND], row[I_DST] = Operand.DSD, index
        row[I_A_KIND], row[I_A] = _scalar_operand(item.a, at, regs)


def _scalar_operand(opnd, at, regs, fmt="f32"):
    """(kind, value) of a scalar operand; a float immediate of a 16-bit operand is rounded
    to that format (its pattern in the low half)."""
    if isinstance(opnd, ins.Imm):
        if fmt in FORMATS and isinstance(opnd.value, (float, np.floating)):
            return Operand.IMM, int(to_half(np.float32(opnd.value), fmt))
        return Operand.IMM, opnd.bits
    if isinstance(opnd, ins.Reg):
        return Operand.REG, regs[opnd.name]
    if opnd is ins.WAVELET:
        return Operand.WAVELET, 0
    raise BuildError(f"{at}: expected an immediate, register or WAVELET, got {opnd!r}")


def _encode_dsd_op(config, item, row, at, ids, regs, syms, dsd_rows):
    if not isinstance(item.dst, (ins.Mem, ins.FabOut)):
        raise BuildError(f"{at}: destination must be a memory or fabric-output DSD, "
                         f"got {item.dst!r}")
    needs_b = item.op not in (Op.MOV, Op.FTOI, Op.ITOF)
    if needs_b and item.b is None:
        raise BuildError(f"{at}: needs a second source operand")
    if item.op == Op.FMA and item.s is None:
        raise BuildError(f"{at}: fma needs a scalar operand s")
    lengths = []
    colors_in = []
    fabric = False
    formats = _operand_formats(item)
    operands = ((item.dst, I_DST_KIND, I_DST, "dst"), (item.a, I_A_KIND, I_A, "a"),
                (item.b, I_B_KIND, I_B, "b"))
    for opnd, kcol, vcol, role in operands:
        if opnd is None:
            continue
        if isinstance(opnd, (ins.Mem, ins.FabIn, ins.FabOut)):
            if role != "dst" and isinstance(opnd, ins.FabOut):
                raise BuildError(f"{at}: FabOut cannot be a source")
            if role == "dst" and isinstance(opnd, ins.FabIn):
                raise BuildError(f"{at}: FabIn cannot be a destination")
            dsd_row, length = _encode_dsd(config, opnd, at, regs, syms)
            if isinstance(opnd, ins.Mem):
                _check_symbol_format(item, opnd, syms[opnd.symbol], formats[role], role, at)
            if isinstance(opnd, ins.FabIn):
                if opnd.color in colors_in:
                    raise BuildError(f"{at}: reads color {opnd.color} twice in one op")
                colors_in.append(opnd.color)
            fabric |= not isinstance(opnd, ins.Mem)
            if length is not None:
                lengths.append((role, length))
            row[kcol], row[vcol] = Operand.DSD, len(dsd_rows)
            dsd_rows.append(dsd_row)
        else:
            if role == "dst":
                raise BuildError(f"{at}: destination must be a DSD")
            row[kcol], row[vcol] = _scalar_operand(opnd, at, regs, formats[role])
    if item.s is not None:
        row[I_S_KIND], row[I_S] = _scalar_operand(item.s, at, regs, formats["s"])
    if len({n for _, n in lengths}) > 1:
        desc = ", ".join(f"{role}={n}" for role, n in lengths)
        raise BuildError(f"{at}: operand lengths differ ({desc})")
    row[I_ASYNC] = int(item.is_async)
    if item.on_done is not None:
        name = item.on_done.task
        if name not in ids:
            raise BuildError(f"{at}: on_done names undefined task {name!r}; tasks: {sorted(ids)}")
        if isinstance(item.on_done, ins.Activate) and ids[name] < config.num_colors:
            raise BuildError(f"{at}: on_done activates data task {name!r}; only local tasks "
                             "can be activated")
        row[I_DONE_KIND] = int(ins.DONE_KIND[type(item.on_done)])
        row[I_DONE_TASK] = ids[name]
    _check_packed(item, formats, at)
    row[I_SIMD] = config.simd_width(*_simd_key(item))
    row[I_FMT] = sum(code_of(formats[role]) << shift for role, shift in FMT_SHIFT.items())


def _operand_formats(item) -> dict:
    """dtype of each operand role (dst, a, b, s) of a DSD op, from its builtin."""
    dtype, variant = item.dtype, item.variant
    if variant == "mixed":  # fmachs: fp32 accumulator, 16-bit product operands
        return {"dst": "f32", "a": "f32", "b": dtype, "s": dtype}
    if variant == "to_half":
        return {"dst": dtype, "a": "f32", "b": "f32", "s": "f32"}
    if variant == "to_f32":
        return {"dst": "f32", "a": dtype, "b": "f32", "s": "f32"}
    return dict.fromkeys(("dst", "a", "b", "s"), dtype)


def _check_packed(item, formats, at):
    """Packed fabric operands (two values per wavelet) are 16-bit, and an op that has one
    moves a pair per cycle: all its fabric operands are packed and no memory operand
    accumulates (stride 0)."""
    roles = (("dst", item.dst), ("a", item.a), ("b", item.b))
    fab = [(r, o) for r, o in roles if isinstance(o, (ins.FabIn, ins.FabOut))]
    if not any(o.packed for _, o in fab):
        return
    for role, opnd in fab:
        if not opnd.packed:
            raise BuildError(f"{at}: fabric operand {role} is not packed but another one is; "
                             "pack all or none")
        if formats[role] not in FORMATS:
            raise BuildError(f"{at}: fabric operand {role} is packed but the op takes fp32 "
                             "there; only 16-bit operands pack two per wavelet")
    for role, opnd in roles:
        if isinstance(opnd, ins.Mem) and opnd.stride == 0:
            raise BuildError(f"{at}: memory operand {role} has stride 0, which a packed "
                             "op (two elements per cycle) cannot accumulate into")


def _simd_key(item):
    """The (builtin, dtype) entry of the config's SIMD table that times this op."""
    if item.dtype == "f32":
        return SIMD_NAME[item.op]
    if item.variant == "mixed":
        return SIMD_MIXED
    if item.variant in ("to_half", "to_f32"):
        return SIMD_CONVERT
    return SIMD_NAME_HALF[item.op]


def _check_symbol_format(item, mem, sym, want, role, at):
    """A memory operand's symbol must hold what the builtin reads or writes there: a 32-bit
    dtype for an fp32 operand, exactly the 16-bit dtype for a 16-bit one."""
    ok = sym.dtype in DTYPES if want == "f32" else sym.dtype == want
    if not ok:
        what = "a 32-bit symbol (f32, i32, u32)" if want == "f32" else f"a {want} symbol"
        builtin = item.op.name.lower() + ("" if item.dtype == "f32" else
                                          f" (dtype={item.dtype!r}, {item.variant})")
        raise BuildError(f"{at}: operand {role} is symbol {mem.symbol!r} of dtype "
                         f"{sym.dtype}, but {builtin} takes {what} there")


def _encode_dsd(config, dsd, at, regs, syms):
    row = [0] * D_FIELDS
    row[D_BASE_REG] = -1
    row[D_LENGTH_REG] = -1
    if isinstance(dsd, ins.Mem):
        if dsd.symbol not in syms:
            raise BuildError(f"{at}: undefined symbol {dsd.symbol!r}; symbols: {sorted(syms)}")
        sym = syms[dsd.symbol]
        size = int(np.prod(sym.shape))
        length = size if dsd.length is None else int(dsd.length)
        row_length = length if dsd.row_length is None else int(dsd.row_length)
        row_stride = (row_length * dsd.stride) if dsd.row_stride is None else int(dsd.row_stride)
        if length < 1 or row_length < 1:
            raise BuildError(f"{at}: DSD over {dsd.symbol!r} has length {length}")
        if dsd.offset_reg is None and dsd.length_reg is None:
            rows_n = -(-length // row_length)
            last_in_row = min(row_length, length) - 1
            hi = dsd.offset + last_in_row * dsd.stride + (rows_n - 1) * row_stride
            lo = dsd.offset + min(0, last_in_row * dsd.stride) + min(0, (rows_n - 1) * row_stride)
            if lo < 0 or hi >= size:
                raise BuildError(f"{at}: DSD over {dsd.symbol!r} reaches elements {lo}..{hi} "
                                 f"but the symbol has {size}")
        row[D_KIND] = DsdKind.MEM
        # 16-bit symbols are addressed in half-words (two per 32-bit word)
        row[D_BASE] = (2 * sym.address if sym.dtype in FORMATS else sym.address) + dsd.offset
        row[D_LENGTH] = length
        row[D_ROW_LENGTH] = 0 if dsd.row_length is None else row_length  # 0: 1D
        row[D_STRIDE] = dsd.stride
        row[D_ROW_STRIDE] = row_stride
        if dsd.offset_reg is not None:
            row[D_BASE_REG] = regs[dsd.offset_reg]
        if dsd.length_reg is not None:
            row[D_LENGTH_REG] = regs[dsd.length_reg]
        return row, (None if dsd.length_reg else length)
    if not 0 <= dsd.color < config.num_colors:
        raise BuildError(f"{at}: color {dsd.color} is not a color of {config.name} "
                         f"(0..{config.num_colors - 1}): undefined color")
    if dsd.length < 1 and dsd.length_reg is None:
        raise BuildError(f"{at}: fabric DSD of color {dsd.color} has length {dsd.length}")
    row[D_KIND] = DsdKind.FABIN if isinstance(dsd, ins.FabIn) else DsdKind.FABOUT
    row[D_LENGTH] = dsd.length
    row[D_STRIDE] = PACKED_STRIDE if dsd.packed else 0
    row[D_COLOR] = dsd.color
    if dsd.length_reg is not None:
        row[D_LENGTH_REG] = regs[dsd.length_reg]
    return row, (None if dsd.length_reg else dsd.length)
