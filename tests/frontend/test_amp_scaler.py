"""Loss scaling (frontend.training.GradScaler, optimizer_step) and the fabric optimizers
(FabricSGD, FabricAdamW) against torch.optim and torch.nn.utils.clip_grad_norm_.

Every Simulator here (optimizers, sums of squares, maps, the training step) runs on the
frontend tests' fabric CONFIG with the frontend's MIN_TABLE_ROWS: one engine compile.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fabric.kernels.optimizers import ADAMW_UPDATE_RTOL
from frontend.amp import set_half_dtype
from frontend.tables import MIN_TABLE_ROWS
from frontend.training import GradScaler, compile_training_step, optimizer_step
from frontend.training.optim import FabricAdamW, FabricSGD
from tests.frontend.models import CONFIG

FABRIC = {"config": CONFIG, "min_table_rows": MIN_TABLE_ROWS}


def _params(seed=0):
    torch.manual_seed(seed)
    lin = torch.nn.Linear(4, 3)
    return {n: p.detach().clone() for n, p in lin.named_parameters()}


def _grads(params, seed):
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(p.shape, generator=g) for n, p in params.items()}


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy().view(np.int32).copy()


def _snapshot(opt):
    """Weights and optimizer state as bit patterns, and the step counts."""
    sd = opt.state_dict()
    state = {(n, k): _bits(v) for n, e in sd["state"].items() for k, v in e.items()
             if isinstance(v, torch.Tensor)}
    return ({n: _bits(w) for n, w in opt.parameters().items()}, state, opt.steps())


def _assert_same(a, b):
    for x, y in zip(a[:2], b[:2]):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=str(k))
    assert a[2] == b[2]


def _torch_opt(cls, params, **hyper):
    ps = {n: torch.nn.Parameter(p.clone()) for n, p in params.items()}
    return ps, cls(list(ps.values()), foreach=False, **hyper)


def test_sgd_matches_torch_bit_for_bit_and_state_round_trip():
    params = _params()
    hyper = {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}
    opt = FabricSGD(params, **hyper, **FABRIC)
    ps, ref = _torch_opt(torch.optim.SGD, params, **hyper)
    for t in range(1, 4):
        grads = _grads(params, t)
        opt.step(grads)
        for n, p in ps.items():
            p.grad = grads[n].clone()
        ref.step()
        # torch's add(alpha) is one fma and mul_ one product, as the kernel's
        for n, w in opt.parameters().items():
            np.testing.assert_array_equal(_bits(w), _bits(ps[n]), err_msg=f"{n} step {t}")
            np.testing.assert_array_equal(
                _bits(opt.state_dict()["state"][n]["momentum_buffer"]),
                _bits(ref.state[ps[n]]["momentum_buffer"]))
        # the kernels' exact cycle models (the first step's has no buffer update), summed
        # over the parameters
        key = "model_cycles_first" if t == 1 else "model_cycles"
        assert opt.cycles == sum(s.kernel.info.get(key, s.kernel.model_cycles)
                                 for s in opt._slots.values())
    assert opt.steps() == {"weight": 3, "bias": 3} and opt.host_cycles > 0
    # a second optimizer from the first's weights and state_dict (through torch.save)
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    twin = FabricSGD(opt.parameters(), **hyper, **FABRIC)
    twin.load_state_dict(torch.load(buf))
    grads = _grads(params, 9)
    opt.step(grads)
    twin.step(grads)
    _assert_same(_snapshot(opt), _snapshot(twin))
    with pytest.raises(ValueError, match="momentum=0.9 in the state dict"):
        FabricSGD(params, lr=0.1, momentum=0.5, **FABRIC).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="gradient of 'bias' has shape"):
        opt.step({"bias": torch.zeros(4)})


def test_adamw_matches_torch():
    params = _params(1)
    opt = FabricAdamW(params, lr=1e-2, weight_decay=0.1, **FABRIC)
    ps, ref = _torch_opt(torch.optim.AdamW, params, lr=1e-2, weight_decay=0.1)
    bound = {n: np.zeros(p.shape) for n, p in params.items()}
    for t in range(1, 4):
        grads = _grads(params, 10 + t)
        opt.step(grads)
        for n, p in ps.items():
            p.grad = grads[n].clone()
        ref.step()
        state, got = opt.state_dict()["state"], opt.parameters()
        for n, p in ps.items():
            m_t, v_t = ref.state[p]["exp_avg"], ref.state[p]["exp_avg_sq"]
            # the state: bit-exact (torch's lerp and addcmul are the kernel's fmas)
            np.testing.assert_array_equal(_bits(state[n]["exp_avg"]), _bits(m_t))
            np.testing.assert_array_equal(_bits(state[n]["exp_avg_sq"]), _bits(v_t))
            # the weights: each step's update within ADAMW_UPDATE_RTOL of torch's plus one
            # rounding of w (as tests/kernels/test_optimizers.py)
            u = (1e-2 / (1 - 0.9**t)) * m_t.double().numpy() / (
                np.sqrt(v_t.double().numpy()) / np.sqrt(1 - 0.999**t) + 1e-8)
            w_ref = p.detach().numpy()
            bound[n] += ADAMW_UPDATE_RTOL * np.abs(u) + np.spacing(np.abs(w_ref))
            err = np.abs(got[n].double().numpy() - w_ref)
            assert np.all(err <= bound[n]), (n, t, float(np.max(err / bound[n])))
    assert state["weight"]["step"] == 3
    assert opt.cycles == sum(s.kernel.model_cycles for s in opt._slots.values())


def _scaled_step(opt, scaler, grads, **kw):
    """optimizer_step on gradients of a loss-gradient-1.0 backward."""
    opt.set_grads(grads)
    return optimizer_step(torch.tensor(0.0), opt, scaler, **kw)


def test_overflow_skips_step_bit_identical_and_halves_scale():
    params = _params(2)
    opt = FabricSGD(params, lr=0.1, momentum=0.9, **FABRIC)
    scaler = GradScaler(init_scale=2.0**10)
    ps, ref = _torch_opt(torch.optim.SGD, params, lr=0.1, momentum=0.9)
    grads = _grads(params, 20)
    assert _scaled_step(opt, scaler, grads)  # clean: scaled by 2^10, unscaled: exact
    for n, p in ps.items():
        p.grad = grads[n].clone()
    ref.step()
    for n, w in opt.parameters().items():
        np.testing.assert_array_equal(_bits(w), _bits(ps[n]))
    assert set(scaler.cycles) == {"scale", "overflow_check", "unscale"}
    assert all(c > 0 for c in scaler.cycles.values())
    assert scaler.get_scale() == 2.0**10
    before = _snapshot(opt)
    for bad, scale in ((np.inf, 2.0**9), (np.nan, 2.0**8)):
        g = _grads(params, 21)
        g["weight"][1, 2] = bad
        assert not _scaled_step(opt, scaler, g)
        _assert_same(_snapshot(opt), before)  # weights, state, step counts unchanged
        assert scaler.get_scale() == scale
        assert "unscale" not in scaler.cycles  # skipped steps are not unscaled
    # a finite gradient whose scaled square overflows fp32 (|x| 2^9 > 1.8e19) too
    g = _grads(params, 22)
    g["bias"][0] = 1e17
    assert not _scaled_step(opt, scaler, g)
    _assert_same(_snapshot(opt), before)
    assert scaler.get_scale() == 2.0**7


def test_scale_growth_bounds_and_tolerance():
    params = {"b": torch.zeros(3)}
    opt = FabricSGD(params, lr=0.1, **FABRIC)
    scaler = GradScaler(init_scale=4.0, steps_per_increase=3, min_loss_scale=1.0,
                        max_loss_scale=8.0)
    clean, bad = {"b": torch.ones(3)}, {"b": torch.tensor([1.0, np.inf, 0.0])}
    scales = []
    for g in [clean] * 6 + [bad] * 4:
        _scaled_step(opt, scaler, g)
        scales.append(scaler.get_scale())
    # doubles after 3 clean steps, capped at 8; halves per overflow, floored at 1
    assert scales == [4, 4, 8, 8, 8, 8, 4, 2, 1, 1]
    assert opt.steps() == {"b": 6}
    # tolerance 0.5: an overflow halves only when overflows / steps since the change > 0.5
    tol = GradScaler(init_scale=16.0, overflow_tolerance=0.5, steps_per_increase=100)
    for g, want in ((clean, 16), (bad, 16), (bad, 8), (bad, 4)):
        _scaled_step(opt, tol, g)
        assert tol.get_scale() == want
    # a fixed scale skips overflowing steps but never moves
    fixed = GradScaler(loss_scale=64.0)
    assert not _scaled_step(opt, fixed, bad) and fixed.get_scale() == 64.0
    with pytest.raises(ValueError, match="min_loss_scale"):
        GradScaler(min_loss_scale=4.0, max_loss_scale=2.0)
    with pytest.raises(ValueError, match="loss_scale must be 'dynamic'"):
        GradScaler(loss_scale="static")


def test_state_dict_round_trip_and_default_scales():
    params = {"b": torch.zeros(3)}
    opt = FabricSGD(params, lr=0.1, **FABRIC)
    scaler = GradScaler(init_scale=32.0, steps_per_increase=2, overflow_tolerance=0.4)
    for g in ({"b": torch.ones(3)}, {"b": torch.full((3,), np.inf)}):
        _scaled_step(opt, scaler, g)
    buf = io.BytesIO()
    torch.save(scaler.state_dict(), buf)
    buf.seek(0)
    twin = GradScaler()
    twin.load_state_dict(torch.load(buf))
    assert twin.state_dict() == scaler.state_dict()
    for g in ({"b": torch.ones(3)}, {"b": torch.ones(3)}):  # both continue alike
        _scaled_step(opt, scaler, g)
        _scaled_step(opt, twin, g)
        assert twin.get_scale() == scaler.get_scale()
    assert GradScaler().get_scale() == 2.0**15 and GradScaler().max_loss_scale == 2.0**15
    try:
        set_half_dtype("cbfloat16")
        cb = GradScaler()
        assert cb.get_scale() == 2.0**31 and cb.max_loss_scale == 2.0**31
    finally:
        set_half_dtype("float16")


@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clipping_matches_clip_grad_norm(max_norm):
    params = _params(3)
    opt = FabricSGD(params, lr=0.1, **FABRIC)
    grads = {n: 3.0 * g for n, g in _grads(params, 30).items()}
    scaler = GradScaler(init_scale=2.0**12)
    opt.set_grads(grads)
    scaler.scale_grads(opt)
    assert not scaler.unscale_(opt)
    norm = scaler.clip_(opt, max_norm)
    ref = {n: torch.nn.Parameter(torch.zeros_like(g)) for n, g in grads.items()}
    for n, p in ref.items():
        p.grad = grads[n].clone()
    want_norm = torch.nn.utils.clip_grad_norm_(list(ref.values()), max_norm, foreach=False)
    # norms: fp32 sums in two orders (18 terms): within 1e-6 relative
    assert norm == pytest.approx(float(want_norm), rel=1e-6)
    for n, p in ref.items():
        if max_norm > norm:  # no clipping: the unscaled gradients, exactly
            np.testing.assert_array_equal(_bits(opt.grads[n]), _bits(p.grad))
        else:  # coef from those norms (1e-6) and one rounding each side
            torch.testing.assert_close(opt.grads[n], p.grad, rtol=2e-6, atol=0.0)
    assert ("clip" in scaler.cycles) and scaler.cycles["clip"] > 0


def test_training_loop_matches_eager():
    """5 steps of nn.Linear(4, 3) with mse: fabric gradients (compile_training_step),
    loss scaling and FabricSGD on the fabric, against eager autograd + torch.optim.SGD.
    The gradients agree within assert_close's fp32 tolerance (test_training_grads), the
    scaling by 2^15 and back is exact, the SGD step is bit-exact: the losses stay within
    rtol 1e-5 (measured below 1e-6)."""
    torch.manual_seed(4)
    model = torch.nn.Linear(4, 3)
    eager = torch.nn.Linear(4, 3)
    eager.load_state_dict(model.state_dict())
    x, y = torch.randn(6, 4), torch.randn(6, 3)
    step = compile_training_step(model, (x,), (y,), F.mse_loss, CONFIG)
    opt = FabricSGD(model.named_parameters(), lr=0.1, momentum=0.9, **FABRIC)
    ref = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9, foreach=False)
    scaler = GradScaler()
    losses, want = [], []
    for _ in range(5):
        loss, grads = step((x,), (y,))
        opt.set_grads(grads)
        assert optimizer_step(loss, opt, scaler)
        opt.copy_to(model)
        losses.append(float(loss))
        ref.zero_grad()
        eager_loss = F.mse_loss(eager(x), y)
        eager_loss.backward()
        ref.step()
        want.append(float(eager_loss.detach()))
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    assert losses[-1] < losses[0]
    for n, p in eager.named_parameters():
        torch.testing.assert_close(dict(model.named_parameters())[n], p, rtol=1e-5, atol=1e-6)


def test_eager_loss_path_bit_exact():
    """optimizer_step on an eager loss: the backward of scale(loss) (scaled by 2^15, exact
    in fp32), unscaled on the fabric, then FabricSGD: bit-identical to torch.optim.SGD on
    the unscaled gradients."""
    torch.manual_seed(5)
    model, eager = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    eager.load_state_dict(model.state_dict())
    x, y = torch.randn(6, 4), torch.randn(6, 3)
    opt = FabricSGD(model.named_parameters(), lr=0.1, **FABRIC)
    ref = torch.optim.SGD(eager.parameters(), lr=0.1, foreach=False)
    scaler = GradScaler()
    for _ in range(2):
        assert optimizer_step(F.mse_loss(model(x), y), opt, scaler)
        opt.copy_to(model)
        ref.zero_grad()
        F.mse_loss(eager(x), y).backward()
        ref.step()
        for n, p in eager.named_parameters():
            np.testing.assert_array_equal(_bits(dict(model.named_parameters())[n]), _bits(p))
    assert "scale" not in scaler.cycles and scaler.cycles["unscale"] > 0
