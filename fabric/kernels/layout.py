"""Where the elements of a tensor live in PE memory (`WordMap`), and probes that derive a
kernel's maps from its own `load` and `read` functions.

A `WordMap` names, for every element slot of some symbols on a rectangle of PEs, the flat
(C-order) index of the tensor element it holds, or -1. A slot is a 32-bit word of a 32-bit
symbol ("f32") or a half-word of a 16-bit one ("f16", "bf16", "cb16": two per word, slot 2k
in the low half of word k; docs/numerics.md "Storage"); `dtypes` gives each symbol's format.
An element may be held by several slots (a vector loaded on every PE of a column); an output
map holds each element once (the slot the kernel's `read` takes it from).

The probes run no engine cycles: they build the kernel's program, load (or fill) SRAM on
the host and compare slots. Probe values must survive the symbols' formats exactly:
- fp32 symbols only: the integers 1, 2, ..., size (exact below 2**24);
- with 16-bit symbols: the distinct finite normal values exactly representable in every
  16-bit format of the kernel's symbols (about 63,000 for one format, about 8,000 for
  f16 with bf16), in batches when the tensor has more elements than that.
- `probe_inputs` loads input `name` = the probe values (the other inputs zero) and finds
  the slots that differ from a load of all zeros: each must hold one of the values (else
  the load does arithmetic on its input, and the probe raises).
- `probe_output` writes a distinct probe value into every symbol slot of the kernel's
  rectangle, calls `read`, and inverts: output element i came from the slot whose value it
  holds.

Example:
    >>> k = build_elementwise(FabricConfig.small(4, 6), Rect(0, 0, 2, 2), 6, 5)  # doctest: +SKIP
    >>> maps = probe_inputs(k, {"x": (6, 5), "y": (6, 5)})                     # doctest: +SKIP
    >>> maps["x"].symbols["x"].shape, maps["x"].dtypes                         # doctest: +SKIP
    ((2, 2, 9), {'x': 'f32'})
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

import numpy as np

from fabric.host import Simulator
from fabric.numerics import FORMATS, HALF_DTYPES, from_half, to_half, words_for
from fabric.program import Rect

EXACT_F32 = 2 ** 24  # integers up to this are exact in fp32
SLOT_DTYPES = ("f32", *HALF_DTYPES)  # "f32": a whole 32-bit word (any 32-bit value)


def slot_dtype(symbol_dtype: str) -> str:
    """The slot format of a program symbol's dtype: 16-bit ones as they are, "f32" for every
    32-bit dtype (f32, i32, u32)."""
    return symbol_dtype if symbol_dtype in HALF_DTYPES else "f32"


def _slot_view(name: str, w, fmt: str, where: str) -> np.ndarray:
    """Raw slot values: uint32 for a 32-bit symbol, uint16 bit patterns for a 16-bit one
    (any dtype of that item size is taken bit for bit)."""
    w = np.ascontiguousarray(np.asarray(w))
    size = 2 if fmt in HALF_DTYPES else 4
    if w.dtype.itemsize != size:
        raise ValueError(f"{where}: symbol {name!r} ({fmt}) takes {8 * size}-bit slot values, "
                         f"got dtype {w.dtype}")
    return w.view(np.uint16 if size == 2 else np.uint32)


@dataclasses.dataclass(frozen=True)
class WordMap:
    """Element placement of one tensor.

    shape: the tensor's shape (C-order flat indices 0..size-1 name its elements).
    rect: the absolute rectangle of PEs holding it.
    symbols: symbol name -> int64 array (rect.rows, rect.cols, slots): the flat element
        index stored in each element slot of the symbol on each PE, -1 where it holds none.
    dtypes: symbol name -> slot format ("f32", "f16", "bf16", "cb16"); symbols not named
        are "f32" (a slot is then a 32-bit word).
    """

    shape: tuple
    rect: Rect
    symbols: Mapping[str, np.ndarray]
    dtypes: Mapping[str, str] | None = None

    def __post_init__(self):
        shape = tuple(int(s) for s in self.shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"WordMap: shape {shape} has a negative size")
        object.__setattr__(self, "shape", shape)
        if not self.symbols:
            raise ValueError(f"WordMap of shape {shape} on {self.rect}: no symbols")
        size = self.size
        fixed = {}
        for name, arr in self.symbols.items():
            a = np.asarray(arr)
            if a.ndim != 3 or a.shape[:2] != (self.rect.rows, self.rect.cols) or a.shape[2] < 1:
                raise ValueError(f"WordMap symbol {name!r}: array shape {a.shape}, expected "
                                 f"({self.rect.rows}, {self.rect.cols}, slots >= 1) for "
                                 f"{self.rect}")
            if not np.issubdtype(a.dtype, np.integer):
                raise ValueError(f"WordMap symbol {name!r}: dtype {a.dtype} is not integer")
            a = a.astype(np.int64)
            bad = (a < -1) | (a >= size)
            if bad.any():
                r, c, w = (int(v) for v in np.argwhere(bad)[0])
                raise ValueError(f"WordMap symbol {name!r}: word {w} of PE ({r}, {c}) of the "
                                 f"rectangle holds element {int(a[r, c, w])}, outside "
                                 f"-1..{size - 1} (shape {shape})")
            a.setflags(write=False)
            fixed[name] = a
        object.__setattr__(self, "symbols", fixed)
        given = dict(self.dtypes or {})
        stray = sorted(set(given) - set(fixed))
        if stray:
            raise ValueError(f"WordMap: dtypes name symbols {stray} that the map does not have "
                             f"(symbols: {sorted(fixed)})")
        for name, fmt in given.items():
            if fmt not in SLOT_DTYPES:
                raise ValueError(f"WordMap symbol {name!r}: dtype {fmt!r} is not one of "
                                 f"{list(SLOT_DTYPES)}")
        object.__setattr__(self, "dtypes", {k: given.get(k, "f32") for k in fixed})

    def at(self, rect: Rect) -> WordMap:
        """The same map on another rectangle of the same size (a kernel probed on its own
        tile, `FabricConfig.tile`, placed at `rect` of the whole fabric)."""
        if (rect.rows, rect.cols) != (self.rect.rows, self.rect.cols):
            raise ValueError(f"WordMap.at({rect}): the map's rectangle {self.rect} has another "
                             "size")
        return WordMap(self.shape, rect, self.symbols, self.dtypes)

    # ---- facts -----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def words(self, name: str) -> int:
        """Element slots per PE of symbol `name` in the map (words of a 32-bit symbol,
        half-words of a 16-bit one)."""
        return int(self.symbols[name].shape[2])

    def sram_words(self, name: str) -> int:
        """32-bit SRAM words per PE that symbol `name`'s slots occupy."""
        return words_for(self.dtypes[name], self.words(name))

    @property
    def widest_sram_words(self) -> int:
        """32-bit SRAM words per PE of its largest symbol: what one host transfer or one
        buffer of the tensor writes per PE at most."""
        return max(self.sram_words(name) for name in self.symbols)

    def is_half(self, name: str) -> bool:
        return self.dtypes[name] in HALF_DTYPES

    def elements_per_pe(self) -> np.ndarray:
        """(rows, cols): distinct elements held by each PE."""
        out = np.zeros((self.rect.rows, self.rect.cols), np.int64)
        for r in range(self.rect.rows):
            for c in range(self.rect.cols):
                held = np.concatenate([a[r, c] for a in self.symbols.values()])
                out[r, c] = np.unique(held[held >= 0]).size
        return out

    def words_per_pe(self) -> np.ndarray:
        """(rows, cols): slots holding an element on each PE (duplicates counted)."""
        return sum((a >= 0).sum(axis=2) for a in self.symbols.values())

    def coverage(self) -> np.ndarray:
        """(size,): how many slots hold each element."""
        counts = np.zeros(self.size, np.int64)
        for a in self.symbols.values():
            held = a[a >= 0]
            np.add.at(counts, held, 1)
        return counts

    def missing(self) -> np.ndarray:
        """Flat indices of the elements no slot holds."""
        return np.flatnonzero(self.coverage() == 0)

    def same_placement(self, other: WordMap) -> bool:
        """True when `other` puts every element in the same slots of the same formats (shapes
        may differ if their sizes agree: a reshape moves nothing)."""
        return (self.size == other.size and self.rect == other.rect
                and self.symbols.keys() == other.symbols.keys() and self.dtypes == other.dtypes
                and all(np.array_equal(a, other.symbols[k]) for k, a in self.symbols.items()))

    def compose(self, index: np.ndarray, shape: tuple) -> WordMap:
        """This map re-labelled in the elements of another tensor x of `shape`, when this
        map's tensor is y = x.reshape(-1)[index] (index of this map's shape). A transpose:
        `ymap.compose(np.arange(x.size).reshape(x.shape).T, x.shape)`."""
        index = np.asarray(index, np.int64)
        if index.shape != self.shape:
            raise ValueError(f"compose: index has shape {index.shape}, the map {self.shape}")
        flat = index.reshape(-1)
        return WordMap(shape, self.rect, {k: np.where(a >= 0, flat[np.maximum(a, 0)], -1)
                                          for k, a in self.symbols.items()}, self.dtypes)

    # ---- data --------------------------------------------------------------------------------
    def to_words(self, tensor: np.ndarray) -> dict[str, np.ndarray]:
        """The raw slot values (rows, cols, slots) of every symbol holding `tensor`: uint32
        words for 32-bit symbols (`tensor` of any 32-bit dtype, bits kept), uint16 bit
        patterns for 16-bit ones (float32 values rounded to nearest even to the symbol's
        format; integer tensors cannot go there). Slots holding no element are 0."""
        t = np.asarray(tensor)
        t = np.ascontiguousarray(t).reshape(t.shape)  # (ascontiguousarray makes 0-d 1-d)
        if t.shape != self.shape:
            raise ValueError(f"to_words: tensor of shape {t.shape}, map of shape {self.shape}")
        if t.dtype.itemsize != 4:
            raise ValueError(f"to_words: dtype {t.dtype} is not a 32-bit type")
        flat = t.view(np.uint32).reshape(-1)
        halves = {}
        out = {}
        for k, a in self.symbols.items():
            fmt = self.dtypes[k]
            if fmt == "f32":
                src, zero = flat, np.uint32(0)
            else:
                if t.dtype.kind != "f":
                    raise ValueError(f"to_words: a {t.dtype} tensor cannot go to the 16-bit "
                                     f"symbol {k!r} ({fmt}); integer tensors (token ids) "
                                     "need 32-bit symbols")
                if fmt not in halves:
                    halves[fmt] = to_half(t.reshape(-1).astype(np.float32), fmt)
                src, zero = halves[fmt], np.uint16(0)
            out[k] = np.where(a >= 0, src[np.maximum(a, 0)], zero).astype(src.dtype)
        return out

    def from_words(self, words: Mapping[str, np.ndarray], dtype=np.float32) -> np.ndarray:
        """The tensor read back from raw slot values (every element from one of its slots):
        32-bit slots bit for bit as `dtype`, 16-bit slots widened exactly to float32 (then
        `dtype` must be float32).

        Raises ValueError when an element is held by no slot, or a symbol is missing."""
        flat = np.zeros(self.size, np.uint32)
        seen = np.zeros(self.size, bool)
        for k, a in self.symbols.items():
            if k not in words:
                raise ValueError(f"from_words: no words for symbol {k!r}")
            fmt = self.dtypes[k]
            w = _slot_view(k, words[k], fmt, "from_words")
            if w.shape != a.shape:
                raise ValueError(f"from_words: symbol {k!r} words have shape {w.shape}, "
                                 f"map {a.shape}")
            if fmt != "f32":
                if np.dtype(dtype) != np.float32:
                    raise ValueError(f"from_words: symbol {k!r} holds 16-bit {fmt} values, "
                                     f"which read back as float32, not {np.dtype(dtype)}")
                w = from_half(w, fmt).view(np.uint32)
            held = a >= 0
            flat[a[held]] = w[held]
            seen[a[held]] = True
        if not seen.all():
            raise ValueError(f"from_words: elements {np.flatnonzero(~seen)[:8].tolist()} of "
                             "the tensor are held by no word")
        return flat.view(dtype).reshape(self.shape)

    def __repr__(self) -> str:
        syms = ", ".join(f"{k}[{a.shape[2]}]" + ("" if self.dtypes[k] == "f32"
                                                  else f" {self.dtypes[k]}")
                         for k, a in self.symbols.items())
        return f"WordMap(shape={self.shape}, rect={self.rect}, symbols={{{syms}}})"


# ---- symbols of a built program ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SymbolSlots:
    """One symbol on a rectangle: word `address` and element `slots` per PE, (rect.rows,
    rect.cols) each (slots 0 where the PE lacks it), and its slot format `dtype`."""

    address: np.ndarray
    slots: np.ndarray
    dtype: str

    @property
    def half(self) -> bool:
        return self.dtype in HALF_DTYPES


def symbol_layout(sim: Simulator, rect: Rect) -> dict[str, SymbolSlots]:
    """Every symbol on some PE of `rect`. Raises ValueError when a symbol's format differs
    between PEs (16-bit on one, 32-bit on another)."""
    found: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    for r, c in rect.pes():
        i = sim.info.placement_index(r, c)
        if i is None:
            continue
        for name, s in sim.info.symbols[i].items():
            fmt = slot_dtype(s.dtype)
            if name not in found:
                found[name] = (np.zeros((rect.rows, rect.cols), np.int64),
                               np.zeros((rect.rows, rect.cols), np.int64), fmt)
            addr, slots, have = found[name]
            if have != fmt:
                raise ValueError(f"symbol {name!r} holds {have} slots on one PE of {rect} and "
                                 f"{fmt} on PE ({r}, {c})")
            addr[r - rect.row, c - rect.col] = s.address
            slots[r - rect.row, c - rect.col] = int(np.prod(s.shape, dtype=np.int64))
    return {k: SymbolSlots(*v) for k, v in found.items()}


def _slot_index(sym: SymbolSlots, rect: Rect, width: int):
    """Index arrays (rows, cols, width) into the SRAM of the slots 0..width-1 of `sym` on
    every PE of `rect` (slots past a PE's end clamped to its first word), the bit shift of
    each slot in its word, and the mask of real slots."""
    j = np.arange(width)
    valid = j < sym.slots[..., None]
    offset = j // 2 if sym.half else j
    word = np.where(valid, sym.address[..., None] + offset, sym.address[..., None])
    rows = np.broadcast_to(np.arange(rect.row, rect.row_end)[:, None, None], word.shape)
    cols = np.broadcast_to(np.arange(rect.col, rect.col_end)[None, :, None], word.shape)
    shift = (16 * (j % 2) if sym.half else np.zeros(width, np.int64)).astype(np.uint32)
    return (rows, cols, word), np.broadcast_to(shift, word.shape), valid


def _symbol_slots(sram: np.ndarray, rect: Rect, sym: SymbolSlots, width: int | None = None):
    """Slot values of one symbol: (rows, cols, width) uint32 (32-bit) or uint16 (16-bit),
    0 where a PE has no such slot, and the mask of real slots."""
    width = int(sym.slots.max()) if width is None else width
    idx, shift, valid = _slot_index(sym, rect, width)
    got = sram[idx]
    if sym.half:
        got = ((got >> shift) & np.uint32(0xFFFF)).astype(np.uint16)
    return np.where(valid, got, got.dtype.type(0)), valid


def _put_slots(sram: np.ndarray, rect: Rect, sym: SymbolSlots, values: np.ndarray,
               mask: np.ndarray) -> None:
    """Write values (rows, cols, width) into the slots of `sym` where `mask` (and the PE has
    the slot); the other half of a 16-bit slot's word keeps its value."""
    idx, shift, valid = _slot_index(sym, rect, values.shape[2])
    sel = mask & valid
    v = values.astype(np.uint32)
    if not sym.half:
        sram[tuple(i[sel] for i in idx)] = v[sel]
        return
    for parity in (0, 1):  # the two halves of a word in separate passes: no index repeats
        part = sel & (np.arange(values.shape[2]) % 2 == parity)
        at = tuple(i[part] for i in idx)
        keep = np.uint32(0xFFFF0000 if parity == 0 else 0x0000FFFF)
        sram[at] = (sram[at] & keep) | (v[part] << np.uint32(16 * parity))


def _map_symbols(wmap: WordMap, layout: dict[str, SymbolSlots], where: str) -> None:
    for k in wmap.symbols:
        if k not in layout:
            raise ValueError(f"{where}: no PE of {wmap.rect} has symbol {k!r}")
        if layout[k].dtype != wmap.dtypes[k]:
            raise ValueError(f"{where}: symbol {k!r} holds {layout[k].dtype} slots in the "
                             f"program, the map says {wmap.dtypes[k]}")


def read_words(sim: Simulator, wmap: WordMap) -> dict[str, np.ndarray]:
    """The raw slot values of `wmap`'s symbols in `sim`'s SRAM, (rows, cols, slots) each:
    uint32 words of 32-bit symbols, uint16 bit patterns of 16-bit ones; 0 past the end of a
    symbol on a PE where it is shorter (a host-side look, no cycles)."""
    layout = symbol_layout(sim, wmap.rect)
    _map_symbols(wmap, layout, "read_words")
    sram = sim.sram_view()
    return {k: _symbol_slots(sram, wmap.rect, layout[k], a.shape[2])[0]
            for k, a in wmap.symbols.items()}


def write_words(sim: Simulator, wmap: WordMap, words: Mapping[str, np.ndarray],
                mapped_only: bool = False) -> None:
    """Write raw slot values (rows, cols, slots) of `wmap`'s symbols into `sim`'s SRAM (uint32
    words of 32-bit symbols, uint16 patterns of 16-bit ones), on each PE only the slots its
    symbol has (a host-side write, no cycles). mapped_only: only the slots that hold an
    element of the map (the others keep their contents, and so does the other half of the
    word of a 16-bit slot)."""
    layout = symbol_layout(sim, wmap.rect)
    _map_symbols(wmap, layout, "write_words")
    sram = sim.host_sram()
    for k, a in wmap.symbols.items():
        if k not in words:
            raise ValueError(f"write_words: no words for symbol {k!r}")
        w = _slot_view(k, words[k], wmap.dtypes[k], "write_words")
        if w.shape != a.shape:
            raise ValueError(f"write_words: symbol {k!r} words have shape {w.shape}, map "
                             f"{a.shape}")
        _put_slots(sram, wmap.rect, layout[k], w, a >= 0 if mapped_only else np.ones_like(w, bool))


# ---- probe values ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _value_table(halves: tuple) -> np.ndarray | None:
    """The probe values for symbols of the 16-bit formats `halves` (sorted tuple): every
    finite, nonzero value normal and exact in each of them, ascending float32; None for
    fp32 symbols alone (the probes then use the integers 1, 2, ...)."""
    if not halves:
        return None
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    values = from_half(patterns, halves[0])
    keep = np.isfinite(values)
    for fmt in halves:
        f = FORMATS[fmt]
        back = to_half(values, fmt)
        field = (back >> np.uint16(f.mbits)) & np.uint16(f.emax_field)
        keep &= (from_half(back, fmt) == values) & (field > 0) & (field < f.emax_field)
    table = np.unique(values[keep])
    table.setflags(write=False)
    return table


class _Values:
    """Distinct probe values for a kernel's symbol formats: value(i) for i < batch, and the
    inverse lookup."""

    def __init__(self, layout: dict[str, SymbolSlots]):
        halves = tuple(sorted({s.dtype for s in layout.values() if s.half}))
        self.table = _value_table(halves)
        self.batch = EXACT_F32 - 1 if self.table is None else int(self.table.size)

    def values(self, count: int) -> np.ndarray:
        """The first `count` probe values (float32)."""
        if self.table is None:
            return np.arange(1, count + 1, dtype=np.float32)
        return self.table[:count]

    def index(self, f: np.ndarray) -> np.ndarray:
        """Index of each float32 value in the probe values, -1 where it is none of them."""
        f = np.asarray(f, np.float32)
        if self.table is None:
            ok = (f == np.round(f)) & (f >= 1) & (f <= self.batch)
            return np.where(ok, np.where(ok, f, 1).astype(np.int64) - 1, -1)
        pos = np.minimum(np.searchsorted(self.table, f), self.table.size - 1)
        return np.where(self.table[pos] == f, pos, -1).astype(np.int64)


def _decode(got: np.ndarray, sym: SymbolSlots) -> np.ndarray:
    """Slot values as float32 (16-bit ones widened exactly)."""
    return from_half(got, sym.dtype) if sym.half else got.view(np.float32)


# ---- probes -------------------------------------------------------------------------------------
def probe_inputs(kernel, shapes: Mapping[str, tuple]) -> dict[str, WordMap]:
    """The WordMap of every input of `kernel` (a `fabric.kernels.base.Kernel`), given the
    input shapes {name: shape}; each symbol's slot format comes from the kernel's program.
    Raises ValueError when an input of a kernel with fp32 symbols only has 2**24 elements
    or more, or when its load writes a slot that is not one of its elements."""
    shapes = {k: tuple(int(s) for s in v) for k, v in shapes.items()}
    zeros = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    sim = Simulator(kernel.config, kernel.program)
    layout = symbol_layout(sim, kernel.rect)
    probe = _Values(layout)
    for name, shape in shapes.items():
        size = int(np.prod(shape, dtype=np.int64))
        if probe.table is None and size >= EXACT_F32:
            raise ValueError(f"probe_inputs({kernel.name}): input {name!r} has {size} elements; "
                             f"probe values must stay below 2**24 to be exact in fp32")
    kernel.load(sim, zeros)
    base = sim.sram_view().copy()  # the zeros load: each batch below starts over from 0
    inside = _symbol_words(kernel, layout, base.shape)
    refs = {sym: _symbol_slots(base, kernel.rect, slots)[0] for sym, slots in layout.items()}
    out = {}
    for name, shape in shapes.items():
        size = int(np.prod(shape, dtype=np.int64))
        symbols: dict[str, np.ndarray] = {}
        for start in range(0, size, probe.batch):  # batches of distinct probe values
            count = min(probe.batch, size - start)
            values = np.zeros(size, np.float32)
            values[start:start + count] = probe.values(count)
            sim.host_sram()[...] = 0  # SRAM as a fresh session's
            kernel.load(sim, {**zeros, name: values.reshape(shape)})
            sram = sim.sram_view()
            for sym, slots in layout.items():
                got, valid = _symbol_slots(sram, kernel.rect, slots)
                changed = (got != refs[sym]) & valid
                if not changed.any():
                    continue
                f = _decode(got, slots)
                idx = probe.index(f)
                bad = changed & ((idx < 0) | (idx >= count))
                if bad.any():
                    r, c, w = (int(v) for v in np.argwhere(bad)[0])
                    raise ValueError(
                        f"probe_inputs({kernel.name}): input {name!r}: {_slot_name(slots)} {w} "
                        f"of symbol {sym!r} on PE ({kernel.rect.row + r}, "
                        f"{kernel.rect.col + c}) holds {f[r, c, w]!r}, not an element of the "
                        "input: the load computes on its input, so its layout cannot be probed")
                arr = symbols.setdefault(sym, np.full(got.shape, -1, np.int64))
                arr[changed] = start + idx[changed]
            _check_outside(kernel, base, sram, inside)
        if not symbols:
            raise ValueError(f"probe_inputs({kernel.name}): loading input {name!r} changed no "
                             f"symbol word on {kernel.rect}")
        out[name] = WordMap(shape, kernel.rect, symbols,
                            {sym: layout[sym].dtype for sym in symbols})
    return out


def _slot_name(sym: SymbolSlots) -> str:
    return "half-word slot" if sym.half else "word"


def _symbol_words(kernel, layout: Mapping[str, SymbolSlots], shape: tuple) -> np.ndarray:
    """bool (rows, cols, words) of the probe's grid `shape`: the words some symbol of the
    kernel's rectangle occupies."""
    inside = np.zeros(shape, bool)
    r0, c0 = kernel.rect.row, kernel.rect.col
    word = np.arange(shape[2])
    for s in layout.values():
        start = np.asarray(s.address, np.int64)[..., None]
        n = words_for(s.dtype, np.asarray(s.slots, np.int64))[..., None]  # over the PEs
        inside[r0:r0 + kernel.rect.rows, c0:c0 + kernel.rect.cols] |= \
            (word >= start) & (word < start + n)
    return inside


def _check_outside(kernel, base, sram, inside):
    """A probe's load must not write words outside the symbols of the rectangle (`inside`,
    `_symbol_words`)."""
    stray = (sram != base) & ~inside
    if stray.any():
        r, c, w = (int(v) for v in np.argwhere(stray)[0])
        raise ValueError(f"probe_inputs({kernel.name}): the load wrote word {w} of PE ({r}, {c}),"
                         f" outside every symbol of the kernel's rectangle {kernel.rect}")


def probe_output(kernel) -> WordMap:
    """The WordMap of `kernel`'s output (its `read` must return one ndarray whose
    elements each come from one slot, unchanged, widened to float32 from a 16-bit one)."""
    sim = Simulator(kernel.config, kernel.program)
    rect = kernel.rect
    layout = symbol_layout(sim, rect)
    probe = _Values(layout)
    empty = sim.sram_view().copy()
    # every real slot of every symbol, numbered 0..total-1 in (symbol, PE, slot) order
    masks = {}
    total = 0
    for sym, slots in layout.items():
        valid = np.arange(int(slots.slots.max())) < slots.slots[..., None]
        masks[sym] = (total, valid)
        total += int(valid.sum())
    if probe.table is None and total + 1 >= EXACT_F32:
        raise ValueError(f"probe_output({kernel.name}): {total + 1} symbol words on "
                         f"{rect}; ids must stay below 2**24 to be exact in fp32")
    source = None  # output element -> slot number
    flat = shape = None
    for start in range(0, max(total, 1), probe.batch):
        count = min(probe.batch, total - start)
        values = probe.values(count)
        sram = empty.copy()
        for sym, slots in layout.items():
            first, valid = masks[sym]
            num = np.full(valid.shape, -1, np.int64)
            num[valid] = np.arange(first, first + int(valid.sum())) - start
            mine = (num >= 0) & (num < count)
            v = values[np.clip(num, 0, max(count - 1, 0))] if count else np.zeros(num.shape)
            v = np.where(mine, v, np.float32(0)).astype(np.float32)
            bits = to_half(v, slots.dtype) if slots.half else v.view(np.uint32)
            _put_slots(sram, rect, slots, bits, valid)
        sim.host_sram()[...] = sram
        out = kernel.read(sim)
        if not isinstance(out, np.ndarray):
            raise ValueError(f"probe_output({kernel.name}): read returned "
                             f"{type(out).__name__}, not one ndarray")
        shape = out.shape
        flat = np.asarray(out, np.float32).reshape(-1)
        if source is None:
            source = np.full(flat.size, -1, np.int64)
        idx = probe.index(flat)
        hit = (idx >= 0) & (idx < count)
        if (hit & (source >= 0)).any():
            i = int(np.flatnonzero(hit & (source >= 0))[0])
            raise ValueError(f"probe_output({kernel.name}): output element {i} takes a probe "
                             "value in two batches: the read computes on what it reads, so its "
                             "layout cannot be probed")
        source[hit] = start + idx[hit]
    bad = source < 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"probe_output({kernel.name}): output element {i} (of shape "
                         f"{shape}) is {flat[i]!r}, not a word of PE memory: the read "
                         "computes on what it reads, so its layout cannot be probed")
    if np.unique(source).size != source.size:
        raise ValueError(f"probe_output({kernel.name}): several output elements come from one "
                         "word; a WordMap holds one element per word")
    symbols = {}
    for sym, (first, valid) in masks.items():
        n = int(valid.sum())
        hit = (source >= first) & (source < first + n)
        if not hit.any():
            continue
        arr = np.full(valid.shape, -1, np.int64)
        flat_idx = np.flatnonzero(valid.reshape(-1))[source[hit] - first]
        arr.reshape(-1)[flat_idx] = np.flatnonzero(hit)
        symbols[sym] = arr
    return WordMap(shape, rect, symbols, {sym: layout[sym].dtype for sym in symbols})
