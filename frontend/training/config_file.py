"""A training run from a YAML file: the Trainer's keyword arguments as keys (device or
backend, model, optimizer, loss, precision, loop, checkpoint, callbacks; their plain-data
forms in `frontend.training.specs`) plus `data`, what `wafer train` feeds the Trainer:

    data: {task: regression | tokens, args: {...}}        (frontend.training.tasks)
    data: {factory: "package.module:callable", args: {...}}
          (the callable returns (train_loader, val_loader) or a train loader alone)

Example (examples/train_mlp.yaml):
    device: fabric                 # or backend: {name: fabric, config: {preset: small,
    model: {name: mlp, seed: 0}    #              rows: 12, cols: 12}, mode: train,
                                   #              execution: sequential | pipelined}
    optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
    loss: mse
    precision: bfloat16
    loop: {max_steps: 20}
    data: {task: regression, args: {batch: 4, batches: 20}}
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import yaml

from frontend.training.specs import call_factory, check_args
from frontend.training.tasks import TASKS
from frontend.training.trainer import Trainer

TRAINER_KEYS = ("device", "backend", "model", "optimizer", "loss", "precision", "loop",
                "checkpoint", "callbacks")
KEYS = TRAINER_KEYS + ("data",)


def load_config(path) -> dict:
    """The YAML file at `path` as a mapping, its keys checked."""
    try:
        with open(path) as f:
            cfg = yaml.safe_load(f)
    except OSError as e:
        raise ValueError(f"cannot read training config {os.fspath(path)!r}: {e}") from e
    except yaml.YAMLError as e:
        raise ValueError(f"{os.fspath(path)!r} is not valid YAML: {e}") from e
    if not isinstance(cfg, Mapping):
        raise ValueError(f"{os.fspath(path)!r}: expected a mapping of "
                         f"{', '.join(KEYS)}; got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - set(KEYS))
    if unknown:
        raise ValueError(f"{os.fspath(path)!r}: unknown keys {unknown}; allowed: "
                         f"{', '.join(KEYS)}")
    for key in ("model", "optimizer"):
        if key not in cfg:
            raise ValueError(f"{os.fspath(path)!r}: '{key}' is required")
    return dict(cfg)


def make_trainer(cfg: Mapping, **overrides) -> Trainer:
    """A Trainer from a config mapping (`overrides` replace keys, e.g. device="cpu")."""
    kwargs = {k: cfg[k] for k in TRAINER_KEYS if k in cfg}
    if "device" in overrides or "backend" in overrides:
        kwargs.pop("device", None)
        kwargs.pop("backend", None)
    kwargs.update(overrides)
    return Trainer(**kwargs)


def make_data(cfg: Mapping):
    """(train_loader, val_loader or None) from the config's `data` key."""
    spec = cfg.get("data")
    if not isinstance(spec, Mapping):
        raise ValueError("data: expected {task: regression|tokens, args: {...}} or "
                         f"{{factory: 'package.module:callable', args: {{...}}}}, got {spec!r}")
    unknown = sorted(set(spec) - {"task", "factory", "args"})
    if unknown or ("task" in spec) == ("factory" in spec):
        raise ValueError(f"data: give exactly one of task ({sorted(TASKS)}) and factory, "
                         f"and optional args; got {dict(spec)}")
    args = spec.get("args") or {}
    if not isinstance(args, Mapping):
        raise ValueError(f"data.args must be a mapping, got {type(args).__name__} {args!r}")
    if "task" in spec:
        if spec["task"] not in TASKS:
            raise ValueError(f"data.task must be one of {sorted(TASKS)}, got {spec['task']!r}")
        check_args(TASKS[spec["task"]], args, "data.args")
        return TASKS[spec["task"]](**args)
    out = call_factory(spec["factory"], "data.factory", args)
    if isinstance(out, tuple) and len(out) == 2:
        return out
    return out, None
