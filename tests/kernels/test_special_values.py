"""Special values (inf, NaN, overflow) of the row kernels, as eager PyTorch gives them, on
the fabric; the elementwise math's are in test_mathlib.py and test_unary_functions.py.

layer_norm (torch.nn.functional.layer_norm, fp32 on CPU): a row holding inf or NaN, or
whose sum of squares (x - mean)^2 overflows fp32, comes out all NaN; the
other rows match the float64 reference within `layernorm_tolerance`.
"""

import numpy as np

from fabric import FabricConfig, Rect
from fabric.kernels import rownorm as rn
from fabric.kernels.base import Blocks, run_kernel

CONFIG = FabricConfig.small(4, 4)
F32_MAX = float(np.finfo(np.float32).max)


def test_layernorm_rows_with_specials_or_overflow_are_nan():
    rows = np.array([[np.inf, 1, 2, 3, 4], [-np.inf, 1, 2, 3, 4], [np.nan, 1, 2, 3, 4],
                     [1e30, -1e30, 1e20, 0, 5], [F32_MAX, F32_MAX, 1, 0, 2],
                     [1e19, -1e19, 0, 1, 2],  # variance 4e37, squares 1e38: finite
                     [1e18, -1e18, 0, 1, 2],  # variance 4e35, finite
                     [0.5, -1.5, 2, 3, -4]], np.float32)
    m, n = rows.shape
    gamma = np.linspace(0.5, 2, n).astype(np.float32)
    beta = np.linspace(-1, 1, n).astype(np.float32)
    rect = Rect(0, 0, 2, 2)  # rows spread over two PEs: the NaN crosses the allreduce
    out = run_kernel(rn.build_layernorm(CONFIG, rect, m, n),
                     {"x": rows, "gamma": gamma, "beta": beta}).output
    nan_rows = [0, 1, 2, 3, 4]
    assert np.isnan(out[nan_rows]).all(), out[nan_rows]
    finite = [5, 6, 7]
    ref = rn.layernorm_reference(rows[finite], gamma, beta)
    tol = rn.layernorm_tolerance(rows[finite], gamma, beta, Blocks.of(rect, len(finite), n))
    assert (np.abs(out[finite] - ref) <= tol).all(), (out[finite], ref)
