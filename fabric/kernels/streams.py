"""Stream chains: elementwise ops on tiles stacked down a column of the fabric, each tile's
output streamed into the next tile as it is computed. The stream form of the library's
elementwise kernels and math functions: every stage runs the code of its standalone kernel
on its block
(`fabric.kernels.stream_stages`, one definition), wired to take x from a color instead of
memory and to send z on a color instead of leaving it for the host. A consumer computes
on the first blocks that reach it while later ones are still on their way: no stage
waits for the whole of its input, as a kernel started once a move has delivered it does.

Layout and order. Every stage's tile has `rect`'s shape and x's blocks (`Blocks.of(rect, m,
n)`); stage k sits k * P rows below `rect` (P = rect.rows). Block row p of a stream has a
color of its own (a set of P colors per stream; stage k sends on set k % 2, so a tile's
incoming and outgoing streams differ and the sets alternate down the chain) and flows,
row major, from its PE in one tile through the routers between to its PE in the next,
never through a CE on the way. The first tile sends its block rows one after another, top
down (row p starts once row p - 1 has passed it its turn: a wavelet one hop south on one
of two alternating colors), so the rows of a tile reach the next one in a known order.
The tiles after the first hold their block rows bottom up (`pe_row`): block 0 runs through
the whole tile to its bottom row, block P - 1 stops at the top one. Then a link inside a
tile carries only incoming blocks (those for the rows below it) and, later, only outgoing
ones (the z of the rows above it), never both at once: the blocks go down one after
another at a wavelet per cycle, where with the rows top down an outgoing block and the next
incoming one would share a link at half the rate each.

Per PE: the first stage computes on x in memory (the host writes x, as for the standalone
kernel) and sends its z when its turn comes; a later stage's first op takes its block
straight from the color (a fabric operand: one element per cycle, as it arrives), its
other ops then run on memory ("rest"), and it sends its z on ("send"); the last keeps its
z, the output. Every stage keeps its z in memory (`read_stage`). Tasks: "main" (launched on
every PE of the chain at once), "rest", "send", "pass" (the turn).

Cycle model (exact for stages of one op on the tested shapes; within 5 % where a stage has
ops on memory after its first: an affine in the middle of a chain runs a few cycles
longer than modelled), block by block per column q (L_p the elements of block row p there,
H the hop latency, b_{k,p} the cycles of stage k's ops on memory on block p's PE, b_0 the
first stage's slowest, h_{k,p} the rows between block p's PEs in stages k - 1 and k):
    s_{0,p} = b_0 + 2 + sum_{i < p} (L_i + TURN)               the first tile's sends
    d_{k,p} = s_{k-1,p} + L_p + (h_{k,p} + 1) H + b_{k,p} + 2 [b_{k,p} > 0]
    s_{k,p} = d_{k,p} + 2
    T = max_p d_{K-1,p} + 3, the slowest column (`stream_chain_cycles`).
A block is sent on once it is wholly in and its ops are done; so the first stage's blocks
cross its bottom edge once, about P L cycles, and each stage after adds the last block's
way down, its ops and, where it sends on, the block. The same ops as standalone kernels
with a move between consecutive tiles pay the P L crossing, at least, per stage:
tests/kernels/test_stream_chain.py, four stages of 2 x 1 PEs with 16-element blocks, 103
cycles against 61 for two (each stage after the second 21).
Samples (`samples=S`): x holds S samples, the first tile keeping every sample's block one
after another, and they stream through one after another, the next entering while the
one before is still on its way. No host acts between them: every PE re-arms itself once
a sample is done there (sent on, or on the last tile copied into "out" at the sample's
place: its offset registers advanced, "left" counted down, "main" activated again, a few
instructions). A PE takes the next sample once it has sent the last one on (one buffer
per PE), so the rate is set by the slowest of: the first tile's bottom edge, which every
block crosses (sum_p L_p), a first-stage PE's ops and send, a middle PE's receive, ops and
send (2 L + b), the last PE's receive, ops and copy, plus a few cycles of each loop. The
model is the first sample with its copy and then S - 1 periods of that bound; the
simulation takes 1.00x to 1.24x of it on the tested and benchmarked shapes (the first
tile's turns tie a row's send to the row before, and a middle PE's receive to the
previous row's, which the bound leaves out; the slack grows with the rows and the blocks
where middle stages bind: 4 x 4 tiles, blocks of 64, four stages, four samples: 1,614
cycles against 1,300).

Colors: `stream_colors_needed` (P per stream, two sets, up to two turns: 22 for three
stages of 10 rows, more than a fabric's 21, refused with that count).

Example:
    >>> stages = [map_stage("relu"), affine_stage("row")]
    >>> k = build_stream_chain(FabricConfig.small(8, 4), Rect(0, 0, 2, 4), 16, 16,
    ...                        stages)                                   # doctest: +SKIP
    >>> z = run_kernel(k, {"x": x, "1.s": s, "1.t": t}).output          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.isa import Port
from fabric.kernels.base import (
    BlockClass,
    Blocks,
    Kernel,
    check_dtypes,
    pick_colors,
    simd_key,
)
from fabric.kernels.stream_stages import StreamStage
from fabric.program import Program, Rect, Tile


def stream_colors_needed(stages: int, rows: int) -> int:
    """Colors a chain of `stages` tiles of `rows` PE rows routes on: a color per block row
    per stream, two sets alternating down the chain, and the first tile's turns (two
    alternating, one for two rows, none for one)."""
    if stages < 2:
        return 0
    return rows * (1 if stages == 2 else 2) + _turn_colors(rows)


def _turn_colors(rows: int) -> int:
    return min(rows - 1, 2)


def stage_rect(rect: Rect, k: int) -> Rect:
    """The tile of stage k of a chain starting on `rect`."""
    return Rect(rect.row + k * rect.rows, rect.col, rect.rows, rect.cols)


def build_stream_chain(config: FabricConfig, rect: Rect, m: int, n: int,
                       stages: Sequence[StreamStage], dtype: str = "f32",
                       colors: Sequence[int] | None = None, samples: int = 1) -> Kernel:
    """z = stage_K(... stage_1(x)) for x (m, n), stage k on `stage_rect(rect, k)`, every
    tile's output streamed into the next (module docstring).

    dtype: storage of every stage's tensors ("f32", "f16", "bf16", "cb16"; a 16-bit value
        travels in the low half of a wavelet, as the fabric carries 16-bit operands).
    colors: `stream_colors_needed(len(stages), rect.rows)` colors (default: the lowest
        ones): the first P stream colors, the next P (three stages or more), then the
        turns' (two; one for two rows).
    samples: how many samples stream through one after another (module docstring,
        "Samples"); each PE re-arms itself for the next.
    Inputs: "x" (m, n), or (samples, m, n) with several samples, and stage k's own inputs
    as "k.name" (e.g. "1.y", "2.s"), shaped as its standalone kernel takes them, the same
    for every sample. Output: the last stage's z, (m, n) or (samples, m, n), float32
    holding dtype values. Raises ValueError naming the stage or the resource for an empty
    chain, fewer than one sample, tiles that leave the fabric, more colors than the fabric
    has, sizes below the rectangle's, or blocks above a PE's SRAM.
    """
    if not stages:
        raise ValueError("stream chain: no stages given")
    if int(samples) != samples or samples < 1:
        raise ValueError(f"stream chain: samples must be a whole number >= 1, got {samples!r}")
    check_dtypes("stream chain", dtype, "f32")
    K, P = len(stages), rect.rows
    if rect.row + K * P > config.rows or rect.col_end > config.cols:
        raise ValueError(f"stream chain: {K} stages of {P} x {rect.cols} PEs stacked from row "
                         f"{rect.row} need rows {rect.row}..{rect.row + K * P - 1} and "
                         f"columns {rect.col}..{rect.col_end - 1}; {config.name} has "
                         f"{config.rows} x {config.cols}")
    needed = stream_colors_needed(K, P)
    if colors is None and needed > len(config.program_colors):
        raise ValueError(f"stream chain: {K} stages of {P} PE rows route on {needed} colors "
                         f"(a color per block row per stream, two sets, up to two for the "
                         f"first tile's turns); {config.name} has {len(config.program_colors)} "
                         "outside the reserved ones; use a tile of fewer rows")
    blocks = Blocks.of(rect, m, n)
    picked = pick_colors(config, needed, colors)
    sets = [picked[:P], picked[P:2 * P] if K > 2 else []]
    turns = picked[len(picked) - _turn_colors(P):] if K > 1 else []
    prog = Program(config)
    busy = np.zeros((K, rect.rows, rect.cols), np.int64)  # ops on memory per PE
    for k, stage in enumerate(stages):
        incoming = sets[(k - 1) % 2] if k > 0 else None
        outgoing = sets[k % 2] if k < K - 1 else None
        for i, cls in enumerate(blocks.classes()):
            for p in range(cls.p0, cls.p0 + cls.rect.rows):
                r = pe_row(rect, k, p)
                tile = Tile(f"stream{k}_{stage.name}_{i}_{p}")
                wiring = _Wiring(incoming[p] if incoming else None,
                                 outgoing[p] if outgoing else None,
                                 turns[(p - 1) % 2] if outgoing and k == 0 and p > 0 else None,
                                 turns[p % 2] if outgoing and k == 0 and p < P - 1 else None)
                memory_ops = _stage_tile(tile, cls, stage, dtype, config, wiring, samples)
                prog.place(tile, Rect(r, cls.rect.col, 1, cls.rect.cols),
                           params={"left": samples} if samples > 1 else None)
                busy[k, p, cls.pes[1]] = _busy(config, tile, stage, cls, memory_ops, dtype,
                                               k == 0)
        if outgoing is not None:
            _route_stream(prog, rect, k, outgoing)
    if K > 1:
        _route_turns(prog, rect, turns)
    model = stream_chain_cycles(config, blocks, K, busy, samples, dtype)
    return _kernel(config, rect, blocks, stages, prog, model, dtype, samples)


@dataclasses.dataclass(frozen=True)
class _Wiring:
    """A PE's colors: its block comes in on `incoming` (None: from memory), its z goes
    out on `outgoing` (None: stays in memory); on the first tile it sends once its turn
    has come in on `turn_in` (None: the top row, at once) and passes the turn on
    `turn_out` once its block is out (None: the bottom row)."""

    incoming: int | None
    outgoing: int | None
    turn_in: int | None
    turn_out: int | None


def _stage_tile(tile: Tile, cls: BlockClass, stage: StreamStage, dtype: str,
                config: FabricConfig, wiring: _Wiring, samples: int) -> list:
    """Fill `tile` (the PEs of one block class on one row of a stage) with the stage's code
    wired to its colors; returns the ops that run on memory (for the model). With several
    `samples` the PE takes them one after another, re-arming itself: once a sample is done
    there (sent on, or kept), it advances its offsets, counts the sample off ("left") and
    starts "main" again."""
    L = cls.size
    looping = samples > 1
    first_stage, last_stage = wiring.incoming is None, wiring.outgoing is None
    again = []
    if looping:
        again = [*([ins.iadd("xo", "xo", L)] if first_stage else []),
                 *([ins.iadd("oo", "oo", L)] if last_stage else []),
                 ins.isub("left", "left", 1), ins.branch_if_zero("left", "all_done"),
                 ins.activate("main"), ins.label("all_done")]
    send = ins.Activate("send") if not last_stage else None
    if first_stage:  # x in memory, every sample's block one after another
        tile.symbol("x", dtype, L * samples)
        x = ins.Mem("x", length=L, offset_reg="xo") if looping else tile.symbols["x"].dsd()
        memory_ops = stage.code(tile, cls, x, dtype)
        main = list(memory_ops)
        if not last_stage and wiring.turn_in is not None:
            turn = tile.symbol("turn", "u32", 1).dsd()
            main.append(ins.mov(turn, ins.FabIn(wiring.turn_in, 1), is_async=True,
                                on_done=send))
        elif not last_stage:
            main.append(ins.activate("send"))
        else:
            main += [*_kept(tile, L, samples, dtype), *again]
    else:
        ops = stage.code(tile, cls, ins.FabIn(wiring.incoming, L), dtype)
        first, memory_ops = ops[0], ops[1:]
        rest = [*memory_ops, *(_kept(tile, L, samples, dtype) + again if last_stage else [])]
        if rest:
            tile.local_task("rest", [*rest, *([ins.activate("send")] if send else [])])
        main = [dataclasses.replace(first, is_async=True,
                                    on_done=ins.Activate("rest") if rest else send)]
    if not last_stage:
        after = [*([ins.mov(ins.FabOut(wiring.turn_out, 1), 0, is_async=True)]
                   if wiring.turn_out is not None else []), *again]
        tile.local_task("send", [ins.mov(ins.FabOut(wiring.outgoing, L),
                                         tile.symbols["z"].dsd(), dtype=dtype, is_async=True,
                                         on_done=ins.Activate("after") if after else None)])
        if after:
            tile.local_task("after", after)
    tile.local_task("main", main)
    words = sum(s.words for s in tile.symbols.values())
    if words > config.sram_words:
        raise ValueError(f"stream chain: stage {stage.name!r} needs {4 * words} B per PE for "
                         f"blocks of {cls.mb} x {cls.nb} ({dtype}), {samples} sample(s), "
                         f"above the {config.sram_bytes // 1024} KiB of a PE; use a larger "
                         "rectangle")
    return memory_ops


def _kept(tile: Tile, L: int, samples: int, dtype: str) -> list:
    """The last stage's copy of a sample's z into "out" at the sample's offset (several
    samples; one keeps z)."""
    if samples == 1:
        return []
    tile.symbol("out", dtype, L * samples)
    return [ins.mov(ins.Mem("out", length=L, offset_reg="oo"), tile.symbols["z"].dsd(),
                    dtype=dtype)]


def _busy(config, tile: Tile, stage: StreamStage, cls: BlockClass, memory_ops: list,
          dtype: str, first: bool) -> int:
    """Cycles of a PE's ops on memory: all of the first stage's, the others' after their
    first (which runs as the stream comes in), with their read-pair waits."""
    cycles = stage.cycles(config, cls, dtype, not first)
    return cycles + (read_pair_stalls(config, tile, memory_ops) if memory_ops else 0)


def stream_chain_cycles(config: FabricConfig, blocks: Blocks, stages: int,
                        busy: np.ndarray, samples: int = 1, dtype: str = "f32") -> int:
    """The model (module docstring), the slowest column: `busy` (stages, P, Q) the cycles of
    each PE's ops on memory (block order). One sample block by block; several, the first
    with its copy into "out", then the rest at the period's bound."""
    one = _one_sample_cycles(config, blocks, stages, busy)
    if samples == 1:
        return one
    width = config.simd_width("mov", simd_key(dtype))
    keep = -(-blocks.counts() // width)  # (P, Q): each PE's copy of its block into "out"
    return one + int(keep.max()) + 4 + (samples - 1) * _period_bound(blocks, stages, busy,
                                                                      keep)


def _one_sample_cycles(config: FabricConfig, blocks: Blocks, stages: int,
                       busy: np.ndarray) -> int:
    H, P = config.hop_latency, blocks.rect.rows
    if stages == 1:
        return int(busy.max()) + 2
    tile = Rect(0, 0, P, 1)
    worst = 0
    for q, sizes in _columns(blocks):
        sends, start = [], int(busy[0, :, q].max()) + 2  # every row of the first computes
        for size in sizes:  # then they send in turn
            sends.append(start)
            start += size + TURN
        for k in range(1, stages):
            done = []
            for p, size in enumerate(sizes):
                hops = pe_row(tile, k, p) - pe_row(tile, k - 1, p)
                rest = int(busy[k, p, q])
                done.append(sends[p] + size + (hops + 1) * H + rest + 2 * (rest > 0))
            sends = [t + 2 for t in done]  # the send task's start
        worst = max(worst, max(done) + 3)
    return worst


def _period_bound(blocks: Blocks, stages: int, busy: np.ndarray, keep: np.ndarray) -> int:
    """Cycles per sample of a stream of samples, at least (module docstring, "Samples"):
    the slowest of the first tile's bottom edge (every block crosses it), a PE of the
    first stage (its ops, its send), of a middle one (its receive, ops and send) and of
    the last (its receive, ops and copy), each with its loop's few instructions; one
    stage alone: its ops and copy."""
    worst = 0
    for q, sizes in _columns(blocks):
        rows = range(len(sizes))
        if stages == 1:
            worst = max(worst, max(int(busy[0, p, q]) + int(keep[p, q]) + 7 for p in rows))
            continue
        terms = [sum(sizes) + 3, max(int(busy[0, p, q]) + sizes[p] for p in rows) + 10,
                 max(sizes[p] + int(busy[-1, p, q]) + int(keep[p, q]) for p in rows) + 7,
                 *(2 * sizes[p] + int(busy[k, p, q]) + 10 for k in range(1, stages - 1)
                   for p in rows)]
        worst = max(worst, *terms)
    return worst


def _columns(blocks: Blocks):
    """(q, the elements of every block of PE column q, block row by block row)."""
    for q, (_, width) in enumerate(blocks.cols):
        yield q, [size * width for _, size in blocks.rows]


def pe_row(rect: Rect, k: int, p: int) -> int:
    """The fabric row of block row p of stage k: the first tile holds its block rows top
    down, the others bottom up (module docstring)."""
    return rect.row + k * rect.rows + (p if k == 0 else rect.rows - 1 - p)


def _route_stream(prog: Program, rect: Rect, k: int, colors: list[int]) -> None:
    """Routes of the stream out of stage k into stage k + 1: block row p's color from its
    PE row in stage k (out of the CE) through the routers between to its PE row in stage
    k + 1 (into the CE)."""
    for p, color in enumerate(colors):
        src, dst = pe_row(rect, k, p), pe_row(rect, k + 1, p)
        prog.route(Rect(src, rect.col, 1, rect.cols), color, Port.RAMP, Port.SOUTH)
        if dst - src > 1:
            prog.route(Rect(src + 1, rect.col, dst - src - 1, rect.cols), color, Port.NORTH,
                       Port.SOUTH)
        prog.route(Rect(dst, rect.col, 1, rect.cols), color, Port.NORTH, Port.RAMP)


def _route_turns(prog: Program, rect: Rect, turns: list[int]) -> None:
    """The first tile's turns: row p hands the next row its turn on turns[p % 2], one hop
    south."""
    for p in range(rect.rows - 1):
        prog.route(Rect(rect.row + p, rect.col, 1, rect.cols), turns[p % 2], Port.RAMP,
                   Port.SOUTH)
        prog.route(Rect(rect.row + p + 1, rect.col, 1, rect.cols), turns[p % 2], Port.NORTH,
                   Port.RAMP)


TURN = 6  # cycles from a row's last wavelet sent to the next row's first: the turn's hop


def stage_classes(rect: Rect, blocks: Blocks, k: int):
    """(block class, its PEs in stage k) for each class of `blocks`: stage k's tile holds
    the class's blocks on these PEs, in block order (`pe_row`)."""
    for cls in blocks.classes():
        first = pe_row(rect, k, cls.p0 + (cls.rect.rows - 1 if k > 0 else 0))
        yield cls, Rect(first, cls.rect.col, cls.rect.rows, cls.rect.cols)


def in_pe_order(words: np.ndarray, k: int) -> np.ndarray:
    """Per-PE words in block order (P, Q, ...) -> in stage k's PE order (its rows reversed
    after the first stage); its own inverse."""
    return words if k == 0 else words[::-1]


def read_stage(sim, kernel: Kernel, k: int) -> np.ndarray:
    """Stage k's z (m, n), read from its tile (every stage keeps its output in memory; with
    several samples, a stage before the last holds the last sample's)."""
    blocks = kernel.info["blocks"]
    rect = blocks.rect
    words = np.zeros((rect.rows, rect.cols, blocks.mb * blocks.nb), np.float32)
    for cls, pes in stage_classes(rect, blocks, k):
        words[cls.pes][..., :cls.size] = in_pe_order(sim.memcpy_d2h("z", pes), k)
    return blocks.gather(words)


def _kernel(config, rect, blocks, stages, prog, model, dtype, samples) -> Kernel:
    K = len(stages)
    shape = (blocks.m, blocks.n) if samples == 1 else (samples, blocks.m, blocks.n)

    def load(sim, values: Mapping[str, np.ndarray]):
        known = {"x"} | {f"{k}.{key}" for k, s in enumerate(stages) for key in s.inputs}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"stream chain: inputs {unknown} are not inputs of the chain "
                             f"(it takes {sorted(known)})")
        x = np.asarray(values["x"], np.float32)
        if x.shape != shape:
            raise ValueError(f"stream chain: input 'x' has shape {x.shape}, expected {shape}"
                             + (f" ({samples} samples)" if samples > 1 else ""))
        each = [blocks.scatter(sample) for sample in x.reshape(-1, blocks.m, blocks.n)]
        for cls in blocks.classes():  # every sample's block, one after another
            sim.memcpy_h2d("x", np.concatenate([w[cls.pes][..., :cls.size] for w in each],
                                               axis=-1), cls.rect)
        for k, stage in enumerate(stages):
            own = {key: values[f"{k}.{key}"] for key in stage.inputs if f"{k}.{key}" in values}
            classes = list(stage_classes(rect, blocks, k))

            def write(key, words, k=k, stage=stage, classes=classes):
                for cls, pes in classes:
                    size = cls.vector_length(stage.vector)
                    sim.memcpy_h2d(key, in_pe_order(words[cls.pes][..., :size], k), pes)

            stage.load(own, blocks, write, f"stream chain stage {k}")

    def launch(sim):
        sim.launch("main", Rect(rect.row, rect.col, K * rect.rows, rect.cols))

    def read(sim):
        if samples == 1:
            return read_stage(sim, kernel, K - 1)
        words = np.zeros((samples, rect.rows, rect.cols, blocks.mb * blocks.nb), np.float32)
        for cls, pes in stage_classes(rect, blocks, K - 1):
            kept = in_pe_order(sim.memcpy_d2h("out", pes), K - 1)  # (rows, cols, S size)
            for i in range(samples):
                words[i][cls.pes][..., :cls.size] = kept[..., i * cls.size:(i + 1) * cls.size]
        return np.stack([blocks.gather(w) for w in words])

    kernel = Kernel("stream_chain", config, Rect(rect.row, rect.col, K * rect.rows, rect.cols),
                    prog, load, read, launch, model, 0,
                    {"m": blocks.m, "n": blocks.n, "dtype": dtype, "blocks": blocks,
                     "stages": [s.name for s in stages], "samples": samples})
    return kernel


def stream_chain_reference(x: np.ndarray, stages: Sequence[StreamStage],
                           values: Mapping[str, np.ndarray], dtype: str = "f32") -> np.ndarray:
    """The stages' standalone references one after another (numpy); x (m, n), or (samples,
    m, n) for each sample."""
    z = np.asarray(x, np.float32)
    if z.ndim == 3:
        return np.stack([stream_chain_reference(sample, stages, values, dtype) for sample in z])
    for k, stage in enumerate(stages):
        z = stage.reference(z, {key: values[f"{k}.{key}"] for key in stage.inputs}, dtype)
    return z
