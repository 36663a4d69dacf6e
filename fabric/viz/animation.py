"""Wavelets moving on a small grid: a per-cycle record of link use, played as an animation."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.animation import FuncAnimation, PillowWriter
from matplotlib.ticker import MaxNLocator

from fabric.isa import LINK_PORTS, STEP
from fabric.viz.common import grid_size, new_figure


def record_link_activity(sim, cycles: int) -> np.ndarray:
    """Run `sim` (a loaded, launched `fabric.Simulator`) one cycle at a time for up to
    `cycles` cycles, stopping early once the fabric is quiet.

    Returns frames (T, R, C, 4) int: wavelets each router sent out of its N, S, E, W link in
    each cycle (the per-cycle differences of `link_count`). Stepping cycle by cycle gives the
    same results as one long run (the engine's chunking rule), so the record shows the run
    as it is; it costs one engine call per cycle, which suits small grids and short runs.
    """
    if cycles < 1:
        raise ValueError(f"cycles must be >= 1, got {cycles}")
    frames = []
    before = np.asarray(sim.state.link_count)
    for _ in range(cycles):
        sim.run(max_cycles=1, raise_on_limit=False, progress=False)
        if sim.last_run_cycles == 0:  # quiet: nothing left to move
            break
        after = np.asarray(sim.state.link_count)
        frames.append(after - before)
        before = after
    if not frames:
        return np.zeros((0, *before.shape), dtype=np.int64)
    return np.stack(frames).astype(np.int64)


def wavelet_animation(frames: np.ndarray, path: str | os.PathLike, fps: int = 4,
                      title: str = "wavelets on links"):
    """Write `frames` (T, R, C, 4), as from `record_link_activity`, as an animation: one
    frame per cycle, PEs as grey squares, an arrow on every link that carried a wavelet.

    path: ".gif" (matplotlib's PillowWriter, no external program) or ".html" (a
    self-contained JavaScript player). Returns the path written.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[3] != 4 or frames.shape[0] < 1:
        raise ValueError(f"frames must be (cycles >= 1, rows, cols, 4), got {frames.shape}")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".html"):
        raise ValueError(f"animation path must end in .gif or .html, got {str(path)!r}")
    T, R, C, _ = frames.shape
    fig = new_figure(*grid_size(R, C))
    ax = fig.subplots()
    ax.set_label("animation")
    rr, cc = np.mgrid[0:R, 0:C]
    ax.scatter(cc.ravel(), rr.ravel(), s=max(20, 2400 / max(R, C) ** 2), marker="s",
               color="0.8", zorder=1)
    ax.set_xlim(-0.7, C - 0.3)
    ax.set_ylim(R - 0.3, -0.7)
    ax.set_aspect("equal")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    # one arrow slot per (PE, link): from the PE's centre most of the way to the neighbour
    x0 = np.repeat(cc[..., None], 4, axis=2).astype(float)
    y0 = np.repeat(rr[..., None], 4, axis=2).astype(float)
    dx = np.broadcast_to([0.7 * STEP[p][1] for p in LINK_PORTS], x0.shape)
    dy = np.broadcast_to([0.7 * STEP[p][0] for p in LINK_PORTS], x0.shape)
    arrows = ax.quiver(x0.ravel(), y0.ravel(), dx.ravel(), dy.ravel(), angles="xy",
                       scale_units="xy", scale=1, color="tab:red", width=0.012, minlength=0,
                       zorder=2)
    label = ax.set_title("")

    def draw(t):
        active = frames[t] > 0
        arrows.set_UVC(np.where(active, dx, 0.0).ravel(), np.where(active, dy, 0.0).ravel())
        label.set_text(f"{title}: cycle {t + 1} of {T}, {int(frames[t].sum())} wavelets moved")
        return arrows, label

    # lay the figure out once, with a title in place: re-solving the layout for every frame
    # costs most of the time
    draw(T - 1)
    fig.canvas.draw()
    fig.set_layout_engine("none")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".gif":
        # the writer loop draws each frame once (FuncAnimation.save draws each one twice)
        writer = PillowWriter(fps=fps)
        with writer.saving(fig, str(path), dpi=fig.dpi):
            for t in range(T):
                draw(t)
                writer.grab_frame()
    else:
        anim = FuncAnimation(fig, draw, frames=T, interval=1000 / fps, blit=False)
        path.write_text(anim.to_jshtml(fps=fps))
    return path
