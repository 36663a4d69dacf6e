"""The elementwise kernels under the bank read-pair rule (`FabricConfig.bank_conflicts`).
x + y reads two blocks of equal size: the bank-aware layout (`fabric.bank_layout`) starts y
one word later where its natural start has x's word parity, so no group waits and the rule
costs nothing. A broadcast vector's rows restart at its first element, so some of its
groups meet x's bank pairs whatever the layout; the model counts them per PE."""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels.base import run_kernel
from fabric.kernels.elementwise import build_broadcast_op, build_elementwise


@pytest.mark.parametrize("m, n, shape, dtype, moved", [
    (5, 6, (2, 2), "f32", True),    # blocks of 9 (odd: apart already) and 6 words (moved)
    (8, 8, (2, 2), "f32", True),    # 16 words everywhere: y moved to word 17
    (5, 5, (1, 1), "f32", False),   # 25 words: apart
    (4, 10, (2, 2), "bf16", False),  # 10 half-words = 5 words: apart
    (4, 8, (2, 2), "f16", True),     # 8 half-words = 4 words: y moved to word 5
])
def test_elementwise_layout_keeps_the_rule_free(m, n, shape, dtype, moved):
    rng = np.random.default_rng(m * n)
    x, y = (rng.standard_normal((m, n)).astype(np.float32) for _ in range(2))
    rect = Rect(0, 0, *shape)
    runs = []
    for conflicts in (False, True):
        kernel = build_elementwise(FabricConfig.small(*shape, bank_conflicts=conflicts),
                                   rect, m, n, "add", dtype=dtype)
        result = run_kernel(kernel, {"x": x, "y": y})
        assert result.cycles == kernel.model_cycles
        runs.append(result)
    np.testing.assert_array_equal(runs[1].output, runs[0].output)
    assert runs[1].cycles == runs[0].cycles and runs[1].stats.bank_stall.sum() == 0
    tiles = [p.tile for p in kernel.program.placements]
    pads = [t.addresses()["y"] - t.symbols["x"].words for t in tiles]
    assert (max(pads) == 1) == moved


def test_broadcast_row_vector_waits_where_its_rows_meet_x():
    """f32 sub of a row vector (fp32 add/sub 2 wide) on blocks of 4 x 5: v's element j % 5
    beside x's element j; the groups start at even j, where j % 5 changes parity from one
    block row to the next, so about half of them meet x's bank pair whichever word v starts
    at. The model's per-PE count equals the engine's, and the cycles are the rule-free
    run's plus those stalls."""
    config = FabricConfig.small(2, 2)
    rect, m, n = Rect(0, 0, 2, 2), 8, 10
    rng = np.random.default_rng(7)
    x, v = (rng.standard_normal(s).astype(np.float32) for s in ((m, n), n))
    kernel = build_broadcast_op(config, rect, m, n, "sub", "row", "load")
    result = run_kernel(kernel, {"x": x, "v": v})
    np.testing.assert_array_equal(result.output, x - v[None, :])
    assert result.cycles == kernel.model_cycles
    plain = run_kernel(build_broadcast_op(config.replace(bank_conflicts=False), rect, m, n,
                                          "sub", "row", "load"), {"x": x, "v": v})
    np.testing.assert_array_equal(plain.output, result.output)
    stalls = int(result.stats.bank_stall.max())
    groups = 10  # ceil(20 / 2)
    assert 0 < stalls < groups
    assert result.cycles == plain.cycles + stalls
