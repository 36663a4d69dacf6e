"""Matplotlib pictures of a run (headless-safe: callers choose the backend)."""

from __future__ import annotations

import numpy as np


def busy_heatmap(stats, title: str = "busy cycles per PE"):
    """Per-PE busy cycles as a heatmap; returns a matplotlib Figure.

    stats: a `fabric.Stats` (uses `stats.busy`, shape (R, C), and `stats.cycles`).
    """
    import matplotlib.pyplot as plt

    busy = np.asarray(stats.busy)
    fig, ax = plt.subplots(figsize=(5 + busy.shape[1] / 16, 4 + busy.shape[0] / 16))
    image = ax.imshow(busy, cmap="viridis", vmin=0, vmax=max(1, stats.cycles),
                      interpolation="nearest")
    ax.set_title(f"{title} (of {stats.cycles} cycles)")
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    fig.colorbar(image, ax=ax, label="busy cycles")
    fig.tight_layout()
    return fig
