"""Encoding of a tile's tasks into instruction and DSD table rows: scalar ops, memory
ops, DSD ops and their operands (formats, packing, SIMD keys), with the checks that name
the tile, task and instruction at fault. Used by `fabric.build`."""

from __future__ import annotations

import dataclasses

import numpy as np

from fabric import instructions as ins
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
    PACKED_STRIDE,
    SIMD_CONVERT,
    SIMD_MIXED,
    SIMD_NAME,
    SIMD_NAME_HALF,
    DsdKind,
    Op,
    Operand,
)
from fabric.numerics.convert import to_half
from fabric.numerics.formats import FORMATS, code_of
from fabric.program import DTYPES


def encode_task(config, tile, task, ids, regs, syms, instr_rows, dsd_rows):
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
            _encode_dsd_op(config, tile, item, row, at, ids, regs, syms, dsd_rows)
        elif item.op in (Op.LOAD, Op.STORE):
            _encode_memory_op(config, item, row, at, regs, syms, dsd_rows)
        else:
            _encode_scalar_op(config, tile, item, row, at, ids, regs)
        if item.target is not None:
            if item.target not in labels:
                raise BuildError(f"{at}: undefined label {item.target!r}; "
                                 f"labels: {sorted(labels)}")
            row[I_TARGET] = start + labels[item.target]
        instr_rows.append(row)
        origins.append((tile.name, task.name, index))
    return origins


def _encode_scalar_op(config, tile, item, row, at, ids, regs):
    if item.op in (Op.ACTIVATE, Op.BLOCK, Op.UNBLOCK):
        if item.a not in ids:
            raise BuildError(f"{at}: undefined task {item.a!r}; tasks: {sorted(ids)}")
        if item.op == Op.ACTIVATE and tile.tasks[item.a].kind == "data":
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


def _encode_dsd_op(config, tile, item, row, at, ids, regs, syms, dsd_rows):
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
    formats = operand_formats(item)
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
        if isinstance(item.on_done, ins.Activate) and tile.tasks[name].kind == "data":
            raise BuildError(f"{at}: on_done activates data task {name!r}; only local tasks "
                             "can be activated")
        row[I_DONE_KIND] = int(ins.DONE_KIND[type(item.on_done)])
        row[I_DONE_TASK] = ids[name]
    _check_packed(item, formats, at)
    # the bank layout caps the width of strided memory operands (config.stride_width)
    strides = [o.stride for o in (item.dst, item.a, item.b) if isinstance(o, ins.Mem)]
    row[I_SIMD] = config.simd_width(*simd_key(item), strides=strides)
    row[I_FMT] = sum(code_of(formats[role]) << shift for role, shift in FMT_SHIFT.items())


def operand_formats(item) -> dict:
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


def simd_key(item):
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
