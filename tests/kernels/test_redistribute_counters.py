"""Counters in memory (`fabric.kernels.round_programs(..., counters="memory")`): a move's
chains count their activations in a word of their PE instead of a register, and every
chain of every move on a PE uses one scratch register (`SHARED_COUNTER`), which merged
moves share. Two moves out of one tile, merged: with a register per chain they overfill a
PE of one register; with their counters in memory they fit and move the same words.

Reference: numpy indexing of the moved tensor, as tests/kernels/test_redistribute.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric import BuildError, FabricConfig, Part, Rect, Simulator, build, merge_programs
from fabric.kernels import SHARED_COUNTER, build_elementwise, read_words, round_programs
from fabric.kernels.layout import WordMap, probe_output, write_words
from fabric.kernels.redistribute import plan_redistribution
from fabric.kernels.redistribute_code import chain_cycles

# one register a PE: room for one move's counters, not for two
CONFIG = dataclasses.replace(FabricConfig.small(6, 6), num_registers=1)


def _prefixed(prefix: str, m: WordMap) -> WordMap:
    return WordMap(m.shape, m.rect, {prefix + k: a for k, a in m.symbols.items()},
                   {prefix + k: f for k, f in m.dtypes.items()})


def _two_moves():
    """The output of an elementwise kernel on a 2 x 3 tile moved to two other tiles, each
    move's sending PEs issuing several ops (a chain with a counter)."""
    src = probe_output(build_elementwise(CONFIG, Rect(0, 0, 2, 3), 8, 9))
    dsts = [probe_output(build_elementwise(CONFIG, rect, 8, 9))
            for rect in (Rect(2, 0, 3, 3), Rect(0, 3, 3, 2))]
    plans = [plan_redistribution(CONFIG, src, dst, colors=list(range(6 * i, 6 * i + 6)))
             for i, dst in enumerate(dsts)]
    for plan in plans:
        assert any(n > 1 for rnd in plan.rounds for chains in rnd.ops.values()
                   for n in chains.values())
    return src, dsts, plans


def _parts(plans, counters: str) -> list[Part]:
    """Every round of both moves as a part: move i's symbols "m<i>.d_*" on its side, the
    source's "s_*" shared by both."""
    assert max(len(plan.rounds) for plan in plans) <= 2
    parts = []
    for i, plan in enumerate(plans):
        shared = {k: (k if k.startswith("s_") else f"m{i}.{k}") for k in plan.end_symbols}
        if counters == "memory":
            shared[SHARED_COUNTER] = SHARED_COUNTER
        # round k on colors 12 k + its own (the moves' rounds use colors 0..11 each)
        parts += [Part(f"m{i}r{k}", program, plan.window.corner, shared=shared,
                       colors={c: c + 12 * k for c in range(12)})
                  for k, program in enumerate(round_programs(plan, counters=counters))]
    return parts


def test_two_moves_share_one_register_with_counters_in_memory():
    src, dsts, plans = _two_moves()
    with pytest.raises(BuildError, match=r"registers"):
        build(CONFIG, merge_programs(CONFIG, _parts(plans, "registers")).program)
    merged = merge_programs(CONFIG, _parts(plans, "memory"))
    sim = Simulator(CONFIG, merged.program)
    x = np.random.default_rng(0).standard_normal((8, 9)).astype(np.float32)
    write_words(sim, _prefixed("s_", src), {"s_" + k: w for k, w in src.to_words(x).items()})
    for i, plan in enumerate(plans):  # the host runs each move's rounds in turn
        for k, rnd in enumerate(plan.rounds):
            for task in rnd.tasks:
                merged.view(sim, f"m{i}r{k}").launch(task)
            sim.run(progress=False)
    flat = x.reshape(-1).view(np.uint32)
    for i, dst in enumerate(dsts):
        got = read_words(sim, _prefixed(f"m{i}.d_", dst))
        for name, where in dst.symbols.items():
            want = np.where(where >= 0, flat[np.maximum(where, 0)], 0)
            np.testing.assert_array_equal(np.where(where >= 0, got[f"m{i}.d_{name}"], 0),
                                          want, err_msg=f"move {i}, {name}")


def test_a_counter_in_memory_costs_its_load_and_store():
    assert chain_cycles(4, word=True) == chain_cycles(4) + 2
    assert chain_cycles(1, word=True) == chain_cycles(1) == 1  # one op: no counter
    with pytest.raises(ValueError, match="counters 'stack'"):
        round_programs(_two_moves()[2][0], counters="stack")
