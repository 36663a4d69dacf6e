"""What every kernel of the library is: a `Kernel` (a fabric Program plus how to load its
inputs, launch it and read its outputs, with an analytic cycle model) and `run_kernel`.

A kernel builder has the form `build_x(config, rect, sizes..., dtype="f32", colors=None)`
and returns a `Kernel` placed on `rect` of a fabric of `config` (other PEs stay free, so
several kernels can share a fabric). `colors` lets a caller choose the colors the kernel
routes on (default: the lowest ones it needs).

Example:
    >>> k = build_gemv(config, Rect(0, 0, 4, 4), m=64, n=64)          # doctest: +SKIP
    >>> result = run_kernel(k, {"A": A, "x": x, "b": b})               # doctest: +SKIP
    >>> result.output, result.cycles, k.model_cycles                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from fabric.config import FabricConfig
from fabric.host import Simulator
from fabric.program import Program, Rect
from fabric.stats import Stats


@dataclasses.dataclass
class Kernel:
    """A kernel ready to run.

    name: e.g. "gemv".
    program: the fabric Program (tiles placed inside `rect` only).
    load: load(sim, inputs) writes the named numpy inputs into PE memory (host I/O).
    read: read(sim) -> numpy output(s) assembled from PE memory.
    launch: launch(sim) activates the entry tasks.
    model_cycles: the analytic cycle model's prediction (formula in the builder docstring).
    fmas: useful multiply-adds (for efficiency against the fabric's fma peak); 0 if none.
    info: sizes and layout facts for reports.
    """

    name: str
    config: FabricConfig
    rect: Rect
    program: Program
    load: Callable[[Simulator, Mapping[str, np.ndarray]], None]
    read: Callable[[Simulator], object]
    launch: Callable[[Simulator], None]
    model_cycles: int
    fmas: int = 0
    info: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class KernelResult:
    output: object
    stats: Stats
    cycles: int  # kernel cycles of this run (host I/O apart)

    def efficiency(self, kernel: Kernel) -> float:
        """Useful fmas over the rectangle's peak fma capacity for the same cycles: the fma
        width of the kernel's dtype (`kernel.info["dtype"]`, default "f32"; every 16-bit
        format has the ("fma", "f16") width, 4 per cycle on wse2)."""
        dtype = "f32" if kernel.info.get("dtype", "f32") == "f32" else "f16"
        peak = kernel.config.simd_width("fma", dtype) * kernel.rect.rows * kernel.rect.cols
        return kernel.fmas / (peak * self.cycles) if self.cycles else 0.0


def run_kernel(kernel: Kernel, inputs: Mapping[str, np.ndarray], max_cycles: int = 2_000_000,
               min_table_rows: tuple[int, int] = (0, 0)) -> KernelResult:
    """Load `inputs`, launch, run to quiet, read the output. min_table_rows: as
    `Simulator`'s (kernels of different sizes run with one floor share a compiled engine)."""
    sim = Simulator(kernel.config, kernel.program, min_table_rows=min_table_rows)
    kernel.load(sim, inputs)
    kernel.launch(sim)
    start = int(sim.state.cycle)
    stats = sim.run(max_cycles=max_cycles)
    return KernelResult(kernel.read(sim), stats, stats.cycles - start)


def pick_colors(config: FabricConfig, needed: int, colors: Sequence[int] | None) -> list[int]:
    """`needed` distinct colors: the caller's, checked, or the lowest ones."""
    if colors is None:
        colors = list(range(needed))
    colors = [int(c) for c in colors]
    if len(colors) < needed or len(set(colors)) != len(colors):
        raise ValueError(f"kernel needs {needed} distinct colors, got {colors}")
    bad = [c for c in colors if not 0 <= c < config.num_colors]
    if bad:
        raise ValueError(f"colors {bad} are not colors of {config.name} "
                         f"(0..{config.num_colors - 1})")
    return colors[:needed]


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """Split n items into `parts` contiguous (start, size) blocks, sizes differing by at most
    one (the first n % parts blocks are one larger)."""
    if parts < 1:
        raise ValueError(f"cannot split into {parts} parts")
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append((start, size))
        start += size
    return out


def rect_groups(specs: Mapping):
    """Rectangles of cells with identical specs, so that one Tile serves each: vertical runs
    in every column, merged with identical runs of the next columns. specs: {(row, col):
    spec} (specs compared with ==). Yields (Rect, spec)."""
    runs = []
    for c in sorted({c for _, c in specs}):
        rows = sorted(r for r, cc in specs if cc == c)
        start = 0
        for i in range(1, len(rows) + 1):
            if (i == len(rows) or rows[i] != rows[i - 1] + 1
                    or specs[(rows[i], c)] != specs[(rows[start], c)]):
                runs.append([rows[start], c, i - start, 1, specs[(rows[start], c)]])
                start = i
    merged: list = []
    for run in runs:
        prev = next((m for m in merged if m[0] == run[0] and m[2] == run[2]
                     and m[1] + m[3] == run[1] and m[4] == run[4]), None)
        if prev is not None:
            prev[3] += 1
        else:
            merged.append(run)
    for r, c, h, w, spec in merged:
        yield Rect(r, c, h, w), spec
