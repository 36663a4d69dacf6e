"""Optimizer steps (SGD, AdamW) and the sum of squares on the fabric, against torch.optim
(foreach=False: the single-tensor code whose order the kernels follow) and numpy.

One config (4 x 4) and one table bucket (`FLOOR`) for every program here: one engine
compile for the file.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fabric import FabricConfig, Rect, Simulator
from fabric.kernels.base import run_kernel
from fabric.kernels.gradnorm import build_sumsq, sumsq_bound, sumsq_reference
from fabric.kernels.optimizers import (
    ADAMW_UPDATE_RTOL,
    build_adamw,
    build_sgd,
    step_scalars,
    write_step_scalars,
)

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 4, 4)
FLOOR = (128, 128)  # every program of this file fits; one compiled engine serves them all
STEPS = 3


def _data(seed, m, n):
    """A weight and STEPS gradients; the first gradient has exact zeros (sign of -0 kept)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m, n)).astype(np.float32)
    grads = [rng.standard_normal((m, n)).astype(np.float32) for _ in range(STEPS)]
    grads[0][0, :2] = 0.0
    grads[0][1, 0] = -0.0
    return w, grads


def _steps(kernel, torch_opt, param, w, grads, lrs):
    """Run both optimizers step by step; yields (step, fabric state, torch state, cycles)
    after each step. One Simulator (one built program) serves every step: only g and the
    scalars are written between steps."""
    sim = Simulator(CONFIG, kernel.program, min_table_rows=FLOOR)
    tables = sim.tables
    kernel.load(sim, {"w": w})
    for t, (g, lr) in enumerate(zip(grads, lrs), 1):
        param.grad = torch.from_numpy(g.copy())
        for group in torch_opt.param_groups:
            group["lr"] = lr
        torch_opt.step()
        kernel.load(sim, {"g": g})
        write_step_scalars(sim, kernel, lr=lr, step=t)
        kernel.launch(sim)
        start = int(sim.state.cycle)
        stats = sim.run(max_cycles=20_000)
        assert sim.tables is tables and sim.program is kernel.program
        yield t, kernel.read(sim), torch_opt.state[param], stats.cycles - start


SGD_CASES = [
    {},
    {"momentum": 0.9},
    {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01, "maximize": True},
    {"momentum": 0.8, "dampening": 0.3, "weight_decay": 0.05},
]


@pytest.mark.parametrize("hyper", SGD_CASES, ids=lambda h: "-".join(h) or "plain")
def test_sgd_matches_torch_bit_for_bit(hyper):
    # 10 x 9 on 4 x 4: four block shapes (3 x 3, 3 x 2, 2 x 3, 2 x 2), four tiles
    m, n = 10, 9
    w, grads = _data(1, m, n)
    k = build_sgd(CONFIG, RECT, m, n, **hyper)
    p = torch.nn.Parameter(torch.from_numpy(w.copy()))
    opt = torch.optim.SGD([p], lr=0.1, foreach=False, **hyper)
    lrs = [0.1, 0.05, 0.025]  # a schedule: the same program, new scalars
    for t, got, state, cycles in _steps(k, opt, p, w, grads, lrs):
        # torch computes add(alpha) as one fma and mul_ as one product, as the kernel does
        np.testing.assert_array_equal(got["w"].view(np.int32),
                                      p.detach().numpy().view(np.int32), err_msg=f"step {t}")
        if hyper.get("momentum"):
            np.testing.assert_array_equal(got["momentum_buffer"].view(np.int32),
                                          state["momentum_buffer"].numpy().view(np.int32))
        expected = k.info["model_cycles_first"] if t == 1 else k.model_cycles
        assert cycles == expected, (t, cycles, expected)


@pytest.mark.parametrize("hyper", [{}, {"betas": (0.4, 0.99), "maximize": True,
                                        "weight_decay": 0.1, "eps": 1e-6}],
                         ids=["default", "lerp_large_weight-maximize"])
def test_adamw_matches_torch(hyper):
    # betas[0] = 0.4: torch's lerp takes its other form (weight 0.6 >= 0.5)
    m, n = 8, 12  # 2 x 3 blocks on every PE
    w, grads = _data(2, m, n)
    k = build_adamw(CONFIG, RECT, m, n, **hyper)
    p = torch.nn.Parameter(torch.from_numpy(w.copy()))
    opt = torch.optim.AdamW([p], lr=1e-2, foreach=False, **hyper)
    beta1, beta2 = hyper.get("betas", (0.9, 0.999))
    eps = hyper.get("eps", 1e-8)
    bound = np.zeros((m, n))
    for t, got, state, cycles in _steps(k, opt, p, w, grads, [1e-2, 2e-2, 1e-2]):
        m_t, v_t = state["exp_avg"].numpy(), state["exp_avg_sq"].numpy()
        # the state: torch's lerp and addcmul are the kernel's fmas: bit-exact
        np.testing.assert_array_equal(got["exp_avg"].view(np.int32), m_t.view(np.int32))
        np.testing.assert_array_equal(got["exp_avg_sq"].view(np.int32), v_t.view(np.int32))
        # where v = 0 (zero gradients so far) the update is 0, not NaN: sqrt(0) gave 0
        zero = v_t == 0
        assert zero.any() or t > 1
        np.testing.assert_array_equal(got["w"][zero], p.detach().numpy()[zero])
        # w: each step's update u = step_size m / (sqrt(v / bc2) + eps) within
        # ADAMW_UPDATE_RTOL of torch's, plus one rounding of w (ulp) per step
        lr = [1e-2, 2e-2, 1e-2][t - 1]
        u = (lr / (1 - beta1**t)) * m_t.astype(np.float64) / (
            np.sqrt(v_t.astype(np.float64)) / np.sqrt(1 - beta2**t) + eps)
        w_t = p.detach().numpy()
        bound += ADAMW_UPDATE_RTOL * np.abs(u) + np.spacing(np.abs(w_t))
        err = np.abs(got["w"].astype(np.float64) - w_t)
        assert np.all(err <= bound), (t, float(np.max(err / bound)))
        assert np.all(np.isfinite(got["w"]))
        assert cycles == k.model_cycles, (t, cycles, k.model_cycles)


def test_adamw_update_term():
    """From w = 0 the first step's w is the update term itself (0 + u is exact), so its
    error against torch's shows alone: within ADAMW_UPDATE_RTOL (measured: 5 u), for
    gradients over five decades."""
    m, n = 8, 12
    _, grads = _data(5, m, n)
    scale = np.float32(10.0) ** np.random.default_rng(6).integers(-3, 3, (m, n))
    g = (grads[0] * scale).astype(np.float32)
    w = np.zeros((m, n), np.float32)
    k = build_adamw(CONFIG, RECT, m, n, weight_decay=0.1)
    p = torch.nn.Parameter(torch.from_numpy(w.copy()))
    opt = torch.optim.AdamW([p], lr=1e-2, foreach=False, weight_decay=0.1)
    ((_, got, _, _),) = _steps(k, opt, p, w, [g], [1e-2])
    u = p.detach().numpy().astype(np.float64)
    assert np.all((u == 0) == (g == 0))
    np.testing.assert_array_less(np.abs(got["w"] - u), ADAMW_UPDATE_RTOL * np.abs(u) + 1e-45)


@pytest.mark.parametrize(("algo", "rect", "m", "n"), [
    ("tree", RECT, 30, 21),  # four block shapes (8 x 6 .. 7 x 5)
    ("chain", RECT, 30, 21),
    ("tree", Rect(1, 1, 3, 3), 7, 8),  # away from the origin, lines of 3
    ("chain", Rect(0, 3, 4, 1), 9, 3),  # one column: the row reductions are empty
])
def test_sumsq(algo, rect, m, n):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((m, n)).astype(np.float32)
    k = build_sumsq(CONFIG, rect, m, n, algo)
    res = run_kernel(k, {"x": x}, min_table_rows=FLOOR)
    assert isinstance(res.output, np.float32)
    # the fabric's order in float32: bit-exact
    assert res.output == sumsq_reference(x, rect, algo)
    # against float64: within the rounding bound of the squares and additions (3.1e-6 for
    # 30 x 21 on 4 x 4 with the tree: 47 + 2 + 2 additions deep), and the actual error
    # (below 5e-8 in these cases) within 1e-6
    exact = float(np.sum(x.astype(np.float64) ** 2))
    rel = abs(float(res.output) - exact) / exact
    assert rel <= sumsq_bound(m, n, rect, algo)
    assert rel <= 1e-6
    assert res.cycles == k.model_cycles


def test_sumsq_non_finite():
    """The loss scaler's overflow check: any inf or NaN (or a square above FLT_MAX) makes
    the sum non-finite, wherever it sits."""
    m, n = 30, 21
    rng = np.random.default_rng(4)
    x = rng.standard_normal((m, n)).astype(np.float32)
    k = build_sumsq(CONFIG, RECT, m, n)
    sim = Simulator(CONFIG, k.program, min_table_rows=FLOOR)
    for (i, j), bad, want in [((0, 0), np.inf, np.inf), ((29, 20), -np.inf, np.inf),
                              ((15, 10), np.nan, np.nan), ((7, 19), 2e19, np.inf)]:
        x_bad = x.copy()
        x_bad[i, j] = bad
        k.load(sim, {"x": x_bad})
        k.launch(sim)
        sim.run(max_cycles=20_000)
        got = k.read(sim)
        assert not np.isfinite(got)
        np.testing.assert_equal(got, np.float32(want))


def test_step_scalars_follow_torch():
    k = build_adamw(CONFIG, RECT, 8, 12, betas=(0.9, 0.99), weight_decay=0.1)
    got = step_scalars(k, lr=0.01, step=2)
    want = np.float32([1 - 0.01 * 0.1, -(0.01 / (1 - 0.9**2)), 1 / (1 - 0.99**2) ** 0.5])
    np.testing.assert_array_equal(got, want)
    sgd = build_sgd(CONFIG, RECT, 8, 12, momentum=0.9)
    np.testing.assert_array_equal(step_scalars(sgd, 0.5, 1), np.float32([-0.5, 1.0]))
    np.testing.assert_array_equal(step_scalars(sgd, 0.5, 2), np.float32([-0.5, 0.0]))
    assert k.info["scalars"] == ("weight_decay_factor", "neg_step_size",
                                 "inv_sqrt_bias_correction2")


def test_bad_arguments():
    with pytest.raises(ValueError, match="amsgrad"):
        build_adamw(CONFIG, RECT, 8, 12, amsgrad=True)
    with pytest.raises(ValueError, match="nesterov"):
        build_sgd(CONFIG, RECT, 8, 12, nesterov=True)
    with pytest.raises(ValueError, match="momentum"):
        build_sgd(CONFIG, RECT, 8, 12, momentum=-0.1)
    with pytest.raises(ValueError, match="betas"):
        build_adamw(CONFIG, RECT, 8, 12, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="SRAM"):
        build_adamw(CONFIG, RECT, 400, 400)
    with pytest.raises(ValueError, match="step counts from 1"):
        step_scalars(build_sgd(CONFIG, RECT, 8, 12), 0.1, 0)
    k = build_sgd(CONFIG, RECT, 8, 12)
    sim = Simulator(CONFIG, k.program, min_table_rows=FLOOR)
    with pytest.raises(ValueError, match="unknown inputs"):
        k.load(sim, {"exp_avg": np.zeros((8, 12))})
    with pytest.raises(ValueError, match="shape"):
        k.load(sim, {"w": np.zeros((12, 8))})
    with pytest.raises(ValueError, match="algo"):
        build_sumsq(CONFIG, RECT, 8, 12, algo="ring")
