"""Shared pieces of the pictures: Agg figures, PE-grid heatmaps, stats checks, saving."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

LINK_NAMES = ("N", "S", "E", "W")  # last axis of Stats.link_count, in fabric.isa.Port order


def new_figure(width: float, height: float) -> Figure:
    """A Figure on its own Agg canvas (no pyplot: no global state, no display needed)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def grid_size(rows: int, cols: int, panel_rows: int = 1,
              panel_cols: int = 1) -> tuple[float, float]:
    """Figure inches for panel_rows x panel_cols grid pictures, growing gently with the
    grid (the largest wafers get about 8 inches per panel)."""
    panel_w = 4.0 + min(cols, 256) / 64
    panel_h = max(2.5, min(8.0, panel_w * rows / max(1, cols) + 0.9))
    return panel_cols * panel_w + 0.8, panel_rows * panel_h


def pe_grid(ax, values: np.ndarray, vmax: float, cmap: str, label: str, title: str):
    """values (R, C) as an image: PE (r, c) is the unit square centred on x=c, y=r, with
    row 0 at the top. Returns the AxesImage (for a colorbar)."""
    image = ax.imshow(values, cmap=cmap, vmin=0, vmax=max(vmax, 1e-12),
                      interpolation="nearest", aspect="equal")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_label(label)
    return image


def add_colorbar(fig: Figure, image, ax, label: str, integer: bool = True):
    """A colorbar beside `ax`; integer ticks for counts (cycles, bytes, colors)."""
    bar = fig.colorbar(image, ax=ax, label=label, shrink=0.9)
    if integer:
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
    return bar


def per_pe(stats, field: str) -> np.ndarray:
    """stats.<field> as a 2D numpy array (R, C), checked against stats.busy's shape."""
    values = np.asarray(getattr(stats, field))
    shape = np.asarray(stats.busy).shape
    if values.ndim != 2 or values.shape != shape:
        raise ValueError(f"stats.{field} must have the grid's shape {shape} (rows, cols), "
                         f"got {values.shape}")
    return values


def save(fig: Figure, path: str | os.PathLike, dpi: float | None = None) -> Path:
    """Write `fig` as a PNG at `path` (parent folders created); returns the path.

    dpi: default the figure's own (100), so pixel positions match the figure's transforms.
    """
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"save writes PNG files; {str(path)!r} does not end in .png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi or fig.dpi)
    return path


def finish(fig: Figure, path) -> Figure:
    """Save when a path is given; return the figure either way."""
    if path is not None:
        save(fig, path)
    return fig
