"""`Trainer`: a PyTorch training loop run on the simulated fabric (or, for comparison, in
eager PyTorch), configured in Python or by a YAML file with the same keys
(`frontend.training.config_file`, `wafer train config.yaml`).

    trainer = Trainer(device="fabric", model=model, optimizer={"type": "sgd", "lr": 0.1},
                      loss="mse", precision="bfloat16", loop={"max_steps": 50})
    history = trainer.fit(train_loader, val_loader)     # one dict per optimizer step

A loader is any iterable of batches (input, target): each a tensor or a tuple of tensors
(a torch DataLoader's [x, y] works); shapes are static per compiled step, and a batch of
new shapes compiles a step of its own. On the fabric the weights and the optimizer state
stay in PE memory from step to step (`frontend.training.resident`: homed on the tiles of
the forward stages that read them); the model's parameters are updated from there at the
end of `fit` (and after every step in mode "validate"); a callback that needs them
mid-run calls `trainer.sync_model()` (host I/O).

History (`trainer.history`, one dict per step): step (from 1), epoch, batch, loss (fp32,
unscaled; the fabric's forward), taken, scale, wall_s; on the fabric also cycles (forward +
backward with their weight moves, simulated, plus grad_move_cycles), host_cycles,
grad_move_cycles (gradients over the mesh to the weights' homes), optimizer_cycles,
scaler_cycles, utilization, and in mode "validate" loss_error and grad_error against eager
fp32 autograd at the same weights. `trainer.val_history`: {step, val_loss}.

The backend's execution (`frontend.backend(..., execution=)`) decides what a graph's cycles
are: "sequential", its kernels and moves one after another, the host's transfers apart;
"pipelined", its latency, stages overlapping where the dataflow allows and the host's
writes of its inputs and reads of its outputs included (`CompiledModel.cycles` in each
mode). host_cycles are the host's loads of the graphs' constants and writes of their
inputs in both (in pipelined execution those writes lie inside cycles too). utilization is
the step's useful multiply-adds over the fabric's fma peak for the step's cycles, in both:
a step is one sample (the next one needs its weights), never a stream, so pipelined
execution has no period to measure it over.

Checkpoints (`checkpoint={"dir": d, "every": k}`): d/step_<k>.pt every k steps and at the
end: the fabric's weights, optimizer and scaler state (`save_checkpoint`) plus the loop's
position and history. `checkpoint={"resume": path | "latest"}` continues from one: the
batches already seen are skipped (the loader must give the same batches in the same order),
and the run goes on as the uninterrupted one would, bit for bit in fp32. A checkpoint of
another precision (fp32, or another half dtype) is refused before anything is loaded, and
a damaged one too (`frontend.errors.CheckpointError`, naming the file).
`trainer.checkpoints`: one dict per file written: step, path, file_bytes and, on the
fabric, the parts' bytes (weights, optimizer, scaler) and the read-back's host cycles.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import torch

from frontend.errors import CheckpointError
from frontend.training.callbacks import Callback, resolve_callbacks
from frontend.training.runners import EagerRunner, FabricRunner
from frontend.training.specs import (
    resolve_backend,
    resolve_checkpoint,
    resolve_loop,
    resolve_loss,
    resolve_model,
    resolve_optimizer,
    resolve_precision,
)

_STEP_FILE = re.compile(r"step_(\d+)\.pt$")


def split_batch(batch, index: int) -> tuple[tuple, tuple]:
    """(inputs, targets) as tuples of tensors from a batch (input, target)."""
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise ValueError(f"batch {index}: expected a pair (input, target), got "
                         f"{type(batch).__name__}"
                         f"{f' of {len(batch)} items' if isinstance(batch, (tuple, list)) else ''}")
    parts = []
    for what, part in zip(("input", "target"), batch):
        items = tuple(part) if isinstance(part, (tuple, list)) else (part,)
        for t in items:
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"batch {index}: the {what} holds a {type(t).__name__}, "
                                 "not a tensor")
        parts.append(items)
    return parts[0], parts[1]


class Trainer:
    """A training run (module docstring). Arguments, each the object or its YAML form
    (`frontend.training.specs`): device ("fabric" | "cpu") or backend (not both), model,
    optimizer, loss, precision, loop, checkpoint, callbacks."""

    def __init__(self, device: str | None = None, backend=None, *, model, optimizer,
                 loss="mse", precision="fp32", loop=None, checkpoint=None, callbacks=()):
        self.backend = resolve_backend(device, backend)
        self.model = resolve_model(model)
        self.loss_fn = resolve_loss(loss)
        self.optimizer_spec = resolve_optimizer(optimizer, self.model)
        self.precision = resolve_precision(precision)
        self.loop = resolve_loop(loop)
        self.checkpoint = resolve_checkpoint(checkpoint)
        self.callbacks: list[Callback] = resolve_callbacks(callbacks)
        if self.backend.name == "fabric":
            self.runner = FabricRunner(self.model, self.loss_fn, self.optimizer_spec,
                                       self.precision, self.backend)
        else:
            self.runner = EagerRunner(self.model, self.loss_fn, self.optimizer_spec,
                                      self.precision)
        self.history: list[dict] = []
        self.val_history: list[dict] = []
        self.checkpoints: list[dict] = []
        self.compiled = None  # mode "compile_only": the compiled TrainingStep

    @property
    def device(self) -> str:
        return self.backend.name

    @property
    def losses(self) -> list[float]:
        return [log["loss"] for log in self.history]

    # ---- the loop -----------------------------------------------------------------------
    def fit(self, train_loader, val_loader=None) -> list[dict]:
        """Train (module docstring); returns `self.history`."""
        epoch0, skip = self._resume()
        self._fire("on_fit_start")
        if self.backend.mode == "compile_only":
            for i, batch in enumerate(train_loader):
                self.compiled = self.runner.compile_only(*split_batch(batch, i))
                break
            self._fire("on_fit_end")
            return self.history
        step, last_saved, ran = len(self.history), None, False
        for epoch in range(epoch0, self.loop.epochs):
            for i, batch in enumerate(train_loader):
                if epoch == epoch0 and i < skip:
                    continue
                if self.loop.max_steps is not None and step >= self.loop.max_steps:
                    break
                step += 1
                ran = True
                self._fire("on_step_start", step)
                inputs, targets = split_batch(batch, i)
                t0 = time.perf_counter()
                log = {"step": step, "epoch": epoch, "batch": i,
                       **self.runner.train_step(inputs, targets)}
                log["wall_s"] = time.perf_counter() - t0
                self.history.append(log)
                self._fire("on_step_end", log)
                if val_loader is not None and self.loop.val_every and \
                        step % self.loop.val_every == 0:
                    self._validate(val_loader, step)
                if self.checkpoint.every and step % self.checkpoint.every == 0:
                    last_saved = self._save(step, epoch, i + 1)
            else:  # the epoch ran to its end
                if val_loader is not None and self.loop.val_every is None:
                    self._validate(val_loader, step)
                self._fire("on_epoch_end", epoch)
                continue
            break  # max_steps reached
        if self.checkpoint.dir is not None and ran and last_saved != step:
            last = self.history[-1]
            self._save(step, last["epoch"], last["batch"] + 1)
        self.runner.sync_model()
        self._fire("on_fit_end")
        return self.history

    def sync_model(self) -> None:
        """Copy the weights the device holds into the model's parameters."""
        self.runner.sync_model()

    def evaluate(self, loader) -> float:
        """The mean loss over `loader`'s batches (forward only), on this Trainer's device."""
        losses = [self.runner.eval_loss(*split_batch(b, i)) for i, b in enumerate(loader)]
        if not losses:
            raise ValueError("evaluate: the loader gave no batches")
        return sum(losses) / len(losses)

    def _validate(self, loader, step: int) -> None:
        log = {"step": step, "val_loss": self.evaluate(loader)}
        self.val_history.append(log)
        self._fire("on_validation_end", log)

    def _fire(self, hook: str, *args) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    # ---- checkpoints --------------------------------------------------------------------
    def _save(self, step: int, epoch: int, next_batch: int) -> int:
        Path(self.checkpoint.dir).mkdir(parents=True, exist_ok=True)
        path = os.path.join(self.checkpoint.dir, f"step_{step}.pt")
        extra = {"trainer": {"step": step, "epoch": epoch, "next_batch": next_batch,
                             "history": self.history, "val_history": self.val_history,
                             "device": self.device, "precision": self._precision_name()}}
        info = {"step": step, **self.runner.save(path, extra)}
        self.checkpoints.append(info)
        self._fire("on_checkpoint", info)
        return step

    def _precision_name(self) -> str:
        """fp32 or the half dtype of a mixed run (a checkpoint resumes in the same one)."""
        return self.runner.half or "fp32"

    def _resume(self) -> tuple[int, int]:
        """(epoch, batches of it to skip) after loading the resume checkpoint, if any."""
        path = self.checkpoint.resume
        if path is None:
            return 0, 0
        if path == "latest":
            found = [(int(m.group(1)), f) for f in os.listdir(self.checkpoint.dir)
                     if (m := _STEP_FILE.search(f))] if os.path.isdir(self.checkpoint.dir) \
                else []
            if not found:
                raise ValueError(f"checkpoint: resume 'latest' but {self.checkpoint.dir!r} "
                                 "holds no step_<k>.pt")
            path = os.path.join(self.checkpoint.dir, max(found)[1])

        def check(extra):
            # before anything is loaded: a run of another precision differs in its scaler
            # state too, and the runner would refuse that with a less telling message
            state = extra.get("trainer") if isinstance(extra, dict) else None
            if state is None:
                raise CheckpointError(f"checkpoint {path!r} was not written by a Trainer (no "
                                      "loop position in it)")
            if state["precision"] != self._precision_name():
                raise CheckpointError(f"checkpoint {path!r} is of a {state['precision']} "
                                      f"run; this Trainer runs {self._precision_name()}")

        state = self.runner.load(path, check)["trainer"]
        self.history = list(state["history"])
        self.val_history = list(state["val_history"])
        return state["epoch"], state["next_batch"]
