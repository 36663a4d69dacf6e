"""Row softmax and layernorm on a rectangle against numpy, with exact cycle counts.

Tolerances come from `softmax_tolerance` / `layernorm_tolerance`: the rounding of each step,
the mathlib ulp bounds and the depth of the fabric's summation order. Shapes: even and
uneven splits, non-square rectangles, a rectangle inside the fabric and a single column of
PEs (no communication), with the chain and the tree allreduce of `collectives`. One 4x4
config and one table bucket: the engine compiles once for the module.
"""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels import rownorm as rn
from fabric.kernels.base import Blocks, run_kernel

CONFIG = FabricConfig.small(4, 4)
rng = np.random.default_rng(11)

CASES = [  # (rect, m, n, algo)
    (Rect(0, 0, 4, 4), 16, 32, "chain"),  # even split
    (Rect(0, 0, 3, 4), 10, 37, "chain"),  # non-square, uneven both ways
    (Rect(1, 1, 2, 3), 5, 8, "chain"),  # inside the fabric
    (Rect(0, 2, 4, 1), 6, 9, "chain"),  # one PE per row: no communication
    (Rect(0, 0, 2, 4), 7, 30, "tree"),  # tree allreduce, uneven
]


def assert_within(got, ref, tol, x):
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    bad = np.argwhere(~(err <= tol))
    if bad.size:
        i = tuple(bad[0])
        raise AssertionError(f"{len(bad)} elements off; at {i}: x={x[i]!r} got {got[i]!r}, "
                             f"reference {ref[i]!r}, |err| {err[i]:.3g} > tol {tol[i]:.3g}")


@pytest.mark.parametrize("rect,m,n,algo", CASES)
def test_softmax_matches_numpy_and_model(rect, m, n, algo):
    x = (3 * rng.standard_normal((m, n))).astype(np.float32)
    x[0, :] *= 20  # a row whose small entries hit exp's floor
    k = rn.build_softmax(CONFIG, rect, m, n, algo=algo)
    res = run_kernel(k, {"x": x})
    assert_within(res.output, rn.softmax_reference(x),
                  rn.softmax_tolerance(x, Blocks.of(rect, m, n)), x)
    np.testing.assert_allclose(res.output.sum(axis=1), 1, rtol=1e-5)
    assert res.cycles == k.model_cycles


@pytest.mark.parametrize("rect,m,n,algo", CASES)
def test_layernorm_matches_numpy_and_model(rect, m, n, algo):
    x = (100 + 2 * rng.standard_normal((m, n))).astype(np.float32)  # mean >> std
    gamma = rng.standard_normal(n).astype(np.float32)
    beta = rng.standard_normal(n).astype(np.float32)
    k = rn.build_layernorm(CONFIG, rect, m, n, eps=1e-5, algo=algo)
    res = run_kernel(k, {"x": x, "gamma": gamma, "beta": beta})
    ref = rn.layernorm_reference(x, gamma, beta, 1e-5)
    assert_within(res.output, ref,
                  rn.layernorm_tolerance(x, gamma, beta, Blocks.of(rect, m, n), 1e-5), x)
    assert res.cycles == k.model_cycles


def test_layernorm_constant_rows_give_beta():
    """var = 0: rsqrt(eps) scales exact zeros, the output is beta."""
    m, n = 4, 10
    x = np.repeat(np.arange(m, dtype=np.float32)[:, None], n, axis=1)
    beta = np.linspace(-1, 1, n).astype(np.float32)
    k = rn.build_layernorm(CONFIG, Rect(0, 0, 2, 3), m, n)
    out = run_kernel(k, {"x": x, "gamma": np.ones(n, np.float32), "beta": beta}).output
    np.testing.assert_array_equal(out, np.broadcast_to(beta, (m, n)))


def test_chosen_colors_are_used():
    k = rn.build_softmax(CONFIG, Rect(0, 0, 2, 4), 4, 8, colors=[9, 10, 11])
    assert k.info["colors"] == (9, 10, 11)
    assert {r.color for r in k.program.routes} == {9, 10, 11}
    x = rng.standard_normal((4, 8)).astype(np.float32)
    res = run_kernel(k, {"x": x})
    assert_within(res.output, rn.softmax_reference(x),
                  rn.softmax_tolerance(x, Blocks.of(Rect(0, 0, 2, 4), 4, 8)), x)


@pytest.mark.parametrize("rule, softmax, layernorm", [(False, 18.5, 6), (True, 20.25, 8.75)])
def test_model_grows_as_stated(rule, softmax, layernorm):
    """Per element, softmax costs about 18.5 cycles and layernorm about 6 on WSE-2 (exp's
    max and integer ops run one element per cycle: docs/engine.md, "Public facts"). Under
    the bank read-pair rule, 1.75 and 2.75 more: exp's ops read x and its two scratch
    vectors in pairs (three symbols, two start parities), layernorm's x * x reads one word
    twice (every element, at fmuls' width 1) and its broadcasts of a row's mean, rstd and
    of gamma, beta meet x's bank pair on some groups."""
    config = CONFIG.replace(bank_conflicts=rule)
    for build, per_elem in ((rn.build_softmax, softmax), (rn.build_layernorm, layernorm)):
        big = [build(config, Rect(0, 0, 1, 2), 8, 2 * nb).model_cycles for nb in (64, 128)]
        assert abs((big[1] - big[0]) / (8 * 64) - per_elem) < 0.1


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="48 KiB"):
        rn.build_softmax(CONFIG, Rect(0, 0, 1, 1), 64, 100)
    with pytest.raises(ValueError, match="48 KiB"):
        rn.build_layernorm(CONFIG, Rect(0, 0, 1, 2), 64, 200)
    with pytest.raises(ValueError, match="need m >= 4"):
        rn.build_softmax(CONFIG, Rect(0, 0, 4, 4), 3, 16)
    with pytest.raises(ValueError, match="dtype must be one of"):
        rn.build_layernorm(CONFIG, Rect(0, 0, 2, 2), 4, 4, dtype="f64")
    with pytest.raises(ValueError, match="distinct colors"):
        rn.build_softmax(CONFIG, Rect(0, 0, 2, 4), 4, 8, colors=[1, 1, 2])
    k = rn.build_layernorm(CONFIG, Rect(0, 0, 2, 2), 4, 4)
    with pytest.raises(ValueError, match="gamma has shape"):
        run_kernel(k, {"x": np.zeros((4, 4)), "gamma": np.ones(3), "beta": np.ones(4)})
