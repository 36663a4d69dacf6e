"""The host's memcpy owns three colors (docs/engine.md, "Reserved colors"): a program that
routes one, binds a data task to one or names one in a fabric DSD is refused with the color,
the place and the reason; `reserved_colors=()` frees them."""

import numpy as np
import pytest

from fabric import BuildError, FabricConfig, Port, Program, Rect, Simulator, Tile, build
from fabric import instructions as ins
from fabric.kernels.base import pick_colors
from fabric.kernels.rownorm import build_softmax
from tests.fabric.programs import GRID4, ROW, pe


def test_presets_reserve_the_memcpy_colors():
    for cfg in (FabricConfig.wse2(), FabricConfig.wse3(), ROW):
        assert cfg.reserved_colors == (21, 22, 23)
        assert cfg.program_colors == tuple(range(21))
    assert FabricConfig.small(2, 2, reserved_colors=()).program_colors == tuple(range(24))


def test_config_rejects_reserved_colors_outside_the_colors():
    with pytest.raises(ValueError, match="reserved_colors must be distinct colors of 0..23"):
        FabricConfig.small(2, 2, reserved_colors=(24,))
    with pytest.raises(ValueError, match="reserved_colors"):
        FabricConfig.small(2, 2, reserved_colors=(3, 3))


def test_route_on_a_reserved_color_names_color_place_and_reason():
    prog = Program(ROW)
    with pytest.raises(ValueError) as err:
        prog.route(pe(0, 2), 22, Port.RAMP, Port.EAST)
    text = str(err.value)
    assert "route of color 22" in text and "PE (0, 2)" in text
    assert "reserved for the host's memcpy" in text and "0..20" in text


def test_route_cells_routes_as_route_does_and_checks_the_same():
    """A route tree's cells in one call: the routes `route` gives PE by PE, the same
    refusals (a reserved color, a PE off the fabric, an empty tx)."""
    cells = {(0, 1): (Port.RAMP, frozenset({Port.EAST})),
             (0, 2): (Port.WEST, frozenset({Port.EAST, Port.RAMP})),
             (0, 3): (Port.WEST, frozenset({Port.RAMP}))}
    by_pe, at_once = Program(ROW), Program(ROW)
    for (r, c), (rx, tx) in cells.items():
        by_pe.route(pe(r, c), 5, rx, sorted(tx))
    at_once.route_cells(5, cells)
    assert at_once.routes == by_pe.routes
    with pytest.raises(ValueError, match=r"route of color 22 .*PE \(0, 1\).*reserved"):
        Program(ROW).route_cells(22, cells)
    with pytest.raises(ValueError, match=r"route of color 5: .* lies outside"):
        Program(ROW).route_cells(5, {(1, 0): (Port.RAMP, frozenset({Port.EAST}))})
    with pytest.raises(ValueError, match="tx is empty"):
        Program(ROW).route_cells(5, {(0, 0): (Port.RAMP, frozenset())})


def test_data_task_bound_to_a_reserved_color_is_refused():
    t = Tile("t")
    t.data_task("d", 21, [])
    prog = Program(ROW)
    prog.place(t, pe(0, 3))
    with pytest.raises(BuildError, match=r"data task 'd' is bound to color 21 is reserved"):
        build(ROW, prog)


def test_fabric_dsd_on_a_reserved_color_is_refused():
    t = Tile("t")
    x = t.symbol("x", "f32", 4)
    t.local_task("main", [ins.mov(ins.FabOut(23, 4), x.dsd())])
    prog = Program(ROW)
    prog.place(t, pe(0, 1))
    with pytest.raises(BuildError) as err:
        build(ROW, prog)
    text = str(err.value)
    assert "tile 't'" in text and "PE (0, 1)" in text and "task 'main'" in text
    assert "color 23 is reserved for the host's memcpy" in text


def test_freed_colors_route_and_carry_data():
    """reserved_colors=(): color 23 is an ordinary color again (one wavelet east, 1 hop)."""
    cfg = ROW.replace(reserved_colors=())
    send, recv = Tile("send"), Tile("recv")
    xs, ys = send.symbol("x", "f32", 1), recv.symbol("y", "f32", 1)
    send.local_task("main", [ins.mov(ins.FabOut(23, 1), xs.dsd())])
    recv.local_task("main", [ins.mov(ys.dsd(), ins.FabIn(23, 1))])
    prog = Program(cfg)
    prog.place(send, pe(0, 0))
    prog.place(recv, pe(0, 1))
    prog.route(pe(0, 0), 23, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 23, Port.WEST, Port.RAMP)
    sim = Simulator(cfg, prog)
    sim.memcpy_h2d("x", np.array([[[2.5]]], np.float32), pe(0, 0))
    sim.launch("main", pe(0, 0))
    sim.launch("main", pe(0, 1))
    sim.run()
    assert float(np.asarray(sim.memcpy_d2h("y", pe(0, 1))).ravel()[0]) == 2.5


def test_kernels_take_colors_below_the_reserved_ones():
    assert pick_colors(ROW, 3, None) == [0, 1, 2]
    with pytest.raises(ValueError, match="color 21 is reserved"):
        pick_colors(ROW, 2, [20, 21])
    with pytest.raises(ValueError, match="needs 22 distinct colors"):
        pick_colors(ROW, 22, None)
    k = build_softmax(GRID4, Rect(0, 0, 2, 4), 4, 8)
    assert k.program.routes and all(r.color < 21 for r in k.program.routes)
    with pytest.raises(ValueError, match="color 22 is reserved"):
        build_softmax(GRID4, Rect(0, 0, 2, 4), 4, 8, colors=[22, 0, 1])
