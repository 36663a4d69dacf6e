"""Conversions, integer vector ops, min, scalar load/store and stride-0 accumulation,
against numpy, with their cycle counts (ceil(n / width) each, docs/engine.md)."""

import math

import numpy as np

from fabric import Program, Rect, Simulator, Tile
from fabric import instructions as ins
from tests.fabric.programs import ROW

X = np.array([0.5, 1.5, -2.5, 3.7, -0.2, 100.0, 7.0, 2.5, -1e9, 3e9], np.float32)
N = X.size


def run(code, symbols):
    tile = Tile("t")
    for name, dtype in symbols.items():
        tile.symbol(name, dtype, N)
    tile.local_task("main", code)
    prog = Program(ROW)
    prog.place(tile, Rect(0, 0, 1, 1))
    sim = Simulator(ROW, prog)
    sim.memcpy_h2d("x", X, rect=Rect(0, 0, 1, 1))
    sim.launch("main")
    stats = sim.run()
    return sim, stats


def read(sim, name):
    return sim.memcpy_d2h(name, rect=Rect(0, 0, 1, 1))[0, 0]


def test_ftoi_rounds_half_to_even_and_saturates():
    sim, stats = run([ins.ftoi(ins.Mem("i"), ins.Mem("x"))], {"x": "f32", "i": "i32"})
    expected = np.clip(np.round(X.astype(np.float64)), -2**31, 2**31 - 128).astype(np.int32)
    np.testing.assert_array_equal(read(sim, "i"), expected)
    assert stats.cycles == math.ceil(N / ROW.simd_width("cvt", "f32")) + 2


def test_itof_and_integer_vector_ops():
    code = [ins.ftoi(ins.Mem("i"), ins.Mem("x")), ins.itof(ins.Mem("y"), ins.Mem("i")),
            ins.iaddv(ins.Mem("j"), ins.Mem("i"), 7), ins.isubv(ins.Mem("k"), ins.Mem("j"),
                                                                ins.Mem("i")),
            ins.shl(ins.Mem("s"), ins.Mem("i"), 3), ins.shr(ins.Mem("u"), ins.Mem("i"), 28)]
    sim, stats = run(code, {"x": "f32", "i": "i32", "y": "f32", "j": "i32", "k": "i32",
                            "s": "i32", "u": "u32"})
    i = read(sim, "i")
    np.testing.assert_array_equal(read(sim, "y"), i.astype(np.float32))
    np.testing.assert_array_equal(read(sim, "j"), i + np.int32(7))
    np.testing.assert_array_equal(read(sim, "k"), np.full(N, 7, np.int32))
    np.testing.assert_array_equal(read(sim, "s"), (i.view(np.uint32) << 3).view(np.int32))
    np.testing.assert_array_equal(read(sim, "u"), i.view(np.uint32) >> 28)
    cvt, iadd, shift = (ROW.simd_width(*k) for k in (("cvt", "f32"), ("add", "i32"),
                                                       ("shift", "i32")))
    expected = 2 * math.ceil(N / cvt) + 2 * math.ceil(N / iadd) + 2 * math.ceil(N / shift) + 2
    assert stats.cycles == expected


def test_min_against_numpy():
    sim, stats = run([ins.min_(ins.Mem("y"), ins.Mem("x"), 1.0)], {"x": "f32", "y": "f32"})
    np.testing.assert_array_equal(read(sim, "y"), np.minimum(X, np.float32(1.0)))
    assert stats.cycles == math.ceil(N / ROW.simd_width("max", "f32")) + 2


def test_load_store_move_one_word_in_one_cycle_each():
    code = [ins.set_reg("p", 3), ins.load("r", ins.Mem("x", offset=2, offset_reg="p")),
            ins.store(ins.Mem("y", offset=1), ins.Reg("r")), ins.store(ins.Mem("y"), 2.5)]
    sim, stats = run(code, {"x": "f32", "y": "f32"})
    y = read(sim, "y")
    assert y[1] == X[5] and y[0] == np.float32(2.5) and not y[2:].any()
    assert stats.cycles == 4 + 2


def test_stride_zero_destination_accumulates_one_element_per_cycle():
    acc = ins.Mem("y", length=N, stride=0)
    code = [ins.add(acc, acc, ins.Mem("x", length=N)), ins.max_(ins.Mem("z", length=N, stride=0),
                                                                ins.Mem("z", length=N, stride=0),
                                                                ins.Mem("x"))]
    sim, stats = run(code, {"x": "f32", "y": "f32", "z": "f32"})
    expected = np.float32(0)
    for v in X:  # the fabric's order: one element after the other
        expected = np.float32(expected + v)
    assert read(sim, "y")[0] == expected
    assert read(sim, "z")[0] == X.max()
    # width 1 for a stride-0 destination; z's max reads its one word twice (one bank
    # pair: every element waits a cycle), y's add reads x beside it (other bank pairs)
    assert stats.cycles == 2 * N + 2 + N
    np.testing.assert_array_equal(stats.bank_stall[0, 0], N)
