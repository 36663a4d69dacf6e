"""Gates (`fabric.kernels.round_programs`): a consumer merged with the rounds of the move
that feeds it is started by its data. Each chain writing destination words on a PE counts
itself off a word there when done; the last one activates the consumer's task on that PE.

Reference: numpy indexing of the moved tensor (as tests/kernels/test_redistribute.py), read
back from the consumer's copy of its operand, which it makes only when started; the host
never launches the consumer.
"""

from __future__ import annotations

import numpy as np

from fabric import FabricConfig, Part, Program, Rect, Simulator, Tile, merge_programs
from fabric import instructions as ins
from fabric.kernels import GATE, build_elementwise, deliveries, read_words, round_programs
from fabric.kernels.layout import WordMap, probe_output, write_words
from fabric.kernels.redistribute import plan_redistribution

CONFIG = FabricConfig.small(6, 6)
START = "use.main"  # the consumer's entry task on the merged fabric


def _consumer(dst: WordMap, slots: int) -> Program:
    """On every PE of dst's rectangle: task "main" copies the moved symbol into "out"."""
    (name,) = dst.symbols
    tile = Tile("use")
    tile.symbol("d_" + name, "u32", slots)
    tile.symbol("out", "u32", slots)
    tile.local_task("main", [ins.mov(ins.Mem("out", 0, slots), ins.Mem("d_" + name, 0, slots))])
    program = Program(CONFIG)
    program.place(tile, dst.rect)
    return program


def _gate(rect: Rect) -> Program:
    tile = Tile("gate")
    tile.symbol("wait", "u32", 1)
    program = Program(CONFIG)
    program.place(tile, rect)
    return program


def _prefixed(prefix: str, m: WordMap) -> WordMap:
    return WordMap(m.shape, m.rect, {prefix + k: a for k, a in m.symbols.items()},
                   {prefix + k: f for k, f in m.dtypes.items()})


def test_the_last_delivery_starts_the_consumer():
    """A move between overlapping tiles (words staying on a PE and words crossing PEs) on
    one color, so in several rounds: a PE of the consumer waits for every chain that writes
    there (the local moves and one receive per round), and its copy holds the moved words
    only once all of them are in. After round 0 the PEs still waiting have not started."""
    src = probe_output(build_elementwise(CONFIG, Rect(0, 0, 2, 3), 8, 9))
    dst = probe_output(build_elementwise(CONFIG, Rect(0, 1, 2, 2), 8, 9))
    plan = plan_redistribution(CONFIG, src, dst, colors=[0])
    assert len(plan.rounds) >= 2 and plan.local_words > 0
    waits = deliveries(plan)
    assert set(waits) == set(dst.rect.pes()) and max(waits.values()) >= 2
    (name,) = dst.symbols
    slots = dst.symbols[name].shape[2]
    shared = {**{k: k for k in plan.end_symbols}, GATE: "gate.wait"}
    # one program holds every round's routes at once: round k on color k
    rounds = [Part(f"r{k}", program, plan.window.corner, colors={0: k}, shared=shared,
                   tasks={START: START})
              for k, program in enumerate(round_programs(plan, {pe: (START,) for pe in waits}))]
    use = Part("use", _consumer(dst, slots), shared={"d_" + name: "d_" + name})
    merged = merge_programs(CONFIG, [*rounds, use, Part("gate", _gate(dst.rect))])
    sim = Simulator(CONFIG, merged.program)
    x = np.random.default_rng(0).standard_normal((8, 9)).astype(np.float32)
    write_words(sim, _prefixed("s_", src), {"s_" + k: w for k, w in src.to_words(x).items()})
    wait = np.zeros((CONFIG.rows, CONFIG.cols), np.uint32)
    for pe, n in waits.items():
        wait[pe] = n
    sim.memcpy_h2d("gate.wait", wait[dst.rect.row:dst.rect.row_end,
                                     dst.rect.col:dst.rect.col_end, None], dst.rect)
    out = _prefixed("use.", WordMap(dst.shape, dst.rect, {"out": dst.symbols[name]}))
    flat = x.reshape(-1).view(np.uint32)
    want = np.where(dst.symbols[name] >= 0, flat[np.maximum(dst.symbols[name], 0)], 0)
    for k, rnd in enumerate(plan.rounds):  # the host runs the rounds, never the consumer
        for task in rnd.tasks:
            merged.view(sim, f"r{k}").launch(task)
        sim.run(progress=False)
        left = sim.memcpy_d2h("gate.wait", dst.rect)[..., 0]
        got = read_words(sim, out)["use.out"]
        for r, c in dst.rect.pes():
            i, j = r - dst.rect.row, c - dst.rect.col
            if left[i, j]:  # still waiting: never started
                assert not got[i, j].any(), (k, (r, c))
            else:  # started by its last delivery: every moved word in its copy
                np.testing.assert_array_equal(got[i, j], want[i, j], err_msg=str((k, (r, c))))
        if k == 0:
            assert left.any()  # some PE waits for a later round
    assert not sim.memcpy_d2h("gate.wait", dst.rect).any()
