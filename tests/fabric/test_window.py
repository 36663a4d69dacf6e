"""Windows of a fabric (`fabric.window`): their sizes and corners, and a Simulator on a
window charging host transfers as its parent fabric does (`fabric.host_io.host_io_cycles`
of the rectangle where it lies on the parent)."""

import numpy as np
import pytest

from fabric import FabricConfig, Program, Rect, Simulator, Tile, host_io_cycles, window_for

BIG = FabricConfig.small(24, 24)


def test_window_charges_host_io_as_its_parent():
    """A 2 x 2 tile near the east edge of a 24 x 24 fabric, run on its 8 x 8 window: the
    window's own east edge is nearer, so alone it would charge fewer cycles."""
    place = Rect(10, 20, 2, 2)
    window = window_for(BIG, place)
    assert window.rect == Rect(10, 16, 8, 8)
    here = window.inner(place)
    prog = Program(window.config)
    tile = Tile("t")
    tile.symbol("x", "f32", 40)
    prog.place(tile, here)
    words = np.ones((2, 2, 40), np.float32)
    on_parent = Simulator(window.config, prog, **window.simulator_args())
    alone = Simulator(window.config, prog)
    for sim in (on_parent, alone):
        sim.memcpy_h2d("x", words)
        sim.memcpy_d2h("x")
    want = 2 * host_io_cycles(BIG, place, 40)
    assert on_parent.host_cycles == want == on_parent.stats().host_cycles
    assert alone.host_cycles == 2 * host_io_cycles(window.config, here, 40) != want


def test_window_sizes_and_corners():
    assert window_for(BIG, Rect(0, 0, 3, 3)).rect == Rect(0, 0, 8, 8)
    assert window_for(BIG, Rect(20, 20, 3, 3)).rect == Rect(16, 16, 8, 8)  # moved onto it
    assert window_for(BIG, Rect(2, 2, 9, 3)).rect == Rect(2, 2, 16, 8)  # sides apart
    assert window_for(BIG, Rect(2, 2, 17, 3)).rect == Rect(0, 2, 24, 8)  # cut to the fabric
    assert window_for(BIG, Rect(2, 2, 17, 9)).whole  # 24 x 16: more than half the PEs
    assert window_for(FabricConfig.small(12, 12), Rect(4, 0, 3, 9)).whole  # 8 x 12 of 12 x 12
    assert window_for(FabricConfig.small(8, 8), Rect(0, 0, 1, 1)).whole
    tall = window_for(FabricConfig.small(32, 8), Rect(20, 1, 3, 3))
    assert tall.rect == Rect(20, 0, 8, 8) and not tall.whole
    # windows of one size share a config, hence a compiled engine
    assert window_for(BIG, Rect(0, 0, 2, 2)).config == window_for(BIG, Rect(9, 9, 5, 5)).config
    with pytest.raises(ValueError, match="not a window"):
        Simulator(FabricConfig.small(8, 8), Program(FabricConfig.small(8, 8)), parent=BIG)
    with pytest.raises(ValueError, match="leaves"):
        Simulator(BIG.tile(8, 8), Program(BIG.tile(8, 8)), parent=BIG, corner=(20, 0))
