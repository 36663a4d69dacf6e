"""The engine compiles once per (config, table bucket): other programs, data and runs of
the same size reuse the executable without tracing again."""

import numpy as np

from fabric import Program, Simulator, Tile, engine, host
from fabric import instructions as ins
from tests.fabric.programs import ROW, Flow, flows_program, pe, row_path

# A config used by no other test (it differs only by name), so that its first run must
# trace whatever ran before in this process; jax's own jit cache would otherwise hide a
# trace even after `host._COMPILED` is cleared.
FRESH = ROW.replace(name="compile-once")


def program_a():
    return flows_program(FRESH, [Flow(2, (0, 1), row_path(0, 1, 6), [(0, 3), (0, 6)], 10)])


def program_b(pairs=False):
    """y = max(2 x, 0) (pairs: y = max(y + 2 x, 0), an op reading two memory sources)."""
    t = Tile("other")
    x = t.symbol("x", "f32", 12)
    y = t.symbol("y", "f32", 12)
    first = ins.fma(y.dsd(), y.dsd(), x.dsd(), 2.0) if pairs else ins.mul(y.dsd(), x.dsd(), 2.0)
    t.local_task("main", [first, ins.max_(y.dsd(), y.dsd(), 0.0)])
    prog = Program(FRESH)
    prog.place(t, pe(0, 4))
    return prog


def test_two_programs_of_one_bucket_trace_once(monkeypatch):
    monkeypatch.setattr(host, "_COMPILED", {})
    before = engine.TRACE_COUNT["run"]

    sim_a = Simulator(FRESH, program_a())
    sim_a.memcpy_h2d("x", np.arange(10, dtype=np.float32), pe(0, 1))
    sim_a.launch("main")
    sim_a.run()
    assert engine.TRACE_COUNT["run"] == before + 1
    assert sim_a.compile_s > 0

    sim_b = Simulator(FRESH, program_b())
    assert sim_b.tables.instr.shape == sim_a.tables.instr.shape
    assert sim_b.tables.dsd.shape == sim_a.tables.dsd.shape
    sim_b.memcpy_h2d("x", np.full(12, -1.0, np.float32))
    sim_b.launch("main")
    sim_b.run()
    np.testing.assert_array_equal(sim_b.memcpy_d2h("y")[0, 0], 0.0)  # max(0 + -2, 0)

    # program A again, with other data, run in pieces: still no new trace
    sim_a2 = Simulator(FRESH, program_a())
    sim_a2.memcpy_h2d("x", np.ones(10, np.float32), pe(0, 1))
    sim_a2.launch("main")
    sim_a2.run(max_cycles=5, raise_on_limit=False)
    sim_a2.run()
    np.testing.assert_array_equal(sim_a2.memcpy_d2h("y", pe(0, 6))[0, 0], 1.0)

    assert engine.TRACE_COUNT["run"] == before + 1
    assert len(host._COMPILED) == 1
    assert sim_b.compile_s == 0.0 and sim_a2.compile_s == 0.0

    # a program with an op reading two memory sources runs the engine that checks the bank
    # read-pair rule: one more executable, traced once for every such program of the bucket
    for _ in range(2):
        sim_p = Simulator(FRESH, program_b(pairs=True))
        assert sim_p.tables.instr.shape == sim_a.tables.instr.shape
        sim_p.memcpy_h2d("x", np.full(12, -1.0, np.float32))
        sim_p.launch("main")
        sim_p.run()
        np.testing.assert_array_equal(sim_p.memcpy_d2h("y")[0, 0], 0.0)
    assert engine.TRACE_COUNT["run"] == before + 2
    assert len(host._COMPILED) == 2


# Programs with 16-bit ops compile an executable of their own (`engine.run`'s static
# `half_ops`); one more config name, so that this test's traces are its own.
FRESH_HALF = ROW.replace(name="compile-once-16bit")


def half_program(op, dtype):
    """z = op(x, y) on 12 values of `dtype` (a 16-bit format) at PE (0, 2)."""
    t = Tile("half")
    x, y, z = (t.symbol(n, dtype, 12) for n in "xyz")
    t.local_task("main", [op(z.dsd(), x.dsd(), y.dsd(), dtype=dtype)])
    prog = Program(FRESH_HALF)
    prog.place(t, pe(0, 2))
    return prog


def fp32_program():
    """y = y + 2 * x on 12 fp32 values at PE (0, 4)."""
    t = Tile("other")
    x = t.symbol("x", "f32", 12)
    y = t.symbol("y", "f32", 12)
    t.local_task("main", [ins.fma(y.dsd(), y.dsd(), x.dsd(), 2.0)])
    prog = Program(FRESH_HALF)
    prog.place(t, pe(0, 4))
    return prog


def test_16bit_programs_compile_one_executable_of_their_own(monkeypatch):
    monkeypatch.setattr(host, "_COMPILED", {})
    before = engine.TRACE_COUNT["run"]
    x = np.linspace(-2, 2, 12, dtype=np.float16)
    y = np.full(12, 0.5, np.float16)

    sim_f = Simulator(FRESH_HALF, fp32_program())
    assert not sim_f.half_ops
    sim_f.memcpy_h2d("x", np.arange(12, dtype=np.float32))
    sim_f.launch("main")
    sim_f.run()
    np.testing.assert_array_equal(sim_f.memcpy_d2h("y")[0, 0], 2.0 * np.arange(12))
    assert engine.TRACE_COUNT["run"] == before + 1

    # the first 16-bit program of the bucket compiles the 16-bit engine: exactly one trace
    results = {}
    # numpy rounds each fp16 sum and product once, as the engine does (docs/engine.md)
    for op, ref in ((ins.add, x + y), (ins.mul, x * y)):
        sim = Simulator(FRESH_HALF, half_program(op, "f16"))
        assert sim.half_ops
        assert sim.tables.instr.shape == sim_f.tables.instr.shape
        assert sim.tables.dsd.shape == sim_f.tables.dsd.shape
        sim.memcpy_h2d("x", x)
        sim.memcpy_h2d("y", y)
        sim.launch("main")
        sim.run()
        results[op] = (sim.memcpy_d2h("z")[0, 0], ref, sim.compile_s)
        assert engine.TRACE_COUNT["run"] == before + 2
    for got, ref, _ in results.values():
        np.testing.assert_array_equal(got, ref.astype(np.float16))
    assert results[ins.add][2] > 0 and results[ins.mul][2] == 0.0

    # the fp32 program again: its executable is still there
    sim_f2 = Simulator(FRESH_HALF, fp32_program())
    sim_f2.memcpy_h2d("x", np.ones(12, np.float32))
    sim_f2.launch("main")
    sim_f2.run()
    np.testing.assert_array_equal(sim_f2.memcpy_d2h("y")[0, 0], 2.0)
    assert sim_f2.compile_s == 0.0
    assert engine.TRACE_COUNT["run"] == before + 2
    assert len(host._COMPILED) == 2
