"""Static description of the simulated machine: `FabricConfig` and its presets.

Every figure of the machine lives here as a documented field; the engine never hard-codes one.
A config is frozen and hashable, so it can key the cache of compiled engines.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

# SIMD width per cycle (elements) by (builtin, dtype), WSE-2 / WSE-3, from the table of
# builtins with a SIMD mode in the CSL Appendix ("SIMD Mode", sdk.cerebras.net,
# csl/language/appendix): fadds/fsubs/fmovs 2/4, fmach 4/8, fmachs 2/4, 16-bit
# add/sub/mul/mov 4/8, fmaxs 1/4, fmaxh 1/8, fh2s/fs2h 1/4. No 32-bit integer op has a
# SIMD mode there (16-bit add16 4/8 and sll16 1/4 do; the engine has no 16-bit integer
# ops), and fmacs/fmuls are not in the table: width 1. The widths hold for memory operands
# without bank conflicts (same Appendix: 8 banks, two 32-bit reads from distinct banks and
# one write per cycle). f32 <-> i32 conversion is not in the table either (width 1,
# unverified that it has none).
_SIMD_WSE2 = (
    (("fma", "f16"), 4),  # fmach
    (("mul_acc32", "f16"), 2),  # fmachs
    (("add", "f32"), 2),  # fadds
    (("sub", "f32"), 2),  # fsubs
    (("mov", "f32"), 2),  # fmovs
    (("max", "f32"), 1),  # fmaxs: no SIMD mode on WSE-2
    (("add", "f16"), 4),  # faddh
    (("sub", "f16"), 4),  # fsubh
    (("mul", "f16"), 4),  # fmulh
    (("mov", "f16"), 4),  # fmovh
    (("max", "f16"), 1),  # fmaxh: no SIMD mode on WSE-2
    (("fma", "f32"), 1),  # fmacs: not in the SIMD table
    (("mul", "f32"), 1),  # fmuls: not in the SIMD table
    (("cvt", "f32"), 1),  # f32 <-> i32: not in the SIMD table (unverified)
    (("cvt", "f16"), 1),  # fs2h / fh2s: no SIMD mode on WSE-2
    (("add", "i32"), 1),  # 32-bit integer add/sub: no SIMD mode
    (("shift", "i32"), 1),  # 32-bit shifts: no SIMD mode
)
_SIMD_WSE3 = (
    (("fma", "f16"), 8),
    (("mul_acc32", "f16"), 4),
    (("add", "f32"), 4),
    (("sub", "f32"), 4),
    (("mov", "f32"), 4),
    (("max", "f32"), 4),  # fmaxs
    (("add", "f16"), 8),
    (("sub", "f16"), 8),
    (("mul", "f16"), 8),
    (("mov", "f16"), 8),
    (("max", "f16"), 8),  # fmaxh
    (("fma", "f32"), 1),
    (("mul", "f32"), 1),
    (("cvt", "f32"), 1),
    (("cvt", "f16"), 4),  # fs2h / fh2s
    (("add", "i32"), 1),
    (("shift", "i32"), 1),
)


def _ranges(values) -> str:
    """(0, 1, 2, 5) -> '0..2, 5'."""
    out, values = [], list(values)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}..{values[j]}")
        i = j + 1
    return ", ".join(out) or "none"


@dataclasses.dataclass(frozen=True)
class FabricConfig:
    """The machine: grid size, per-PE resources, router figures and clock.

    Args:
        name: preset name, for reports.
        rows, cols: the simulated grid (R x C PEs).
        usable_rows, usable_cols: the program area of the real chip (reports only;
            the simulator runs the whole `rows x cols` grid). The SDK states fabric sizes
            as width x height (columns x rows): `--fabric-dims=757,996` is 757 columns
            and 996 rows.
        sram_bytes: SRAM per PE (48 KiB on WSE-2/3), addressed in 16-bit half-words and
            stored by the engine as 32-bit words.
        num_colors: routable colors (virtual channels) per router.
        queue_depth: wavelets each per-color router buffer and each CE input queue holds
            (2 to 6 on WSE-2; default 4).
        hop_latency: cycles a wavelet spends per router hop (>= 1); must be below
            `queue_depth` so that one color can still stream one wavelet per cycle.
        clock_hz: clock used to convert cycles to seconds (850 MHz as the SDK examples
            convert on WSE-2; 1.1 GHz for WSE-3 is unverified).
        simd: ((builtin, dtype), elements per cycle) pairs.
        num_registers: 32-bit scalar registers per PE.
        num_async_slots: microthreads that run async DSD ops beside the main thread (8:
            WSE-3 has 8, one per input queue 0..7; the WSE-2 examples use queue ids 0..7,
            a microthread per queue id).
        deadlock_window: cycles without any progress while work is pending after which
            `run` stops and reports a deadlock.
        edge_bandwidth: wavelets per cycle one host I/O channel carries.
        host_channel_spacing: rows between the I/O channels on the east and west edges
            ("spaced roughly 16 rows apart": SDK, Host Runtime and Tensor Streaming).
        host_channels_per_edge: I/O channels on each of the east and west edges (60 on
            WSE-2, 62 on WSE-3: same page).
        host_streams: channels one transfer streams on (SdkRuntime "supports up to 16 I/O
            channels": same page; a program compiled with --channels=k uses k).
        host_link_bps: bits per second of the system's link to the host, which bounds every
            transfer (about 1.2 Tb/s, the CS-2's 12 x 100 Gb Ethernet ports; unverified in
            the SDK's documents).
        memcpy_columns: (west, east) columns of PEs the SDK's memcpy adds beside a program
            to carry its host transfers (3 west, 2 east: SDK, Host Runtime and Tensor
            Streaming); they lie outside the grid and add their hops to every transfer's
            latency (`fabric.host_io`). (0, 0): words reach the grid's edge PEs directly.
        generation: "wse2" or "wse3" (selects the SIMD table of `small`).
        task_binding: what a data task is bound to: "color" (WSE-2: its task id is its
            color, ids 0..23 of the 0..30 shared with local tasks) or "queue" (WSE-3: one of
            the input queues 0..7, local tasks 8..30; SDK, "Task IDs" and WSE-3 builtins).
            The engine schedules with data id = color either way (see
            `build.hardware_task_ids`).
        num_input_queues: CE input queues a data task can be bound to (WSE-3: 8,
            microthreads 0..7; the WSE-2 examples use input queues 0..7 too).
        sram_banks: banks of each PE's SRAM (8 on WSE-2/3: successive 16-bit half-words
            in successive banks; CSL Appendix, "SIMD Mode"), or 0 for a flat memory without
            the bank rules. With 8, a memory operand's stride caps the op's SIMD width
            (`stride_width`).
        bank_conflicts: with banks, a DSD op reading two memory sources whose element
            groups start in banks equal mod 4 (`bank_class`) takes a second cycle for the
            group: the two 32-bit reads of a cycle must come from banks differing mod 4
            (same Appendix). On in the presets; tiles are laid out to meet it as little as
            one word of padding per symbol can (`fabric.bank_layout`), and the kernels'
            cycle models count what remains (`fabric.banks.read_pair_stalls`).
            `replace(bank_conflicts=False)` runs a program without the rule.
        async_memory_ops: whether a program may issue a DSD op asynchronously (on a
            microthread, its task going on) when none of its operands is a fabric DSD. The
            SDK refuses it ("Asynchronous DSD operations must have at least one fabric DSD
            operand", release notes; "DSD operations involving fabric operands are allowed
            to happen asynchronously", Data Structure Descriptors): with False, `Program.
            place` refuses such an op, naming the tile, task and instruction, and the
            kernels that would issue one issue it synchronously instead (the GEMMs' and
            the GEMV's fmas, the moves' local copies; each cycle model follows). False in
            the presets (docs/engine.md, "Public facts"); `replace(async_memory_ops=True)`
            runs a program on the machine before the rule (the figures of
            docs/benchmarks.md marked so).
        reserved_colors: colors the host's memcpy infrastructure owns (the SDK's memcpy
            takes 3 of the 24 routable colors; its examples leave 21, 22 and 23 to it). A
            program may not route them, bind a data task to them or name them in a fabric
            DSD; `()` frees them (a fabric without host streaming).

    Example:
        >>> FabricConfig.small(8, 8).num_pes
        64
    """

    name: str
    rows: int
    cols: int
    usable_rows: int
    usable_cols: int
    sram_bytes: int = 48 * 1024
    num_colors: int = 24
    queue_depth: int = 4
    hop_latency: int = 1
    clock_hz: float = 850e6
    simd: tuple = _SIMD_WSE2
    num_registers: int = 16
    num_async_slots: int = 8
    deadlock_window: int = 64
    edge_bandwidth: int = 1
    host_channel_spacing: int = 16
    host_channels_per_edge: int = 60
    host_streams: int = 16
    host_link_bps: float = 1.2e12
    memcpy_columns: tuple = (3, 2)
    generation: str = "wse2"

    # Task ids: ids 0..num_colors-1 are data tasks bound to the color of the same id (as on
    # WSE-2); the ids above are local tasks. WSE-2 has the task ids 0..30 (SDK, "Task IDs"),
    # so 7 local tasks (24..30) here; all task ids fit in one uint32 bitmask (at most 32).
    num_task_ids: int = 31
    reserved_colors: tuple = (21, 22, 23)
    sram_banks: int = 8
    bank_conflicts: bool = True
    async_memory_ops: bool = False
    task_binding: str = "color"
    num_input_queues: int = 8

    def __post_init__(self):
        problems = []
        if self.rows < 1 or self.cols < 1:
            problems.append(f"rows and cols must be >= 1, got rows={self.rows}, "
                            f"cols={self.cols}")
        if not 1 <= self.num_colors <= 31:
            problems.append(f"num_colors must be in 1..31, got {self.num_colors}")
        if self.num_task_ids > 32 or self.num_task_ids <= self.num_colors:
            problems.append(
                f"num_task_ids must be in {self.num_colors + 1}..32, got {self.num_task_ids}"
            )
        if not 1 <= self.queue_depth <= 8:
            problems.append(f"queue_depth must be in 1..8, got {self.queue_depth}")
        if self.hop_latency < 1:
            problems.append(f"hop_latency must be >= 1, got {self.hop_latency}")
        if self.hop_latency >= self.queue_depth:
            problems.append(
                f"hop_latency ({self.hop_latency}) must be below queue_depth "
                f"({self.queue_depth}) to keep one wavelet per cycle per link"
            )
        if self.sram_bytes % 4:
            problems.append(f"sram_bytes must be a multiple of 4, got {self.sram_bytes}")
        if min(self.edge_bandwidth, self.host_channel_spacing, self.host_channels_per_edge,
               self.host_streams) < 1 or not self.host_link_bps > 0:
            problems.append("edge_bandwidth, host_channel_spacing, host_channels_per_edge and "
                            "host_streams must be >= 1 and host_link_bps > 0")
        if len(self.memcpy_columns) != 2 or min(self.memcpy_columns) < 0:
            problems.append("memcpy_columns must be (west, east) column counts >= 0, got "
                            f"{self.memcpy_columns}")
        if self.deadlock_window < 4:
            problems.append(f"deadlock_window must be >= 4, got {self.deadlock_window}")
        if self.task_binding not in ("color", "queue"):
            problems.append(f"task_binding must be 'color' or 'queue', got {self.task_binding!r}")
        if not 1 <= self.num_input_queues < self.num_task_ids:
            problems.append(f"num_input_queues must be in 1..{self.num_task_ids - 1}, got "
                            f"{self.num_input_queues}")
        if self.sram_banks not in (0, 8):
            problems.append(f"sram_banks must be 8 (the SDK's layout) or 0 (a flat memory "
                            f"without bank rules), got {self.sram_banks}")
        bad = [c for c in self.reserved_colors if not 0 <= c < self.num_colors]
        if bad or len(set(self.reserved_colors)) != len(self.reserved_colors):
            problems.append(f"reserved_colors must be distinct colors of 0..{self.num_colors - 1}"
                            f", got {self.reserved_colors}")
        if problems:
            raise ValueError("invalid FabricConfig: " + "; ".join(problems))

    # ---- derived figures -------------------------------------------------------------
    def tile(self, rows: int, cols: int) -> FabricConfig:
        """A `rows` x `cols` fabric with every other figure of this one (PE, router, clock):
        a kernel built on it at the origin has the program and memory layout it has on any
        `rows` x `cols` rectangle of this fabric, so it can be studied (probed, timed) on
        its own tile without the state of the whole wafer."""
        return dataclasses.replace(self, name=f"{self.name} tile {rows}x{cols}", rows=rows,
                                   cols=cols, usable_rows=rows, usable_cols=cols)

    @property
    def num_pes(self) -> int:
        return self.rows * self.cols

    @property
    def sram_words(self) -> int:
        """32-bit words of SRAM per PE."""
        return self.sram_bytes // 4

    @property
    def program_colors(self) -> tuple:
        """The colors a program may use: every color but the reserved ones, ascending."""
        return tuple(c for c in range(self.num_colors) if c not in self.reserved_colors)

    def palette_text(self) -> str:
        """The program colors and the reserved ones, for messages: "21 colors (0..20;
        21..23 reserved for the host's memcpy)"."""
        reserved = sorted(self.reserved_colors)
        return (f"{len(self.program_colors)} colors ({_ranges(self.program_colors)}"
                + (f"; {_ranges(reserved)} reserved for the host's memcpy)" if reserved
                   else ")"))

    def reserved_color_error(self, color: int) -> str | None:
        """Why `color` is not a program's to use, or None when it is."""
        if color in self.reserved_colors:
            return (f"color {color} is reserved for the host's memcpy on {self.name} "
                    f"(reserved_colors={self.reserved_colors}; programs use "
                    f"{_ranges(self.program_colors)})")
        return None

    @property
    def num_local_tasks(self) -> int:
        return self.num_task_ids - self.num_colors

    @property
    def simd_table(self) -> MappingProxyType:
        return MappingProxyType(dict(self.simd))

    def simd_width(self, builtin: str, dtype: str = "f32", strides=()) -> int:
        """Elements per cycle of `builtin` on `dtype` operands held in memory, whose DSDs
        step by `strides` (elements; one per memory operand): the table's width capped by
        `stride_width` of each."""
        try:
            width = self.simd_table[(builtin, dtype)]
        except KeyError:
            known = sorted(f"{b}/{d}" for b, d in self.simd_table)
            raise KeyError(f"no SIMD width for {builtin}/{dtype}; known: {known}") from None
        caps = [self.stride_width(s) for s in strides]
        return min([width] + [c for c in caps if c is not None])

    def stride_width(self, stride: int) -> int | None:
        """The most elements per cycle a memory DSD of `stride` (elements) allows, from
        the bank layout (CSL Appendix, "SIMD Mode"): strides 0 and 1, and strides of 2, 3,
        5 or 6 mod 8, any width; other strides of 1 or 7 mod 8, 2; other strides of 0 mod
        8, 1; strides of 4 mod 8, 4 (the Appendix says "two operations per cycle, or a
        SIMD width of 4" there; the width is taken). None: no cap (also without banks)."""
        if not self.sram_banks or stride in (0, 1):
            return None
        return {0: 1, 1: 2, 7: 2, 4: 4}.get(stride % 8)

    def bank_class(self, element: int, half: bool = False) -> int:
        """Which of the 4 read ports' bank pairs (bank mod 4) holds an element: 32-bit
        element `element` (a word address) starts at half-word 2 * element; a 16-bit one
        (`half`) is half-word `element`. Two reads of one cycle need different classes."""
        return (element if half else 2 * element) % 4

    def cycles_to_seconds(self, cycles: int | float) -> float:
        return float(cycles) / self.clock_hz

    def replace(self, **changes) -> FabricConfig:
        return dataclasses.replace(self, **changes)

    # ---- presets ---------------------------------------------------------------------
    @classmethod
    def wse2(cls, **overrides) -> FabricConfig:
        """The WSE-2 fabric (CS-2): 757 columns wide x 996 rows tall, a program area of
        750 x 994 (width x height), 850 MHz.

        Sources: the SDK's `cslc --fabric-dims=757,996` for a CS-2 (width, height: the
        first figure counts columns, the second rows; SDK tutorial "running on a Cerebras
        system" and every csl-examples hardware script); the clock of the csl-examples
        timing scripts (cycles / 850 MHz).
        """
        base = dict(name="wse2", rows=996, cols=757, usable_rows=994, usable_cols=750)
        return cls(**{**base, **overrides})

    @classmethod
    def wse3(cls, **overrides) -> FabricConfig:
        """The WSE-3 fabric (CS-3): 762 columns wide x 1172 rows tall, about 755 x 1170
        usable (unverified), 1.1 GHz (unverified), doubled 16-bit and fp32 add SIMD widths.

        Sources: the SDK's `cslc --arch=wse3 --fabric-dims=762,1172` ("most CS-3s will
        have a fabric dimension of 762 x 1172", width x height).
        """
        base = dict(
            name="wse3",
            rows=1172,
            cols=762,
            usable_rows=1170,
            usable_cols=755,
            clock_hz=1.1e9,
            simd=_SIMD_WSE3,
            generation="wse3",
            host_channels_per_edge=62,
            task_binding="queue",
        )
        return cls(**{**base, **overrides})

    @classmethod
    def small(cls, rows: int, cols: int, generation: str = "wse2", **overrides) -> FabricConfig:
        """An r x c fabric with the PE figures of `generation`, clocked at 850 MHz."""
        if generation not in ("wse2", "wse3"):
            raise ValueError(f"generation must be 'wse2' or 'wse3', got {generation!r}")
        simd = _SIMD_WSE2 if generation == "wse2" else _SIMD_WSE3
        base = dict(
            name=f"small({rows},{cols})",
            rows=rows,
            cols=cols,
            usable_rows=rows,
            usable_cols=cols,
            simd=simd,
            generation=generation,
            host_channels_per_edge=60 if generation == "wse2" else 62,
            task_binding="color" if generation == "wse2" else "queue",
        )
        return cls(**{**base, **overrides})
