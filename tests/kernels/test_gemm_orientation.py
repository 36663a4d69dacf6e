"""SUMMA in either orientation (`build_gemm_summa(..., orientation=)`): C = A @ B computed as
C^T = B^T A^T where C has few rows, its words the same bit for bit (every element the same
sum in the same order), the cycles within the model's tolerance, "auto" the faster model."""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels.base import run_kernel
from fabric.kernels.gemm_summa import build_gemm_summa, summa_reference

CONFIG = FabricConfig.small(4, 4)
MODEL_TOLERANCE = 0.05  # as tests/kernels/test_gemm.py: the models land within a few cycles


def _inputs(rng, m, k, n):
    return {"A": rng.standard_normal((m, k)).astype(np.float32),
            "B": rng.standard_normal((k, n)).astype(np.float32),
            "C0": rng.standard_normal((m, n)).astype(np.float32)}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_transposed_product_gives_the_same_words(dtype):
    """Few rows, many columns (a product of 3 tokens): "cols" runs its fmas along C's 24
    columns instead of down its 3 rows, in fewer cycles, the words equal."""
    rng = np.random.default_rng(0)
    m, k, n, rect = 3, 10, 24, Rect(0, 0, 2, 2)
    values = _inputs(rng, m, k, n)
    rows = build_gemm_summa(CONFIG, rect, m, k, n, dtype=dtype, with_c0=True)
    cols = build_gemm_summa(CONFIG, rect, m, k, n, dtype=dtype, with_c0=True,
                            orientation="cols")
    assert (rows.info["orientation"], cols.info["orientation"]) == ("rows", "cols")
    assert (cols.info["m"], cols.info["k"], cols.info["n"]) == (m, k, n)
    got_rows, got_cols = run_kernel(rows, values), run_kernel(cols, values)
    assert got_cols.output.shape == (m, n)
    np.testing.assert_array_equal(got_cols.output, got_rows.output)
    if dtype == "f32":  # one of the two fma roundings, element by element in k order
        refs = [summa_reference(values["A"], values["B"], fused=f, c0=values["C0"])
                for f in (False, True)]
        assert any(np.array_equal(got_cols.output, r) for r in refs)
    for kernel, got in ((rows, got_rows), (cols, got_cols)):
        assert abs(got.cycles - kernel.model_cycles) <= MODEL_TOLERANCE * kernel.model_cycles
    assert got_cols.cycles < got_rows.cycles / 2


def test_auto_takes_the_faster_model():
    rng = np.random.default_rng(1)
    rect = Rect(0, 0, 2, 2)
    for (m, k, n), want in (((3, 10, 24), "cols"), ((24, 10, 3), "rows")):
        auto = build_gemm_summa(CONFIG, rect, m, k, n, orientation="auto")
        other = build_gemm_summa(CONFIG, rect, m, k, n,
                                 orientation="rows" if want == "cols" else "cols")
        assert auto.info["orientation"] == want
        assert auto.model_cycles <= other.model_cycles
        values = _inputs(rng, m, k, n)
        del values["C0"]
        np.testing.assert_array_equal(run_kernel(auto, values).output,
                                      run_kernel(other, values).output)


def test_an_orientation_the_tile_does_not_take():
    """C of 3 x 24 on 4 x 2 PEs: its rows do not cover the tile's 4 rows, its columns as
    rows do: "rows" is refused, "auto" takes "cols"; on 2 x 4, the reverse."""
    with pytest.raises(ValueError, match="needs m >= 4"):
        build_gemm_summa(CONFIG, Rect(0, 0, 4, 2), 3, 10, 24)
    assert build_gemm_summa(CONFIG, Rect(0, 0, 4, 2), 3, 10, 24,
                            orientation="auto").info["orientation"] == "cols"
    with pytest.raises(ValueError, match="needs m >= 2, n >= 4"):
        build_gemm_summa(CONFIG, Rect(0, 0, 2, 4), 3, 10, 24, orientation="cols")
    assert build_gemm_summa(CONFIG, Rect(0, 0, 2, 4), 3, 10, 24,
                            orientation="auto").info["orientation"] == "rows"
    with pytest.raises(ValueError, match="needs m >= 4, n >= 4"):  # neither
        build_gemm_summa(CONFIG, Rect(0, 0, 4, 4), 3, 10, 3, orientation="auto")
    with pytest.raises(ValueError, match="orientation must be one of.*'sideways'"):
        build_gemm_summa(CONFIG, Rect(0, 0, 2, 2), 3, 10, 24, orientation="sideways")
