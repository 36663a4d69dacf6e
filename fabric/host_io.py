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
- the farthest PE of the rectangle from the nearer edge adds its column distance once.

    cycles = ceil(rect.rows * rect.cols * words / rate) + max over the rect's columns c of
             min(c + 1, cols - c),
    rate   = min(streams * edge_bandwidth, link words per cycle, 2 * rect.rows),
    streams = min(host_streams, 2 * min(host_channels_per_edge, ceil(rows / spacing))).

The memcpy support columns the SDK adds beside a program (3 west, 2 east) sit outside the
simulated grid; their few cycles of extra latency are not counted.
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
        12
    """
    if words_per_pe <= 0:
        return 0
    words = rect.rows * rect.cols * words_per_pe
    stream = math.ceil(words / host_words_per_cycle(config, rect))
    hops = max(min(c + 1, config.cols - c) for c in (rect.col, rect.col_end - 1,
                                                     min(max(rect.col, (config.cols - 1) // 2),
                                                         rect.col_end - 1)))
    return stream + hops
