"""Instruction constructors: DSDs, scalar operands and the instructions of a task.

All of them build frozen dataclasses (plain data); `build` turns them into table rows.

DSD ops run element by element on the datapath at the SIMD width of the op when every
operand is in memory, and at one element per cycle when a fabric operand is involved;
they stall while a fabric input is empty or a fabric output is full.

The float builtins take `dtype`: "f32" (default) or a 16-bit format ("f16", "bf16", "cb16").
A 16-bit builtin reads and writes 16-bit operands (memory symbols of that dtype, the low half
of fabric wavelets and of scalars), computes in fp32 and rounds its result once to 16 bits.
`fmachs` multiplies 16-bit values and accumulates in fp32; `to_half` / `to_f32` convert
(docs/engine.md lists the rule of each builtin).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fabric.isa import Done, Op
from fabric.numerics.formats import HALF_DTYPES

FLOAT_DTYPES = ("f32", *HALF_DTYPES)


# ---- DSDs -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Mem:
    """Memory DSD over symbol `symbol`.

    Element k sits at element `offset + (k % row_length) * stride + (k // row_length) *
    row_stride` of the symbol (plus the value of `offset_reg`, when given); elements are
    32-bit words, or half-words for 16-bit symbols. `length` defaults to the
    whole symbol; `row_length` defaults to `length` (1D). `length_reg` takes the length from a
    register at issue time.
    """

    symbol: str
    offset: int = 0
    length: int | None = None
    stride: int = 1
    row_length: int | None = None
    row_stride: int | None = None
    offset_reg: str | None = None
    length_reg: str | None = None


@dataclasses.dataclass(frozen=True)
class FabIn:
    """Fabric input DSD: `length` wavelets of `color` read from the CE's input queue.

    packed: (16-bit operands only) each wavelet carries two values, element 2k in its low
    half and 2k+1 in its high half; `length` counts values, ceil(length / 2) wavelets."""

    color: int
    length: int
    length_reg: str | None = None
    packed: bool = False


@dataclasses.dataclass(frozen=True)
class FabOut:
    """Fabric output DSD: `length` wavelets sent on `color` into the PE's router.

    packed: as for `FabIn` (two 16-bit values per wavelet; an odd last one has a zero high
    half)."""

    color: int
    length: int
    length_reg: str | None = None
    packed: bool = False


# ---- scalar operands ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Imm:
    """An immediate: a Python float becomes fp32, an int stays int32."""

    value: float | int

    @property
    def bits(self) -> int:
        if isinstance(self.value, (float, np.floating)):
            return int(np.array(self.value, np.float32).view(np.int32))
        return int(np.array(self.value, np.int64).astype(np.int32))


@dataclasses.dataclass(frozen=True)
class Reg:
    name: str


@dataclasses.dataclass(frozen=True)
class _Wavelet:
    def __repr__(self) -> str:
        return "WAVELET"


WAVELET = _Wavelet()
"""The 32-bit payload of the wavelet that triggered the running data task."""


# ---- instructions ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Activate:
    task: str


@dataclasses.dataclass(frozen=True)
class Unblock:
    task: str


@dataclasses.dataclass(frozen=True)
class Instr:
    op: Op
    dst: object = None
    a: object = None
    b: object = None
    s: object = None
    is_async: bool = False
    on_done: object = None
    target: str | None = None  # label of a branch
    dtype: str = "f32"  # format of the builtin: "f32" or a 16-bit dtype
    # how operands take `dtype`: "same" (all of them), "mixed" (fmachs: b and s; dst and a
    # fp32), "to_half" (dst; a fp32), "to_f32" (a; dst fp32)
    variant: str = "same"

    @property
    def registers(self) -> tuple[str, ...]:
        """The registers the instruction names: register operands, and the offset and
        length registers of its memory and fabric operands."""
        names = []
        for x in (self.dst, self.a, self.b, self.s):
            if isinstance(x, Reg):
                names.append(x.name)
            elif isinstance(x, (Mem, FabIn, FabOut)):
                names += [r for r in (getattr(x, "offset_reg", None), x.length_reg) if r]
        return tuple(names)


@dataclasses.dataclass(frozen=True)
class Label:
    name: str


def _operand(x):
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool):
        return Imm(x)
    if isinstance(x, str):
        return Reg(x)
    return x


def _dsd_op(op, dst, a, b=None, s=None, is_async=False, on_done=None, dtype="f32",
            variant="same"):
    if on_done is not None and not is_async:
        raise ValueError(f"{op.name}: on_done needs is_async=True (a sync op simply returns)")
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"{op.name}: dtype {dtype!r} is not one of {list(FLOAT_DTYPES)}")
    if variant != "same" and dtype == "f32":
        raise ValueError(f"{op.name} ({variant}): dtype must be a 16-bit dtype "
                         f"{list(HALF_DTYPES)}, got 'f32'")
    return Instr(op, dst, _operand(a), _operand(b), _operand(s), is_async, on_done,
                 dtype=dtype, variant=variant)


def mov(dst, src, *, dtype="f32", is_async=False, on_done=None):
    """dst = src (src: DSD or scalar, broadcast); bits are copied unchanged."""
    return _dsd_op(Op.MOV, dst, src, is_async=is_async, on_done=on_done, dtype=dtype)


def add(dst, a, b, *, dtype="f32", is_async=False, on_done=None):
    """dst = a + b."""
    return _dsd_op(Op.ADD, dst, a, b, is_async=is_async, on_done=on_done, dtype=dtype)


def sub(dst, a, b, *, dtype="f32", is_async=False, on_done=None):
    """dst = a - b."""
    return _dsd_op(Op.SUB, dst, a, b, is_async=is_async, on_done=on_done, dtype=dtype)


def mul(dst, a, b, *, dtype="f32", is_async=False, on_done=None):
    """dst = a * b."""
    return _dsd_op(Op.MUL, dst, a, b, is_async=is_async, on_done=on_done, dtype=dtype)


def fma(dst, a, b, s, *, dtype="f32", is_async=False, on_done=None):
    """dst = a + b * s (s a scalar: immediate, register or WAVELET). With a 16-bit dtype
    (fmach) every operand is 16-bit and the fp32 result a + b * s is rounded to 16 bits."""
    return _dsd_op(Op.FMA, dst, a, b, s, is_async=is_async, on_done=on_done, dtype=dtype)


def fmachs(dst, a, b, s, *, dtype="f16", is_async=False, on_done=None):
    """dst = a + b * s with fp32 dst and a, 16-bit b and s of `dtype`: the product is exact
    in fp32 and the sum is rounded to fp32, never to 16 bits (mixed-precision accumulate)."""
    return _dsd_op(Op.FMA, dst, a, b, s, is_async=is_async, on_done=on_done, dtype=dtype,
                   variant="mixed")


def max_(dst, a, b, *, dtype="f32", is_async=False, on_done=None):
    """dst = max(a, b)."""
    return _dsd_op(Op.MAX, dst, a, b, is_async=is_async, on_done=on_done, dtype=dtype)


def min_(dst, a, b, *, dtype="f32", is_async=False, on_done=None):
    """dst = min(a, b)."""
    return _dsd_op(Op.MIN, dst, a, b, is_async=is_async, on_done=on_done, dtype=dtype)


def to_half(dst, a, dtype, *, is_async=False, on_done=None):
    """dst (16-bit `dtype`) = fp32 a rounded to nearest even (overflow to infinity)."""
    return _dsd_op(Op.MOV, dst, a, is_async=is_async, on_done=on_done, dtype=dtype,
                   variant="to_half")


def to_f32(dst, a, dtype, *, is_async=False, on_done=None):
    """dst (fp32) = 16-bit `dtype` a, exactly."""
    return _dsd_op(Op.MOV, dst, a, is_async=is_async, on_done=on_done, dtype=dtype,
                   variant="to_f32")


def ftoi(dst, a, *, is_async=False, on_done=None):
    """dst = a rounded to the nearest int32 (ties to even); fp32 in, int32 bits out."""
    return _dsd_op(Op.FTOI, dst, a, is_async=is_async, on_done=on_done)


def itof(dst, a, *, is_async=False, on_done=None):
    """dst = float32(a) for int32 a."""
    return _dsd_op(Op.ITOF, dst, a, is_async=is_async, on_done=on_done)


def iaddv(dst, a, b, *, is_async=False, on_done=None):
    """dst = a + b on int32 elements (wrapping)."""
    return _dsd_op(Op.IADDV, dst, a, b, is_async=is_async, on_done=on_done)


def isubv(dst, a, b, *, is_async=False, on_done=None):
    """dst = a - b on int32 elements (wrapping)."""
    return _dsd_op(Op.ISUBV, dst, a, b, is_async=is_async, on_done=on_done)


def shl(dst, a, b, *, is_async=False, on_done=None):
    """dst = a << b on 32-bit elements (b in 0..31)."""
    return _dsd_op(Op.SHL, dst, a, b, is_async=is_async, on_done=on_done)


def shr(dst, a, b, *, is_async=False, on_done=None):
    """dst = a >> b, logical, on 32-bit elements (b in 0..31)."""
    return _dsd_op(Op.SHR, dst, a, b, is_async=is_async, on_done=on_done)


def load(reg: str, mem: Mem):
    """reg = the word at `mem`'s first element (its offset plus offset_reg). One cycle."""
    return Instr(Op.LOAD, Reg(reg), mem)


def store(mem: Mem, value):
    """The word at `mem`'s first element = value (immediate or register). One cycle."""
    return Instr(Op.STORE, mem, _operand(value))


def set_reg(reg: str, value):
    """reg = value (immediate, register or WAVELET)."""
    return Instr(Op.SET, Reg(reg), _operand(value))


def _scalar(op):
    def make(reg: str, a, b):
        return Instr(op, Reg(reg), _operand(a), _operand(b))

    make.__name__ = op.name.lower()
    make.__doc__ = f"reg = a {op.name} b on registers or immediates."
    return make


iadd, isub, imul = _scalar(Op.IADD), _scalar(Op.ISUB), _scalar(Op.IMUL)
fadd, fsub, fmul = _scalar(Op.FADD), _scalar(Op.FSUB), _scalar(Op.FMUL)


def label(name: str) -> Label:
    """A branch target: marks the position of the next instruction."""
    return Label(name)


def jump(target: str):
    return Instr(Op.JUMP, target=target)


def branch_if_zero(a, target: str):
    return Instr(Op.BZ, a=_operand(a), target=target)


def branch_if_nonzero(a, target: str):
    return Instr(Op.BNZ, a=_operand(a), target=target)


def branch_if_less(a, b, target: str):
    """Branch when a < b as int32."""
    return Instr(Op.BLT, a=_operand(a), b=_operand(b), target=target)


def activate(task: str):
    return Instr(Op.ACTIVATE, a=task)


def block(task: str):
    return Instr(Op.BLOCK, a=task)


def unblock(task: str):
    return Instr(Op.UNBLOCK, a=task)


def ret():
    """End the running task (also implied after its last instruction)."""
    return Instr(Op.RET)


DONE_KIND = {Activate: Done.ACTIVATE, Unblock: Done.UNBLOCK}
