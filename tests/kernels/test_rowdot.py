"""The weighted row sums kernel (`fabric.kernels.rowdot`, what depthwise and grouped
convolutions lower to): bit for bit against its numpy reference (a left-to-right fp32 sum
per row; 16-bit storage rounding once, or at every op with a 16-bit accumulator) and its
exact cycle model, on blocks of several sizes, a rectangle off the corner, one-column rows
and the SIMD width's cap at short rows."""

import numpy as np
import pytest

from fabric.kernels import build_rowdot, rowdot_reference
from fabric.program import Rect
from tests.kernels.kernel_cases import CONFIG, ODD, normal, rng, run_exact


@pytest.mark.parametrize("m,r,bias,rect,dtype,acc", [
    (10, 9, False, Rect(0, 0, 2, 2), "f32", "f32"),   # blocks of 3 and 2 rows
    (17, 5, True, ODD, "f32", "f32"),                  # 15 PEs off the corner
    (7, 1, True, Rect(0, 0, 1, 3), "f32", "f32"),      # one column: no sum
    (64, 4, False, Rect(0, 0, 8, 8), "f32", "f32"),    # one row per PE: width capped at 1
    (11, 9, True, Rect(0, 0, 2, 2), "bf16", "f32"),    # widened, one rounding
    (9, 4, False, Rect(1, 1, 2, 2), "f16", "f32"),
    (9, 4, True, Rect(0, 0, 2, 2), "f16", "f16"),      # 16-bit accumulator
    (12, 6, True, Rect(0, 0, 3, 1), "cb16", "f32"),
    (12, 8, True, Rect(0, 0, 2, 1), "f32", "f32"),     # p's columns at stride 8: width 1
])
def test_rowdot_exact_and_cycles(m, r, bias, rect, dtype, acc):
    gen = rng(m * r)
    x, w, b = normal(gen, m, r), normal(gen, m, r), normal(gen, m)
    k = build_rowdot(CONFIG, rect, m, r, bias, dtype, acc)
    inputs = {"x": x, "w": w, **({"b": b} if bias else {})}
    run_exact(k, inputs, rowdot_reference(x, w, b if bias else None, dtype, acc))
    assert k.fmas == m * r


def test_rowdot_rejects_idle_pes_and_bad_dtypes():
    with pytest.raises(ValueError, match="leaves PEs idle"):
        build_rowdot(CONFIG, Rect(0, 0, 2, 3), 5, 4)
    with pytest.raises(ValueError, match="acc_dtype"):
        build_rowdot(CONFIG, Rect(0, 0, 1, 1), 5, 4, dtype="f16", acc_dtype="bf16")
    assert np.array_equal(rowdot_reference(np.ones((2, 3)), np.full((2, 3), 2.0)), [6, 6])
