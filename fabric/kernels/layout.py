"""Where the elements of a tensor live in PE memory (`WordMap`), and probes that derive a
kernel's maps from its own `load` and `read` functions.

A `WordMap` names, for every 32-bit word of some symbols on a rectangle of PEs, the flat
(C-order) index of the tensor element it holds, or -1. An element may be held by several
words (a vector loaded on every PE of a column); an output map holds each element once
(the word the kernel's `read` takes it from).

The probes run no engine cycles: they build the kernel's program, load (or fill) SRAM on
the host and compare words.
- `probe_inputs` loads input `name` = 1, 2, ..., size (fp32, exact below 2**24) with the
  other inputs zero, and finds the words that differ from a load of all zeros: each must
  hold one of 1..size (else the load does arithmetic on its input, and the probe raises).
- `probe_output` writes a distinct id into every symbol word of the kernel's rectangle,
  calls `read`, and inverts: output element i came from the word whose id it holds.

Example:
    >>> k = build_elementwise(FabricConfig.small(4, 6), Rect(0, 0, 2, 2), 6, 5)  # doctest: +SKIP
    >>> maps = probe_inputs(k, {"x": (6, 5), "y": (6, 5)})                     # doctest: +SKIP
    >>> maps["x"].symbols["x"].shape                                           # doctest: +SKIP
    (2, 2, 9)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from fabric import engine
from fabric.host import Simulator
from fabric.program import Rect

EXACT_F32 = 2 ** 24  # integers up to this are exact in fp32


@dataclasses.dataclass(frozen=True)
class WordMap:
    """Element placement of one tensor.

    shape: the tensor's shape (C-order flat indices 0..size-1 name its elements).
    rect: the absolute rectangle of PEs holding it.
    symbols: symbol name -> int64 array (rect.rows, rect.cols, words): the flat element
        index stored in each word of the symbol on each PE, -1 where the word holds none.
    """

    shape: tuple
    rect: Rect
    symbols: Mapping[str, np.ndarray]

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
                                 f"({self.rect.rows}, {self.rect.cols}, words >= 1) for "
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

    # ---- facts -----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def words(self, name: str) -> int:
        """Words per PE of symbol `name` in the map."""
        return int(self.symbols[name].shape[2])

    def elements_per_pe(self) -> np.ndarray:
        """(rows, cols): distinct elements held by each PE."""
        out = np.zeros((self.rect.rows, self.rect.cols), np.int64)
        for r in range(self.rect.rows):
            for c in range(self.rect.cols):
                held = np.concatenate([a[r, c] for a in self.symbols.values()])
                out[r, c] = np.unique(held[held >= 0]).size
        return out

    def words_per_pe(self) -> np.ndarray:
        """(rows, cols): words holding an element on each PE (duplicates counted)."""
        return sum((a >= 0).sum(axis=2) for a in self.symbols.values())

    def coverage(self) -> np.ndarray:
        """(size,): how many words hold each element."""
        counts = np.zeros(self.size, np.int64)
        for a in self.symbols.values():
            held = a[a >= 0]
            np.add.at(counts, held, 1)
        return counts

    def missing(self) -> np.ndarray:
        """Flat indices of the elements no word holds."""
        return np.flatnonzero(self.coverage() == 0)

    def same_placement(self, other: WordMap) -> bool:
        """True when `other` puts every element in the same words (shapes may differ if
        their sizes agree: a reshape moves nothing)."""
        return (self.size == other.size and self.rect == other.rect
                and self.symbols.keys() == other.symbols.keys()
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
                                          for k, a in self.symbols.items()})

    # ---- data --------------------------------------------------------------------------------
    def to_words(self, tensor: np.ndarray) -> dict[str, np.ndarray]:
        """The raw uint32 words (rows, cols, words) of every symbol holding `tensor` (any
        32-bit dtype); words holding no element are 0."""
        t = np.ascontiguousarray(np.asarray(tensor))
        if t.shape != self.shape:
            raise ValueError(f"to_words: tensor of shape {t.shape}, map of shape {self.shape}")
        if t.dtype.itemsize != 4:
            raise ValueError(f"to_words: dtype {t.dtype} is not a 32-bit type")
        flat = t.view(np.uint32).reshape(-1)
        return {k: np.where(a >= 0, flat[np.maximum(a, 0)], np.uint32(0)).astype(np.uint32)
                for k, a in self.symbols.items()}

    def from_words(self, words: Mapping[str, np.ndarray], dtype=np.float32) -> np.ndarray:
        """The tensor read back from raw words (every element from one of its words).

        Raises ValueError when an element is held by no word, or a symbol is missing."""
        flat = np.zeros(self.size, np.uint32)
        seen = np.zeros(self.size, bool)
        for k, a in self.symbols.items():
            if k not in words:
                raise ValueError(f"from_words: no words for symbol {k!r}")
            w = np.asarray(words[k])
            if w.shape != a.shape:
                raise ValueError(f"from_words: symbol {k!r} words have shape {w.shape}, "
                                 f"map {a.shape}")
            w = np.ascontiguousarray(w).view(np.uint32)
            held = a >= 0
            flat[a[held]] = w[held]
            seen[a[held]] = True
        if not seen.all():
            raise ValueError(f"from_words: elements {np.flatnonzero(~seen)[:8].tolist()} of "
                             "the tensor are held by no word")
        return flat.view(dtype).reshape(self.shape)

    def __repr__(self) -> str:
        syms = ", ".join(f"{k}[{a.shape[2]}]" for k, a in self.symbols.items())
        return f"WordMap(shape={self.shape}, rect={self.rect}, symbols={{{syms}}})"


# ---- symbols of a built program ----------------------------------------------------------------
def symbol_layout(sim: Simulator, rect: Rect) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """For every symbol on some PE of `rect`: (address, words) arrays of shape
    (rect.rows, rect.cols), words = 0 where the PE lacks the symbol."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for r, c in rect.pes():
        i = sim.info.placement_index(r, c)
        if i is None:
            continue
        for name, s in sim.info.symbols[i].items():
            addr, words = out.setdefault(name, (np.zeros((rect.rows, rect.cols), np.int64),
                                                np.zeros((rect.rows, rect.cols), np.int64)))
            addr[r - rect.row, c - rect.col] = s.address
            words[r - rect.row, c - rect.col] = int(np.prod(s.shape, dtype=np.int64))
    return out


def _symbol_words(sram: np.ndarray, rect: Rect, addr: np.ndarray, words: np.ndarray):
    """Words of one symbol: (rows, cols, max words) uint32 and a mask of real words."""
    width = int(words.max())
    idx = addr[..., None] + np.arange(width)
    valid = np.arange(width) < words[..., None]
    idx = np.where(valid, idx, 0)
    rows = np.arange(rect.row, rect.row_end)[:, None, None]
    cols = np.arange(rect.col, rect.col_end)[None, :, None]
    return sram[rows, cols, idx], valid


def read_words(sim: Simulator, wmap: WordMap) -> dict[str, np.ndarray]:
    """The raw uint32 words of `wmap`'s symbols in `sim`'s SRAM, (rows, cols, words) each,
    0 past the end of a symbol on a PE where it is shorter (a host-side look, no cycles)."""
    layout = symbol_layout(sim, wmap.rect)
    sram = np.asarray(sim.state.sram)
    out = {}
    for k, a in wmap.symbols.items():
        if k not in layout:
            raise ValueError(f"read_words: no PE of {wmap.rect} has symbol {k!r}")
        got, valid = _symbol_words(sram, wmap.rect, *layout[k])
        w = np.zeros(a.shape, np.uint32)
        n = min(a.shape[2], got.shape[2])
        w[..., :n] = np.where(valid, got, np.uint32(0))[..., :n]
        out[k] = w
    return out


def write_words(sim: Simulator, wmap: WordMap, words: Mapping[str, np.ndarray],
                mapped_only: bool = False) -> None:
    """Write raw words (rows, cols, words) of `wmap`'s symbols into `sim`'s SRAM, on each PE
    only the words its symbol has (a host-side write, no cycles). mapped_only: only the
    words that hold an element of the map (the others keep their contents)."""
    layout = symbol_layout(sim, wmap.rect)
    sram = np.array(sim.state.sram)
    rect = wmap.rect
    for k, a in wmap.symbols.items():
        if k not in layout:
            raise ValueError(f"write_words: no PE of {rect} has symbol {k!r}")
        w = np.ascontiguousarray(np.asarray(words[k])).view(np.uint32)
        if w.shape != a.shape:
            raise ValueError(f"write_words: symbol {k!r} words have shape {w.shape}, map "
                             f"{a.shape}")
        addr, n = layout[k]
        for r in range(rect.rows):
            for c in range(rect.cols):
                m = min(int(n[r, c]), a.shape[2])
                dst = sram[rect.row + r, rect.col + c, addr[r, c]:addr[r, c] + m]
                if mapped_only:
                    keep = a[r, c, :m] >= 0
                    dst[keep] = w[r, c, :m][keep]
                else:
                    dst[:] = w[r, c, :m]
    sim.state = engine.replace(sim.state, sram=jnp.asarray(sram))


# ---- probes -------------------------------------------------------------------------------------
def probe_inputs(kernel, shapes: Mapping[str, tuple]) -> dict[str, WordMap]:
    """The WordMap of every input of `kernel` (a `fabric.kernels.base.Kernel`), given the
    input shapes {name: shape}. Raises ValueError when an input has 2**24 elements or
    more, or when its load writes a word that is not one of its elements."""
    shapes = {k: tuple(int(s) for s in v) for k, v in shapes.items()}
    for name, shape in shapes.items():
        size = int(np.prod(shape, dtype=np.int64))
        if size >= EXACT_F32:
            raise ValueError(f"probe_inputs({kernel.name}): input {name!r} has {size} elements; "
                             f"probe values must stay below 2**24 to be exact in fp32")
    zeros = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    base_sim = Simulator(kernel.config, kernel.program)
    kernel.load(base_sim, zeros)
    base = np.asarray(base_sim.state.sram)
    layout = symbol_layout(base_sim, kernel.rect)
    out = {}
    for name, shape in shapes.items():
        size = int(np.prod(shape, dtype=np.int64))
        sim = Simulator(kernel.config, kernel.program)
        values = np.arange(1, size + 1, dtype=np.float32).reshape(shape)
        kernel.load(sim, {**zeros, name: values})
        sram = np.asarray(sim.state.sram)
        symbols = {}
        for sym, (addr, words) in layout.items():
            got, valid = _symbol_words(sram, kernel.rect, addr, words)
            ref, _ = _symbol_words(base, kernel.rect, addr, words)
            changed = (got != ref) & valid
            if not changed.any():
                continue
            f = got.view(np.float32)
            ok = (f == np.round(f)) & (f >= 1) & (f <= size)
            bad = changed & ~ok
            if bad.any():
                r, c, w = (int(v) for v in np.argwhere(bad)[0])
                raise ValueError(
                    f"probe_inputs({kernel.name}): input {name!r}: word {w} of symbol {sym!r} "
                    f"on PE ({kernel.rect.row + r}, {kernel.rect.col + c}) holds {f[r, c, w]!r}, "
                    f"not an element of the input: the load computes on its input, so its "
                    "layout cannot be probed")
            symbols[sym] = np.where(changed, np.where(ok, f, 0).astype(np.int64) - 1, -1)
        if not symbols:
            raise ValueError(f"probe_inputs({kernel.name}): loading input {name!r} changed no "
                             f"symbol word on {kernel.rect}")
        out[name] = WordMap(shape, kernel.rect, symbols)
        _check_outside(kernel, base, sram, layout)
    return out


def _check_outside(kernel, base, sram, layout):
    """A probe's load must not write words outside the symbols of the rectangle."""
    diff = sram != base
    r0, c0 = kernel.rect.row, kernel.rect.col
    inside = np.zeros_like(diff)
    for addr, words in layout.values():
        for r in range(kernel.rect.rows):
            for c in range(kernel.rect.cols):
                a, n = int(addr[r, c]), int(words[r, c])
                inside[r0 + r, c0 + c, a:a + n] = True
    stray = diff & ~inside
    if stray.any():
        r, c, w = (int(v) for v in np.argwhere(stray)[0])
        raise ValueError(f"probe_inputs({kernel.name}): the load wrote word {w} of PE ({r}, {c}),"
                         f" outside every symbol of the kernel's rectangle {kernel.rect}")


def probe_output(kernel) -> WordMap:
    """The WordMap of `kernel`'s output (its `read` must return one ndarray whose
    elements each come from one word, unchanged)."""
    sim = Simulator(kernel.config, kernel.program)
    rect = kernel.rect
    layout = symbol_layout(sim, rect)
    sram = np.array(sim.state.sram)
    ids = {}
    next_id = 1
    for sym, (addr, words) in layout.items():
        width = int(words.max())
        valid = np.arange(width) < words[..., None]
        n = int(valid.sum())
        if next_id + n >= EXACT_F32:
            raise ValueError(f"probe_output({kernel.name}): {next_id + n} symbol words on "
                             f"{rect}; ids must stay below 2**24 to be exact in fp32")
        idmap = np.zeros(valid.shape, np.int64)
        idmap[valid] = np.arange(next_id, next_id + n)
        next_id += n
        ids[sym] = (idmap, valid)
        for r in range(rect.rows):
            for c in range(rect.cols):
                k = int(words[r, c])
                a = int(addr[r, c])
                sram[rect.row + r, rect.col + c, a:a + k] = (
                    idmap[r, c, :k].astype(np.float32).view(np.uint32))
    sim.state = engine.replace(sim.state, sram=jnp.asarray(sram))
    out = kernel.read(sim)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"probe_output({kernel.name}): read returned {type(out).__name__}, "
                         "not one ndarray")
    flat = np.asarray(out, np.float32).reshape(-1)
    got = np.where(flat == np.round(flat), flat, -1).astype(np.int64)
    bad = (got < 1) | (got >= next_id)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"probe_output({kernel.name}): output element {i} (of shape "
                         f"{out.shape}) is {flat[i]!r}, not a word of PE memory: the read "
                         "computes on what it reads, so its layout cannot be probed")
    dup = np.unique(got).size != got.size
    if dup:
        raise ValueError(f"probe_output({kernel.name}): several output elements come from one "
                         "word; a WordMap holds one element per word")
    symbols = {}
    for sym, (idmap, valid) in ids.items():
        arr = np.full(idmap.shape, -1, np.int64)
        lo, hi = int(idmap[valid].min()), int(idmap[valid].max())
        hit = (got >= lo) & (got <= hi)
        if not hit.any():
            continue
        pos = np.searchsorted(idmap[valid], got[hit])  # ids are increasing in mask order
        flat_idx = np.flatnonzero(valid.reshape(-1))[pos]
        arr.reshape(-1)[flat_idx] = np.flatnonzero(hit)
        symbols[sym] = arr
    return WordMap(out.shape, rect, symbols)
