"""Matplotlib pictures of a run: per-PE heatmaps, link traffic, colors, placement, and an
animation of wavelets moving between PEs.

Every picture takes what it draws (a `fabric.Stats`, or a config and rectangles) and
returns a `matplotlib.figure.Figure` on an Agg canvas: nothing here touches pyplot's global
state or needs a display, and notebooks show the returned Figure as it is. Pass `path=` (or
call `save`) to write a PNG.

    busy_heatmap(stats)        busy cycles per PE            (R, C)
    stall_heatmap(stats)       stalled cycles per PE         (R, C)
    sram_heatmap(stats)        SRAM bytes allocated per PE   (R, C)
    link_heatmaps(stats)       wavelets per cycle on each link, one panel per N/S/E/W
    color_use(stats)           colors forwarded per PE + wavelets per color (bar chart)
    placement_map(config, regions, edges)   labelled rectangles of PEs over the wafer
    record_link_activity(sim, cycles) -> (T, R, C, 4) link use per cycle
    wavelet_animation(frames, path)         that record as a GIF or HTML animation

Example:
    >>> from fabric.viz import busy_heatmap, save                      # doctest: +SKIP
    >>> save(busy_heatmap(sim.stats()), "busy.png")                   # doctest: +SKIP
"""

from fabric.viz.animation import record_link_activity, wavelet_animation
from fabric.viz.common import save
from fabric.viz.links import link_heatmaps
from fabric.viz.pe_maps import busy_heatmap, color_use, sram_heatmap, stall_heatmap
from fabric.viz.placement import placement_map

__all__ = [
    "busy_heatmap", "color_use", "link_heatmaps", "placement_map", "record_link_activity",
    "save", "sram_heatmap", "stall_heatmap", "wavelet_animation",
]
