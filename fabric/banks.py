"""The bank read-pair rule counted without running a program: the cycles a DSD op of a tile
waits because its two memory sources start an element group in the same bank pair.

The engine's rule (docs/engine.md, "SRAM banks"; `fabric.datapath`): with
`FabricConfig.bank_conflicts`, an op reading two memory sources whose element groups start
in banks equal mod 4 (`FabricConfig.bank_class`) takes a second cycle for the group. A group
is the `width` elements the op processes in one cycle, from element g * width; its width is
the SIMD table's (capped by strides as `FabricConfig.simd_width` does, by the shortest row
of a 2D memory operand, and 1 with a fabric operand). The counts here follow the same
addresses (`fabric.program.Tile.addresses`), so a kernel's
cycle model can add them exactly; `read_pair_stalls` of a straight list of ops is the
figure `Stats.bank_stall` shows for one PE running it once.

Example:
    >>> from fabric import FabricConfig, instructions as ins
    >>> from fabric.program import Tile
    >>> t = Tile("t"); x = t.symbol("x", "f32", 8); y = t.symbol("y", "f32", 8)
    >>> add = ins.add(x.dsd(), x.dsd(), y.dsd())
    >>> config = FabricConfig.small(2, 2)
    >>> t.addresses(), read_pair_stalls(config, t, [add])  # x, y 8 words apart: 4 groups wait
    ({'x': 0, 'y': 8}, 4)
    >>> t.local_task("main", [add])  # the layout sees the pair and moves y by a word
    >>> t.addresses(), op_width(config, t, add), read_pair_stalls(config, t, [add])
    ({'x': 0, 'y': 9}, 2, 0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from fabric import instructions as ins
from fabric.encode import operand_formats, simd_key
from fabric.numerics.formats import FORMATS


def op_width(config, tile, item, length: int | None = None) -> int:
    """Elements per cycle of DSD op `item` of `tile` (length: the op's element count where
    it takes it from a register), as the engine issues it."""
    operands = (item.dst, item.a, item.b)
    if any(isinstance(o, (ins.FabIn, ins.FabOut)) for o in operands):
        packed = any(getattr(o, "packed", False) for o in operands)
        return 2 if packed else 1
    if isinstance(item.dst, ins.Mem) and item.dst.stride == 0:
        return 1  # accumulating into one word: one element per cycle
    mems = [o for o in operands if isinstance(o, ins.Mem)]
    width = config.simd_width(*simd_key(item), strides=[m.stride for m in mems])
    for mem in mems:
        n = _length(tile, mem, length)
        width = min(width, n if mem.row_length is None else mem.row_length)
    return max(width, 1)


def op_read_pair_stalls(config, tile, item, length: int | None = None,
                        addresses: dict | None = None,
                        registers: Mapping[str, int] | None = None) -> int:
    """Cycles DSD op `item` of `tile` waits under the read-pair rule when it runs once: one
    per element group whose two sources are in memory and start in the same bank pair.
    0 without banks or the rule, for an op with fewer than two memory sources, and for a
    non-DSD instruction. length: the element count of an op that takes it from a register
    (the figure of the PE being counted); registers: the value of each register a source
    takes its offset from (ValueError where one is missing: the count depends on it)."""
    if not (config.sram_banks and config.bank_conflicts) or not isinstance(item, ins.Instr):
        return 0
    if not (isinstance(item.a, ins.Mem) and isinstance(item.b, ins.Mem)):
        return 0
    registers = registers or {}
    for mem in (item.a, item.b):
        if mem.offset_reg is not None and mem.offset_reg not in registers:
            raise ValueError(f"tile {tile.name!r}: {item.op.name.lower()} reads "
                             f"{mem.symbol!r} at an offset from register {mem.offset_reg!r}; "
                             "its bank conflicts depend on that register's value")
    addresses = tile.addresses(config.sram_words) if addresses is None else addresses
    n = _length(tile, item.a, length)
    width = op_width(config, tile, item, length)
    starts = np.arange(0, n, width, dtype=np.int64)  # first element of each group
    formats = operand_formats(item)
    classes = []
    for mem, role in ((item.a, "a"), (item.b, "b")):
        half = formats[role] in FORMATS
        sym = tile.symbols[mem.symbol]
        base = (2 * addresses[mem.symbol] if sym.dtype in FORMATS else addresses[mem.symbol])
        row_length = _length(tile, mem, length) if mem.row_length is None else mem.row_length
        row_stride = (row_length * mem.stride if mem.row_stride is None else mem.row_stride)
        offset = mem.offset + (registers[mem.offset_reg] if mem.offset_reg else 0)
        element = (base + offset + (starts % row_length) * mem.stride
                   + (starts // row_length) * row_stride)
        classes.append(element % 4 if half else (2 * element) % 4)
    return int(np.count_nonzero(classes[0] == classes[1]))


def read_pair_stalls(config, tile, code: Iterable, length: int | None = None,
                     registers: Mapping[str, int] | None = None) -> int:
    """`op_read_pair_stalls` summed over a straight list of instructions, each run once."""
    addresses = tile.addresses(config.sram_words)
    return sum(op_read_pair_stalls(config, tile, item, length, addresses, registers)
               for item in code)


def _length(tile, mem, length):
    if mem.length_reg is not None:
        if length is None:
            raise ValueError(f"tile {tile.name!r}: a DSD over {mem.symbol!r} takes its length "
                             f"from register {mem.length_reg!r}; pass the length to count")
        return int(length)
    if mem.length is not None:
        return int(mem.length)
    return math.prod(tile.symbols[mem.symbol].shape)
