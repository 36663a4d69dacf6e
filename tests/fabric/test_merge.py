"""Programs merged into one (`fabric.merge_programs`): each part runs in the merged program
as it runs alone, sharing PEs and the fabric's colors by the rules of its docstring."""

import numpy as np
import pytest

from fabric import (
    DeadlockError,
    FabricConfig,
    MergeError,
    Part,
    PartMap,
    Port,
    Program,
    Rect,
    Simulator,
    Tile,
    merge_programs,
    restore_part,
    stuck_parts,
)
from fabric import instructions as ins
from fabric.kernels import build_elementwise, build_gemv, run_kernel

CONFIG = FabricConfig.small(2, 4)


def _gemv(rect, seed, colors=None):
    gen = np.random.default_rng(seed)
    m, n = 2 * rect.rows, 3 * rect.cols
    inputs = {"A": gen.standard_normal((m, n), np.float32),
              "x": gen.standard_normal(n, np.float32),
              "b": gen.standard_normal(m, np.float32)}
    return build_gemv(CONFIG, rect, m, n, colors=colors), inputs


def _run_merged(parts, kernels, inputs):
    """Load and launch every part's kernel in the merged program, run once, read each."""
    merged = merge_programs(CONFIG, parts)
    sim = Simulator(CONFIG, merged.program)
    for part, kernel, data in zip(parts, kernels, inputs):
        kernel.load(merged.view(sim, part.name), data)
    for part, kernel in zip(parts, kernels):
        kernel.launch(merged.view(sim, part.name))
    stats = sim.run()
    outs = [kernel.read(merged.view(sim, part.name)) for part, kernel in zip(parts, kernels)]
    return outs, stats.cycles


def test_parts_on_disjoint_tiles_run_as_they_run_alone():
    """Two GEMVs on the two halves of the fabric, the second with its colors renamed (its
    routes, fabric DSDs and data tasks move to colors 8 up): in one run, each gives its own
    outputs bit for bit in the cycles it takes alone."""
    (ka, xa), (kb, xb) = _gemv(Rect(0, 0, 2, 2), 0), _gemv(Rect(0, 2, 2, 2), 1)
    shift = {c: c + 8 for c in {r.color for r in kb.program.routes}}
    alone = [run_kernel(ka, xa), run_kernel(kb, xb)]
    parts = [Part("a", ka.program), Part("b", kb.program, colors=shift)]
    outs, cycles = _run_merged(parts, [ka, kb], [xa, xb])
    for got, ref in zip(outs, alone):
        np.testing.assert_array_equal(got, ref.output)
    assert cycles == max(r.cycles for r in alone)
    on_b = {r.color for r in merge_programs(CONFIG, parts).program.routes if r.rect.col >= 2}
    assert on_b == set(shift.values())


def test_parts_on_one_tile_share_its_pes():
    """A GEMV and an elementwise add on the same 2 x 2 tile: each PE runs both kernels'
    tasks on one CE, so the run takes longer than either alone and at most as long as both
    one after the other; every output is still bit for bit its own kernel's."""
    rect = Rect(0, 0, 2, 2)
    ka, xa = _gemv(rect, 2)
    kb = build_elementwise(CONFIG, rect, 4, 6, op="add")
    gen = np.random.default_rng(3)
    xb = {"x": gen.standard_normal((4, 6), np.float32),
          "y": gen.standard_normal((4, 6), np.float32)}
    alone = [run_kernel(ka, xa), run_kernel(kb, xb)]
    outs, cycles = _run_merged([Part("a", ka.program), Part("b", kb.program)],
                               [ka, kb], [xa, xb])
    for got, ref in zip(outs, alone):
        np.testing.assert_array_equal(got, ref.output)
    assert max(r.cycles for r in alone) < cycles <= sum(r.cycles for r in alone)


def test_one_color_two_parts_on_one_pe_is_refused():
    rect = Rect(0, 0, 2, 2)
    (ka, _), (kb, _) = _gemv(rect, 4), _gemv(rect, 5)
    color = min(r.color for r in kb.program.routes)
    with pytest.raises(MergeError, match=rf"parts 'a' and 'b' both route color {color} "
                                         r"through PE \(0, 0\)"):
        merge_programs(CONFIG, [Part("a", ka.program), Part("b", kb.program)])


def test_a_shared_symbol_is_one_memory():
    """Part "move" streams x from PE (0, 0) into its raw words "dst.y" on PE (0, 1); part
    "double" computes z = y + y there on its f32 y. The move's "dst.y" is a view of
    "double.y": it writes the memory the second part reads, declared as its owner does.
    The move's corner and color are placed on the merged fabric by the part."""
    n = 6
    mover = Program(FabricConfig.small(1, 2))
    send = Tile("send")
    x = send.symbol("x", "f32", n)
    send.local_task("main", [ins.mov(ins.FabOut(0, n), x.dsd())])
    recv = Tile("recv")
    y = recv.symbol("dst.y", "u32", n)  # raw words, as a move's programs hold them
    recv.local_task("main", [ins.mov(y.dsd(), ins.FabIn(0, n))])
    mover.place(send, Rect(0, 0, 1, 1))
    mover.place(recv, Rect(0, 1, 1, 1))
    mover.route(Rect(0, 0, 1, 1), 0, Port.RAMP, Port.EAST)
    mover.route(Rect(0, 1, 1, 1), 0, Port.WEST, Port.RAMP)
    doubler = Program(FabricConfig.small(1, 1))
    double = Tile("double")
    yy, z = double.symbol("y", "f32", n), double.symbol("z", "f32", n)
    double.local_task("main", [ins.add(z.dsd(), yy.dsd(), yy.dsd())])
    doubler.place(double, Rect(0, 0, 1, 1))
    parts = [Part("move", mover, corner=(1, 1), colors={0: 7}, shared={"dst.y": "double.y"}),
             Part("double", doubler, corner=(1, 2))]
    merged = merge_programs(CONFIG, parts)
    assert {r.color for r in merged.program.routes} == {7}
    assert merged.program.tile_at(1, 2).tile.symbols["double.y"].dtype == "f32"  # the owner's
    sim = Simulator(CONFIG, merged.program)
    data = np.arange(1, n + 1, dtype=np.float32) * 0.5
    move = merged.view(sim, "move")
    move.memcpy_h2d("x", data, Rect(0, 0, 1, 1))
    move.launch("main")
    sim.run()
    merged.view(sim, "double").launch("main")
    sim.run()
    np.testing.assert_array_equal(merged.view(sim, "double").memcpy_d2h("z")[0, 0], 2 * data)
    np.testing.assert_array_equal(sim.memcpy_d2h("double.y", Rect(1, 2, 1, 1))[0, 0], data)


def test_views_of_a_symbol_in_another_word_format_are_refused():
    """A view must address the owner's words in their format: 16-bit elements are not
    32-bit words. Views larger than the owner keep the owner's declaration."""
    owner, view = Program(FabricConfig.small(1, 1)), Program(FabricConfig.small(1, 1))
    to, tv = Tile("to"), Tile("tv")
    to.symbol("y", "f32", 4)
    tv.symbol("v", "f16", 8)
    owner.place(to, Rect(0, 0, 1, 1))
    view.place(tv, Rect(0, 0, 1, 1))
    with pytest.raises(MergeError, match=r"shared symbol 'o.y' is f32\[4\] in one part and "
                                         r"f16\[8\] in part 'v' at PE \(0, 0\): 16-bit and "
                                         r"32-bit words cannot be one memory"):
        merge_programs(CONFIG, [Part("o", owner), Part("v", view, shared={"v": "o.y"})])
    tv.symbols.clear()
    tv.symbol("v", "u32", 6)  # a raw view sized for a larger PE: the owner's 4 words kept
    merged = merge_programs(CONFIG, [Part("v", view, shared={"v": "o.y"}), Part("o", owner)])
    kept = merged.program.tile_at(0, 0).tile.symbols["o.y"]
    assert (kept.dtype, kept.shape) == ("f32", (4,))


def _two_gemvs_loaded():
    """GEMV parts "a" and "b" (colors renamed 8 up) on the two halves of the fabric, merged
    and loaded: ((a's kernel, its inputs), b's kernel, the merged program, its simulator)."""
    (ka, xa), (kb, xb) = _gemv(Rect(0, 0, 2, 2), 0), _gemv(Rect(0, 2, 2, 2), 1)
    shift = {c: c + 8 for c in {r.color for r in kb.program.routes}}
    parts = [Part("a", ka.program), Part("b", kb.program, colors=shift)]
    merged = merge_programs(CONFIG, parts)
    sim = Simulator(CONFIG, merged.program)
    for part, kernel, data in zip(parts, [ka, kb], [xa, xb]):
        kernel.load(merged.view(sim, part.name), data)
    return (ka, xa), kb, merged, sim


def test_a_stuck_run_is_reported_by_part():
    """Two GEMVs, the second launched on its tile's bottom row only: the first finishes,
    the second's launched PEs wait for the x its top row never sends, and `stuck_parts`
    names the second part alone, at those PEs."""
    (ka, xa), kb, merged, sim = _two_gemvs_loaded()
    ka.launch(merged.view(sim, "a"))
    merged.view(sim, "b").launch("main", Rect(1, 2, 1, 2))  # its tile's bottom row
    with pytest.raises(DeadlockError):
        sim.run(max_cycles=20_000)
    stuck = stuck_parts(merged, sim)
    assert list(stuck) == ["b"]
    assert stuck["b"] == [(1, 2), (1, 3)]  # the PEs launched, waiting for x


def test_a_part_restored_runs_again_as_loaded():
    """Two GEMVs; the first runs, then is restored with its output kept: its registers
    and other symbols are as loaded, its output and the second part's memory untouched;
    run again, it gives the same output in the same cycles."""
    (ka, xa), kb, merged, sim = _two_gemvs_loaded()
    loaded = sim.host_sram().copy()
    for part, kernel in (("a", ka), ("b", kb)):
        kernel.launch(merged.view(sim, part))
    sim.run()
    out = ka.read(merged.view(sim, "a"))
    ran = sim.host_sram().copy()
    y = sim.info.symbols[0]["a.y"]
    ys = slice(y.address, y.address + merged.program.placements[0].tile.symbols["a.y"].words)
    assert not np.array_equal(ran[:, :2, ys], loaded[:, :2, ys])  # the output was written
    restore_part(sim, merged, "a", loaded, keep={"a.y"})
    now = sim.host_sram()
    np.testing.assert_array_equal(now[:, :2, ys], ran[:, :2, ys])  # kept
    others = np.ones(now.shape[2], bool)
    others[ys] = False
    np.testing.assert_array_equal(now[:, :2, others], loaded[:, :2, others])
    np.testing.assert_array_equal(now[:, 2:], ran[:, 2:])  # part b untouched
    regs = np.asarray(sim.state.regs)
    np.testing.assert_array_equal(regs[:, :2], np.asarray(sim.tables.init_regs)[:, :2])
    start = int(sim.state.cycle)
    ka.launch(merged.view(sim, "a"))
    assert sim.run().cycles - start == run_kernel(ka, xa).cycles  # as alone
    np.testing.assert_array_equal(ka.read(merged.view(sim, "a")), out)
    with pytest.raises(KeyError, match="no part 'c'"):
        restore_part(sim, merged, "c", loaded)


def test_an_op_on_memory_alone_is_its_issuers_part():
    """Parts "copy" and "idle" share PE (0, 0); "copy" issues a long asynchronous copy on
    memory alone and returns. While the copy is in flight the part map gives it to "copy"
    alone (the slot keeps the task that issued it): "idle", with a tile there but nothing
    to do, is not at work, so a host that starts parts by what they read is not held up."""
    n = 512
    # an engine mechanism: async ops on memory alone allowed (the presets refuse them)
    lenient = FabricConfig.small(2, 4, async_memory_ops=True)
    copier = Program(FabricConfig.small(1, 1, async_memory_ops=True))
    copy = Tile("copy")
    src, dst = copy.symbol("src", "f32", n), copy.symbol("dst", "f32", n)
    copy.local_task("main", [ins.mov(dst.dsd(), src.dsd(), is_async=True)])
    copier.place(copy, Rect(0, 0, 1, 1))
    idler = Program(FabricConfig.small(1, 1))
    idle = Tile("idle")
    idle.symbol("y", "f32", n)
    idle.local_task("main", [])
    idler.place(idle, Rect(0, 0, 1, 1))
    merged = merge_programs(lenient, [Part("copy", copier), Part("idle", idler)])
    sim = Simulator(lenient, merged.program)
    merged.view(sim, "copy").launch("main")
    sim.run(max_cycles=20, raise_on_limit=False)
    assert PartMap(merged).at_work(sim) == {"copy": [(0, 0)]}
    sim.run()
    assert PartMap(merged).at_work(sim) == {}
