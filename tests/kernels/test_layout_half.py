"""WordMaps of 16-bit symbols (half-word element slots) and the probes of kernels that hold
16-bit data (no engine run: the probes build programs and touch SRAM on the host only).

Reference: a hand-written copy kernel whose layout is known by construction (element e of
x on PE (e // 3) % 4 of a 2 x 2 rectangle, slot 3 * (e // 12) + e % 3 + 1), built with the
same layout for every dtype; its probes must give that layout, the same slot arrays for
fp32 and 16-bit symbols (a 16-bit slot is a half-word), and the symbols' formats. Values:
16-bit results equal `fabric.numerics.round_to(values, dtype)` bit for bit (one rounding to
nearest even; widening back to fp32 is exact), so every comparison is exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric import FabricConfig, Program, Rect, Simulator, Tile
from fabric.kernels import build_elementwise
from fabric.kernels.base import Kernel
from fabric.kernels.layout import (
    WordMap,
    probe_inputs,
    probe_output,
    read_words,
    write_words,
)
from fabric.numerics import round_to

CONFIG = FabricConfig.small(6, 6)
RECT = Rect(0, 0, 2, 2)
HALVES = ("f16", "bf16", "cb16")


def placement(size: int) -> np.ndarray:
    """(2, 2, slots): the element each slot of the copy kernel's symbols holds, -1 none."""
    e = np.arange(size)
    pe = (e // 3) % 4
    slot = 3 * (e // 12) + e % 3 + 1  # slot 0 stays empty: odd slots start words' high halves
    arr = np.full((2, 2, int(slot.max()) + 2), -1, np.int64)
    arr[pe // 2, pe % 2, slot] = e
    return arr


def copy_kernel(shape, dtypes=("f32", "f32", "f32")) -> Kernel:
    """A kernel with input x and scratch y (formats dtypes[0], dtypes[1]) and output z
    (dtypes[2]), every one of them in `placement`'s layout; load writes x, read takes z."""
    size = int(np.prod(shape))
    where = placement(size)
    held = where >= 0
    tile = Tile("copy")
    for name, dtype in zip("xyz", dtypes):
        tile.symbol(name, dtype, where.shape[2])
    tile.local_task("main", [])
    prog = Program(CONFIG)
    prog.place(tile, RECT)

    def load(sim, inputs):
        data = np.zeros(where.shape, np.float32)
        data[held] = np.asarray(inputs["x"], np.float32).reshape(-1)[where[held]]
        sim.memcpy_h2d("x", data, RECT)

    def read(sim):
        got = np.asarray(sim.memcpy_d2h("z", RECT), np.float32)
        out = np.zeros(size, np.float32)
        out[where[held]] = got[held]
        return out.reshape(shape)

    return Kernel("copy", CONFIG, RECT, prog, load, read, lambda sim: None, 0)


def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("dtype", HALVES)
def test_probes_of_16bit_kernel_equal_fp32_probes(dtype):
    shape = (6, 7)
    ref_in = probe_inputs(copy_kernel(shape), {"x": shape})["x"]
    ref_out = probe_output(copy_kernel(shape))
    k = copy_kernel(shape, (dtype,) * 3)
    got_in = probe_inputs(k, {"x": shape})["x"]
    got_out = probe_output(k)
    np.testing.assert_array_equal(ref_in.symbols["x"], placement(42))
    np.testing.assert_array_equal(got_in.symbols["x"], ref_in.symbols["x"])
    np.testing.assert_array_equal(got_out.symbols["z"], ref_out.symbols["z"])
    assert ref_in.dtypes == {"x": "f32"} and got_in.dtypes == {"x": dtype}
    assert got_out.dtypes == {"z": dtype} and got_out.shape == shape
    # the maps read the kernel's own load, and the kernel's read takes what the map writes
    x, z = _random(shape, 1), _random(shape, 2)
    sim = Simulator(CONFIG, k.program)
    k.load(sim, {"x": x})
    words = read_words(sim, got_in)
    assert words["x"].dtype == np.uint16
    np.testing.assert_array_equal(got_in.from_words(words), round_to(x, dtype))
    write_words(sim, got_out, got_out.to_words(z))
    np.testing.assert_array_equal(k.read(sim), round_to(z, dtype))


def test_probes_in_batches_with_mixed_formats():
    """f16 and bf16 symbols share about 7,680 exact normal values (8 significant bits,
    exponents -14..15): a 9,000-element input takes 2 probe batches, the output's 27,000
    slots 4; fp32 scratch symbols of a 16-bit kernel use the same values."""
    shape = (90, 100)
    k = copy_kernel(shape, ("f16", "bf16", "f32"))
    x = probe_inputs(k, {"x": shape})["x"]
    want = placement(9000)
    np.testing.assert_array_equal(x.symbols["x"], want)
    assert x.dtypes == {"x": "f16"}
    z = probe_output(k)
    np.testing.assert_array_equal(z.symbols["z"], want)
    assert z.dtypes == {"z": "f32"}


def test_elementwise_f16_probes_equal_f32():
    half = build_elementwise(CONFIG, Rect(0, 0, 2, 2), 6, 5, dtype="f16")
    full = build_elementwise(CONFIG, Rect(0, 0, 2, 2), 6, 5)
    shapes = {"x": (6, 5), "y": (6, 5)}
    for name, m in probe_inputs(half, shapes).items():
        ref = probe_inputs(full, shapes)[name]
        assert m.symbols.keys() == ref.symbols.keys()
        for k, a in m.symbols.items():
            np.testing.assert_array_equal(a, ref.symbols[k])
            assert m.dtypes[k] == "f16"
    out, ref = probe_output(half), probe_output(full)
    for k, a in out.symbols.items():
        np.testing.assert_array_equal(a, ref.symbols[k])


@pytest.mark.parametrize("dtype", HALVES)
def test_to_words_from_words_round_trip(dtype):
    """fp32 -> 16 bits rounds to nearest even (round_to), back is exact, and a second trip
    changes nothing; a map with fp32 and 16-bit symbols converts each its own way."""
    x = _random((5, 8), 3) * np.float32(100)
    x[0, :3] = [np.inf, -np.inf, 1e-30]  # infinities stay, a tiny value rounds to 0
    a = np.arange(40).reshape(2, 2, 10)
    m = WordMap((5, 8), RECT, {"h": a, "w": a[..., ::-1]}, {"h": dtype})
    assert m.dtypes == {"h": dtype, "w": "f32"}
    words = m.to_words(x)
    assert words["h"].dtype == np.uint16 and words["w"].dtype == np.uint32
    wide = WordMap((5, 8), RECT, {"w": a[..., ::-1]})
    np.testing.assert_array_equal(wide.from_words({"w": words["w"]}).view(np.uint32),
                                  x.view(np.uint32))
    half = WordMap((5, 8), RECT, {"h": a}, {"h": dtype})
    back = half.from_words({"h": words["h"]})
    np.testing.assert_array_equal(back, round_to(x, dtype))
    np.testing.assert_array_equal(half.to_words(back)["h"], words["h"])


def test_write_words_keeps_the_other_half_and_reads_slots():
    """A 16-bit symbol of 5 slots on each PE: mapped_only writes slots 1 and 2 (the high half
    of word 0, the low half of word 1); slots 0, 3 and 4 keep what was there."""
    tile = Tile("t")
    tile.symbol("h", "f16", 5)
    prog = Program(CONFIG)
    prog.place(tile, RECT)
    sim = Simulator(CONFIG, prog)
    old = _random((2, 2, 5), 4)
    sim.memcpy_h2d("h", old, RECT)
    a = np.full((2, 2, 5), -1)
    a[..., 1] = np.arange(4).reshape(2, 2)
    a[..., 2] = np.arange(4, 8).reshape(2, 2)
    m = WordMap((8,), RECT, {"h": a}, {"h": "f16"})
    x = _random(8, 5)
    write_words(sim, m, m.to_words(x), mapped_only=True)
    got = sim.memcpy_d2h("h", RECT).astype(np.float32)
    want = round_to(old, "f16")
    want[..., 1:3] = round_to(x, "f16")[a[..., 1:3]]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(m.from_words(read_words(sim, m)), round_to(x, "f16"))


def test_bad_formats_are_named():
    a = np.arange(4).reshape(1, 2, 2)
    rect = Rect(0, 0, 1, 2)
    with pytest.raises(ValueError, match=r"symbol 'h': dtype 'f8' is not one of"):
        WordMap((4,), rect, {"h": a}, {"h": "f8"})
    with pytest.raises(ValueError, match=r"dtypes name symbols \['g'\]"):
        WordMap((4,), rect, {"h": a}, {"g": "f16"})
    m = WordMap((4,), rect, {"h": a}, {"h": "bf16"})
    with pytest.raises(ValueError, match=r"int32 tensor cannot go to the 16-bit symbol 'h'"):
        m.to_words(np.arange(4, dtype=np.int32))
    with pytest.raises(ValueError, match=r"'h' \(bf16\) takes 16-bit slot values"):
        m.from_words({"h": np.zeros((1, 2, 2), np.uint32)})
    with pytest.raises(ValueError, match="read back as float32, not int32"):
        m.from_words({"h": np.zeros((1, 2, 2), np.uint16)}, np.int32)
    k = copy_kernel((6, 7), ("f16",) * 3)
    with pytest.raises(ValueError, match=r"symbol 'x' holds f16 slots in the program, the "
                                         r"map says f32"):
        read_words(Simulator(CONFIG, k.program), WordMap((42,), RECT, {"x": placement(42)}))
