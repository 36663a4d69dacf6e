"""Numeric encoding shared by `build` (which writes the tables) and the engine (which reads them).

Ports, operand kinds, DSD kinds, opcodes and the column layout of the instruction and DSD
tables. Nothing here knows about a particular program.
"""

from __future__ import annotations

import enum


class Port(enum.IntEnum):
    """The five router ports. A wavelet leaving through EAST enters the east neighbour
    through its WEST port; RAMP connects the router to its own compute engine."""

    NORTH = 0
    SOUTH = 1
    EAST = 2
    WEST = 3
    RAMP = 4


NUM_PORTS = 5
LINK_PORTS = (Port.NORTH, Port.SOUTH, Port.EAST, Port.WEST)
OPPOSITE = {
    Port.NORTH: Port.SOUTH, Port.SOUTH: Port.NORTH, Port.EAST: Port.WEST, Port.WEST: Port.EAST,
}
# (d_row, d_col) of the neighbour reached through each link port.
STEP = {Port.NORTH: (-1, 0), Port.SOUTH: (1, 0), Port.EAST: (0, 1), Port.WEST: (0, -1)}


class Operand(enum.IntEnum):
    """What an instruction operand field refers to."""

    NONE = 0
    DSD = 1  # value = row of the DSD table
    IMM = 2  # value = 32-bit pattern
    REG = 3  # value = register index
    WAVELET = 4  # the wavelet that triggered the running data task


class DsdKind(enum.IntEnum):
    MEM = 1
    FABIN = 2
    FABOUT = 3


class Op(enum.IntEnum):
    """Opcodes. DSD ops run on the datapath; the others take one cycle of the main thread.

    The float DSD ops (MOV .. MIN) read each operand in its own format (I_FMT: fp32 or a
    16-bit format), compute in fp32 and round the result once to the destination's format;
    a MOV between two formats is a conversion."""

    NOP = 0
    # DSD (vector) ops on memory and fabric operands
    MOV = 1  # dst = a
    ADD = 2  # dst = a + b
    SUB = 3  # dst = a - b
    MUL = 4  # dst = a * b
    FMA = 5  # dst = a + b * s
    MAX = 6  # dst = max(a, b)
    MIN = 7  # dst = min(a, b)
    FTOI = 8  # dst = int32(round-to-nearest-even(a))
    ITOF = 9  # dst = float32(a as int32)
    IADDV = 10  # dst = a + b     (int32, wrapping)
    ISUBV = 11  # dst = a - b     (int32, wrapping)
    SHL = 12  # dst = a << b    (int32 bits, b in 0..31)
    SHR = 13  # dst = a >> b    (logical, int32 bits, b in 0..31)
    LAST_DSD = 13
    # scalar register ops
    SET = 16  # r = a
    IADD = 17  # r = a + b      (int32)
    ISUB = 18  # r = a - b      (int32)
    IMUL = 19  # r = a * b      (int32)
    FADD = 20  # r = a + b      (fp32)
    FSUB = 21  # r = a - b      (fp32)
    FMUL = 22  # r = a * b      (fp32)
    # control
    JUMP = 32  # pc = target
    BZ = 33  # if a == 0: pc = target
    BNZ = 34  # if a != 0: pc = target
    BLT = 35  # if a < b (int32): pc = target
    ACTIVATE = 40  # activate task a
    BLOCK = 41  # block task a
    UNBLOCK = 42  # unblock task a
    RET = 43  # end the task
    LOAD = 48  # r = word at a memory DSD's first element (one cycle)
    STORE = 49  # word at a memory DSD's first element = a (one cycle)


DSD_OPS = (Op.MOV, Op.ADD, Op.SUB, Op.MUL, Op.FMA, Op.MAX, Op.MIN, Op.FTOI, Op.ITOF,
           Op.IADDV, Op.ISUBV, Op.SHL, Op.SHR)
# builtin name of each DSD op in the SIMD table of FabricConfig
SIMD_NAME = {
    Op.MOV: ("mov", "f32"), Op.ADD: ("add", "f32"), Op.SUB: ("sub", "f32"),
    Op.MUL: ("mul", "f32"), Op.FMA: ("fma", "f32"), Op.MAX: ("max", "f32"),
    Op.MIN: ("max", "f32"), Op.FTOI: ("cvt", "f32"), Op.ITOF: ("cvt", "f32"),
    Op.IADDV: ("add", "i32"), Op.ISUBV: ("add", "i32"), Op.SHL: ("shift", "i32"),
    Op.SHR: ("shift", "i32"),
}


# builtin names of the 16-bit variants in the SIMD table (all three 16-bit formats run on the
# same 16-bit datapath, so they share the fp16 widths)
SIMD_NAME_HALF = {
    Op.MOV: ("mov", "f16"), Op.ADD: ("add", "f16"), Op.SUB: ("sub", "f16"),
    Op.MUL: ("mul", "f16"), Op.FMA: ("fma", "f16"), Op.MAX: ("max", "f16"),
    Op.MIN: ("max", "f16"),
}
HALF_OPS = tuple(SIMD_NAME_HALF)
SIMD_MIXED = ("mul_acc32", "f16")  # fma: fp32 dst and a, 16-bit b and s (fmachs)
SIMD_CONVERT = ("cvt", "f16")  # mov between fp32 and a 16-bit format


class Done(enum.IntEnum):
    """What an async DSD op does to a task when it finishes."""

    NONE = 0
    ACTIVATE = 1
    UNBLOCK = 2


# ---- instruction table columns (int32) ----------------------------------------------------
I_OP = 0
I_DST_KIND, I_DST = 1, 2
I_A_KIND, I_A = 3, 4
I_B_KIND, I_B = 5, 6
I_S_KIND, I_S = 7, 8
I_ASYNC = 9
I_DONE_KIND, I_DONE_TASK = 10, 11
I_TARGET = 12  # branch target (absolute row)
I_SIMD = 13  # elements per cycle when every operand is in memory
I_FMT = 14  # format code (fabric.numerics: 0 fp32, 1 f16, 2 bf16, 3 cb16) per operand:
I_FIELDS = 15  # dst in bits 0-1, a in 2-3, b in 4-5, s in 6-7 (FMT_SHIFT)
FMT_SHIFT = {"dst": 0, "a": 2, "b": 4, "s": 6}
FMT_MASK = 3

# ---- DSD table columns (int32) ---------------------------------------------------------------
D_KIND = 0
D_BASE = 1  # word address of element 0
D_BASE_REG = 2  # register added to D_BASE, -1 for none
D_LENGTH = 3
D_LENGTH_REG = 4  # register holding the length, -1 for none
D_ROW_LENGTH = 5  # elements per row (2D); 0 for 1D (one row of `length`)
D_STRIDE = 6  # word step between elements of a row; fabric DSDs: PACKED_STRIDE if packed
PACKED_STRIDE = 2  # a fabric DSD carrying two 16-bit values per wavelet
D_ROW_STRIDE = 7  # word step between rows
D_COLOR = 8
D_FIELDS = 9
