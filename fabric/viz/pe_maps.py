"""Per-PE pictures: busy and stall cycles, SRAM allocated, colors forwarded."""

from __future__ import annotations

import numpy as np

from fabric.viz.common import add_colorbar, finish, grid_size, new_figure, pe_grid, per_pe


def busy_heatmap(stats, title: str = "busy cycles per PE", path=None):
    """Busy cycles per PE (the CE ran an instruction), on a scale of 0 .. stats.cycles.

    stats: a `fabric.Stats` (uses `busy` (R, C) and `cycles`).
    Returns a Figure (brighter = busier); `path` also writes it as a PNG.
    """
    busy = per_pe(stats, "busy")
    fig = new_figure(*grid_size(*busy.shape))
    ax = fig.subplots()
    image = pe_grid(ax, busy, max(1, stats.cycles), "viridis", "busy",
                    f"{title} (of {stats.cycles} cycles)")
    add_colorbar(fig, image, ax, "busy cycles")
    return finish(fig, path)


def stall_heatmap(stats, title: str = "stalled cycles per PE", path=None):
    """Cycles each PE's CE waited on an empty fabric input or a full output.

    stats: a `fabric.Stats` (uses `stall` (R, C) and `cycles`). The scale runs to the
    largest stall (at least 1) so that small stalls still show.
    """
    stall = per_pe(stats, "stall")
    fig = new_figure(*grid_size(*stall.shape))
    ax = fig.subplots()
    image = pe_grid(ax, stall, max(1, int(stall.max())), "magma", "stall",
                    f"{title} (max {int(stall.max())}, total {int(stall.sum())})")
    add_colorbar(fig, image, ax, "stalled cycles")
    return finish(fig, path)


def sram_heatmap(stats, title: str = "SRAM allocated per PE", path=None):
    """Bytes of SRAM the program's symbols take on each PE.

    stats: a `fabric.Stats` (uses `sram_bytes_used` (R, C) and `sram_bytes_per_pe`). The
    scale runs to the fullest PE; the title gives it as a share of the capacity.
    """
    used = per_pe(stats, "sram_bytes_used")
    top = int(used.max())
    fig = new_figure(*grid_size(*used.shape))
    ax = fig.subplots()
    share = 100 * top / stats.sram_bytes_per_pe
    image = pe_grid(ax, used, max(1, top), "cividis", "sram",
                    f"{title} (max {top} of {stats.sram_bytes_per_pe} B, {share:.1f} %)")
    add_colorbar(fig, image, ax, "bytes")
    return finish(fig, path)


def color_use(stats, title: str = "color use", path=None):
    """Left: how many distinct colors each PE's router forwarded. Right: wavelets forwarded
    per color, summed over all routers (a multicast counts once per router).

    stats: a `fabric.Stats` (uses `color_count_per_pe` (R, C, K)).
    """
    counts = np.asarray(stats.color_count_per_pe)
    grid = np.asarray(stats.busy).shape
    if counts.ndim != 3 or counts.shape[:2] != grid:
        raise ValueError(f"stats.color_count_per_pe must be (rows, cols, colors) with the "
                         f"grid {grid} first, got {counts.shape}")
    used = (counts > 0).sum(axis=2)
    per_color = counts.sum(axis=(0, 1))
    width, height = grid_size(*grid, panel_cols=2)
    fig = new_figure(width, height)
    left, right = fig.subplots(1, 2)
    image = pe_grid(left, used, max(1, int(used.max())), "viridis", "colors_per_pe",
                    f"colors forwarded per PE (max {int(used.max())})")
    add_colorbar(fig, image, left, "colors")
    right.bar(np.arange(per_color.size), per_color, color="tab:blue")
    right.set_label("per_color")
    right.set_xlabel("color")
    right.set_ylabel("wavelets forwarded")
    right.set_xticks(np.arange(0, per_color.size, max(1, per_color.size // 12)))
    right.set_title(f"wavelets per color ({int((per_color > 0).sum())} of "
                    f"{per_color.size} used)", fontsize=10)
    fig.suptitle(title)
    return finish(fig, path)
