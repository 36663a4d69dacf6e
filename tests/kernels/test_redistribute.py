"""Redistribution of tensors between layouts over the simulated mesh.

Reference: numpy indexing. Every destination word must hold, bit for bit, the source
element its map names (dst word = x.flat[e] for element e), and words the map does not
name come back 0. Cycles: at least the plan's lower bound (`model_cycles`: busiest PE's
datapath, busiest link, a lone stream's exact latency), at most 2x it for the block
layouts of the kernels, and at most 1.5x the plan's estimate (which adds the chains'
dispatch per op) for any layout, random ones included.

One config (GRID6 of the fabric tests) and plans kept in the engine's smallest table
bucket where they can be, so the module compiles the engine about twice.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric import FabricConfig, Port, Rect, Simulator
from fabric.kernels import build_broadcast_op, build_elementwise, build_gemm_summa
from fabric.kernels.layout import WordMap, probe_inputs, probe_output, read_words
from fabric.kernels.redistribute import plan_redistribution
from fabric.kernels.redistribute_code import Run, split_runs
from fabric.kernels.redistribute_ops import local_cycles
from fabric.kernels.traffic_routes import XY, link_loads

CONFIG = FabricConfig.small(6, 6)  # GRID6 of tests/fabric/programs.py
BLOCK_FACTOR = 2.0  # cycles / lower bound, block layouts of the kernels
ESTIMATE_FACTOR = 1.5  # cycles / estimate, any layout


def _tensor(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def move(src: WordMap, dst: WordMap, x: np.ndarray, block: bool = True, **kw):
    """Plan and run; check every dst word against numpy indexing and the cycles against
    the model. Returns (plan, dst words, cycles)."""
    plan = plan_redistribution(CONFIG, src, dst, **kw)
    words, cycles, stats = plan.run(src.to_words(x))
    flat = np.ascontiguousarray(x).reshape(-1).view(np.uint32)
    for k, a in dst.symbols.items():
        want = np.where(a >= 0, flat[np.maximum(a, 0)], np.uint32(0))
        np.testing.assert_array_equal(words[k], want, err_msg=f"dst symbol {k!r}")
    assert cycles == sum(s.cycles for s in stats) and len(stats) == len(plan.rounds)
    assert cycles >= plan.model_cycles, plan.report()
    assert cycles <= ESTIMATE_FACTOR * plan.estimate_cycles, (cycles, plan.report())
    if block:
        assert cycles <= BLOCK_FACTOR * plan.model_cycles, (cycles, plan.report())
    for st in stats:  # every word sent was consumed, none left in flight
        assert st.in_flight == 0 and st.injected + st.forked == st.consumed
    return plan, words, cycles


# ---- runs of DSDs (no engine) --------------------------------------------------------------
def test_split_runs_finds_1d_and_2d_runs():
    one = [(("a", w),) for w in (4, 6, 8, 10, 3)]
    assert split_runs(one) == [(Run("a", 4, 4, 2),), (Run("a", 3, 1, 1),)]
    # a 3 x 4 block read column by column: one 2D DSD
    cols = [(("a", r * 4 + c),) for c in range(4) for r in range(3)]
    (run,), = split_runs(cols)
    assert run == Run("a", 0, 12, 4, 3, 1)
    assert run.addresses() == [a for ((_, a),) in cols]
    # two sides cut together; a symbol change ends a run
    joint = [(("a", w), ("b", 2 * w)) for w in range(5)] + [(("c", 0), ("b", 10))]
    assert [len(r) for r in split_runs(joint)] == [2, 2]
    assert [r[0].length for r in split_runs(joint)] == [5, 1]


def test_split_runs_reads_a_repeated_word_with_stride_0():
    """A broadcast's source repeats words: each word's copies in one run of stride 0, the
    rows of copies one 2D DSD; a row repeated whole steps by 0 from row to row."""
    copies = [(("a", w),) for w in (5, 5, 5, 7, 7, 7, 9, 9, 9)]
    (run,), = split_runs(copies)
    assert run == Run("a", 5, 9, 0, 3, 2) and run.addresses() == [w for ((_, w),) in copies]
    rows = [(("a", w),) for _ in range(3) for w in (0, 1, 2, 3)]
    (run,), = split_runs(rows)
    assert run == Run("a", 0, 12, 1, 4, 0) and run.addresses() == [w for ((_, w),) in rows]
    # joint: the source repeats, the destination steps
    joint = [(("a", 4), ("b", w)) for w in range(6)]
    assert split_runs(joint) == [(Run("a", 4, 6, 0), Run("b", 0, 6, 1))]


def test_expanded_vector_moves_with_one_op_at_each_end():
    """x (8,) expanded to (8, 16) into another PE's (8, 16) operand: the sender reads
    each word 16 times with one stride-0 DSD, not one op per copy."""
    src = WordMap((8,), Rect(0, 0, 1, 1), {"x": np.arange(8).reshape(1, 1, 8)})
    dmap = probe_output(build_elementwise(CONFIG, Rect(0, 2, 1, 1), 8, 16))
    dst = dmap.compose(np.repeat(np.arange(8)[:, None], 16, 1), (8,))
    x = _tensor(8, 5)
    plan, words, cycles = move(src, dst, x, block=False)
    np.testing.assert_array_equal(dmap.from_words(words), np.repeat(x[:, None], 16, 1))
    assert [(f["send_ops"], set(f["recv_ops"].values())) for f in plan.flows] == [(1, {1})]
    assert cycles < 2 * 128  # 128 words streamed, not a chain of 128 ops


# ---- kernel layouts ------------------------------------------------------------------------
def test_elementwise_tile_to_gemm_a_on_another_tile():
    z = probe_output(build_elementwise(CONFIG, Rect(0, 0, 2, 2), 6, 5))
    gemm = build_gemm_summa(CONFIG, Rect(3, 2, 2, 3), 6, 5, 4)
    a = probe_inputs(gemm, {"A": (6, 5), "B": (5, 4)})["A"]
    x = _tensor((6, 5), 0)
    plan, words, _ = move(z, a, x)
    assert plan.local_words == 0 and plan.remote_words == 30 and len(plan.rounds) == 1
    # the words are those gemm's own load writes
    sim = Simulator(CONFIG, gemm.program)
    gemm.load(sim, {"A": x, "B": np.zeros((5, 4), np.float32)})
    loaded = read_words(sim, a)["abuf"]
    held = a.symbols["abuf"] >= 0
    np.testing.assert_array_equal(words["abuf"][held], loaded[held])


def test_transpose_within_one_tile():
    rect = Rect(1, 1, 4, 4)
    xmap = probe_output(build_elementwise(CONFIG, rect, 12, 12))
    ymap = probe_output(build_elementwise(CONFIG, rect, 12, 12))  # y = x.T, same blocks
    dst = ymap.compose(np.arange(144).reshape(12, 12).T, (12, 12))
    x = _tensor((12, 12), 1)
    plan, words, _ = move(xmap, dst, x)
    np.testing.assert_array_equal(ymap.from_words(words), x.T)
    assert plan.local_words == 36  # the 4 diagonal blocks stay
    # each block moves as one 2D DSD at each end
    assert all(f["send_ops"] == 1 and set(f["recv_ops"].values()) == {1} for f in plan.flows)


def test_vector_duplicated_down_columns_is_multicast():
    k = build_broadcast_op(CONFIG, Rect(0, 0, 3, 4), 6, 8, "add", vector="row")
    vmap = probe_inputs(k, {"x": (6, 8), "v": (8,)})["v"]
    src = WordMap((8,), Rect(5, 0, 1, 4), {"o": np.arange(8).reshape(1, 4, 2)})
    plan, _, cycles = move(src, vmap, _tensor(8, 2))
    assert len(plan.flows) == 4 and all(len(f["dsts"]) == 3 for f in plan.flows)
    assert cycles == plan.model_cycles  # lone multicast streams: the bound is exact


def test_overlapping_rectangles():
    src = probe_output(build_elementwise(CONFIG, Rect(0, 0, 2, 3), 8, 9))
    dst = probe_output(build_elementwise(CONFIG, Rect(0, 1, 2, 2), 8, 9))
    plan, _, _ = move(src, dst, _tensor((8, 9), 3))
    assert plan.local_words > 0 and plan.remote_words > 0


def test_route_orders_spread_the_load():
    """Plan only: between two diagonal tiles, all-"xy" routes funnel every word down the
    destination's columns (48 words on the busiest link); mixing "xy" and "yx" also uses
    the source's columns. The cut bound is 144 words over 6 links = 24."""
    a = probe_output(build_elementwise(CONFIG, Rect(0, 0, 3, 3), 12, 12))
    b = probe_output(build_elementwise(CONFIG, Rect(3, 3, 3, 3), 12, 12))
    plan = plan_redistribution(CONFIG, a, b)
    moves = [m for r in plan.rounds for m in r.moves]
    all_xy = link_loads([m.flow("f", XY) for m in moves])
    assert max(v for k, v in all_xy.items() if k[2] != Port.RAMP) == 48
    report = plan.report()
    assert report["busiest_link"] == 32 and report["cut_bound"] == 24
    assert report["model_cycles"] == 33  # the busiest link + 1


# ---- many flows into one PE: phases and two receive chains ----------------------------------
def _column_gather(pick):
    """A 16 x 32 elementwise tile on 4 x 4 PEs into a 4 x 1 column (a reduction's layout):
    PE r of the column holds the columns `pick(r)` of every row."""
    src = probe_output(build_elementwise(CONFIG, Rect(0, 0, 4, 4), 16, 32))
    ids = np.arange(16 * 32).reshape(16, 32)
    held = np.stack([ids[:, pick(r)].reshape(-1) for r in range(4)]).reshape(4, 1, -1)
    return src, WordMap((16, 32), Rect(0, 5, 4, 1), {"c": held})


def _phases_hold(plan):
    """The flows come in (round, phase) order, and those of one phase share no PE and no
    link."""
    flows = plan.flows
    assert [(f["round"], f["phase"]) for f in flows] == sorted(
        (f["round"], f["phase"]) for f in flows)
    phases: dict = {}
    for r in plan.rounds:
        for m in r.moves:
            phases.setdefault((m.round, m.phase), []).append(m)
    for group in phases.values():
        pes = [pe for m in group for pe in (m.src, *m.dsts)]
        assert len(pes) == len(set(pes))
        links = [k for m in group for k in link_loads([m.flow("f")]) if k[2] != Port.RAMP]
        assert len(links) == len(set(links))


def test_a_column_gathering_blocks_takes_its_flows_by_phases_on_two_chains():
    """Each PE of the column receives a block column of 4 senders, whose routes meet on
    the links into the column: the flows go by phases (no PE, no link twice in one), and
    each receiver takes its flows on two chains, so it takes the next while the sender
    of the one before is still busy: within 1.15x of the plan's bound (1.34x when every
    receiver took its flows one at a time in the order of their offsets)."""
    src, dst = _column_gather(lambda r: slice(8 * r, 8 * r + 8))
    plan, _, cycles = move(src, dst, _tensor((16, 32), 6))
    _phases_hold(plan)
    assert max(f["phase"] for f in plan.flows) > 0
    receiving = [chains for cell, chains in plan.rounds[0].ops.items() if "recv" in chains]
    assert len(receiving) == 4 and all({"recv", "recv2"} <= set(c) for c in receiving)
    assert cycles <= 1.15 * plan.model_cycles, (cycles, plan.report())


def test_a_column_gathering_strided_columns_from_every_pe():
    """Every sender serves every receiver (PE r takes the columns r, r + 4, ...): 64
    flows of 8 words, in 18 phases; within 1.7x of the bound (2.0x one at a time)."""
    src, dst = _column_gather(lambda r: slice(r, None, 4))
    plan, _, cycles = move(src, dst, _tensor((16, 32), 7), block=False)
    _phases_hold(plan)
    assert len(plan.flows) == 64
    assert cycles <= 1.7 * plan.model_cycles, (cycles, plan.report())


# ---- random layouts, rounds ------------------------------------------------------------------
def random_map(gen, size, rect, words, copies=1, symbols=("a",)):
    """Each element in `copies` random words of `symbols` on `rect`."""
    slots = [(k, r, c, w) for k in symbols for r in range(rect.rows) for c in range(rect.cols)
             for w in range(words)]
    arrays = {k: np.full((rect.rows, rect.cols, words), -1, np.int64) for k in symbols}
    for i, j in enumerate(gen.permutation(len(slots))[:size * copies]):
        k, r, c, w = slots[j]
        arrays[k][r, c, w] = i % size
    return WordMap((size,), rect, arrays)


@pytest.mark.parametrize("seed, copies, colors", [(0, 1, None), (1, 2, [5, 9])])
def test_random_layouts(seed, copies, colors):
    """Every element in 2 random source words (two symbols) and `copies` destination
    words; two colors force several rounds."""
    gen = np.random.default_rng(seed)
    src = random_map(gen, 12, Rect(0, 0, 2, 2), 5, copies=2, symbols=("a", "b"))
    dst = random_map(gen, 12, Rect(1, 1, 2, 3), 4, copies=copies)
    plan, _, _ = move(src, dst, _tensor(12, seed), block=False, colors=colors)
    if colors is not None:
        assert len(plan.rounds) > 1 and plan.colors_used <= 2
        assert {f["color"] for f in plan.flows} <= set(colors)


def test_rounds_when_colors_run_out():
    rect = Rect(0, 0, 4, 4)
    xmap = probe_output(build_elementwise(CONFIG, rect, 8, 8))
    dst = xmap.compose(np.arange(64).reshape(8, 8).T, (8, 8))
    plan, _, cycles = move(xmap, dst, _tensor((8, 8), 4), colors=[0])
    assert plan.colors_used == 1 and len(plan.rounds) >= 3
    one_round = plan_redistribution(CONFIG, xmap, dst)
    assert len(one_round.rounds) == 1 and one_round.model_cycles < plan.model_cycles


# ---- nothing to move, errors -----------------------------------------------------------------
def test_same_map_moves_nothing():
    xmap = probe_output(build_elementwise(CONFIG, Rect(0, 0, 2, 2), 4, 6))
    reshaped = WordMap((24,), xmap.rect, xmap.symbols)  # a view: same words
    x = _tensor((4, 6), 5)
    for dst in (xmap, reshaped):
        plan = plan_redistribution(CONFIG, xmap, dst)
        words, cycles, stats = plan.run(xmap.to_words(x))
        assert plan.rounds == [] and cycles == 0 and stats == [] and plan.model_cycles == 0
        np.testing.assert_array_equal(dst.from_words(words).reshape(4, 6), x)
    empty = WordMap((4, 6), Rect(3, 3, 1, 1), {"e": np.full((1, 1, 2), -1, np.int64)})
    plan = plan_redistribution(CONFIG, xmap, empty)  # dst holds no element: nothing moves
    words, cycles, _ = plan.run(xmap.to_words(x))
    assert plan.rounds == [] and cycles == 0 and words["e"].tolist() == [[[0, 0]]]


def test_errors():
    rect = Rect(0, 0, 1, 2)
    src = WordMap((4,), rect, {"a": np.array([[[0, 1], [3, -1]]])})
    dst = WordMap((4,), Rect(2, 2, 1, 1), {"b": np.array([[[3, 2, 1]]])})
    with pytest.raises(ValueError, match=r"word 1 of symbol 'b' on PE \(2, 2\) holds "
                                         r"element 2 .*no src word holds"):
        plan_redistribution(CONFIG, src, dst)
    with pytest.raises(ValueError, match="src has 4 elements"):
        plan_redistribution(CONFIG, src, WordMap((5,), rect, {"a": np.zeros((1, 2, 1))
                                                              .astype(np.int64)}))
    with pytest.raises(ValueError, match="outside the 6x6 fabric"):
        plan_redistribution(CONFIG, src, WordMap((4,), Rect(5, 5, 2, 1),
                                                 {"a": np.zeros((2, 1, 4), np.int64)}))
    with pytest.raises(ValueError, match=r"colors \[30\] are not colors"):
        plan_redistribution(CONFIG, src, src, colors=[30])
    big = np.full((1, 2, CONFIG.sram_words), -1, np.int64)
    big[0, 0, :4] = np.arange(4)  # 48 KiB of dst words on a PE that also holds src words
    with pytest.raises(ValueError, match="above its 49152 B of SRAM"):
        plan_redistribution(CONFIG, WordMap((4,), rect, {"a": np.array([[[0, 1], [2, 3]]])}),
                            WordMap((4,), rect, {"z": big}))


def test_local_run_cycles_take_the_stride_cap():
    """A local run read at stride 8 moves one word per cycle (`FabricConfig.stride_width`),
    a contiguous one two (fmovs on WSE-2); without banks both move two."""
    config = FabricConfig.small(2, 2)
    column, row = Run("x", 0, 8, stride=8), Run("y", 0, 8)
    assert local_cycles(config, row, "f32", column, "f32") == 8
    assert local_cycles(config, row, "f32", row, "f32") == 4
    assert local_cycles(config.replace(sram_banks=0), row, "f32", column, "f32") == 4
