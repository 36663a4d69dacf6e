"""GEMV y = A x + b on 2D blocks against numpy, its cycle model and its efficiency against
the SRAM-bandwidth bound.

Tolerance: bit-exact against `gemv_reference`, which runs the fabric's order in float32
(per block y = 0, y += A[:, k] x[k] in k order; the row reduction in the collective's
order; + b). The one freedom is the fma's rounding: XLA may contract a + b s into one fused
multiply-add (one rounding) or not (two) depending on the backend, so the output must equal
the reference computed one way or the other, as a whole.
"""

import numpy as np
import pytest

from fabric import Rect
from fabric.kernels import gemv as gv
from fabric.kernels.base import run_kernel
from tests.kernels.kernel_cases import CONFIG, check_cycles, normal, rng

CASES = [  # rect, m, n, algo
    (Rect(0, 0, 4, 4), 64, 64, "chain"),
    (Rect(1, 1, 3, 5), 50, 37, "chain"),  # uneven blocks, non-square, off the corner
    (Rect(1, 1, 3, 5), 50, 37, "tree"),
    (Rect(0, 0, 8, 8), 200, 256, "tree"),
    (Rect(2, 0, 2, 8), 20, 29, "chain"),  # blocks of m_p = 10 rows, n_q = 3 or 4 columns
]


def _inputs(m, n, seed):
    gen = rng(seed)
    return {"A": normal(gen, m, n), "x": normal(gen, n), "b": normal(gen, m)}


@pytest.mark.parametrize("rect, m, n, algo", CASES)
def test_gemv_matches_numpy_and_model(rect, m, n, algo):
    data = _inputs(m, n, seed=m + n)
    kernel = gv.build_gemv(CONFIG, rect, m, n, algo=algo)
    result = run_kernel(kernel, data)
    refs = [gv.gemv_reference(data["A"], data["x"], data["b"], rect.rows, rect.cols, algo,
                              fused=f) for f in (True, False)]
    assert any(np.array_equal(result.output, ref) for ref in refs), (
        f"max |y - ref| = {np.abs(result.output - refs[0]).max():.3g}")
    # the model is exact when PEs of a row finish their blocks together (chain, or a tree
    # on even blocks); uneven trees may share links between rounds: within 10 %
    even = m % rect.rows == 0 and n % rect.cols == 0
    check_cycles(result, kernel, exact=algo == "chain" or even)


@pytest.mark.parametrize("rect, m, n", [(Rect(0, 0, 4, 4), 64, 64), (Rect(0, 0, 8, 8), 256, 256)])
def test_gemv_efficiency_within_2x_of_the_sram_bound(rect, m, n):
    """The local product alone, at one fp32 fma per cycle, takes m_p n_q cycles: the whole
    kernel (x broadcast, products, row reduction, + b) stays within 2x of it."""
    kernel = gv.build_gemv(CONFIG, rect, m, n)
    result = run_kernel(kernel, _inputs(m, n, seed=1))
    bound = kernel.info["bound_cycles"]
    assert bound == (m // rect.rows) * (n // rect.cols)
    assert result.cycles <= 2 * bound
    assert result.efficiency(kernel) == pytest.approx(bound / result.cycles)


def test_local_product_cycles():
    """Pairs of fmas cost max(m, 7) + m + 1 cycles; the zeroing ceil(m / 2) + 2."""
    assert gv.local_product_cycles(16, 8) == 8 + 2 + 4 * 33 + 1
    assert gv.local_product_cycles(16, 7) == 8 + 2 + 3 * 33 + 17
    assert gv.local_product_cycles(3, 2) == 2 + 2 + 1 * 11 + 1


def test_gemv_errors_name_sizes():
    with pytest.raises(ValueError, match="48 KiB"):
        gv.build_gemv(CONFIG, Rect(0, 0, 1, 1), 110, 110)
    with pytest.raises(ValueError, match="every PE needs"):
        gv.build_gemv(CONFIG, Rect(0, 0, 4, 4), 3, 64)
    with pytest.raises(ValueError, match="dtype must be one of"):
        gv.build_gemv(CONFIG, Rect(0, 0, 4, 4), 64, 64, dtype="f64")
    kernel = gv.build_gemv(CONFIG, Rect(0, 0, 2, 2), 4, 4)
    with pytest.raises(ValueError, match="expected A"):
        run_kernel(kernel, {"A": np.zeros((4, 5)), "x": np.zeros(4), "b": np.zeros(4)})
