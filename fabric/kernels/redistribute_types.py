"""What planning a redistribution gives (`fabric.kernels.redistribute_plan`): `Move` (one
flow), `Round` (one Program and its figures) and `Redistribution`, the plan, which
reports its flows and cycles and runs its rounds one after another on the simulator
(`Redistribution.run`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from fabric.config import FabricConfig
from fabric.host import Simulator
from fabric.kernels.layout import WordMap, read_words, write_words
from fabric.kernels.redistribute_code import Run
from fabric.kernels.redistribute_ops import DST, SRC
from fabric.kernels.traffic_routes import Flow, cut_bound
from fabric.program import Program
from fabric.stats import Stats
from fabric.window import Window, whole_fabric

Cell = tuple[int, int]


@dataclasses.dataclass
class Move:
    """One flow of a round: the same `n` words from PE `src` to every PE of `dsts`
    (in the plan's window; several = a multicast along the L routes' tree) on `color`."""

    src: Cell
    dsts: tuple
    n: int
    order: str
    color: int
    round: int
    send: list  # [Run] in the source's `s_` symbols
    recv: dict  # dst cell -> [Run] in its `d_` symbols
    wire: str = "f32"  # format of the values on the fabric: "f32" or a 16-bit dtype
    packed: bool = False  # two 16-bit values per wavelet
    # dst cell -> [(dst Run, dst Run)]: copies there, after its receives, of words it
    # brought into other slots holding the same elements (sent once per PE)
    copies: dict = dataclasses.field(default_factory=dict)
    # within its round: flows of one phase share no PE and no link (`redistribute_plan`)
    phase: int = 0

    @property
    def hops(self) -> int:
        return max(abs(self.src[0] - d[0]) + abs(self.src[1] - d[1]) for d in self.dsts)

    @property
    def wavelets(self) -> int:
        """Wavelets the flow sends (each op's values, two per wavelet when packed)."""
        return sum(_op_wavelets(r, self.packed) for r in self.send)

    def flow(self, name: str, order: str | None = None) -> Flow:
        return Flow(name, self.src, tuple(self.dsts), self.wavelets, order or self.order)


def _op_wavelets(run: Run, packed: bool) -> int:
    return -(-run.length // 2) if packed else run.length


@dataclasses.dataclass
class Round:
    """One round: its program (on the plan's window), in the window's coordinates."""

    program: Program
    tasks: list  # chain tasks to launch
    moves: list  # [Move]
    local: dict  # cell -> [(dst Run, src Run)] (round 0 only)
    datapath: dict  # cell -> datapath cycles
    ops: dict  # cell -> {chain: number of ops}
    model_cycles: int
    estimate_cycles: int
    busiest_link: int
    # its program built, by config and floor (`fabric.build.build_once`): a move of a
    # model runs once per call
    built: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclasses.dataclass
class Redistribution:
    """A plan moving `src`'s elements into `dst`'s words; see `fabric.kernels.redistribute_plan`.

    config: the fabric; src, dst: the maps on it.
    rounds: the Programs run one after another (empty when nothing moves), each on
        `window.config` with the PEs of `window.rect` (the whole fabric by default).
    model_cycles: the lower bound (sum over rounds); estimate_cycles: with chain overheads.
    """

    config: FabricConfig
    src: WordMap
    dst: WordMap
    rounds: list
    local_words: int
    remote_words: int
    window: Window | None = None  # None: the whole fabric

    def __post_init__(self):
        if self.window is None:
            self.window = whole_fabric(self.config)

    @property
    def model_cycles(self) -> int:
        return sum(r.model_cycles for r in self.rounds)

    @property
    def estimate_cycles(self) -> int:
        return sum(r.estimate_cycles for r in self.rounds)

    @property
    def end_symbols(self) -> dict[str, tuple[str, str]]:
        """The symbols the rounds' programs hold the moved words in: {program symbol:
        ("src" | "dst", that map's symbol)}. A program that merges the move with the
        kernels at its two ends shares these with theirs (`fabric.merge_programs`)."""
        return {**{SRC + k: ("src", k) for k in self.src.symbols},
                **{DST + k: ("dst", k) for k in self.dst.symbols}}

    @property
    def colors_used(self) -> int:
        """Most colors any round uses."""
        return max((len({m.color for m in r.moves}) for r in self.rounds), default=0)

    @property
    def flows(self) -> list[dict]:
        """Every flow, in the order the chains take them: src, dsts (absolute PEs), words
        (values), wavelets, wire format, packed, hops, color, round, phase, ops per end."""
        outer = self.window_to_fabric
        return [{"src": outer(m.src), "dsts": [outer(d) for d in m.dsts],
                 "words": m.n, "wavelets": m.wavelets,
                 "wire": m.wire, "packed": m.packed, "hops": m.hops,
                 "color": m.color, "round": m.round, "phase": m.phase, "order": m.order,
                 "send_ops": len(m.send),
                 "recv_ops": {outer(d): len(v) for d, v in m.recv.items()}}
                for r in self.rounds for m in r.moves]

    def report(self) -> dict:
        """Figures for reports (JSON-ready)."""
        moves = [m for r in self.rounds for m in r.moves]
        return {"rounds": len(self.rounds), "flows": len(moves),
                "colors_used": self.colors_used, "local_words": self.local_words,
                "remote_words": self.remote_words,
                "remote_wavelets": sum(m.wavelets * len(m.dsts) for m in moves),
                "packed_flows": sum(m.packed for m in moves),
                "model_cycles": self.model_cycles,
                "estimate_cycles": self.estimate_cycles,
                "busiest_link": max((r.busiest_link for r in self.rounds), default=0),
                "cut_bound": (cut_bound([self._outer_flow(m, f"f{i}")
                                         for i, m in enumerate(moves)],
                                        self.config.rows, self.config.cols)["cycles"]
                              if moves else 0)}

    def window_to_fabric(self, cell: Cell) -> Cell:
        """A PE of the window in the fabric's coordinates."""
        return cell[0] + self.window.rect.row, cell[1] + self.window.rect.col

    def fabric_to_window(self, pe: Cell) -> Cell:
        """A PE of the fabric in the window's coordinates."""
        return pe[0] - self.window.rect.row, pe[1] - self.window.rect.col

    def _outer_flow(self, m: Move, name: str) -> Flow:
        f = m.flow(name)
        outer = self.window_to_fabric
        return Flow(name, outer(f.src), tuple(outer(d) for d in f.dsts), f.n, f.order)

    def run(self, src_words: Mapping[str, np.ndarray], max_cycles: int | None = None,
            min_table_rows: tuple[int, int] = (0, 0),
            ) -> tuple[dict[str, np.ndarray], int, list[Stats]]:
        """Move the words. src_words: {src symbol: raw slot values (rows, cols, slots)}: any
        32-bit dtype for a 32-bit symbol, 16-bit patterns (any 16-bit dtype, bits kept) for a
        16-bit one. Returns ({dst symbol: (rows, cols, slots)} uint32 for 32-bit symbols,
        uint16 patterns for 16-bit ones, kernel cycles over all rounds, the Stats of each
        round); dst slots the map does not name are 0. min_table_rows: as `Simulator`'s
        (the rounds then share the caller's compiled engine)."""
        words = _check_words(self.src, src_words)
        zeros = {k: np.zeros(a.shape, np.uint16 if self.dst.is_half(k) else np.uint32)
                 for k, a in self.dst.symbols.items()}
        if not self.rounds:
            if self.src.same_placement(self.dst):  # the words are where they belong
                return ({k: np.where(a >= 0, words[k], zeros[k])
                         for k, a in self.dst.symbols.items()}, 0, [])
            return zeros, 0, []
        out = zeros
        src_map = _prefixed(SRC, _inside(self.window, self.src))
        dst_map = _prefixed(DST, _inside(self.window, self.dst))
        cycles, stats = 0, []
        for rnd in self.rounds:
            sim = Simulator(self.window.config, rnd.program, min_table_rows=min_table_rows,
                            built=rnd.built, **self.window.simulator_args())
            write_words(sim, src_map, {SRC + k: w for k, w in words.items()})
            for task in rnd.tasks:
                sim.launch(task)
            limit = max_cycles or 20 * rnd.estimate_cycles + 10_000
            st = sim.run(max_cycles=limit, progress=False)
            got = read_words(sim, dst_map)
            for k in out:
                # each dst slot is written in exactly one round; the others leave it 0
                out[k] = out[k] | got[DST + k]
            cycles += st.cycles
            stats.append(st)
        for k, a in self.dst.symbols.items():
            out[k] = np.where(a >= 0, out[k], zeros[k])
        return out, cycles, stats


def _prefixed(prefix: str, m: WordMap) -> WordMap:
    """The map with its symbols renamed as in the programs."""
    return WordMap(m.shape, m.rect, {prefix + k: a for k, a in m.symbols.items()},
                   {prefix + k: f for k, f in m.dtypes.items()})


def _inside(window: Window, m: WordMap) -> WordMap:
    """The map in the window's coordinates."""
    return m.at(window.inner(m.rect))


def _check_words(src: WordMap, src_words: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for k, a in src.symbols.items():
        if k not in src_words:
            raise ValueError(f"redistribution: no words for source symbol {k!r} "
                             f"(given: {sorted(src_words)})")
        w = np.ascontiguousarray(np.asarray(src_words[k]))
        bits = 16 if src.is_half(k) else 32
        if w.shape != a.shape or 8 * w.dtype.itemsize != bits:
            raise ValueError(f"redistribution: source symbol {k!r} ({src.dtypes[k]}) words are "
                             f"{w.shape} {w.dtype}; expected {a.shape} of a {bits}-bit type")
        out[k] = w.view(np.uint16 if bits == 16 else np.uint32)
    return out

