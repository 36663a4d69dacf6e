"""Memory DSD layouts (strides, 2D rows, offset and length registers) against numpy views,
and host transfers by symbol."""

import math

import numpy as np
import pytest

from fabric import Program, Rect, Simulator, Tile
from fabric import instructions as ins
from tests.fabric.programs import ROW, ROW_RECT, pe, run_tile

rng = np.random.default_rng(99)
M = rng.standard_normal((1, 8, 4, 6)).astype(np.float32)  # a 4x6 matrix per PE
V = rng.standard_normal((1, 8, 12)).astype(np.float32)


def matrix_tile():
    t = Tile("t")
    return t, t.symbol("m", "f32", (4, 6)), t.symbol("out", "f32", (4, 6))


def test_2d_block_with_row_stride():
    """out[1:4, 1:5] = m[1:4, 1:5] + 1.5 as one 12-element DSD of rows of 4, row stride 6."""
    t, m, out = matrix_tile()
    block = dict(offset=7, length=12, row_length=4, row_stride=6)
    t.local_task("main", [ins.add(out.dsd(**block), m.dsd(**block), 1.5)])
    sim, stats = run_tile(t, {"m": M})
    ref = np.zeros_like(M)
    ref[..., 1:4, 1:5] = M[..., 1:4, 1:5] + np.float32(1.5)
    np.testing.assert_array_equal(sim.memcpy_d2h("out"), ref)
    assert stats.cycles == math.ceil(12 / ROW.simd_width("add")) + 2


def test_2d_transpose_by_strides():
    """out (6x4 view) = m^T: read m column by column (stride 6 in a row of 4, rows step 1)."""
    t, m, out = matrix_tile()
    t.local_task("main", [
        ins.mov(out.dsd(), m.dsd(length=24, row_length=4, stride=6, row_stride=1)),
    ])
    sim, stats = run_tile(t, {"m": M})
    got = sim.memcpy_d2h("out").reshape(1, 8, 6, 4)
    np.testing.assert_array_equal(got, np.swapaxes(M, -1, -2))
    assert stats.cycles == 24 // 2 + 2


@pytest.mark.parametrize(("stride", "offset", "length"), [(2, 0, 6), (3, 1, 4), (-1, 11, 12),
                                                          (-2, 10, 5)])
def test_strided_1d(stride, offset, length):
    t = Tile("t")
    v = t.symbol("v", "f32", 12)
    w = t.symbol("w", "f32", 12)
    t.local_task("main", [ins.mov(w.dsd(length=length), v.dsd(offset=offset, stride=stride,
                                                               length=length))])
    sim, stats = run_tile(t, {"v": V})
    idx = offset + stride * np.arange(length)
    np.testing.assert_array_equal(sim.memcpy_d2h("w")[..., :length], V[..., idx])
    assert stats.cycles == math.ceil(length / 2) + 2


def test_strided_destination():
    """w[0::4] = v[0:3] * 2 (a strided destination DSD)."""
    t = Tile("t")
    v = t.symbol("v", "f32", 12)
    w = t.symbol("w", "f32", 12)
    t.local_task("main", [ins.add(w.dsd(length=3, stride=4), v.dsd(length=3), v.dsd(length=3))])
    sim, _ = run_tile(t, {"v": V})
    ref = np.zeros_like(V)
    ref[..., 0::4] = V[..., :3] * 2
    np.testing.assert_array_equal(sim.memcpy_d2h("w"), ref)


def test_offset_register_per_pe():
    """Each PE copies the 3-element window v[c : c+3] (offset from a per-PE register)."""
    t = Tile("t")
    v = t.symbol("v", "f32", 12)
    w = t.symbol("w", "f32", 3)
    t.local_task("main", [ins.mov(w.dsd(), v.dsd(length=3, offset_reg="o"))])
    offsets = np.arange(8).reshape(1, 8)
    sim, _ = run_tile(t, {"v": V}, params={"o": offsets})
    got = sim.memcpy_d2h("w")
    for c in range(8):
        np.testing.assert_array_equal(got[0, c], V[0, c, c:c + 3])


def test_length_register_per_pe():
    """PE c copies c + 1 elements; its busy cycles are ceil((c + 1) / 2) + 2."""
    t = Tile("t")
    v = t.symbol("v", "f32", 12)
    w = t.symbol("w", "f32", 12)
    t.local_task("main", [ins.mov(w.dsd(length_reg="n"), v.dsd(length_reg="n"))])
    lengths = np.arange(1, 9).reshape(1, 8)
    sim, stats = run_tile(t, {"v": V}, params={"n": lengths})
    got = sim.memcpy_d2h("w")
    for c in range(8):
        np.testing.assert_array_equal(got[0, c, :c + 1], V[0, c, :c + 1])
        np.testing.assert_array_equal(got[0, c, c + 1:], 0)
    np.testing.assert_array_equal(stats.busy[0], [math.ceil(n / 2) + 2 for n in range(1, 9)])
    assert stats.cycles == math.ceil(8 / 2) + 2


def test_integer_symbols_move_bit_exact():
    t = Tile("t")
    a = t.symbol("a", "i32", 5)
    b = t.symbol("b", "u32", 5)
    data = np.array([0, -1, 2**31 - 1, -(2**31), 12345], np.int32)
    t.local_task("main", [ins.mov(b.dsd(), a.dsd())])
    sim, _ = run_tile(t, {"a": data})
    np.testing.assert_array_equal(sim.memcpy_d2h("b")[0, 3], data.view(np.uint32))
    np.testing.assert_array_equal(sim.memcpy_d2h("a")[0, 5], data)


def test_memcpy_by_rect_and_host_cycles():
    """memcpy writes/reads a sub-rectangle; its cost (docs/engine.md, "Host I/O") is the
    words over the rate (one row: its west and east links, 2 words per cycle) plus the
    column distance of its farthest PE from the nearer edge, apart from kernel cycles."""
    t = Tile("t")
    t.symbol("x", "f32", 5)
    t.local_task("main", [])
    prog = Program(ROW)
    prog.place(t, ROW_RECT)
    sim = Simulator(ROW, prog)
    data = rng.standard_normal((1, 3, 5)).astype(np.float32)
    sim.memcpy_h2d("x", data, Rect(0, 2, 1, 3))
    # columns 2..4: column 3, 4 hops and the 3 memcpy support columns west of the grid
    assert sim.host_cycles == math.ceil(3 * 5 / 2) + 7
    full = sim.memcpy_d2h("x")
    assert sim.host_cycles == 15 + 8 * 5 // 2 + 7
    np.testing.assert_array_equal(full[:, 2:5], data)
    np.testing.assert_array_equal(full[:, :2], 0)
    np.testing.assert_array_equal(sim.memcpy_d2h("x", pe(0, 3))[0, 0], data[0, 1])
    sim.launch("main")
    stats = sim.run()
    assert stats.host_cycles == sim.host_cycles and stats.cycles == 2
    with pytest.raises(ValueError, match="expected"):
        sim.memcpy_h2d("x", np.zeros(4, np.float32))
