"""What a host transfer costs: data enters and leaves the fabric through I/O channels at its
edges, so copying words between the host and PE memory takes cycles, counted apart from
kernel cycles (`Simulator.host_cycles`).

The model (docs/engine.md, "Host I/O"; sources in fabric/config.py):
- I/O channels reach the fabric's routers on its east and west edges only, one every
  `host_channel_spacing` rows (about 16), at most `host_channels_per_edge` per edge (60 on
  WSE-2, 62 on WSE-3); a transfer streams on at most `host_streams` of them (SdkRuntime
  supports up to 16), each carrying `edge_bandwidth` wavelets (32-bit words) per cycle;
- every word also crosses the system's link to the host, `host_link_bps` bits per second,
  i.e. host_link_bps / clock_hz / 32 words per cycle;
- the words of a rectangle enter it through its rows' west and east links, one wavelet
  per cycle per link: at most 2 * rect.rows words per cycle;
- the farthest PE of the rectangle from the nearer edge adds its hops from the host once:
  its column distance from that edge plus the memcpy support columns the SDK adds beside
  a program on that side (`memcpy_columns`, 3 west and 2 east), which every word crosses.

    cycles = ceil(rect.rows * rect.cols * words / rate) + max over the rect's columns c of
             min(c + 1 + west, cols - c + east),
    rate   = min(streams * edge_bandwidth, link words per cycle, 2 * rect.rows),
    streams = min(host_streams, 2 * min(host_channels_per_edge, ceil(rows / spacing))).
"""

from __future__ import annotations

import math

from fabric.config import FabricConfig
from fabric.program import Rect

WORD_BITS = 32


def edge_channels(config: FabricConfig) -> int:
    """I/O channels on each of the fabric's east and west edges: one per
    `host_channel_spacing` rows, at most `host_channels_per_edge`."""
    return min(config.host_channels_per_edge, math.ceil(config.rows / config.host_channel_spacing))


def host_streams(config: FabricConfig) -> int:
    """I/O channels a transfer streams on: the SdkRuntime limit, or the channels the
    fabric's east and west edges have, whichever is fewer.

    Example:
        >>> host_streams(FabricConfig.wse2()), host_streams(FabricConfig.small(8, 8))
        (16, 2)
    """
    return min(config.host_streams, 2 * edge_channels(config))


def host_words_per_cycle(config: FabricConfig, rect: Rect) -> float:
    """Words per cycle a transfer to or from `rect` moves: the channels, the host link and
    the rectangle's edge links, whichever is least."""
    link = config.host_link_bps / config.clock_hz / WORD_BITS
    return min(host_streams(config) * config.edge_bandwidth, link, 2 * rect.rows)


def host_io_cycles(config: FabricConfig, rect: Rect, words_per_pe: int) -> int:
    """Cycles to copy `words_per_pe` words to (or from) every PE of `rect`.

    Example:
        >>> host_io_cycles(FabricConfig.small(1, 8), Rect(0, 2, 1, 3), 5)  # 2 words/cycle
        15
    """
    if words_per_pe <= 0:
        return 0
    words = rect.rows * rect.cols * words_per_pe
    stream = math.ceil(words / host_words_per_cycle(config, rect))
    return stream + host_hops(config, rect)


def host_hops(config: FabricConfig, rect: Rect) -> int:
    """Hops from the host to the PE of `rect` farthest from it: over the rectangle's
    columns c, the most of min(c + 1 + west, cols - c + east), (west, east) the memcpy
    support columns.

    Example:
        >>> host_hops(FabricConfig.small(4, 8), Rect(0, 0, 4, 8))  # column 3: 4 + 3
        7
    """
    west, east = config.memcpy_columns
    # the distance rises with c up to where the two sides meet, then falls: its most over
    # the rectangle is at an end or at the meeting columns, clamped into the rectangle
    meet = (config.cols - 1 + east - west) / 2
    inside = {min(max(c, rect.col), rect.col_end - 1)
              for c in (rect.col, rect.col_end - 1, math.floor(meet), math.ceil(meet))}
    return max(min(c + 1 + west, config.cols - c + east) for c in inside)
