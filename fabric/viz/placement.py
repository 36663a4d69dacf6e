"""The wafer with labelled rectangles of PEs (tiles, kernels) and arrows between them."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.colors import hsv_to_rgb
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.ticker import MaxNLocator

from fabric.program import Rect
from fabric.viz.common import finish, grid_size, new_figure


def _checked_regions(config, regions) -> dict[str, Rect]:
    out: dict[str, Rect] = {}
    for i, item in enumerate(regions):
        if not (isinstance(item, (tuple, list)) and len(item) == 2
                and isinstance(item[1], Rect)):
            raise TypeError(f"regions[{i}] must be a (label, Rect) pair, got {item!r}")
        label, rect = str(item[0]), item[1]
        if label in out:
            raise ValueError(f"regions[{i}]: label {label!r} is used twice")
        if rect.row < 0 or rect.col < 0 or rect.row_end > config.rows \
                or rect.col_end > config.cols:
            raise ValueError(f"regions[{i}] {label!r}: {rect} lies outside the "
                             f"{config.rows} x {config.cols} fabric of {config.name}")
        out[label] = rect
    return out


def _hue(color: int, num_colors: int):
    """Fabric color `color` as a matplotlib color: hues spread around the circle."""
    return hsv_to_rgb((color / max(1, num_colors), 0.85, 0.8))


def _centre(rect: Rect) -> tuple[float, float]:
    """(x, y) of a rectangle's centre, in the heatmaps' coordinates (PE (r, c) at x=c, y=r)."""
    return rect.col + rect.cols / 2 - 0.5, rect.row + rect.rows / 2 - 0.5


def placement_map(config, regions: Sequence, edges: Sequence = (), title: str = "placement",
                  path=None, edge_colors: Sequence | None = None, emphasized: Sequence = ()):
    """The fabric of `config` as its grid outline, each region filled, outlined and labelled,
    and an arrow from region a's centre to region b's for each edge.

    config: a `FabricConfig` (rows, cols, usable area).
    regions: (label, Rect) pairs, absolute PE rectangles that lie inside the fabric.
    edges: (label_a, label_b) pairs naming regions (data flowing from a to b).
    edge_colors: per edge, the fabric colors its routes take (e.g. the moves' colors over
        a whole graph, `fabric.assign_part_colors`): its arrow is drawn in the hue of the
        first (hues around the circle over `config.num_colors`) and labelled with them
        all; an edge with none stays black. None: every arrow black, unlabelled.
    emphasized: (label_a, label_b) pairs of `edges` drawn thicker (a pipeline's planned
        way through its tiles, `frontend.placement.planned`).
    Axes use the heatmaps' coordinates: PE (r, c) is the unit square centred on (c, r),
    row 0 at the top. The axis carries the label "placement".

    Raises TypeError / ValueError naming the bad region or edge.

    Example:
        >>> placement_map(FabricConfig.small(8, 8), [("gemm", Rect(0, 0, 4, 8)),
        ...               ("softmax", Rect(4, 0, 4, 8))], [("gemm", "softmax")])  # doctest: +SKIP
    """
    rects = _checked_regions(config, regions)
    for i, edge in enumerate(edges):
        if not (isinstance(edge, (tuple, list)) and len(edge) == 2):
            raise TypeError(f"edges[{i}] must be a (label_a, label_b) pair, got {edge!r}")
        missing = [str(e) for e in edge if str(e) not in rects]
        if missing:
            raise ValueError(f"edges[{i}] names {missing}, which no region has; regions: "
                             f"{sorted(rects)}")
    known = {tuple(e) for e in edges}
    unknown = [e for e in emphasized if tuple(e) not in known]
    if unknown:
        raise ValueError(f"emphasized names {unknown}, which are not edges")
    thick = {tuple(e) for e in emphasized}
    if edge_colors is not None and len(edge_colors) != len(edges):
        raise ValueError(f"edge_colors has {len(edge_colors)} entries for {len(edges)} edges")
    fig = new_figure(*grid_size(config.rows, config.cols))
    ax = fig.subplots()
    ax.set_label("placement")
    ax.add_patch(Rectangle((-0.5, -0.5), config.cols, config.rows, facecolor="0.95",
                           edgecolor="black", lw=1.5))
    if (config.usable_rows, config.usable_cols) != (config.rows, config.cols):
        ax.add_patch(Rectangle((-0.5, -0.5), config.usable_cols, config.usable_rows,
                               fill=False, edgecolor="0.4", ls="--", lw=0.8,
                               label="usable area"))
    palette = [f"C{i}" for i in range(10)]
    for i, (label, rect) in enumerate(rects.items()):
        color = palette[i % len(palette)]
        ax.add_patch(Rectangle((rect.col - 0.5, rect.row - 0.5), rect.cols, rect.rows,
                               facecolor=color, alpha=0.55, edgecolor=color, lw=1.5))
        x, y = _centre(rect)
        # labels sit above the arrows, on a light box, so that both stay readable
        ax.text(x, y, f"{label}\n{rect.rows}x{rect.cols}", ha="center", va="center",
                fontsize=8, clip_on=True, zorder=4,
                bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.8, lw=0))
    for i, (a, b) in enumerate(edges):
        start, end = _centre(rects[str(a)]), _centre(rects[str(b)])
        colors = list(edge_colors[i]) if edge_colors is not None else []
        hue = _hue(colors[0], config.num_colors) if colors else "black"
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                     color=hue, lw=3.0 if (a, b) in thick else 1.2,
                                     shrinkA=14, shrinkB=14, zorder=3))
        if colors:
            ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2,
                    ",".join(map(str, colors)), color=hue, fontsize=6, ha="center",
                    va="center", zorder=3, clip_on=True)
    ax.set_xlim(-0.5, config.cols - 0.5)
    ax.set_ylim(config.rows - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    ax.set_title(f"{title}: {len(rects)} regions on {config.name} "
                 f"({config.rows} x {config.cols})", fontsize=10)
    return finish(fig, path)
