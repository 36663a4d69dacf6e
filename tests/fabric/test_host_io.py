"""Host I/O cost (docs/engine.md, "Host I/O"): words reach the fabric on I/O channels of its
east and west edges (about 16 rows apart, at most 60 per edge on WSE-2, at most 16 used by
SdkRuntime), bounded by the host link and by the rectangle's own edge links."""

import math

import pytest

from fabric import FabricConfig, Rect, host_io_cycles
from fabric.host_io import host_streams, host_words_per_cycle

WSE2 = FabricConfig.wse2()


def test_full_height_column_takes_the_channel_limited_time():
    """994 rows x 1 column x 100 words on WSE-2: 16 streams of 1 word per cycle, not one
    word per cycle per row (the old model's 100 + 1 cycles, 62x too fast)."""
    col = Rect(0, 0, 994, 1)
    assert host_streams(WSE2) == 16  # SdkRuntime's limit, below the 2 x 60 edge channels
    assert host_words_per_cycle(WSE2, col) == 16
    # column 0: its own hop and the 3 memcpy support columns west of the program
    assert host_io_cycles(WSE2, col, 100) == math.ceil(994 * 100 / 16) + 4


def test_the_host_link_bounds_more_streams():
    """With every edge channel streaming (120), the 1.2 Tb/s link at 850 MHz carries about
    44.1 words per cycle: it, not the channels, sets the rate."""
    cfg = WSE2.replace(host_streams=120)
    assert host_streams(cfg) == 120
    link = 1.2e12 / 850e6 / 32
    assert host_words_per_cycle(cfg, Rect(0, 0, 994, 1)) == pytest.approx(link)
    assert host_io_cycles(cfg, Rect(0, 0, 994, 1), 100) == math.ceil(99400 / link) + 4


def test_channels_follow_the_fabric_height_and_the_edge_cap():
    """One channel per 16 rows on each edge: a 20-row fabric has 2 + 2; WSE-2's 996 rows
    would have 63 per edge but it has 60 (62 on WSE-3)."""
    cfg = FabricConfig.small(20, 4)
    assert host_streams(cfg) == 4
    # 20 x 4 PEs x 10 words at 4 words per cycle, then column 1: 2 + 3 hops from the west
    assert host_io_cycles(cfg, Rect(0, 0, 20, 4), 10) == 800 // 4 + 5
    assert host_streams(WSE2.replace(host_streams=999)) == 120
    assert host_streams(FabricConfig.wse3(host_streams=999)) == 124


def test_a_narrow_rectangle_is_bound_by_its_row_links():
    """One row enters through its west and east links: 2 words per cycle at most."""
    cfg = FabricConfig.small(1, 8)
    assert host_words_per_cycle(cfg, Rect(0, 0, 1, 8)) == 2
    assert host_io_cycles(cfg, Rect(0, 0, 1, 8), 5) == 20 + 7  # column 3: 4 + 3 hops
    assert host_io_cycles(cfg, Rect(0, 0, 1, 8), 0) == 0


def test_far_columns_count_from_the_nearer_edge():
    cfg = FabricConfig.small(16, 16)
    one = [host_io_cycles(cfg, Rect(0, c, 1, 1), 2) for c in range(16)]
    # nearer edge counted with its memcpy support columns: 3 west, 2 east
    assert one == [1 + min(c + 1 + 3, 16 - c + 2) for c in range(16)]
    bare = cfg.replace(memcpy_columns=(0, 0))
    assert [host_io_cycles(bare, Rect(0, c, 1, 1), 2) for c in range(16)] == [
        1 + min(c + 1, 16 - c) for c in range(16)]


def test_bad_host_figures_are_refused():
    with pytest.raises(ValueError, match="host_streams must be >= 1"):
        FabricConfig.small(2, 2, host_streams=0)
    with pytest.raises(ValueError, match=r"memcpy_columns must be \(west, east\)"):
        FabricConfig.small(2, 2, memcpy_columns=(3, -1))
