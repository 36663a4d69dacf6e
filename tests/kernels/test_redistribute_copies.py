"""A redistribution into slots that repeat elements on one PE (a convolution's windows as
rows, an expanded vector): each element crosses the fabric once per destination PE and
the receiver copies it into its other slots (`Move.copies`). Reference: numpy indexing,
as in test_redistribute.py, whose `move` checks every word and the cycle bounds."""

from __future__ import annotations

import numpy as np

from fabric import Rect
from fabric.kernels.layout import WordMap
from fabric.kernels.redistribute import plan_redistribution
from fabric.numerics import round_to
from tests.kernels.test_redistribute import CONFIG, ESTIMATE_FACTOR, move

N, K = 24, 3  # a 1D signal and its windows of K taps: N - K + 1 rows


def _windows(dtypes=None) -> WordMap:
    """The (N - K + 1, K) windows of x (N,) as rows, split over a 2 x 1 tile: 11 rows per
    PE, K words a row, each element in up to K slots of a PE."""
    rows = np.arange(N - K + 1)[:, None] + np.arange(K)[None, :]  # (22, 3) element ids
    words = rows.reshape(2, 1, -1)  # PE r holds rows 11 r .. 11 r + 10
    return WordMap((N,), Rect(2, 3, 2, 1), {"w": words}, dtypes or {})


def _source() -> WordMap:
    return WordMap((N,), Rect(0, 0, 1, 2), {"x": np.arange(N).reshape(1, 2, N // 2)})


def test_a_window_element_crosses_once_per_pe_and_is_copied_into_its_other_slots():
    dst = _windows()
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    plan, words, cycles = move(_source(), dst, x, block=False)
    # PE (2, 3) needs elements 0..12, PE (3, 3) elements 11..23: 13 each cross the fabric
    assert plan.remote_words == 26
    assert plan.local_words == dst.symbols["w"].size - 26  # the other 40 slots: copies
    assert sum(f["words"] * len(f["dsts"]) for f in plan.flows) == 26
    copies = {d: runs for r in plan.rounds for m in r.moves for d, runs in m.copies.items()}
    assert sum(to.length for runs in copies.values() for to, _ in runs) == 40


def test_copies_keep_a_16_bit_format_and_formats_apart_cross_twice():
    """bf16 slots copy bf16 words (every slot its element rounded once, bit for bit); an
    element held in an fp32 slot and a bf16 slot of one PE crosses once for each format
    (a copy does not convert)."""
    x = 300 * np.random.default_rng(1).standard_normal(N).astype(np.float32)
    half = _windows({"w": "bf16"})
    plan = plan_redistribution(CONFIG, _source(), half)
    words, cycles, stats = plan.run(_source().to_words(x))
    np.testing.assert_array_equal(words["w"], half.to_words(round_to(x, "bf16"))["w"])
    assert plan.remote_words == 26 and plan.local_words == 40
    assert plan.model_cycles <= cycles <= ESTIMATE_FACTOR * plan.estimate_cycles
    assert all(st.in_flight == 0 and st.injected + st.forked == st.consumed for st in stats)
    rows = half.symbols["w"]
    mixed = WordMap((N,), Rect(2, 3, 2, 1), {"a": rows, "b": rows}, {"b": "bf16"})
    both = plan_redistribution(CONFIG, _source(), mixed)
    assert both.remote_words == 52 and both.local_words == 2 * 40


def test_a_2d_windows_copies_go_in_runs_of_one_address_offset():
    """3 x 3 windows (padding 1) of a 6 x 8 image as rows, 24 pixels per PE: a slot and the
    slot its element arrived in lie a few offsets apart, each repeated at the window's
    stride, so the receiver's copies grouped by offset take 23 ops per PE over its two
    flows (37 ordered by either address alone), every word as numpy's indexing puts it."""
    h, w = 6, 8
    pad = np.full((h + 2, w + 2), -1)
    pad[1:-1, 1:-1] = np.arange(h * w).reshape(h, w)
    rows = np.stack([pad[i:i + 3, j:j + 3].reshape(-1) for i in range(h) for j in range(w)])
    dst = WordMap((h, w), Rect(2, 3, 2, 1), {"w": rows.reshape(2, 1, -1)})  # (48, 9) rows
    src = WordMap((h, w), Rect(0, 0, 1, 2), {"x": np.arange(h * w).reshape(1, 2, -1)})
    x = np.random.default_rng(2).standard_normal((h, w)).astype(np.float32)
    plan, _, _ = move(src, dst, x, block=False)
    ops = {d: 0 for d in ((2, 3), (3, 3))}
    for m in (m for r in plan.rounds for m in r.moves):
        for d, runs in m.copies.items():
            ops[plan.window_to_fabric(d)] += len(runs)
    assert max(ops.values()) <= 23, ops
