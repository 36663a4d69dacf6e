"""Per-link traffic: wavelets per cycle sent through each router's N, S, E and W links."""

from __future__ import annotations

import numpy as np

from fabric.viz.common import LINK_NAMES, finish, grid_size, new_figure, pe_grid


def link_heatmaps(stats, title: str = "link traffic", path=None):
    """Four heatmaps (2 x 2: N, S / E, W), one per direction: at PE (r, c), the wavelets
    its router sent out of that port over the run, divided by stats.cycles (a link carries
    at most one wavelet per cycle, so the scale is 0 .. 1).

    stats: a `fabric.Stats` (uses `link_count` (R, C, 4) in N, S, E, W order, `cycles`).
    Axes carry the labels "N", "S", "E", "W".
    """
    counts = np.asarray(stats.link_count)
    grid = np.asarray(stats.busy).shape
    if counts.shape != (*grid, 4):
        raise ValueError(f"stats.link_count must have shape {(*grid, 4)} (rows, cols, N/S/E/W), "
                         f"got {counts.shape}")
    util = counts / max(1, stats.cycles)
    fig = new_figure(*grid_size(*grid, panel_rows=2, panel_cols=2))
    axes = fig.subplots(2, 2).ravel()
    for k, (ax, name) in enumerate(zip(axes, LINK_NAMES)):
        image = pe_grid(ax, util[..., k], 1.0, "magma", name,
                        f"{name} links ({int(counts[..., k].sum()):,} wavelets)")
    fig.colorbar(image, ax=list(axes), label="wavelets per cycle", shrink=0.6)
    fig.suptitle(f"{title} over {stats.cycles} cycles")
    return finish(fig, path)
