"""What a host transfer costs: data enters and leaves the fabric through its edge, so
copying words between the host and PE memory takes cycles, counted apart from kernel
cycles (`Simulator.host_cycles`).

The model: the west edge carries one wavelet per cycle per row channel (`edge_bandwidth`),
all rows in parallel; a word for a PE of column c also crosses c columns of the mesh.
"""

from __future__ import annotations

import math

from fabric.config import FabricConfig
from fabric.program import Rect


def host_io_cycles(config: FabricConfig, rect: Rect, words_per_pe: int) -> int:
    """Cycles to copy `words_per_pe` words to (or from) every PE of `rect`:
    ceil(rect.cols * words_per_pe / edge_bandwidth) + rect.col_end.

    Example:
        >>> host_io_cycles(FabricConfig.small(4, 4), Rect(0, 0, 4, 2), 8)  # doctest: +SKIP
        18
    """
    return math.ceil(rect.cols * words_per_pe / config.edge_bandwidth) + rect.col_end
