"""`wafer train CONFIG.yaml`: a YAML run on the fabric compared with eager PyTorch (summary,
history JSON, loss PNG, exit code 0), and bad configs or flags, a failing data factory or a
model that does not match its data refused in one line (exit code 2)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from frontend.cli import main
from frontend.errors import UserCodeError

CONFIG = {"backend": {"name": "fabric", "config": {"preset": "small", "rows": 12, "cols": 12}},
          "model": {"name": "mlp", "seed": 0},
          "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "loss": "mse",
          "precision": "fp32", "loop": {"max_steps": 10},
          "data": {"task": "regression", "args": {"batch": 4, "batches": 4}}}


def _write(tmp_path, cfg) -> str:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_train_compares_with_eager(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["train", _write(tmp_path, CONFIG), "--steps", "2", "--compare", "--quiet",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "fabric training, fp32: 2 steps" in printed
    assert "against eager PyTorch" in printed and "within" in printed
    result = json.loads((out / "train_history.json").read_text())
    assert [h["step"] for h in result["history"]] == [1, 2]
    assert result["eager"]["ok"] and result["eager"]["max_rel"] <= 1e-4
    assert (out / "train_loss.png").stat().st_size > 10_000


def _run(args) -> int:
    """main's exit code, whether it returns it or argparse exits with it."""
    try:
        return main(args)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize("change, flags, message", [
    ({"optimizer": {"type": "sgd"}}, [], "lr is required"),
    ({"data": {"task": "images"}}, [], "data.task must be one of"),
    ({"epochs": 2}, [], r"unknown keys \['epochs'\]"),
    ({"data": {"task": "regression", "args": {"batchh": 4}}}, [],
     r"data.args: got an unexpected keyword argument 'batchh' for regression\(\); it takes "
     r"d_in, d_out, batch, batches, seed, val_batches"),
    ({"model": {"name": "mlp", "args": {"d_inn": 4}}}, [],
     r"model.args: got an unexpected keyword argument 'd_inn' for MLP\(\); it takes d_in, "
     r"hidden, d_out"),
    ({}, ["--device", "cpu", "--compare"], "--compare compares a fabric run with eager "
                                            "PyTorch; this run is on device 'cpu' already"),
    ({}, ["--device", "cpu", "--execution", "pipelined"], "no execution mode"),
    ({"backend": {**CONFIG["backend"], "execution": "streamed"}}, [],
     r"backend execution must be one of \['sequential', 'pipelined'\], got 'streamed'"),
])
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, change, flags, message):
    assert _run(["train", _write(tmp_path, {**CONFIG, **change}), "--out", str(tmp_path),
                 *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.search(message, err), err


def test_a_failing_data_factory_is_named_with_its_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "user_data.py").write_text("def make(batch):\n"
                                           "    raise OSError(f'no data for batch {batch}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = {**CONFIG, "data": {"factory": "user_data:make", "args": {"batch": 4}}}
    args = ["train", _write(tmp_path, cfg), "--out", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "data.factory 'user_data:make' raised OSError at " in err
    assert "user_data.py:2: no data for batch 4 (run with --traceback" in err
    with pytest.raises(UserCodeError) as info:
        main([*args, "--traceback"])
    assert isinstance(info.value.__cause__, OSError)


def test_a_model_that_does_not_match_its_data_is_one_line(tmp_path, capsys, caplog):
    """The mlp takes 16 features, the data has 8: the frontend's message alone, without
    the 150-line traceback torch logs while tracing (checked on the records, which reach
    pytest's handlers; torch's own handler writes to a stream captured elsewhere)."""
    cfg = {**CONFIG, "data": {"task": "regression", "args": {"d_in": 8, "batch": 4,
                                                              "batches": 1}}}
    assert main(["train", _write(tmp_path, cfg), "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        "wafer train: error: aot_autograd could not trace a training step of MLP: "
        "RuntimeError: a and b must have same reduction dim, but got [4, 8] X [16, 24]. "
        "(run with --traceback for the full trace)"], err
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("torch")]
    assert not any("failed while attempting to run meta" in m for m in logged), logged
