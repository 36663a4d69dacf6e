"""Redistribution between layouts of different element formats (fp32 and 16-bit symbols).

Reference: every dst slot must hold, bit for bit, its element in the dst format:
round_to(x, src format) widened exactly, then rounded to the dst format (`round_to`, round to
nearest even; an fp32 -> fp32 or h -> h step changes nothing); slots the map does not name
come back 0, every wavelet sent is consumed (nothing lost or left in flight). Cycles: at
least the plan's lower bound and at most 1.5x its estimate, as in test_redistribute.py.

One config (GRID6 of the fabric tests), tilings of an 8 x 9 tensor on two rectangles with
odd slot offsets, so 16-bit runs start in the high halves of words. Every program runs
with tables of one size (`FLOOR`), so the module compiles the engine once.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels.layout import WordMap
from fabric.kernels.redistribute import plan_redistribution
from fabric.numerics import round_to

CONFIG = FabricConfig.small(6, 6)  # GRID6 of tests/fabric/programs.py
ESTIMATE_FACTOR = 1.5  # cycles / estimate, as test_redistribute.py
SHAPE = (8, 9)
SRC_RECT, DST_RECT = Rect(0, 0, 2, 2), Rect(3, 2, 2, 3)


FLOOR = (256, 128)  # the largest plan here's (instruction, DSD) rows: one compiled engine


def tiling(rect: Rect, block: int, offset: int, dtype: str, name: str = "a") -> WordMap:
    """Element e on PE (e // block) % PEs (row-major in `rect`), slot offset + block *
    (e // (block * PEs)) + e % block."""
    size = int(np.prod(SHAPE))
    pes = rect.rows * rect.cols
    e = np.arange(size)
    pe = (e // block) % pes
    slot = offset + block * (e // (block * pes)) + e % block
    arr = np.full((rect.rows, rect.cols, int(slot.max()) + 1), -1, np.int64)
    arr[pe // rect.cols, pe % rect.cols, slot] = e
    return WordMap(SHAPE, rect, {name: arr}, {name: dtype})


def widen(x, fmt):
    return x if fmt == "f32" else round_to(x, fmt)


def move(src: WordMap, dst: WordMap, seed: int, **kw):
    """Plan, run, check every dst slot and the cycles; returns (plan, cycles)."""
    x = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
    x *= np.float32(300)  # beyond bf16's 8 significant bits and cb16's 10: every step rounds
    plan = plan_redistribution(CONFIG, src, dst, **kw)
    words, cycles, stats = plan.run(src.to_words(x), min_table_rows=FLOOR)
    (s_fmt,), (d_fmt,) = set(src.dtypes.values()), set(dst.dtypes.values())
    want = dst.to_words(widen(widen(x, s_fmt), d_fmt))
    for k in dst.symbols:
        assert words[k].dtype == want[k].dtype
        np.testing.assert_array_equal(words[k], want[k], err_msg=f"dst symbol {k!r}")
    assert cycles >= plan.model_cycles, plan.report()
    assert cycles <= ESTIMATE_FACTOR * plan.estimate_cycles, (cycles, plan.report())
    for st in stats:
        assert st.in_flight == 0 and st.injected + st.forked == st.consumed
    assert plan.remote_words + plan.local_words == int((dst.symbols["a"] >= 0).sum())
    return plan, cycles


@pytest.mark.parametrize("src_fmt,dst_fmt,pack", [
    ("f32", "f16", False),  # the receiver rounds (to_half from the fabric input)
    ("f32", "f16", True),  # packed flows: the sender rounds into its packed output
    ("f16", "f32", True),  # the receiver widens (to_f32 from the fabric input)
    ("bf16", "cb16", True),  # through fp32: the sender widens, the receiver rounds
])
def test_formats_between_two_tilings(src_fmt, dst_fmt, pack):
    src = tiling(SRC_RECT, 3, 1, src_fmt)
    dst = tiling(DST_RECT, 4, 1, dst_fmt)
    plan, _ = move(src, dst, 0, pack=pack)
    flows = plan.flows
    assert plan.local_words == 0 and plan.remote_words == 72
    wires = {f["wire"] for f in flows}
    if src_fmt == "f32" and not pack:
        assert wires == {"f32"}
    if src_fmt != "f32" and dst_fmt != "f32":  # h1 -> h2 goes through fp32
        assert wires == {"f32"} and not any(f["packed"] for f in flows)
    if src_fmt == "f16":
        assert wires == {"f16"}


def test_f16_packing_halves_the_wavelets():
    """Same-format 16-bit flows: unpacked, one value per wavelet; packed, two, on the flows
    whose ops move even counts (all here: blocks of 4 and 2) -> half the wavelets."""
    src = tiling(SRC_RECT, 4, 1, "f16")
    dst = tiling(DST_RECT, 2, 1, "f16")
    loose, loose_cycles = move(src, dst, 1, pack=False)
    tight, tight_cycles = move(src, dst, 1)
    assert loose.report()["remote_wavelets"] == 72
    assert tight.report()["packed_flows"] == len(tight.flows)
    assert tight.report()["remote_wavelets"] == 36
    assert tight.model_cycles < loose.model_cycles and tight_cycles < loose_cycles


def test_local_h1_to_h2_through_scratch():
    """Overlapping rectangles: elements staying on a PE go bf16 -> fp32 scratch -> cb16 with
    two local conversions; the others cross the fabric through fp32."""
    src = tiling(Rect(0, 0, 2, 3), 3, 1, "bf16")
    dst = tiling(Rect(0, 1, 2, 2), 4, 0, "cb16")
    plan, _ = move(src, dst, 2)
    assert plan.local_words > 0 and plan.remote_words > 0
    same = tiling(Rect(0, 0, 2, 3), 3, 1, "cb16")
    plan, cycles = move(src, same, 3)  # same slots, another format: all local
    assert plan.remote_words == 0 and plan.local_words == 72 and cycles > 0


def test_a_source_word_of_the_destinations_format_goes_before_another_as_near():
    """Each element on the same PE twice, in a bf16 symbol and an fp32 one: the fp32 slots
    take the fp32 words (the value itself), the bf16 slots the bf16 words, exactly;
    reading the bf16 copy into an fp32 slot would lose the low mantissa bits."""
    h = tiling(SRC_RECT, 3, 1, "bf16", "h")
    f = tiling(SRC_RECT, 3, 1, "f32", "f")
    src = WordMap(SHAPE, SRC_RECT, {**h.symbols, **f.symbols}, {"h": "bf16"})
    dst = WordMap(SHAPE, SRC_RECT, {"a": tiling(SRC_RECT, 2, 0, "f32").symbols["a"],
                                    "b": tiling(SRC_RECT, 4, 0, "bf16").symbols["a"]},
                  {"b": "bf16"})
    x = np.random.default_rng(4).standard_normal(SHAPE).astype(np.float32) * np.float32(300)
    plan = plan_redistribution(CONFIG, src, dst)
    words, _, _ = plan.run(src.to_words(x), min_table_rows=FLOOR)
    want = dst.to_words(x)
    for k in want:
        np.testing.assert_array_equal(words[k], want[k], err_msg=f"dst symbol {k!r}")


def test_bad_source_words_are_named():
    src = tiling(SRC_RECT, 3, 1, "f16")
    plan = plan_redistribution(CONFIG, src, tiling(DST_RECT, 4, 1, "f32"))
    with pytest.raises(ValueError, match=r"source symbol 'a' \(f16\) words are .* uint32; "
                                         r"expected .* of a 16-bit type"):
        plan.run({"a": np.zeros(src.symbols["a"].shape, np.uint32)}, min_table_rows=FLOOR)
