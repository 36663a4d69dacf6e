"""`wafer train CONFIG.yaml`: a YAML run on the fabric compared with eager PyTorch (summary,
history JSON, loss PNG, exit code 0), and bad configs or flags refused in one line (exit
code 2)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from frontend.cli import main

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


@pytest.mark.parametrize("change, flags, message", [
    ({"optimizer": {"type": "sgd"}}, [], "lr is required"),
    ({"data": {"task": "images"}}, [], "data.task must be one of"),
    ({"epochs": 2}, [], r"unknown keys \['epochs'\]"),
    ({}, ["--device", "cpu", "--compare"], "--compare compares a fabric run with eager "
                                            "PyTorch; this run is on device 'cpu' already"),
])
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, change, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", _write(tmp_path, {**CONFIG, **change}), "--out", str(tmp_path),
              *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.search(message, err), err
