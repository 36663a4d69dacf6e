"""frontend.Trainer: configuration (Python and YAML give the same run; device and backend
are exclusive; bad values are named), callbacks in order, checkpoints that resume bit for
bit, the modes, loss scaling with skipped steps. The fabric runs use the frontend tests'
CONFIG (one engine compile); the loss curves against eager PyTorch over many steps are in
test_training_curves.py."""

from __future__ import annotations

import pytest
import torch
import yaml

import frontend
from frontend.training import Callback, tasks
from frontend.training.config_file import load_config, make_data, make_trainer
from tests.frontend.models import CONFIG

SGD = {"type": "sgd", "lr": 0.05, "momentum": 0.9}
FABRIC = {"name": "fabric", "config": {"preset": "small", "rows": 12, "cols": 12}}


def _fabric(**kw):
    return frontend.Trainer(backend=frontend.backend("fabric", config=CONFIG), **kw)


def _data(n=4):
    return tasks.regression(batch=4, batches=n, val_batches=1)


def test_device_and_backend_are_exclusive():
    with pytest.raises(ValueError, match="mutually exclusive"):
        frontend.Trainer(device="cpu", backend=frontend.backend("fabric", config=CONFIG),
                         model={"name": "mlp"}, optimizer=SGD)


@pytest.mark.parametrize("kwargs, match", [
    ({"device": "gpu"}, "device must be one of"),
    ({"optimizer": {"type": "lamb", "lr": 0.1}}, "optimizer.type"),
    ({"optimizer": {"type": "sgd"}}, "lr is required"),
    ({"optimizer": {"type": "sgd", "lr": 0.1, "betas": [0.9, 0.99]}}, r"unknown keys \['betas'\]"),
    ({"loss": "hinge"}, "loss must be"),
    ({"precision": "float8"}, "precision: dtype"),
    ({"loop": {"epochs": 0}}, "loop.epochs"),
    ({"loop": {"steps": 3}}, r"loop: unknown keys \['steps'\]"),
    ({"checkpoint": {"every": 2}}, "need a dir"),
    ({"model": {"name": "resnet"}}, "no model 'resnet'"),
    ({"callbacks": [42]}, r"callbacks\[0\]"),
    ({"device": "cpu", "precision": "cbfloat16"}, "cannot run cbfloat16"),
])
def test_bad_settings_are_named(kwargs, match):
    args = {"device": "cpu", "model": {"name": "mlp"}, "optimizer": SGD, **kwargs}
    with pytest.raises(ValueError, match=match):
        frontend.Trainer(**args)


def test_torch_optimizer_is_taken_with_its_hyperparameters():
    model = frontend.zoo.build("mlp")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    trainer = frontend.Trainer(device="cpu", model=model, optimizer=opt)
    assert trainer.optimizer_spec.kind == "adamw"
    assert trainer.optimizer_spec.hyper["lr"] == 3e-3
    assert trainer.optimizer_spec.hyper["weight_decay"] == 0.1
    other = torch.optim.SGD(frontend.zoo.build("mlp").parameters(), lr=0.1)
    with pytest.raises(ValueError, match="not built on exactly this model"):
        frontend.Trainer(device="cpu", model=model, optimizer=other)


class Recorder(Callback):
    """Appends (tag, hook, detail) to a shared list."""

    def __init__(self, events, tag):
        self.events, self.tag = events, tag

    def on_fit_start(self, trainer):
        self.events.append((self.tag, "fit_start", None))

    def on_step_start(self, trainer, step):
        self.events.append((self.tag, "step_start", step))

    def on_step_end(self, trainer, log):
        self.events.append((self.tag, "step_end", log["step"]))

    def on_validation_end(self, trainer, log):
        self.events.append((self.tag, "validation_end", log["step"]))

    def on_checkpoint(self, trainer, info):
        self.events.append((self.tag, "checkpoint", info["step"]))

    def on_epoch_end(self, trainer, epoch):
        self.events.append((self.tag, "epoch_end", epoch))

    def on_fit_end(self, trainer):
        self.events.append((self.tag, "fit_end", None))


def test_callbacks_fire_in_order(tmp_path):
    events = []
    train, val = _data(3)
    trainer = frontend.Trainer(device="cpu", model={"name": "mlp"}, optimizer=SGD,
                               loop={"epochs": 2, "val_every": 2},
                               checkpoint={"dir": str(tmp_path), "every": 3},
                               callbacks=[Recorder(events, "a"), Recorder(events, "b")])
    trainer.fit(train, val)
    hooks = []
    for tag, hook, detail in events:
        if tag == "a":
            hooks.append((hook, detail))
    assert hooks == [
        ("fit_start", None),
        ("step_start", 1), ("step_end", 1),
        ("step_start", 2), ("step_end", 2), ("validation_end", 2),
        ("step_start", 3), ("step_end", 3), ("checkpoint", 3), ("epoch_end", 0),
        ("step_start", 4), ("step_end", 4), ("validation_end", 4),
        ("step_start", 5), ("step_end", 5),
        ("step_start", 6), ("step_end", 6), ("validation_end", 6), ("checkpoint", 6),
        ("epoch_end", 1),
        ("fit_end", None)]
    # every hook reaches a before b
    assert [e for e in events if e[0] == "b"] == [("b", h, d) for h, d in hooks]
    for i in range(0, len(events), 2):
        assert events[i][0] == "a" and events[i + 1][0] == "b"
        assert events[i][1:] == events[i + 1][1:]
    assert [h["step"] for h in trainer.history] == [1, 2, 3, 4, 5, 6]
    assert [v["step"] for v in trainer.val_history] == [2, 4, 6]


def test_yaml_and_python_configs_give_the_same_run(tmp_path):
    train, _ = _data(2)
    cfg = {"backend": FABRIC, "model": {"name": "mlp", "seed": 3}, "optimizer": SGD,
           "loss": "mse", "precision": "fp32", "loop": {"max_steps": 2},
           "data": {"task": "regression", "args": {"batch": 4, "batches": 2,
                                                   "val_batches": 1}}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    loaded = load_config(path)
    from_yaml = make_trainer(loaded)
    yaml_train, _ = make_data(loaded)
    from_yaml.fit(yaml_train)

    torch.manual_seed(3)
    model = frontend.zoo.MLP()
    python = _fabric(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.05,
                                                              momentum=0.9),
                     loss=torch.nn.functional.mse_loss, loop={"max_steps": 2})
    python.fit(train)
    assert from_yaml.losses == python.losses  # bit for bit
    for (n, a), (_, b) in zip(from_yaml.model.named_parameters(),
                              python.model.named_parameters()):
        assert torch.equal(a, b), n
    # and the fabric run follows eager PyTorch (fp32: reassociated sums, 1e-5 relative)
    eager = make_trainer(loaded, device="cpu")
    eager.fit(yaml_train)
    torch.testing.assert_close(torch.tensor(from_yaml.losses), torch.tensor(eager.losses),
                               rtol=1e-5, atol=0)
    assert all(h["cycles"] > 0 and 0 < h["utilization"] < 1 for h in from_yaml.history)


def test_yaml_errors_name_the_file_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: {name: mlp}\noptimizer: {type: sgd, lr: 0.1}\nepochs: 3\n")
    with pytest.raises(ValueError, match=r"bad.yaml.*unknown keys \['epochs'\]"):
        load_config(path)
    path.write_text("model: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_config(path)


def test_checkpoint_resume_continues_bit_for_bit(tmp_path):
    train, _ = _data(3)
    common = {"model": {"name": "mlp", "seed": 1}, "optimizer": SGD,
              "precision": {"dtype": "fp32", "loss_scale": "dynamic", "init_scale": 2.0**8,
                            "steps_per_increase": 2}}
    whole = _fabric(**common, checkpoint={"dir": str(tmp_path), "every": 2})
    whole.fit(train)
    assert [c["step"] for c in whole.checkpoints] == [2, 3]  # every 2, and the last
    info, numel = whole.checkpoints[0], sum(p.numel() for p in whole.model.parameters())
    # each part as torch.save writes it alone: its fp32 values plus the container
    assert 4 * numel < info["weights_bytes"] < 4 * numel + 4096
    assert 4 * numel < info["optimizer_bytes"]  # the momentum buffers
    assert info["scaler_bytes"] > 0 and info["host_cycles"] > 0
    assert info["file_bytes"] > 8 * numel
    assert whole.history[-1]["scale"] == 2.0**9  # doubled after 2 clean steps

    resumed = _fabric(**common, checkpoint={"resume": str(tmp_path / "step_2.pt")})
    resumed.fit(train)
    assert [h["step"] for h in resumed.history] == [1, 2, 3]
    assert resumed.losses == whole.losses
    for (n, a), (_, b) in zip(resumed.model.named_parameters(),
                              whole.model.named_parameters()):
        assert torch.equal(a, b), n
    assert resumed.runner.scaler.state_dict() == whole.runner.scaler.state_dict()

    latest = _fabric(**common, checkpoint={"dir": str(tmp_path), "resume": "latest"})
    latest.fit(train)  # resumes after the last batch: nothing left to run
    assert latest.losses == whole.losses


def test_validate_mode_compares_every_step_with_eager():
    train, _ = _data(1)
    trainer = frontend.Trainer(backend=frontend.backend("fabric", config=CONFIG,
                                                        mode="validate"),
                               model={"name": "mlp"}, optimizer=SGD)
    trainer.fit(train)
    for log in trainer.history:
        assert log["loss_error"] < 1e-6 and log["grad_error"] < 1e-5


def test_compile_only_mode_runs_nothing():
    train, _ = _data(2)
    trainer = frontend.Trainer(backend=frontend.backend("fabric", config=CONFIG,
                                                        mode="compile_only"),
                               model={"name": "mlp"}, optimizer=SGD)
    assert trainer.fit(train) == []
    step = trainer.compiled
    assert {"gemm_summa", "relation", "select"} <= {s.kind for s in step.backward.lowered.stages}
    assert step.forward.last is None and step.backward.last is None
    with pytest.raises(ValueError, match="compile_only' needs the fabric"):
        frontend.Trainer(device="cpu", model={"name": "mlp"}, optimizer=SGD,
                         ).runner.compile_only(*[(t,) for t in train[0]])


def test_overflowing_steps_are_skipped_and_the_scale_halves():
    """fp16 with a loss scale of 2^30: the scaled gradients overflow fp16, the steps are
    skipped (weights unchanged) and the scale halves until a step goes through; eager
    PyTorch under autocast skips the same steps."""
    train, _ = _data(2)
    precision = {"dtype": "float16", "init_scale": 2.0**30, "max_loss_scale": 2.0**30}
    fabric = _fabric(model={"name": "mlp"}, optimizer=SGD, precision=precision)
    before = {n: p.detach().clone() for n, p in fabric.model.named_parameters()}
    eager = frontend.Trainer(device="cpu", model={"name": "mlp"}, optimizer=SGD,
                             precision=precision)
    fabric.fit(train[:1] * 2)
    eager.fit(train[:1] * 2)
    taken = [h["taken"] for h in fabric.history]
    assert taken == [h["taken"] for h in eager.history]
    assert not taken[0]
    scales = [h["scale"] for h in fabric.history]
    assert scales == [2.0**30 / 2**i for i in range(2)]
    first = taken.index(True) if True in taken else len(taken)
    if first == len(taken):  # every step skipped: weights exactly as before
        for n, p in fabric.model.named_parameters():
            assert torch.equal(p, before[n]), n
