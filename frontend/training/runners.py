"""One training step on a device, for the Trainer: `FabricRunner` (the simulated fabric:
`compile_training_step`, a fabric optimizer, the GradScaler's work on the fabric) and
`EagerRunner` (eager PyTorch: the same loop, torch.optim with foreach=False, CPU autocast).

Both take a batch as (inputs, targets), tuples of tensors, and return the step's log: a
dict with loss (fp32, unscaled), taken (False when loss scaling skipped the step), scale
(the loss scale used, 1.0 without scaling) and, on the fabric, the simulated cycles.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

import torch

from frontend.errors import CheckpointError
from frontend.training.checkpoint import (
    load_checkpoint,
    read_checkpoint_file,
    save_checkpoint,
    write_checkpoint_file,
)
from frontend.training.optim import FabricAdamW, FabricSGD
from frontend.training.resident import ResidentStep
from frontend.training.scaler import GradScaler, optimizer_step
from frontend.training.specs import OPTIMIZERS, Backend, OptimizerSpec, PrecisionSpec
from frontend.training.step import TrainingStep, compile_training_step

FABRIC_OPTIMIZERS = {"sgd": FabricSGD, "adamw": FabricAdamW}


def _shape_key(tensors) -> tuple:
    return tuple((tuple(t.shape), t.dtype) for t in tensors)


def _scaler(precision: PrecisionSpec, half: str | None):
    """Dynamic loss scaling in mixed precision (with the spec's settings); in fp32 a scaler
    only when the spec asks for one (a fixed scale, clipping)."""
    if precision.mode == "fp32" and not precision.scaler:
        return None
    return GradScaler(**(precision.scaler or {}), half=half)


class FabricRunner:
    """Steps on the simulated fabric: the step compiled per batch shape (once each), weights
    and optimizer state resident in PE memory (`frontend.training.resident`: homed on the
    tiles of the first compiled step's forward stages that read them). The model's
    parameters are updated from the fabric by `sync_model` (the Trainer calls it at the end
    of fit), and after every step in mode "validate" (its eager reference reads them)."""

    device = "fabric"

    def __init__(self, model: torch.nn.Module, loss_fn, optimizer: OptimizerSpec,
                 precision: PrecisionSpec, backend: Backend):
        self.model, self.loss_fn, self.backend = model, loss_fn, backend
        self.precision = precision
        self.half = precision.half_name()
        self.steps: dict[tuple, ResidentStep] = {}
        self.optimizer = FABRIC_OPTIMIZERS[optimizer.kind](
            model.named_parameters(), **optimizer.hyper, config=backend.config)
        self.scaler = _scaler(precision, self.half)

    def step_for(self, inputs, targets) -> ResidentStep:
        """The compiled step for this batch's shapes (compiled on first use; the first one
        compiled decides where the parameters live)."""
        key = (_shape_key(inputs), _shape_key(targets))
        if key not in self.steps:
            step = compile_training_step(
                self.model, inputs, targets, self.loss_fn, self.backend.config,
                self.backend.max_cycles, self.precision.mode, self.half,
                self.backend.execution)
            self.steps[key] = ResidentStep(step, self.optimizer, rehome=not self.steps)
        return self.steps[key]

    def train_step(self, inputs, targets) -> dict:
        step = self.step_for(inputs, targets)
        reference = self._eager_reference(inputs, targets) \
            if self.backend.mode == "validate" else None
        scale = self.scaler.get_scale() if self.scaler else 1.0
        # the eager comparison takes the gradients from the host
        loss = step(inputs, targets, loss_scale=scale, host_grads=reference is not None)
        grads = step.host_grads
        if self.scaler is not None:
            if grads:
                self.optimizer.set_grads(grads)
            taken = optimizer_step(loss, self.optimizer, self.scaler, grads_scaled=True)
        else:
            self.optimizer.step_resident(step.moved, grads)
            taken = True
        if reference is not None:
            self.sync_model()
        config = self.backend.config
        peak = config.simd_width("fma", "f16" if self.half else "f32") * config.num_pes
        log = {"loss": float(loss), "taken": taken, "scale": scale, "cycles": step.cycles,
               "host_cycles": step.host_cycles,
               "grad_move_cycles": step.grad_move_cycles,
               "optimizer_cycles": self.optimizer.cycles if taken else 0,
               "scaler_cycles": sum(self.scaler.cycles.values()) if self.scaler else 0,
               "utilization": step.fmas / (peak * max(1, step.cycles))}
        if reference is not None:
            log.update(_errors(loss, grads, scale, *reference))
        return log

    def sync_model(self) -> None:
        """Copy the weights in PE memory into the model's parameters (host I/O)."""
        self.optimizer.copy_to(self.model)

    def _eager_reference(self, inputs, targets):
        """Eager fp32 loss and gradients at the current weights (mode "validate")."""
        self.model.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(*inputs), *targets)
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in self.model.named_parameters()}
        self.model.zero_grad(set_to_none=True)
        return loss.detach(), grads

    def eval_loss(self, inputs, targets) -> float:
        return float(self.step_for(inputs, targets).loss_only(inputs, targets))

    def compile_only(self, inputs, targets) -> TrainingStep:
        return self.step_for(inputs, targets).step

    def save(self, path, extra: dict) -> dict:
        report = save_checkpoint(path, self.optimizer, self.scaler, extra=extra)
        return dataclasses.asdict(report)

    def load(self, path, check_extra=None) -> dict:
        """Resume from the checkpoint at `path` (`load_checkpoint`, with `check_extra`);
        returns its extra."""
        extra = load_checkpoint(path, self.optimizer, self.scaler, check_extra)
        self.sync_model()
        return extra


def _errors(loss, grads, scale, want_loss, want) -> dict:
    """Relative errors of the fabric's loss and gradients (unscaled) against eager's: each
    gradient's largest difference over its largest magnitude, the worst parameter's."""
    worst = 0.0
    for name, g in want.items():
        diff = (grads[name] / scale - g).abs().max().item()
        worst = max(worst, diff / max(g.abs().max().item(), 1e-30))
    return {"loss_error": abs(float(loss) - float(want_loss)) / max(abs(float(want_loss)),
                                                                     1e-30),
            "grad_error": worst}


class EagerRunner:
    """Steps in eager PyTorch on the CPU: torch.optim (foreach=False, the fabric
    optimizers' order), autocast in mixed precision, the same GradScaler rule in PyTorch."""

    device = "cpu"

    def __init__(self, model: torch.nn.Module, loss_fn, optimizer: OptimizerSpec,
                 precision: PrecisionSpec):
        self.model, self.loss_fn, self.precision = model, loss_fn, precision
        self.half = precision.half_name()
        if self.half == "cbfloat16":
            raise ValueError("device 'cpu' cannot run cbfloat16 (PyTorch has no such dtype); "
                             "compare a cbfloat16 fabric run with precision='fp32' on the cpu")
        self.optimizer = OPTIMIZERS[optimizer.kind](model.parameters(), foreach=False,
                                                    **optimizer.hyper)
        self.scaler = _scaler(precision, self.half)

    def _autocast(self):
        if self.half is None:
            return contextlib.nullcontext()
        return torch.autocast("cpu", dtype=getattr(torch, self.half))

    def train_step(self, inputs, targets) -> dict:
        with self._autocast():
            loss = self.loss_fn(self.model(*inputs), *targets)
        scale = self.scaler.get_scale() if self.scaler else 1.0
        if self.scaler is not None:
            taken = optimizer_step(loss, self.optimizer, self.scaler)
        else:
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            taken = True
        return {"loss": float(loss.detach().float()), "taken": taken, "scale": scale}

    def sync_model(self) -> None:
        """Nothing to do: eager steps update the model's parameters in place."""

    def eval_loss(self, inputs, targets) -> float:
        with torch.no_grad(), self._autocast():
            return float(self.loss_fn(self.model(*inputs), *targets).float())

    def compile_only(self, inputs, targets):
        raise ValueError("mode 'compile_only' needs the fabric backend")

    def save(self, path, extra: dict) -> dict:
        # the file of a fabric run's checkpoint (a digest at its end, an atomic write)
        file_bytes = write_checkpoint_file(path, {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler else None,
            "extra": extra, "format": "eager-2"})
        return {"path": os.fspath(path), "file_bytes": file_bytes,
                "host_cycles": 0}  # eager: no fabric to read back

    def load(self, path, check_extra=None) -> dict:
        """Resume from the checkpoint at `path`, verified (`read_checkpoint_file`);
        `check_extra(extra)` is called before anything is loaded. Returns its extra."""
        ckpt = read_checkpoint_file(path)
        if not isinstance(ckpt, dict) or ckpt.get("format") != "eager-2":
            raise CheckpointError(f"checkpoint {os.fspath(path)!r} is not one of a 'cpu' "
                                  "training run (a fabric run's checkpoint resumes on the "
                                  "fabric)")
        if check_extra is not None:
            check_extra(ckpt["extra"])
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if self.scaler is not None:
            self.scaler.load_state_dict(ckpt["scaler"])
        return ckpt["extra"]
