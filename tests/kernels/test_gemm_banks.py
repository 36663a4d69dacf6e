"""The GEMM kernels under the bank read-pair rule (`FabricConfig.bank_conflicts`): the same
bits as without it, and the cycles their models predict from the tile's layout
(`gemm_cycles.conflict_cycles`): the fma C[:, j] += A[:, k] * b reads A and C, whose
columns start at words of equal parity in these layouts (fp32: every element group waits
a cycle), at equal half-word classes (16-bit), or alternate classes group by group (fmachs:
fp32 accumulator, 16-bit A: every other group waits).
"""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels.base import run_kernel
from fabric.kernels.gemm_cannon import build_gemm_cannon
from fabric.kernels.gemm_summa import build_gemm_summa

MODEL_TOLERANCE = 0.005  # the models land within 0.15 % on these sizes


@pytest.mark.parametrize("build, shape, m, k, n, dtype, acc", [
    (build_gemm_cannon, (3, 3), 40, 29, 35, "f32", "f32"),
    (build_gemm_summa, (2, 3), 50, 37, 45, "f32", "f32"),
    (build_gemm_summa, (2, 2), 64, 16, 32, "f16", "f32"),   # fmachs: classes alternate
    (build_gemm_cannon, (2, 2), 96, 16, 16, "bf16", "bf16"),
])
def test_gemm_under_bank_conflicts_same_bits_and_modelled_cycles(build, shape, m, k, n,
                                                                  dtype, acc):
    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    rect = Rect(0, 0, *shape)
    results = {}
    for conflicts in (False, True):
        config = FabricConfig.small(*shape, bank_conflicts=conflicts)
        kernel = build(config, rect, m, k, n, dtype=dtype, acc_dtype=acc)
        result = run_kernel(kernel, {"A": a, "B": b})
        assert abs(kernel.model_cycles / result.cycles - 1) <= MODEL_TOLERANCE, (
            conflicts, kernel.model_cycles, result.cycles)
        results[conflicts] = result
    np.testing.assert_array_equal(results[True].output, results[False].output)
    assert results[True].stats.bank_stall.sum() > 0
    assert results[True].cycles > results[False].cycles


@pytest.mark.parametrize("build, shape, m, k, n, dtype, acc", [
    (build_gemm_cannon, (2, 2), 32, 24, 32, "f32", "f32"),    # Mb = 16: classes kept
    (build_gemm_summa, (2, 2), 48, 20, 24, "f32", "f32"),
    (build_gemm_cannon, (2, 2), 64, 16, 16, "bf16", "bf16"),  # Mb = 32 half-words
])
def test_bank_aware_layout_avoids_every_conflict(build, shape, m, k, n, dtype, acc):
    """The accumulator started at an odd word (`tile_words(bank_aware=True)`): no fma meets
    the rule, the run takes the cycles it takes without the rule, the model says so."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    rect = Rect(0, 0, *shape)
    plain = build(FabricConfig.small(*shape, bank_conflicts=False), rect, m, k, n,
                  dtype=dtype, acc_dtype=acc)
    aware = build(FabricConfig.small(*shape, bank_conflicts=True), rect, m, k, n,
                  dtype=dtype, acc_dtype=acc, bank_aware=True)
    naive = build(FabricConfig.small(*shape, bank_conflicts=True), rect, m, k, n,
                  dtype=dtype, acc_dtype=acc)
    results = [run_kernel(kernel, {"A": a, "B": b}) for kernel in (plain, aware, naive)]
    np.testing.assert_array_equal(results[1].output, results[0].output)
    assert results[1].stats.bank_stall.sum() == 0 < results[2].stats.bank_stall.sum()
    assert results[1].cycles == results[0].cycles < results[2].cycles
    assert aware.model_cycles == plain.model_cycles < naive.model_cycles
