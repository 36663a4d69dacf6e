"""Weights and optimizer state resident on the fabric (frontend.training.resident): the
training step takes the weights over the mesh from their homes in the layer-pipelined
placement and moves the gradients back there; the results are the host path's bit for bit
(fp32), only the step's scalars cross the host boundary for the optimizer, and a loss
scaler checks and unscales the gradients where they lie."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import frontend
from fabric import FabricConfig, host_io_cycles
from frontend.errors import PlacementError
from frontend.tables import MIN_TABLE_ROWS
from frontend.training import GradScaler, compile_training_step, optimizer_step
from frontend.training.optim import FabricAdamW, FabricSGD
from frontend.training.resident import ResidentStep, parameter_homes
from tests.frontend.models import CONFIG, MLP

STEPS = 3


def _pair(opt_cls, **hyper):
    torch.manual_seed(0)
    model = MLP()
    x, y = torch.randn(4, 16), torch.randn(4, 8)
    twin = copy.deepcopy(model)
    host_step = compile_training_step(model, (x,), (y,), F.mse_loss, CONFIG)
    host_opt = opt_cls(model.named_parameters(), config=CONFIG, min_table_rows=MIN_TABLE_ROWS,
                       **hyper)
    res_opt = opt_cls(twin.named_parameters(), config=CONFIG, min_table_rows=MIN_TABLE_ROWS,
                      **hyper)
    res_step = ResidentStep(compile_training_step(twin, (x,), (y,), F.mse_loss, CONFIG),
                            res_opt)
    return (x, y), (model, host_step, host_opt), (twin, res_step, res_opt)


@pytest.mark.parametrize("opt_cls, hyper", [
    (FabricSGD, {"lr": 0.05, "momentum": 0.9}),
    # the moves are the optimizer's business alone; AdamW's kernel is in the long run
    pytest.param(FabricAdamW, {"lr": 0.01}, marks=pytest.mark.long),
])
def test_resident_steps_match_the_host_path_bit_for_bit(opt_cls, hyper):
    (x, y), (model, host_step, host_opt), (_, res, res_opt) = _pair(opt_cls, **hyper)
    assert res.moved == sorted(n for n, _ in model.named_parameters())  # all over the mesh
    for _ in range(STEPS):
        loss, grads = host_step((x,), (y,))
        host_opt.step(grads)
        host_opt.copy_to(model)
        assert torch.equal(res((x,), (y,)), loss)
        res_opt.step_resident(res.moved)
        assert res.grad_move_cycles > 0 and res.host_grads == {}
    want, got = host_opt.state_dict()["state"], res_opt.state_dict()["state"]
    for name, w in host_opt.parameters().items():
        assert torch.equal(res_opt.parameters()[name], w), name
        for key, value in want[name].items():
            assert torch.equal(torch.as_tensor(got[name][key]), torch.as_tensor(value)), key
    # the weights no longer come from the host: the forward writes only x and y
    assert res.step.forward.host_cycles < host_step.forward.host_cycles
    # the optimizer's host I/O is the step's scalars, nothing else
    scalars = sum(host_io_cycles(CONFIG, res_opt.layout(n)[2], len(
        res_opt._slots[n].kernel.info["scalars"])) for n in res_opt.param_names)
    assert res_opt.host_cycles == scalars
    _check_homes(res, res_opt)


def _check_homes(res, res_opt):
    """Every parameter lives on the tile of its first reader, in its top-left part."""
    homes = parameter_homes(res.step)
    assert set(homes) == set(res_opt.param_names)
    for name, (tile, stage) in homes.items():
        rect = res_opt.layout(name)[2]
        assert (rect.row, rect.col) == (tile.row, tile.col), name
        assert rect.row_end <= tile.row_end and rect.col_end <= tile.col_end, name
        reader = next(p for p in res.step.forward.prepared if p.stage.name == stage)
        assert any(src.tensor.name in res.fw_resident for srcs in reader.sources.values()
                   for src in srcs)


@pytest.mark.parametrize("features, match", [
    # the stage's program and AdamW's four blocks do not fit a PE together (the GEMM's
    # bank-aware layout pads its accumulator by a word)
    (24, r"stage 'addmm' on Rect.* and the optimizer state of weight, bias homed there "
         r"need 4852 B of SRAM on PE \(0, 0\), which has 4096 B"),
    # the optimizer kernel alone does not fit the tile
    (32, r"parameter 'weight' cannot live on the tile Rect.* of stage 'addmm', which "
         r"reads it: adamw: .* needs 6156 B of SRAM per PE"),
])
def test_a_home_too_small_for_the_optimizer_state_is_named(features, match):
    config = FabricConfig.small(4, 4, sram_bytes=4096)
    torch.manual_seed(0)
    model = torch.nn.Linear(features, features)
    x, y = torch.randn(2, features), torch.randn(2, features)
    step = compile_training_step(model, (x,), (y,), F.mse_loss, config)
    opt = FabricAdamW(model.named_parameters(), lr=0.01, config=config)
    with pytest.raises(PlacementError, match=match):
        ResidentStep(step, opt)


def test_trainer_keeps_weights_on_the_fabric_and_syncs_the_model_at_the_end():
    torch.manual_seed(1)
    model = MLP()
    data = [(torch.randn(4, 16), torch.randn(4, 8)) for _ in range(2)]
    seen = []

    class Watch(frontend.training.Callback):
        def on_step_end(self, trainer, log):
            seen.append([p.detach().clone() for p in trainer.model.parameters()])

    start = [p.detach().clone() for p in model.parameters()]
    trainer = frontend.Trainer(backend=frontend.backend("fabric", config=CONFIG), model=model,
                               optimizer={"type": "sgd", "lr": 0.1}, loss="mse",
                               callbacks=[Watch()])
    trainer.fit(data)
    # mid-run the model is untouched (the weights live on the fabric) ...
    assert all(torch.equal(a, b) for a, b in zip(seen[-1], start))
    # ... and holds the trained weights after fit
    on_fabric = trainer.runner.optimizer.parameters()
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), on_fabric[name]) and not torch.equal(p, start[0])
    assert all(log["grad_move_cycles"] > 0 for log in trainer.history)


def test_loss_scaler_works_on_the_gradients_in_sram():
    (x, y), (model, host_step, host_opt), (_, res, res_opt) = _pair(
        FabricSGD, lr=0.05, momentum=0.9)
    host_scaler, res_scaler = (GradScaler(init_scale=2.0**10, steps_per_increase=2)
                               for _ in range(2))
    for _ in range(STEPS):
        loss, grads = host_step((x,), (y,), loss_scale=host_scaler.get_scale())
        host_opt.set_grads(grads)
        assert optimizer_step(loss, host_opt, host_scaler, grads_scaled=True)
        host_opt.copy_to(model)
        res((x,), (y,), loss_scale=res_scaler.get_scale())
        assert res_opt.resident_grads == set(res.moved)
        assert optimizer_step(loss, res_opt, res_scaler, grads_scaled=True)
        assert res_scaler.get_scale() == host_scaler.get_scale()
        assert res_scaler.cycles["overflow_check"] > 0 and res_scaler.cycles["unscale"] > 0
    assert res_scaler.get_scale() == 2.0**11  # doubled after two clean steps
    for name, w in host_opt.parameters().items():
        assert torch.equal(res_opt.parameters()[name], w), name
    # an inf in one gradient word in SRAM: the step is skipped, nothing moves, scale halves
    before = (res_opt.parameters(), res_opt.state_dict()["state"])
    res((x,), (y,), loss_scale=res_scaler.get_scale())
    gmap, words = res_opt.grad_words("fc2.weight")
    symbol = next(iter(words))
    words[symbol].reshape(-1)[int(np.flatnonzero(gmap.symbols[symbol] >= 0)[3])] = \
        np.float32(np.inf).view(np.uint32)
    res_opt.put_grad_words("fc2.weight", gmap, words)
    assert not optimizer_step(loss, res_opt, res_scaler, grads_scaled=True)
    assert res_scaler.get_scale() == 2.0**10 and res_opt.resident_grads == set()
    for name, w in before[0].items():
        assert torch.equal(res_opt.parameters()[name], w), name
        assert torch.equal(res_opt.state_dict()["state"][name]["momentum_buffer"],
                           before[1][name]["momentum_buffer"])
