"""SRAM banks (CSL Appendix, "SIMD Mode"): a strided memory operand caps an op's SIMD width,
and, under `bank_conflicts`, two memory sources whose element groups start in banks equal
mod 4 take a second cycle per group. Every result is checked against numpy; a local task of
one synchronous op of g element groups takes 1 (start) + g (+ g conflict cycles) + 1 (RET).
"""

import math

import numpy as np
import pytest

from fabric import FabricConfig, Tile
from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from tests.fabric.programs import ROW, ROW_RECT, run_tile

N = 48  # symbol length (elements)
rng = np.random.default_rng(2024)
A = rng.standard_normal((1, 8, N)).astype(np.float32)
B = rng.standard_normal((1, 8, N)).astype(np.float32)


@pytest.mark.parametrize("stride, width", [
    (0, None), (1, None), (2, None), (3, None), (5, None), (6, None), (10, None),
    (9, 2), (7, 2), (15, 2), (-1, 2), (8, 1), (16, 1), (4, 4), (12, 4)])
def test_stride_width_is_the_appendix_table(stride, width):
    assert ROW.stride_width(stride) == width
    assert ROW.replace(sram_banks=0).stride_width(stride) is None


@pytest.mark.parametrize("stride, n, cycles", [
    (1, 12, 3), (3, 12, 3), (4, 12, 3), (9, 5, 3), (8, 5, 5), (16, 3, 3)])
def test_strided_16bit_mov_loses_simd_width(stride, n, cycles):
    """mov f16 is 4 wide on WSE-2: stride 9 leaves 2 (ceil(5 / 2) = 3 groups), stride 8 or
    16 leaves 1, strides 3 and 4 keep 4 (ceil(12 / 4) = 3)."""
    h = rng.standard_normal((1, 8, N)).astype(np.float16)
    t = Tile("t")
    x, z = t.symbol("x", "f16", N), t.symbol("z", "f16", N)
    t.local_task("main", [ins.mov(z.dsd(length=n), x.dsd(length=n, stride=stride),
                                  dtype="f16")])
    sim, stats = run_tile(t, {"x": h})
    np.testing.assert_array_equal(sim.memcpy_d2h("z")[..., :n], h[..., :n * stride:stride])
    assert cycles == math.ceil(n / min(4, ROW.stride_width(stride) or 4))
    assert stats.cycles == cycles + 2
    flat = ROW.replace(sram_banks=0)  # no banks: the table's width whatever the stride
    _, stats = run_tile(t, {"x": h}, config=flat)
    assert stats.cycles == math.ceil(n / 4) + 2


def test_strided_destination_caps_the_width_too():
    t = Tile("t")
    a, d = t.symbol("a", "f32", N), t.symbol("d", "f32", N)
    t.local_task("main", [ins.mov(d.dsd(length=6, stride=8), a.dsd(length=6))])
    sim, stats = run_tile(t, {"a": A})
    np.testing.assert_array_equal(sim.memcpy_d2h("d")[..., :41:8], A[..., :6])
    assert stats.cycles == 6 + 2  # fmovs 2 wide, stride 8: one per cycle


CONFLICTS = ROW  # the presets apply the read-pair rule
PLAIN = ROW.replace(bank_conflicts=False)


@pytest.mark.parametrize("offset_b, conflict", [(0, True), (1, False), (2, True), (3, False)])
def test_same_bank_read_pair_stalls_the_group(offset_b, conflict):
    """fadds (2 wide) of a[0:n] and b[o:o + n]: a starts at word 0, b at word N + o; the
    reads of a group conflict when both start at words of equal parity (half-words 2w,
    banks equal mod 4)."""
    n = 20
    t = Tile("t", bank_aware=False)  # the declared layout: b right after a
    a, b, d = (t.symbol(s, "f32", N) for s in "abd")
    t.local_task("main", [ins.add(d.dsd(length=n), a.dsd(length=n),
                                  b.dsd(offset=offset_b, length=n))])
    sim, stats = run_tile(t, {"a": A, "b": B}, config=CONFLICTS)
    np.testing.assert_array_equal(sim.memcpy_d2h("d")[..., :n],
                                  A[..., :n] + B[..., offset_b:offset_b + n])
    groups = math.ceil(n / 2)
    assert (CONFLICTS.bank_class(0) == CONFLICTS.bank_class(N + offset_b)) == conflict
    assert stats.cycles == 2 + groups * (2 if conflict else 1)
    np.testing.assert_array_equal(stats.bank_stall, groups if conflict else 0)
    # the stalls are the conflicts' first reads, but for the first group's, in the cycle the
    # task issues the op (busy)
    np.testing.assert_array_equal(stats.stall, groups - 1 if conflict else 0)
    _, plain = run_tile(t, {"a": A, "b": B}, config=PLAIN)
    assert plain.cycles == 2 + groups and plain.bank_stall.sum() == 0


def test_half_words_conflict_by_their_own_bank():
    """16-bit operands: half-word h lies in bank h mod 8; x at half-word 0 and y at 2N
    conflict (both class 0), y from element 2 does not (class 2)."""
    n = 16
    h = [rng.standard_normal((1, 8, N)).astype(np.float16) for _ in range(2)]
    for offset, conflict in ((0, True), (1, False), (2, False), (4, True)):
        t = Tile("t", bank_aware=False)
        x, y, z = (t.symbol(s, "f16", N) for s in "xyz")
        t.local_task("main", [ins.add(z.dsd(length=n), x.dsd(length=n),
                                      y.dsd(offset=offset, length=n), dtype="f16")])
        sim, stats = run_tile(t, {"x": h[0], "y": h[1]}, config=CONFLICTS)
        want = (h[0][..., :n].astype(np.float32)
                + h[1][..., offset:offset + n].astype(np.float32)).astype(np.float16)
        np.testing.assert_array_equal(sim.memcpy_d2h("z")[..., :n], want)
        assert (CONFLICTS.bank_class(0, half=True)
                == CONFLICTS.bank_class(2 * N + offset, half=True)) == conflict
        groups = math.ceil(n / 4)
        assert stats.cycles == 2 + groups * (2 if conflict else 1), offset


def test_one_memory_source_never_conflicts():
    """A scalar second source reads one bank pair: no conflict (fma's scalar, add of an
    immediate)."""
    t = Tile("t")
    a, d = t.symbol("a", "f32", N), t.symbol("d", "f32", N)
    t.local_task("main", [ins.add(d.dsd(length=N), a.dsd(length=N), 1.5),
                          ins.mul(d.dsd(length=N), d.dsd(length=N), 2.0)])
    sim, stats = run_tile(t, {"a": A}, config=CONFLICTS)
    np.testing.assert_array_equal(sim.memcpy_d2h("d"), (A + np.float32(1.5)) * np.float32(2))
    assert stats.bank_stall.sum() == 0


def test_sram_banks_must_be_the_sdk_layout_or_none():
    with pytest.raises(ValueError, match="sram_banks must be 8"):
        FabricConfig.small(2, 2, sram_banks=4)


# ---- the bank-aware layout and the count without a run -------------------------------------
def _ops(t, x, y, z, acc, h, g):
    """Ops with two memory sources of every kind the counts must follow: fp32 and 16-bit,
    offsets, strides, 2D DSDs, an accumulating (stride-0) destination, a broadcast source,
    one symbol read twice, fmachs' fp32 and 16-bit sources, a 16-bit widening."""
    n = 12
    return [
        ins.add(z.dsd(length=n), x.dsd(length=n), y.dsd(length=n)),
        ins.add(z.dsd(length=n), x.dsd(offset=1, length=n), y.dsd(offset=2, length=n)),
        ins.mul(z.dsd(length=n), x.dsd(length=n, stride=3), y.dsd(length=n, stride=2)),
        ins.add(z.dsd(length=n), x.dsd(length=n, row_length=5, row_stride=7),
                y.dsd(length=n, stride=0, row_length=5, row_stride=1)),
        ins.add(acc.dsd(length=n, stride=0, row_length=4, row_stride=1),
                acc.dsd(length=n, stride=0, row_length=4, row_stride=1),
                x.dsd(length=n)),
        ins.mul(z.dsd(length=n), x.dsd(length=n), x.dsd(offset=2, length=n)),
        ins.add(h.dsd(length=n), h.dsd(length=n), g.dsd(offset=1, length=n), dtype="f16"),
        ins.fmachs(z.dsd(length=n), z.dsd(length=n), h.dsd(length=n), 1.0, dtype="f16"),
        ins.to_f32(z.dsd(length=n), h.dsd(length=n), "f16"),
    ]


def _symbols(t):
    x, y, z, acc = (t.symbol(s, "f32", N) for s in ("x", "y", "z", "acc"))
    h, g = t.symbol("h", "f16", N), t.symbol("g", "f16", N)
    return x, y, z, acc, h, g


@pytest.mark.parametrize("bank_aware", [False, True])
@pytest.mark.parametrize("index", range(9))
def test_read_pair_stalls_count_what_the_engine_waits(index, bank_aware):
    """`banks.read_pair_stalls` of one op (no run) equals the engine's `bank_stall`, with
    the declared layout (odd symbol sizes put the symbols at every start parity) and with
    the bank-aware one; the cycles are the rule-free run's plus those stalls."""
    t = Tile("t", bank_aware=bank_aware)
    t.symbol("odd", "f32", 3)  # the others start at odd words in the declared layout
    ops = _ops(t, *_symbols(t))
    t.local_task("main", [ops[index]])
    data = {"x": A, "y": B, "h": A.astype(np.float16), "g": B.astype(np.float16)}
    _, stats = run_tile(t, data, config=CONFLICTS)
    counted = read_pair_stalls(CONFLICTS, t, [ops[index]])
    np.testing.assert_array_equal(stats.bank_stall, counted)
    _, plain = run_tile(t, data, config=PLAIN)
    assert stats.cycles == plain.cycles + counted


def test_bank_aware_layout_moves_a_symbol_read_beside_another():
    """x and y of 48 words each are read together: declared, both start at even words and
    every group waits; the bank-aware layout starts y at word 49 and none does. Same sums."""
    def tile(bank_aware):
        t = Tile("t", bank_aware=bank_aware)
        x, y, z = (t.symbol(s, "f32", N) for s in "xyz")
        t.local_task("main", [ins.add(z.dsd(), x.dsd(), y.dsd())])
        return t

    declared, aware = tile(False), tile(True)
    assert declared.addresses() == {"x": 0, "y": N, "z": 2 * N}
    assert aware.addresses() == {"x": 0, "y": N + 1, "z": 2 * N + 1}
    runs = [run_tile(t, {"x": A, "y": B}, config=CONFLICTS) for t in (declared, aware)]
    for sim, _ in runs:
        np.testing.assert_array_equal(sim.memcpy_d2h("z"), A + B)
    groups = N // 2
    assert runs[0][1].bank_stall.max() == groups and runs[1][1].bank_stall.sum() == 0
    assert runs[0][1].cycles == runs[1][1].cycles + groups


def test_bank_aware_layout_takes_the_least_waiting_parities():
    """Three symbols read pairwise (x, y), (y, z), (x, z) cannot all differ with two
    parities: the layout leaves the shortest pair's op waiting (z's 4 elements against x),
    never a longer one; a read of one symbol at two offsets is left as it is."""
    t = Tile("t")
    x, y, z, w = (t.symbol(s, "f32", N) for s in "xyzw")
    code = [ins.add(w.dsd(), x.dsd(), y.dsd()),
            ins.add(w.dsd(length=8), y.dsd(length=8), z.dsd(length=8)),
            ins.add(w.dsd(length=4), x.dsd(length=4), z.dsd(length=4))]
    t.local_task("main", code)
    at = t.addresses()
    parity = {s: at[s] % 2 for s in "xyz"}
    assert parity["x"] != parity["y"] and parity["y"] != parity["z"]
    assert [read_pair_stalls(CONFLICTS, t, [op]) for op in code] == [0, 0, 2]


def test_bank_aware_layout_keeps_the_declared_one_where_pads_would_not_fit():
    config = FabricConfig.small(1, 2, sram_bytes=4 * (2 * N))
    t = Tile("t")
    x, y = t.symbol("x", "f32", N), t.symbol("y", "f32", N)
    t.local_task("main", [ins.add(x.dsd(), x.dsd(), y.dsd())])
    assert t.addresses() == {"x": 0, "y": N + 1}
    assert t.addresses(config.sram_words) == {"x": 0, "y": N}


def test_engine_checks_the_rule_only_for_programs_that_read_pairs():
    """A program without an op reading two memory sources runs an engine without the
    read-pair check (none of its ops can meet it); one with such an op runs the rule."""
    from fabric import Program, Simulator
    from fabric.engine import has_read_pairs

    def sim_of(code_of):
        t = Tile("t")
        a, d = t.symbol("a", "f32", N), t.symbol("d", "f32", N)
        t.local_task("main", code_of(a, d))
        prog = Program(CONFLICTS)
        prog.place(t, ROW_RECT)
        return Simulator(CONFLICTS, prog)

    single = sim_of(lambda a, d: [ins.mul(d.dsd(), a.dsd(), 2.0)])
    pair = sim_of(lambda a, d: [ins.add(d.dsd(), d.dsd(), a.dsd())])
    assert not has_read_pairs(single.tables) and has_read_pairs(pair.tables)
    assert not single.engine_config.bank_conflicts and pair.engine_config.bank_conflicts
    assert single.config.bank_conflicts  # what the user asked for is kept
