"""Task ids per generation (docs/engine.md, "Tasks and queues"): on WSE-2 a data task's id
is its color; on WSE-3 data tasks are bound to input queues 0..7 (given in ascending color
order) and local tasks take ids 8 and up. The engine's schedule is the same either way."""

import numpy as np
import pytest

from fabric import BuildError, FabricConfig, Port, Program, Simulator, Tile, build
from fabric import instructions as ins
from fabric.build import hardware_task_ids
from tests.fabric.programs import pe

WSE2_ROW = FabricConfig.small(1, 4)
WSE3_ROW = FabricConfig.small(1, 4, generation="wse3")


def test_presets_bind_data_tasks_as_their_generation_does():
    assert FabricConfig.wse2().task_binding == WSE2_ROW.task_binding == "color"
    assert FabricConfig.wse3().task_binding == WSE3_ROW.task_binding == "queue"
    assert FabricConfig.wse3().num_input_queues == 8
    with pytest.raises(ValueError, match="task_binding must be 'color' or 'queue'"):
        FabricConfig.small(1, 1, task_binding="port")


def tile_with(colors, locals_=("main",)):
    t = Tile("t")
    for c in colors:
        t.data_task(f"d{c}", c, [])
    for name in locals_:
        t.local_task(name, [])
    return t


def test_wse2_data_task_ids_are_colors():
    t = tile_with([9, 2, 5], ("main", "next"))
    assert hardware_task_ids(WSE2_ROW, t) == {"d2": 2, "d5": 5, "d9": 9, "main": 24, "next": 25}


def test_wse3_data_tasks_take_input_queues_in_color_order():
    t = tile_with([9, 2, 5], ("main", "next"))
    assert hardware_task_ids(WSE3_ROW, t) == {"d2": 0, "d5": 1, "d9": 2, "main": 8, "next": 9}


def test_wse3_refuses_more_data_tasks_than_input_queues():
    t = tile_with(range(9))
    assert len(hardware_task_ids(WSE2_ROW, t)) == 10  # WSE-2: nine colors, fine
    prog = Program(WSE3_ROW)
    prog.place(t, pe(0, 0))
    with pytest.raises(BuildError) as err:
        build(WSE3_ROW, prog)
    text = str(err.value)
    assert "tile 't' binds 9 data tasks" in text and "8 (0..7)" in text
    assert "'d8' (color 8)" in text


def test_queue_binding_keeps_the_schedule():
    """Wavelets on colors 7 then 3 wait while the receiver runs a long local task; then the
    data task of the lower color (queue 0 on WSE-3, id 3 on WSE-2) runs first on both
    generations; the cycles differ only by the busy mov's SIMD width (2 vs 4)."""
    results = []
    for cfg in (WSE2_ROW, WSE3_ROW):
        send, recv = Tile("send"), Tile("recv")
        a, b = send.symbol("a", "f32", 1), send.symbol("b", "f32", 1)
        recv.symbol("log", "f32", 2)
        send.local_task("main", [ins.mov(ins.FabOut(7, 1), b.dsd(), is_async=True),
                                 ins.mov(ins.FabOut(3, 1), a.dsd())])
        recv.register("n")
        scratch = recv.symbol("s", "f32", 64)
        # 32 cycles on WSE-2, 16 on WSE-3
        recv.local_task("busy", [ins.mov(scratch.dsd(), scratch.dsd())])
        for color in (7, 3):
            recv.data_task(f"on{color}", color, [
                ins.store(ins.Mem("log", offset_reg="n"), float(color)),
                ins.iadd("n", "n", 1)])
        prog = Program(cfg)
        prog.place(send, pe(0, 0))
        prog.place(recv, pe(0, 1), params={"n": 0})
        for color in (7, 3):
            prog.route(pe(0, 0), color, Port.RAMP, Port.EAST)
            prog.route(pe(0, 1), color, Port.WEST, Port.RAMP)
        sim = Simulator(cfg, prog)
        sim.launch("busy", pe(0, 1))
        sim.launch("main", pe(0, 0))
        stats = sim.run()
        results.append((np.asarray(sim.memcpy_d2h("log", pe(0, 1))).ravel().tolist(),
                        stats.cycles))
    assert results[0][0] == results[1][0] == [3.0, 7.0]
    assert results[0][1] - results[1][1] == 64 // 2 - 64 // 4


# ---- more local tasks than the ids above the colors -------------------------------------------
def test_wse2_local_tasks_past_seven_take_free_color_ids_above_the_data_tasks():
    """WSE-2 shares its ids 0..30 between data tasks (id = color) and local tasks: a tile
    with 10 local tasks takes, in declaration order, the ids above its highest data task's
    color that no data task, fabric DSD or reserved color holds."""
    names = [f"l{i}" for i in range(10)]
    t = tile_with([1, 3], names)
    t.local_task("extra", [ins.mov(ins.FabOut(5, 1), 1.0)])  # names color 5: its id is taken
    ids = hardware_task_ids(WSE2_ROW, t)
    assert [ids[n] for n in [*names, "extra"]] == [4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    assert ids["d1"] == 1 and ids["d3"] == 3
    # seven or fewer keep the ids above the colors
    assert hardware_task_ids(WSE2_ROW, tile_with([1], names[:7]))["l0"] == 24


def test_too_many_local_tasks_name_the_free_ids():
    t = tile_with([20], [f"l{i}" for i in range(8)])  # above color 20: 21..23 reserved
    prog = Program(WSE2_ROW)
    prog.place(t, pe(0, 0))
    with pytest.raises(BuildError, match=r"tile 't' has 8 local tasks but 7 free task ids"):
        build(WSE2_ROW, prog)
    t3 = tile_with([], [f"l{i}" for i in range(24)])
    with pytest.raises(BuildError, match=r"24 local tasks, but .* has 23 local task ids \(8..30\)"):
        hardware_task_ids(WSE3_ROW, t3)


def test_twelve_local_tasks_run_in_declaration_order_beside_a_data_task():
    """main activates 11 local tasks in reverse order; they run in declaration order (their
    ids ascend), each appending its index to a log, and a data task on color 0 (below them
    all) still takes the wavelets the west neighbour sends."""
    n_local, n_wavelets = 11, 3
    t = Tile("recv")
    log = t.symbol("log", "i32", n_local)
    got = t.symbol("got", "f32", n_wavelets)
    t.data_task("on_wavelet", 0, [ins.mov(got.dsd(length=1, offset_reg="w"), ins.WAVELET),
                                  ins.iadd("w", "w", 1)])
    append = [ins.mov(log.dsd(length=1, offset_reg="p"), "mark"), ins.iadd("p", "p", 1)]
    t.local_task("main", [ins.activate(f"l{i}") for i in reversed(range(n_local))])
    for i in range(n_local):
        t.local_task(f"l{i}", [ins.set_reg("mark", i), *append])
    send = Tile("send")
    x = send.symbol("x", "f32", n_wavelets)
    send.local_task("main", [ins.mov(ins.FabOut(0, n_wavelets), x.dsd())])
    prog = Program(WSE2_ROW)
    prog.place(send, pe(0, 0))
    prog.place(t, pe(0, 1))
    prog.route(pe(0, 0), 0, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 0, Port.WEST, Port.RAMP)
    sim = Simulator(WSE2_ROW, prog)
    data = np.array([1.5, -2.0, 3.25], np.float32)
    sim.memcpy_h2d("x", data, pe(0, 0))
    sim.launch("main")
    sim.run()
    np.testing.assert_array_equal(sim.memcpy_d2h("log", pe(0, 1))[0, 0], np.arange(n_local))
    np.testing.assert_array_equal(sim.memcpy_d2h("got", pe(0, 1))[0, 0], data)
    ids = hardware_task_ids(WSE2_ROW, t)  # 12 local tasks: the ids above color 0, in order
    assert [ids["main"], *(ids[f"l{i}"] for i in range(n_local))] == list(range(1, 13))
