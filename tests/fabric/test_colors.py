"""Colors for programs that are to share one fabric (`fabric.colors`, docs/engine.md,
"Colors over many programs"): footprints that share a PE get different colors, disjoint
ones may share one, the reserved colors are never given, and the lower bound is the most
nodes on one PE, checked against footprints counted here PE by PE."""

import time

import numpy as np
import pytest

from fabric import (
    ColorPart,
    FabricConfig,
    Port,
    Program,
    Rect,
    Tile,
    assign_part_colors,
    tile_colors,
)
from fabric import instructions as ins

GRID8 = FabricConfig.small(8, 8)


def _routes(config, color, *rects) -> Program:
    """A program routing `color` on each of `rects` (the ports do not matter here)."""
    prog = Program(config)
    for rect in rects:
        prog.route(rect, color, Port.RAMP, Port.RAMP)
    return prog


def _pes(rect: Rect) -> set:
    return set(rect.pes())


def test_crossing_routes_get_different_colors_and_disjoint_ones_share():
    row0 = ColorPart("row 0", _routes(GRID8, 0, Rect(0, 0, 1, 8)))
    col3 = ColorPart("column 3", _routes(GRID8, 0, Rect(0, 3, 8, 1)))  # meets row 0 at (0, 3)
    row5 = ColorPart("row 5", _routes(GRID8, 0, Rect(5, 0, 1, 3)))  # meets column 3? no
    a = assign_part_colors(GRID8, [row0, col3, row5])
    assert a.ok and a.needed == 2 and a.lower_bound == 2 and a.busiest_pe == (0, 3)
    assert a.assigned[("row 0", 0)] != a.assigned[("column 3", 0)]
    # row 5 crosses neither: the greedy gives it the lowest color, which row 0 has too
    assert a.assigned[("row 5", 0)] == a.assigned[("row 0", 0)] == GRID8.program_colors[0]


def test_a_tiles_colors_count_where_it_runs_without_routes():
    tile = Tile("uses 3 and 4")
    x = tile.symbol("x", "f32", 4)
    tile.data_task("got", 3, [])
    tile.local_task("send", [ins.mov(ins.FabOut(4, 4), x.dsd())])
    prog = Program(GRID8)
    prog.place(tile, Rect(2, 2, 2, 2))
    assert set(tile_colors(tile)) == {3, 4}
    passing = ColorPart("passing", _routes(GRID8, 0, Rect(3, 0, 1, 8)))  # through row 3
    away = ColorPart("away", _routes(GRID8, 0, Rect(6, 0, 1, 8)))
    a = assign_part_colors(GRID8, [ColorPart("tile", prog), passing, away])
    assert a.lower_bound == 3 and a.busiest_pe in {(3, 2), (3, 3)}
    tile_colors_given = {a.assigned[("tile", 3)], a.assigned[("tile", 4)]}
    assert len(tile_colors_given) == 2 and a.assigned[("passing", 0)] not in tile_colors_given
    assert a.assigned[("away", 0)] in tile_colors_given  # disjoint: free to share


def test_a_window_part_is_placed_by_its_offset():
    window = GRID8.tile(4, 4)  # a window's own grid, at PE (4, 4) of the fabric
    inner = ColorPart("window", _routes(window, 0, Rect(0, 0, 1, 1)), offset=(4, 4))
    at_44 = ColorPart("at (4, 4)", _routes(GRID8, 0, Rect(4, 4, 1, 1)))
    at_00 = ColorPart("at (0, 0)", _routes(GRID8, 0, Rect(0, 0, 1, 1)))
    a = assign_part_colors(GRID8, [inner, at_44, at_00])
    assert a.assigned[("window", 0)] != a.assigned[("at (4, 4)", 0)]
    assert a.assigned[("at (0, 0)", 0)] == a.assigned[("window", 0)]
    assert [n.label for n in a.at(4, 4)] == ["window", "at (4, 4)"]


def test_reserved_colors_are_never_given():
    config = FabricConfig.small(4, 4, reserved_colors=(0, 1, 2))
    # 21 parts on one PE: every program color once, none of 0, 1, 2
    parts = [ColorPart(f"p{i}", _routes(config, 3, Rect(0, 0, 1, 1))) for i in range(21)]
    a = assign_part_colors(config, parts)
    assert a.ok and sorted(a.assigned.values()) == list(range(3, 24))
    more = assign_part_colors(config, [*parts, ColorPart("p21", _routes(config, 3,
                                                                         Rect(0, 0, 1, 1)))])
    assert not more.ok and more.needed == 22 and more.lower_bound == 22
    assert not {0, 1, 2} & set(more.assigned.values())
    assert [n.label for n in more.uncolored] == ["p21"]
    text = more.shortfall()
    for words in ("need at least 22 colors", "21 colors (3..23; 0..2 reserved for the host's "
                  "memcpy)", "PE (0, 0) is crossed by 22", "of 22 parts", "p0 (its "
                  "color 3)", "and 10 more", "parts left without a color (1):\n  p21"):
        assert words in text, text


def test_a_greedy_short_of_colors_within_the_bound_says_so():
    """Five parts in a ring (each meets the next at one PE, no PE holds three): the bound is
    2, but an odd ring takes 3 colors, one more than a fabric of 2 program colors has."""
    config = FabricConfig.small(4, 4, reserved_colors=tuple(range(2, 24)))
    ring = [(0, 0), (0, 3), (3, 3), (3, 0), (1, 1)]
    parts = [ColorPart(f"p{i}", _routes(config, 0, Rect(*ring[i], 1, 1),
                                        Rect(*ring[(i + 1) % 5], 1, 1))) for i in range(5)]
    a = assign_part_colors(config, parts)
    assert a.lower_bound == 2 and a.needed == 3 and len(a.uncolored) == 1
    text = a.shortfall()
    assert "the greedy assignment (DSatur) needs 3 colors" in text
    assert "within the colors available" in text
    assert f"left without a color (1):\n  {a.uncolored[0].label} (its color 0)" in text


def _independent_footprints(config, parts) -> dict:
    """{(label, color): set of PEs}, walked route by route and PE by PE."""
    out: dict = {}
    for part in parts:
        r0, c0 = part.offset
        for route in part.program.routes:
            out.setdefault((part.label, route.color), set()).update(
                (r + r0, c + c0) for r, c in route.rect.pes())
    return out


def test_lower_bound_is_the_most_nodes_on_one_pe_and_no_crossing_pair_shares():
    rng = np.random.default_rng(0)
    config = FabricConfig.small(12, 12)
    parts = []
    for i in range(40):
        prog = Program(config)
        for color in range(int(rng.integers(1, 4))):
            for _ in range(int(rng.integers(1, 3))):
                r, c = rng.integers(0, 10, 2)
                h, w = rng.integers(1, min(5, 13 - r)), rng.integers(1, min(5, 13 - c))
                prog.route(Rect(int(r), int(c), int(h), int(w)), color, Port.RAMP, Port.RAMP)
        parts.append(ColorPart(f"p{i}", prog))
    a = assign_part_colors(config, parts)
    feet = _independent_footprints(config, parts)
    count = np.zeros((12, 12), int)
    for pes in feet.values():
        for r, c in pes:
            count[r, c] += 1
    assert a.lower_bound == count.max() and count[a.busiest_pe] == count.max()
    assert a.ok and a.needed >= a.lower_bound > 3
    keys = sorted(feet)
    assert sorted(a.assigned) == keys
    for i, x in enumerate(keys):
        for y in keys[i + 1:]:
            if feet[x] & feet[y]:
                assert a.assigned[x] != a.assigned[y], (x, y)


def test_five_hundred_nodes_on_a_64_by_64_fabric_take_well_under_a_second():
    rng = np.random.default_rng(1)
    config = FabricConfig.small(64, 64)
    parts = []
    for i in range(100):  # 5 colors each, strips and blocks as kernels and moves route
        prog = Program(config)
        r, c = (int(v) for v in rng.integers(0, 48, 2))
        for color in range(5):
            prog.route(Rect(r, c, 16, 1 + color), color, Port.RAMP, Port.RAMP)
            prog.route(Rect(r + color, 0, 1, 64), color, Port.RAMP, Port.RAMP)
        parts.append(ColorPart(f"p{i}", prog))
    t0 = time.perf_counter()
    a = assign_part_colors(config, parts)
    took = time.perf_counter() - t0
    assert len(a.nodes) == 500 and took < 1.0, took


def test_bad_parts_are_refused():
    prog = _routes(GRID8, 0, Rect(0, 0, 1, 1))
    with pytest.raises(ValueError, match=r"labels must differ.*\['x'\]"):
        assign_part_colors(GRID8, [ColorPart("x", prog), ColorPart("x", prog)])
    window = _routes(GRID8.tile(4, 4), 0, Rect(0, 0, 1, 1))
    with pytest.raises(ValueError, match=r"'w': its 4 x 4 grid at PE \(6, 0\) does not lie"):
        assign_part_colors(GRID8, [ColorPart("w", window, offset=(6, 0))])
