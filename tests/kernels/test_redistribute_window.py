"""A redistribution planned on the window of its two rectangles (`fabric.window`) moves the
same words in the same cycles as the same plan on the whole fabric.

Reference: the plan made with `windowed=False` (every program on the whole 24 x 24 fabric),
run on the same source words; `flows` and `report` (in the fabric's coordinates) agree too.
"""

from __future__ import annotations

import numpy as np

from fabric import FabricConfig, Rect
from fabric.kernels import build_elementwise
from fabric.kernels.layout import WordMap, probe_output
from fabric.kernels.redistribute import plan_redistribution

CONFIG = FabricConfig.small(24, 24)
FLOOR = (512, 512)  # the frontend's table floor: one compiled engine per grid


def _random_map(gen, size: int, rect: Rect, words: int, fmt: str) -> WordMap:
    """Each element in one random word of `rect`."""
    slots = gen.permutation(rect.rows * rect.cols * words)[:size]
    arr = np.full(rect.rows * rect.cols * words, -1, np.int64)
    arr[slots] = np.arange(size)
    return WordMap((size,), rect, {"a": arr.reshape(rect.rows, rect.cols, words)},
                   {"a": fmt})


def _both(src: WordMap, dst: WordMap, words: dict):
    windowed = plan_redistribution(CONFIG, src, dst)
    whole = plan_redistribution(CONFIG, src, dst, windowed=False)
    got = [plan.run(words, min_table_rows=FLOOR) for plan in (windowed, whole)]
    return windowed, whole, got


def test_window_moves_the_same_words_in_the_same_cycles():
    # two tiles near the south-east corner: the window (8 x 8) is pushed back onto the fabric
    a = probe_output(build_elementwise(CONFIG, Rect(18, 18, 3, 3), 12, 12))
    b = probe_output(build_elementwise(CONFIG, Rect(20, 14, 3, 3), 12, 12))
    x = np.random.default_rng(0).standard_normal((12, 12)).astype(np.float32)
    windowed, whole, ((w1, c1, s1), (w2, c2, s2)) = _both(a, b, a.to_words(x))
    assert windowed.window.rect == Rect(16, 14, 8, 8) and whole.window.whole
    assert windowed.rounds[0].program.config.rows == 8
    assert c1 == c2 > 0 and [s.cycles for s in s1] == [s.cycles for s in s2]
    assert w1.keys() == w2.keys()
    for k in w1:
        np.testing.assert_array_equal(w1[k], w2[k])
    assert windowed.flows == whole.flows and windowed.report() == whole.report()
    assert windowed.src is a and windowed.dst is b  # the maps stay in the fabric's coordinates


def test_window_of_half_words_with_several_rounds():
    """16-bit words, packed, two colors: several rounds, each on the window."""
    gen = np.random.default_rng(1)
    src = _random_map(gen, 40, Rect(2, 7, 2, 3), 10, "f16")
    dst = _random_map(gen, 40, Rect(5, 3, 3, 2), 10, "f16")
    values = gen.standard_normal(40).astype(np.float16)
    words = {"a": np.where(src.symbols["a"] >= 0,
                           values.view(np.uint16)[np.maximum(src.symbols["a"], 0)], 0)}
    windowed = plan_redistribution(CONFIG, src, dst, colors=[5, 9])
    whole = plan_redistribution(CONFIG, src, dst, colors=[5, 9], windowed=False)
    assert len(windowed.rounds) > 1 and windowed.window.rect == Rect(2, 3, 8, 8)
    (w1, c1, _), (w2, c2, _) = (p.run(words, min_table_rows=FLOOR) for p in (windowed, whole))
    assert c1 == c2 and np.array_equal(w1["a"], w2["a"])
    assert windowed.flows == whole.flows
