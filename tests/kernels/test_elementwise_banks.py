"""The elementwise kernel under the bank read-pair rule (`FabricConfig.bank_conflicts`): x
at word 0 and y right after it conflict in every group where a block's words are even in
number; the model takes the slowest block, which may be a smaller one."""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels.base import run_kernel
from fabric.kernels.elementwise import build_elementwise


@pytest.mark.parametrize("m, n, shape, dtype, slower", [
    (5, 6, (2, 2), "f32", True),    # blocks of 9 (odd: apart) and 6 words (even: 3 x 2 > 5)
    (8, 8, (2, 2), "f32", True),    # 16 words everywhere: every group twice
    (5, 5, (1, 1), "f32", False),   # 25 words: apart
    (4, 10, (2, 2), "bf16", False),  # 10 half-words = 5 words: apart
    (4, 8, (2, 2), "f16", True),     # 8 half-words = 4 words: every group twice
])
def test_elementwise_under_the_read_pair_rule(m, n, shape, dtype, slower):
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
    assert (runs[1].cycles > runs[0].cycles) == slower
