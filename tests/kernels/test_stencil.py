"""The 5-point Jacobi stencil against numpy (bit-exact: the same fp32 operations in the
same order, each rounded once, so no tolerance is needed) and against its cycle model
(within 10%), on square, non-square, sub-rectangle, single-row and single-PE layouts with
uneven block splits."""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels.base import run_kernel
from fabric.kernels.stencil import build_stencil, stencil_reference

# the configs of test_traffic.py: one engine compile per config and table bucket
CFG = FabricConfig.small(4, 8)
CFG_L2 = FabricConfig.small(4, 8, hop_latency=2)

CASES = {  # config, rect, ny, nx, iterations
    "4x8 even blocks": (CFG, Rect(0, 0, 4, 8), 32, 40, 3),
    "4x4 uneven both": (CFG, Rect(0, 0, 4, 4), 31, 29, 4),
    "4x3 sub-rect, uneven rows": (CFG, Rect(0, 5, 4, 3), 13, 9, 3),
    "1x8 single row": (CFG, Rect(0, 0, 1, 8), 5, 40, 2),
    "1x8 single row, hop latency 2": (CFG_L2, Rect(0, 0, 1, 8), 7, 40, 3),
    "single PE": (CFG, Rect(2, 2, 1, 1), 6, 7, 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stencil_matches_numpy_exactly_and_the_model_within_10_percent(name):
    config, rect, ny, nx, iters = CASES[name]
    kernel = build_stencil(config, rect, ny, nx, iters)
    u = np.random.default_rng(ny * nx).standard_normal((ny + 2, nx + 2)).astype(np.float32)
    result = run_kernel(kernel, {"u": u})
    np.testing.assert_array_equal(result.output, stencil_reference(u, iters))
    assert abs(result.cycles - kernel.model_cycles) <= 0.1 * kernel.model_cycles, (
        result.cycles, kernel.model_cycles, kernel.info["per_iteration"])


def test_boundary_stays_fixed_and_heat_flows_in():
    """A hot west wall on a cold grid: the ring never changes; the interior warms from the
    west, and more with more iterations."""
    rect, ny, nx = Rect(0, 0, 4, 8), 32, 40
    u = np.zeros((ny + 2, nx + 2), np.float32)
    u[:, 0] = 1.0
    out = run_kernel(build_stencil(CFG, rect, ny, nx, 3), {"u": u}).output
    ring = np.ones_like(u, bool)
    ring[1:-1, 1:-1] = False
    np.testing.assert_array_equal(out[ring], u[ring])
    assert (out[1:-1, 1] > 0).all() and (out[1:-1, 4:-1] == 0).all()
    np.testing.assert_array_equal(out, stencil_reference(u, 3))


def test_reference_is_the_jacobi_update():
    u = np.random.default_rng(1).random((5, 6), dtype=np.float32)
    once = stencil_reference(u, 1)
    expected = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    np.testing.assert_allclose(once[1:-1, 1:-1], expected, rtol=1e-6)  # other add order
    np.testing.assert_array_equal(stencil_reference(u, 0), u)


def test_bad_sizes_are_rejected_clearly():
    with pytest.raises(ValueError, match=r"80 x 80 block .* 48 KiB"):
        build_stencil(CFG, Rect(0, 0, 1, 1), 80, 80, 1)
    with pytest.raises(ValueError, match=r"3 x 40 interior .* 4 x 8 rectangle"):
        build_stencil(CFG, Rect(0, 0, 4, 8), 3, 40, 1)
    with pytest.raises(ValueError, match="iters must be >= 1"):
        build_stencil(CFG, Rect(0, 0, 2, 2), 4, 4, 0)
    with pytest.raises(ValueError, match="needs 8 distinct colors"):
        build_stencil(CFG, Rect(0, 0, 2, 2), 4, 4, 1, colors=[0, 1, 2])
    kernel = build_stencil(CFG, Rect(0, 0, 2, 2), 4, 4, 1)
    with pytest.raises(ValueError, match=r"u has shape \(4, 4\), expected \(6, 6\)"):
        run_kernel(kernel, {"u": np.zeros((4, 4), np.float32)})
