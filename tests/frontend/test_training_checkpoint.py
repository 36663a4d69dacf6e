"""Checkpoints of a fabric training run (frontend.training.checkpoint): save at step k, load
into fresh optimizer and scaler objects, continue to step n: bit-identical to the
uninterrupted run. The model and loop are test_amp_scaler.py's (nn.Linear(4, 3), mse,
compile_training_step + FabricSGD(momentum=0.9) + GradScaler), on the frontend tests'
CONFIG and MIN_TABLE_ROWS (one engine compile)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from frontend.errors import FrontendError
from frontend.tables import MIN_TABLE_ROWS
from frontend.training import (
    GradScaler,
    compile_training_step,
    load_checkpoint,
    optimizer_step,
    save_checkpoint,
)
from frontend.training.optim import FabricSGD
from tests.frontend.models import CONFIG

FABRIC = {"config": CONFIG, "min_table_rows": MIN_TABLE_ROWS}
N, K = 4, 2


def _setup():
    torch.manual_seed(4)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(6, 4), torch.randn(6, 3)
    step = compile_training_step(model, (x,), (y,), F.mse_loss, CONFIG)
    return model, step, x, y


def _fresh(model):
    opt = FabricSGD(model.named_parameters(), lr=0.1, momentum=0.9, **FABRIC)
    # a small steps_per_increase: the scale doubles within the run, so its state matters
    return opt, GradScaler(init_scale=2.0**10, steps_per_increase=3)


def _train(model, step, x, y, opt, scaler, n):
    losses = []
    for _ in range(n):
        loss, grads = step((x,), (y,))
        opt.set_grads(grads)
        assert optimizer_step(loss, opt, scaler)
        opt.copy_to(model)
        losses.append(loss.detach().clone())
    return losses


def _assert_identical(a_opt, a_scaler, b_opt, b_scaler):
    wa, wb = a_opt.parameters(), b_opt.parameters()
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name
    sa, sb = a_opt.state_dict()["state"], b_opt.state_dict()["state"]
    for name in sa:
        assert sa[name]["step"] == sb[name]["step"] == N
        assert torch.equal(sa[name]["momentum_buffer"], sb[name]["momentum_buffer"]), name
    assert a_scaler.get_scale() == b_scaler.get_scale()
    assert a_scaler.state_dict() == b_scaler.state_dict()


def test_resume_is_bit_identical(tmp_path):
    model, step, x, y = _setup()
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt, scaler = _fresh(model)
    want = _train(model, step, x, y, opt, scaler, N)
    assert scaler.get_scale() == 2.0**11  # doubled after 3 clean steps: state crosses k

    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(init[n])
    opt_a, scaler_a = _fresh(model)
    got = _train(model, step, x, y, opt_a, scaler_a, K)
    path = tmp_path / "ckpt.pt"
    report = save_checkpoint(path, opt_a, scaler_a, extra={"step": K})
    assert report.file_bytes == os.path.getsize(path)
    assert report.weights_bytes > 0 and report.optimizer_bytes > 0 and report.scaler_bytes > 0
    assert report.host_cycles > 0 and report.n_params == 2
    assert f"{report.file_bytes} B" in str(report)

    # fresh objects, built from different weights: everything must come from the file
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    opt_b, scaler_b = _fresh(model)
    assert load_checkpoint(path, opt_b, scaler_b) == {"step": K}
    opt_b.copy_to(model)
    got += _train(model, step, x, y, opt_b, scaler_b, N - K)
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), (i, g, w)
    _assert_identical(opt, scaler, opt_b, scaler_b)
    # the file is a plain torch.save dict
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["format"] == 1 and set(ckpt["weights"]) == {"weight", "bias"}


def test_load_errors(tmp_path):
    params = {"weight": torch.randn(3, 4), "bias": torch.randn(3)}
    opt = FabricSGD(params, lr=0.1, momentum=0.9, **FABRIC)
    good = tmp_path / "good.pt"
    save_checkpoint(good, opt)  # no scaler
    ckpt = torch.load(good, weights_only=True)
    opt.step({n: torch.ones_like(t) for n, t in params.items()})  # now differs from the file
    before = opt.parameters()

    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(FrontendError, match="is not a checkpoint"):
        load_checkpoint(junk, opt)
    plain = tmp_path / "plain.pt"
    torch.save({"weight": torch.zeros(3, 4)}, plain)
    with pytest.raises(FrontendError, match="is not a format-1 checkpoint"):
        load_checkpoint(plain, opt)
    with pytest.raises(FrontendError, match="no file"):
        load_checkpoint(tmp_path / "absent.pt", opt)

    def _variant(name, weights):
        p = tmp_path / name
        torch.save({**ckpt, "weights": weights}, p)
        return p

    with pytest.raises(FrontendError, match=r"missing from the checkpoint \['bias'\]"):
        load_checkpoint(_variant("m.pt", {"weight": ckpt["weights"]["weight"]}), opt)
    with pytest.raises(FrontendError, match=r"not in the optimizer \['extra'\]"):
        load_checkpoint(_variant("x.pt", {**ckpt["weights"], "extra": torch.zeros(1)}), opt)
    with pytest.raises(FrontendError, match=r"parameter 'bias' has shape \(4,\)"):
        load_checkpoint(_variant("s.pt", {**ckpt["weights"], "bias": torch.zeros(4)}), opt)
    with pytest.raises(FrontendError, match="holds no scaler state"):
        load_checkpoint(good, opt, GradScaler())
    # a failed load wrote nothing: the weights and step counts are the stepped ones
    for name, w in opt.parameters().items():
        assert torch.equal(w, before[name]) and not torch.equal(w, ckpt["weights"][name])
    assert opt.steps() == {"weight": 1, "bias": 1}
