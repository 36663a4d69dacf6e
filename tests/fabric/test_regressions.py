"""Regression tests: minimal reproductions of engine bugs that were fixed (multicast
arbitration deadlock, activating a data task, strict promotion with hop latency > 1, the
deadlock report's instruction, the config error naming its field)."""

import functools

import jax
import numpy as np
import pytest

from fabric import (
    BuildError,
    DeadlockError,
    FabricConfig,
    Port,
    Program,
    Simulator,
    Tile,
    build,
    init_state,
    step,
)
from fabric import instructions as ins
from tests.fabric.programs import ROW, pe, receiver_tile


def test_two_multicast_colors_sharing_two_ports_do_not_deadlock():
    """PE 0 sends 2 wavelets on color 1 then 2 on color 2; PE 1 multicasts both colors to
    its CE and east to PE 2, and sends one wavelet of color 3 east. After color 1 moved
    (pointers E = RAMP = 2) and color 3 took EAST (pointer E = 4), EAST picks color 1 and
    RAMP picks color 2: rr = [0 0 4 0 2] at PE 1 and nothing moves again."""
    n = 2
    s = Tile("S")
    x1, x2 = s.symbol("x1", "f32", n), s.symbol("x2", "f32", n)
    s.local_task("main", [ins.mov(ins.FabOut(1, n), x1.dsd()),
                          ins.mov(ins.FabOut(2, n), x2.dsd())])
    m = Tile("M")
    x3, ym = m.symbol("x3", "f32", 1), m.symbol("y", "f32", n)
    m.local_task("main", [ins.set_reg("q", 0),
                          ins.mov(ins.FabOut(3, 1), x3.dsd()),
                          ins.add(ym.dsd(), ins.FabIn(1, n), ins.FabIn(2, n))])
    r = Tile("R")
    z, yr = r.symbol("z", "f32", 1), r.symbol("y", "f32", n)
    r.local_task("main", [ins.mov(z.dsd(), ins.FabIn(3, 1)),
                          ins.add(yr.dsd(), ins.FabIn(1, n), ins.FabIn(2, n))])
    prog = Program(ROW)
    prog.place(s, pe(0, 0))
    prog.place(m, pe(0, 1))
    prog.place(r, pe(0, 2))
    for color in (1, 2):
        prog.route(pe(0, 0), color, Port.RAMP, Port.EAST)
        prog.route(pe(0, 1), color, Port.WEST, [Port.EAST, Port.RAMP])
        prog.route(pe(0, 2), color, Port.WEST, Port.RAMP)
    prog.route(pe(0, 1), 3, Port.RAMP, Port.EAST)
    prog.route(pe(0, 2), 3, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.memcpy_h2d("x1", np.array([1, 2], np.float32))
    sim.memcpy_h2d("x2", np.array([10, 20], np.float32))
    sim.memcpy_h2d("x3", np.array([7], np.float32))
    sim.launch("main")
    sim.run(max_cycles=1_000)
    np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(0, 1))[0, 0], [11, 22])
    np.testing.assert_array_equal(sim.memcpy_d2h("y", pe(0, 2))[0, 0], [11, 22])
    np.testing.assert_array_equal(sim.memcpy_d2h("z")[0, 0], [7])


def test_activating_a_data_task_does_not_invent_wavelets():
    t = Tile("t")
    y = t.symbol("y", "i32", 1)
    t.data_task("on0", 0, [ins.iadd("n", "n", 1), ins.mov(y.dsd(), "n")])
    t.local_task("main", [ins.activate("on0")])
    prog = Program(ROW)
    prog.place(t, pe(0, 1))
    prog.route(pe(0, 0), 0, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 0, Port.WEST, Port.RAMP)
    try:
        sim = Simulator(ROW, prog)
    except BuildError as err:
        assert "on0" in str(err)
        return
    sim.launch("main")
    stats = sim.run(max_cycles=200)
    assert int(np.asarray(sim.state.iq_count).min()) >= 0
    assert stats.consumed == 0


def test_hop_latency_2_traces_under_strict_rank_promotion():
    cfg = FabricConfig.small(1, 2, hop_latency=2)
    tables, _ = build(cfg, Program(cfg))
    state = init_state(cfg, tables)
    with jax.numpy_rank_promotion("raise"):
        jax.eval_shape(functools.partial(step, cfg), tables, state)


def test_deadlock_report_names_the_stuck_instruction():
    prog = Program(ROW)
    prog.place(receiver_tile(5, 4), pe(0, 3))
    prog.route(pe(0, 3), 5, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.launch("main")
    with pytest.raises(DeadlockError) as err:
        sim.run()
    assert "task 'main', instruction 0: MOV waits for input on color 5" in str(err.value)


def test_zero_rows_error_names_the_field():
    with pytest.raises(ValueError, match="rows"):
        FabricConfig.small(0, 4)
