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
