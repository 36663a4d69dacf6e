"""What every kernel of the library is: a `Kernel` (a fabric Program plus how to load its
inputs, launch it and read its outputs, with an analytic cycle model) and `run_kernel`; and
what the kernels share below that: the 2D block layout of a tensor on a rectangle (`Blocks`)
and the checks of dtypes and SRAM.

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
from fabric.numerics.formats import HALF_DTYPES
from fabric.program import Program, Rect
from fabric.stats import Stats

DTYPES = ("f32", *HALF_DTYPES)  # storage formats of the kernels' tensors


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
        colors = list(config.program_colors[:needed])
    colors = [int(c) for c in colors]
    if len(colors) < needed or len(set(colors)) != len(colors):
        raise ValueError(f"kernel needs {needed} distinct colors, got {colors}")
    bad = [c for c in colors if not 0 <= c < config.num_colors]
    if bad:
        raise ValueError(f"colors {bad} are not colors of {config.name} "
                         f"(0..{config.num_colors - 1})")
    reserved = [c for c in colors if c in config.reserved_colors]
    if reserved:
        raise ValueError(config.reserved_color_error(reserved[0]))
    if len(colors) < needed:
        raise ValueError(f"kernel needs {needed} distinct colors; {config.name} has "
                         f"{len(config.program_colors)} outside the reserved ones")
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


# ---- block layout -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BlockClass:
    """The PEs of `rect` (absolute; a sub-rectangle of the layout's) that all hold blocks of
    mb x nb; the first of them holds block (p0, q0) of the layout."""

    rect: Rect
    mb: int
    nb: int
    p0: int
    q0: int

    @property
    def size(self) -> int:
        return self.mb * self.nb

    def vector_length(self, vector: str) -> int:
        """Elements a PE of the class holds of an operand laid out as `vector`: "full" the
        block, "row" one value per block column (a row vector's part), "col" one per block
        row."""
        return {"full": self.size, "row": self.nb, "col": self.mb}[vector]

    @property
    def pes(self) -> tuple[slice, slice]:
        """These PEs in an array over the layout's whole rectangle, (rect.rows, rect.cols,
        ...): e.g. `words[cls.pes][..., :cls.size]` are their blocks in `scatter`'s words."""
        return (slice(self.p0, self.p0 + self.rect.rows),
                slice(self.q0, self.q0 + self.rect.cols))


@dataclasses.dataclass(frozen=True)
class Blocks:
    """An (m, n) tensor in 2D blocks on `rect`: row block i = rows[i] = (start, size),
    column block j = cols[j] (`split`: the first m % rect.rows row blocks and the first
    n % rect.cols column blocks are one larger); PE (i, j) holds rows[i] x cols[j], padded
    to (mb, nb) = the largest block sizes.

    Example:
        >>> b = Blocks.of(Rect(0, 0, 2, 3), 5, 7)
        >>> b.mb, b.nb, b.rows, b.cols
        (3, 3, [(0, 3), (3, 2)], [(0, 3), (3, 2), (5, 2)])
        >>> [(c.mb, c.nb, c.rect.rows, c.rect.cols) for c in b.classes()]
        [(3, 3, 1, 1), (3, 2, 1, 2), (2, 3, 1, 1), (2, 2, 1, 2)]
    """

    rect: Rect
    m: int
    n: int
    rows: list
    cols: list

    @classmethod
    def of(cls, rect: Rect, m: int, n: int) -> Blocks:
        """ValueError unless every PE gets at least one row and one column."""
        if m < rect.rows or n < rect.cols:
            raise ValueError(f"a {m} x {n} tensor on {rect.rows} x {rect.cols} PEs leaves PEs "
                             f"without a block (need m >= {rect.rows} and n >= {rect.cols}); "
                             "use a smaller rectangle")
        return cls(rect, m, n, split(m, rect.rows), split(n, rect.cols))

    @property
    def mb(self) -> int:
        return self.rows[0][1]

    @property
    def nb(self) -> int:
        return self.cols[0][1]

    def sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows and columns of every PE's block: two int64 arrays of shape (rect.rows,
        rect.cols)."""
        mb, nb = np.meshgrid(np.array([s for _, s in self.rows], np.int64),
                             np.array([s for _, s in self.cols], np.int64), indexing="ij")
        return mb, nb

    def counts(self) -> np.ndarray:
        """Elements of every PE's block, shape (rect.rows, rect.cols)."""
        mb, nb = self.sizes()
        return mb * nb

    def classes(self) -> list[BlockClass]:
        """The PEs grouped by block shape into (at most four) sub-rectangles, the largest
        blocks first: one tile serves each, so its DSDs have static lengths."""
        return [BlockClass(Rect(self.rect.row + p0, self.rect.col + q0, pr, qc), mb, nb, p0, q0)
                for p0, pr, mb in _runs(self.rows) for q0, qc, nb in _runs(self.cols)]

    def scatter(self, x: np.ndarray, fill: float = 0.0, packed: bool = True) -> np.ndarray:
        """(m, n) -> (rect.rows, rect.cols, mb * nb) fp32 per-PE words: each block row
        major, packed (row stride = its own width) or padded (row stride nb); `fill` in the
        rest."""
        x = np.asarray(x, np.float32)
        if x.shape != (self.m, self.n):
            raise ValueError(f"tensor has shape {x.shape}, expected {(self.m, self.n)}")
        out = np.full((self.rect.rows, self.rect.cols, self.mb * self.nb), fill, np.float32)
        for i, (r0, rs) in enumerate(self.rows):
            for j, (c0, cs) in enumerate(self.cols):
                block = x[r0:r0 + rs, c0:c0 + cs]
                if packed:
                    out[i, j, :rs * cs] = block.reshape(-1)
                else:
                    out[i, j].reshape(self.mb, self.nb)[:rs, :cs] = block
        return out

    def gather(self, words: np.ndarray, packed: bool = True) -> np.ndarray:
        """The inverse of `scatter`: (rect.rows, rect.cols, >= mb * nb) -> (m, n)."""
        out = np.empty((self.m, self.n), np.float32)
        for i, (r0, rs) in enumerate(self.rows):
            for j, (c0, cs) in enumerate(self.cols):
                w = words[i, j]
                block = (w[:rs * cs].reshape(rs, cs) if packed
                         else w[:self.mb * self.nb].reshape(self.mb, self.nb)[:rs, :cs])
                out[r0:r0 + rs, c0:c0 + cs] = block
        return out


def _runs(blocks: list) -> list[tuple[int, int, int]]:
    """(first index, count, size) of the runs of equal sizes in a list of (start, size)."""
    runs: list[tuple[int, int, int]] = []
    for i, (_, size) in enumerate(blocks):
        if runs and runs[-1][2] == size:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, size)
        else:
            runs.append((i, 1, size))
    return runs


# ---- checks shared by the kernels -------------------------------------------------------
def check_sram(config: FabricConfig, what: str, words: int, sizes: str) -> None:
    """ValueError naming the sizes when `words` fp32 words per PE exceed a PE's SRAM."""
    if 4 * words > config.sram_bytes:
        raise ValueError(f"{what}: {sizes} needs {4 * words} B of SRAM per PE, above the "
                         f"{config.sram_bytes // 1024} KiB of a PE; use a larger rectangle")


def check_dtypes(what: str, dtype: str, acc_dtype: str, half_acc: bool = True) -> None:
    """ValueError naming the kernel and the parameter unless `dtype` is "f32" or a 16-bit
    format and `acc_dtype` is "f32" or `dtype` (only "f32" when `half_acc` is False: the
    kernel computes in fp32 only)."""
    if dtype not in DTYPES:
        raise ValueError(f"{what}: dtype must be one of {list(DTYPES)}, got {dtype!r}")
    allowed = ["f32", dtype] if half_acc and dtype != "f32" else ["f32"]
    if acc_dtype not in allowed:
        why = ("" if half_acc or dtype == "f32" else
               f"; {what} computes in fp32 only (its polynomials need fp32 precision), widening "
               "16-bit inputs and rounding the output once")
        raise ValueError(f"{what}: acc_dtype must be one of {allowed} with dtype {dtype!r}, "
                         f"got {acc_dtype!r}{why}")


def simd_key(dtype: str) -> str:
    """The dtype under which `config.simd_width` lists ops of `dtype` (16-bit formats share
    the "f16" widths)."""
    return "f32" if dtype == "f32" else "f16"
