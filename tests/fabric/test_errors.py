"""Bad programs and bad runs raise (never hang) with messages naming the PE, color, symbol
or task at fault."""

import re

import numpy as np
import pytest

from fabric import (
    BuildError,
    CycleLimitError,
    DeadlockError,
    FabricError,
    Port,
    Program,
    Rect,
    RunError,
    Simulator,
    Tile,
    build,
)
from fabric import instructions as ins
from tests.fabric.programs import (
    GRID4,
    ROW,
    ROW_ASYNC,
    ROW_RECT,
    pe,
    receiver_tile,
    run_tile,
    sender_tile,
)


def place_alone(tile, rect=None, config=ROW):
    prog = Program(config)
    prog.place(tile, rect or pe(0, 1))
    return prog


# ---- build errors ----------------------------------------------------------------------------
def test_sram_overflow_names_pe_symbols_and_sizes():
    t = Tile("big")
    t.symbol("weights", "f32", 8000)
    t.symbol("acts", "f32", 5000)
    with pytest.raises(BuildError) as err:
        build(ROW, place_alone(t, Rect(0, 2, 1, 3)))
    msg = str(err.value)
    for part in ("'big'", "52000 B", "PE (0, 2)", "49152 B", "weights: 32000 B",
                 "acts: 20000 B"):
        assert part in msg, msg


@pytest.mark.parametrize(("config", "cell", "rx", "tx", "where"), [
    (ROW, (0, 7), Port.WEST, Port.EAST, "PE (0, 7) is sent EAST"),
    (ROW, (0, 0), Port.EAST, Port.WEST, "PE (0, 0) is sent WEST"),
    (GRID4, (0, 2), Port.WEST, [Port.NORTH, Port.RAMP], "PE (0, 2) is sent NORTH"),
    (GRID4, (3, 1), Port.NORTH, Port.SOUTH, "PE (3, 1) is sent SOUTH"),
])
def test_route_leaving_the_fabric(config, cell, rx, tx, where):
    prog = Program(config)
    prog.route(pe(*cell), 6, rx, tx)
    with pytest.raises(BuildError, match=rf"color 6 at {re.escape(where)} but leaves the "
                                         rf"{config.rows}x{config.cols} fabric"):
        build(config, prog)


def test_route_into_a_neighbour_that_does_not_accept_it():
    prog = Program(ROW)
    prog.route(pe(0, 2), 4, Port.RAMP, Port.EAST)
    prog.route(pe(0, 3), 4, Port.NORTH, Port.RAMP)  # wrong rx (and off-fabric north)
    with pytest.raises(BuildError, match=r"PE \(0, 3\) does not accept it from WEST"):
        build(ROW, prog)


@pytest.mark.parametrize("make", [receiver_tile, sender_tile], ids=["FabIn", "FabOut"])
def test_color_used_by_code_but_not_routed(make):
    with pytest.raises(BuildError, match=r"color 3 .*task 'main'.*undefined color"):
        build(ROW, place_alone(make(3, 4)))


def test_data_task_on_a_color_not_routed_to_the_ce():
    t = Tile("t")
    t.data_task("on9", 9, [])
    with pytest.raises(BuildError, match=r"color 9 .*data task 'on9'.*undefined color"):
        build(ROW, place_alone(t))


def test_color_routed_on_some_pes_of_the_tile_only_fails_at_run_time():
    """The tile covers PEs 1-2 but only PE 1 delivers color 3 to its CE: PE 2's read is
    reported at run time, naming the PE, task and color."""
    prog = place_alone(receiver_tile(3, 4), Rect(0, 1, 1, 2))
    prog.route(pe(0, 0), 3, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 3, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.launch("main")
    with pytest.raises(RunError, match=r"PE \(0, 2\) tile 'recv', task 'main'.*color 3.*"
                                       r"undefined color") as err:
        sim.run(max_cycles=100)
    assert "PE (0, 1)" not in str(err.value)


@pytest.mark.parametrize("code", [
    lambda x: [ins.activate("nope")],
    lambda x: [ins.unblock("nope")],
    lambda x: [ins.mov(x.dsd(), x.dsd(), is_async=True, on_done=ins.Activate("nope"))],
    lambda x: [ins.mov(x.dsd(), x.dsd(), is_async=True, on_done=ins.Unblock("nope"))],
], ids=["activate", "unblock", "on_done-activate", "on_done-unblock"])
def test_undefined_task(code):
    t = Tile("t")
    x = t.symbol("x", "f32", 4)
    t.local_task("main", code(x))
    with pytest.raises(BuildError, match=r"tile 't', task 'main'.*undefined task 'nope'"):
        build(ROW_ASYNC, place_alone(t, config=ROW_ASYNC))


def test_undefined_label():
    t = Tile("t")
    t.local_task("main", [ins.set_reg("i", 0), ins.branch_if_zero("i", "nowhere")])
    with pytest.raises(BuildError, match=r"task 'main', instruction 1.*undefined label "
                                         r"'nowhere'"):
        build(ROW, place_alone(t))


def test_undefined_symbol_and_out_of_range_dsd():
    t = Tile("t")
    x = t.symbol("x", "f32", 4)
    t.local_task("main", [ins.mov(x.dsd(), ins.Mem("missing", length=4))])
    with pytest.raises(BuildError, match="undefined symbol 'missing'"):
        build(ROW, place_alone(t))
    t = Tile("t")
    x = t.symbol("x", "f32", 4)
    t.local_task("main", [ins.mov(x.dsd(length=3), x.dsd(offset=2, length=3))])
    with pytest.raises(BuildError, match="'x' reaches elements 2..4 but the symbol has 4"):
        build(ROW, place_alone(t))


def test_operand_lengths_must_agree():
    t = Tile("t")
    x = t.symbol("x", "f32", 8)
    t.local_task("main", [ins.add(x.dsd(length=4), x.dsd(length=4), x.dsd(length=5))])
    with pytest.raises(BuildError, match=r"lengths differ \(dst=4, a=4, b=5\)"):
        build(ROW, place_alone(t))


def test_program_level_validation():
    prog = Program(ROW)
    with pytest.raises(ValueError, match="outside the 1x8 fabric"):
        prog.route(Rect(0, 6, 1, 3), 0, Port.WEST, Port.EAST)
    with pytest.raises(ValueError, match="colors are 0..23"):
        prog.route(pe(0, 0), 24, Port.WEST, Port.EAST)
    t = Tile("t")
    prog.place(t, Rect(0, 0, 1, 4))
    with pytest.raises(ValueError, match="overlaps tile 't'"):
        prog.place(Tile("u"), Rect(0, 3, 1, 2))
    with pytest.raises(BuildError, match="not small"):
        build(GRID4, prog)  # a program is built for the config it was written for


# ---- run errors ------------------------------------------------------------------------------
def test_deadlock_lists_stuck_pe_and_color():
    """A FabIn waiting for color 5, which nobody sends: DeadlockError within the window."""
    prog = place_alone(receiver_tile(5, 4), pe(0, 3))
    prog.route(pe(0, 3), 5, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.launch("main")
    with pytest.raises(DeadlockError) as err:
        sim.run(max_cycles=100_000)
    msg = str(err.value)
    assert "PE (0, 3) tile 'recv', task 'main'" in msg, msg
    assert "waits for input on color 5" in msg, msg
    assert err.value.report in msg
    assert int(sim.state.cycle) <= 2 + ROW.deadlock_window + 1  # stopped, did not hang


def test_deadlock_names_wavelets_nobody_reads():
    """A sender fills its path with color 2 while the receiver reads color 3 only."""
    recv = Tile("recv")
    y = recv.symbol("y", "f32", 2)
    recv.local_task("main", [ins.mov(y.dsd(), ins.FabIn(3, 2))])
    prog = Program(ROW)
    prog.place(sender_tile(2, 20), pe(0, 0))
    prog.place(recv, pe(0, 1))
    prog.route(pe(0, 0), 2, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 2, Port.WEST, Port.RAMP)
    prog.route(pe(0, 1), 3, Port.EAST, Port.RAMP)
    prog.route(pe(0, 2), 3, Port.RAMP, Port.WEST)
    sim = Simulator(ROW, prog)
    sim.launch("main")
    with pytest.raises(DeadlockError) as err:
        sim.run()
    msg = str(err.value)
    assert "PE (0, 0) tile 'send'" in msg and "waits for room to send color 2" in msg, msg
    assert "waits for input on color 3" in msg, msg
    assert "PE (0, 1) color 2: 4 wavelet(s) no task consumed" in msg, msg


def test_deadlock_names_an_activated_but_blocked_task():
    t = Tile("t")
    t.local_task("main", [ins.activate("parked")])
    t.local_task("parked", [], blocked=True)
    prog = place_alone(t, pe(0, 4))
    sim = Simulator(ROW, prog)
    sim.launch("main")
    with pytest.raises(DeadlockError, match=r"activated but blocked tasks.*\n.*PE \(0, 4\): "
                                            r"parked"):
        sim.run()


def test_cycle_limit():
    t = Tile("t")
    t.local_task("main", [ins.label("forever"), ins.jump("forever")])
    prog = place_alone(t)
    sim = Simulator(ROW, prog)
    sim.launch("main")
    with pytest.raises(CycleLimitError, match="50 cycles ran"):
        sim.run(max_cycles=50)
    stats = sim.run(max_cycles=30, raise_on_limit=False)
    assert stats.cycles == 80 and stats.run_cycles == 30


def test_memory_dsd_outside_sram_at_run_time():
    t = Tile("t")
    x = t.symbol("x", "f32", 4)
    t.local_task("main", [ins.mov(x.dsd(length=4, offset_reg="o"), 1.0)])
    offsets = np.array([[0, 0, 0, 0, 0, 20_000, 0, 0]])
    with pytest.raises(RunError, match=r"1 PE\(s\).*\n.*PE \(0, 5\) tile 't', task 'main', "
                                       r"instruction 0: memory DSD reaches outside SRAM "
                                       r"\(word 20003\)"):
        run_tile(t, {}, params={"o": offsets}, rect=ROW_RECT)


def test_fabric_input_on_a_color_bound_to_a_data_task():
    t = Tile("t")
    y = t.symbol("y", "f32", 1)
    t.data_task("on2", 2, [])
    t.local_task("main", [ins.mov(y.dsd(), ins.FabIn(2, 1))])
    prog = place_alone(t, pe(0, 1))
    prog.route(pe(0, 0), 2, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 2, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.launch("main")
    with pytest.raises(RunError, match=r"PE \(0, 1\).*color 2, which is bound to a data task"):
        sim.run()


def test_every_error_is_a_fabric_error():
    for cls in (BuildError, RunError, DeadlockError, CycleLimitError):
        assert issubclass(cls, FabricError)
    assert issubclass(BuildError, ValueError) and issubclass(RunError, RuntimeError)
