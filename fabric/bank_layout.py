"""Where a tile's symbols lie in each PE's memory: one after the other in declaration order
from word 0, a symbol moved down by one word where that puts the two memory sources of the
tile's DSD ops in different bank pairs (docs/engine.md, "SRAM banks").

Why a word: SRAM is 8 banks of 16-bit half-words, and the two reads of a cycle must come
from banks differing mod 4 (`FabricConfig.bank_class`). Every element of a symbol sits at
half-word 2 * word (+ its offset), so a symbol's bank pairs all move by 2 when it starts
one word later: the word parity of a symbol's start is the one choice a layout has. The
SDK's advice for operands read together is the same (place them in different banks).

Each DSD op of the tile with two memory sources at fixed offsets adds, for its pair of
symbols, the element count that would meet the rule with both starts of equal parity and
with them of unequal parity (an op reading one symbol twice cannot change). The parities
of the symbols that appear in such pairs are chosen to make the sum least (every choice
tried up to `EXHAUSTIVE_SYMBOLS` of them, one at a time in declaration order above), then
the fewest pad words; a symbol is padded where its natural start has the other parity.
Ops with an offset from a register are left out (their classes move with the register).
A layout whose pads would pass `sram_words` keeps the natural one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from fabric import instructions as ins
from fabric.numerics.formats import HALF_DTYPES

EXHAUSTIVE_SYMBOLS = 12  # 4,096 parity choices at most, tried at once


def natural_addresses(symbols: Mapping) -> dict[str, int]:
    """Word address of each symbol, one after the other from word 0."""
    out, address = {}, 0
    for sym in symbols.values():
        out[sym.name] = address
        address += sym.words
    return out


def bank_aware_addresses(symbols: Mapping, code: Iterable,
                         sram_words: int | None = None) -> dict[str, int]:
    """Word address of each symbol (module docstring). symbols: name -> `Symbol` in
    declaration order; code: every instruction of the tile's tasks."""
    pairs = _pair_costs(symbols, code)
    chosen = [name for name in symbols if any(name in key for key in pairs)]
    if not chosen:
        return natural_addresses(symbols)
    parities = (_exhaustive(symbols, chosen, pairs) if len(chosen) <= EXHAUSTIVE_SYMBOLS
                else _greedy(chosen, pairs))
    out, address = {}, 0
    for sym in symbols.values():
        want = parities.get(sym.name)
        if want is not None and address % 2 != want:
            address += 1
        out[sym.name] = address
        address += sym.words
    if sram_words is not None and address > sram_words:
        return natural_addresses(symbols)
    return out


def _pair_costs(symbols, code) -> dict:
    """(symbol, symbol) -> [elements meeting the rule at equal start parity, at unequal]."""
    out: dict = {}
    for item in code:
        if not (isinstance(item, ins.Instr) and isinstance(item.a, ins.Mem)
                and isinstance(item.b, ins.Mem)):
            continue
        a, b = item.a, item.b
        if a.symbol == b.symbol or a.offset_reg or b.offset_reg:
            continue
        if a.symbol not in symbols or b.symbol not in symbols:
            continue  # the build reports the undefined symbol
        n = min(_count(symbols, a), _count(symbols, b))
        ca = _classes(symbols, a, n, 0)
        costs = [int(np.count_nonzero(ca == _classes(symbols, b, n, p))) for p in (0, 1)]
        key = (a.symbol, b.symbol)
        total = out.setdefault(key, [0, 0])
        total[0] += costs[0]
        total[1] += costs[1]
    return {k: v for k, v in out.items() if v[0] != v[1]}


def _count(symbols, mem) -> int:
    if mem.length is not None:
        return int(mem.length)
    return int(np.prod(symbols[mem.symbol].shape))  # a register's length: at most this


def _classes(symbols, mem, n, start_word) -> np.ndarray:
    """Bank pair (0..3) of each element of a memory DSD over n elements, its symbol
    starting at word `start_word`."""
    k = np.arange(n, dtype=np.int64)
    row_length = n if mem.row_length is None else mem.row_length
    row_stride = row_length * mem.stride if mem.row_stride is None else mem.row_stride
    element = mem.offset + (k % row_length) * mem.stride + (k // row_length) * row_stride
    if symbols[mem.symbol].dtype in HALF_DTYPES:
        return (2 * start_word + element) % 4
    return (2 * (start_word + element)) % 4


def _cost(parities: Mapping, pairs) -> int:
    return sum(c[parities[a] != parities[b]] for (a, b), c in pairs.items())


def _exhaustive(symbols, chosen, pairs) -> dict:
    """Every parity choice of the chosen symbols at once: [choices, len(chosen)] bits, the
    cost of each (pairs) and its pads (one pass over the symbols), the least of both."""
    k = len(chosen)
    bits = (np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1
    column = {name: i for i, name in enumerate(chosen)}
    cost = np.zeros(2**k, np.int64)
    for (a, b), (same, other) in pairs.items():
        cost += np.where(bits[:, column[a]] != bits[:, column[b]], other, same)
    pads = np.zeros(2**k, np.int64)
    address = np.zeros(2**k, np.int64)
    for sym in symbols.values():
        if sym.name in column:
            pad = (address % 2) != bits[:, column[sym.name]]
            pads += pad
            address += pad
        address += sym.words
    best = int(np.lexsort((pads, cost))[0])
    return {name: int(bits[best, i]) for i, name in enumerate(chosen)}


def _greedy(chosen, pairs) -> dict:
    parities: dict = {}
    for name in chosen:
        costs = []
        for p in (0, 1):
            parities[name] = p
            known = {k: v for k, v in pairs.items() if k[0] in parities and k[1] in parities}
            costs.append(_cost(parities, known))
        parities[name] = int(costs[1] < costs[0])
    return parities
