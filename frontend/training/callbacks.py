"""Trainer callbacks: hooks called in the order the callbacks were given, at fixed points of
`Trainer.fit`:

    on_fit_start(trainer)
      per step:  on_step_start(trainer, step)  ->  on_step_end(trainer, log)
                 on_validation_end(trainer, log)       (when validation runs)
                 on_checkpoint(trainer, info)          (when a checkpoint is written)
      per epoch: on_epoch_end(trainer, epoch)
    on_fit_end(trainer)

`step` counts optimizer steps from 1 (skipped steps included); `log` is the step's entry of
`trainer.history` (or `trainer.val_history`). A YAML config names callbacks as
"package.module:Class" or {class: ..., args: {...}}, or "progress" (ProgressPrinter).
"""

from __future__ import annotations

import sys

from frontend.training.specs import load_object


class Callback:
    """Override the hooks you need; each does nothing by default."""

    def on_fit_start(self, trainer) -> None:
        pass

    def on_step_start(self, trainer, step: int) -> None:
        pass

    def on_step_end(self, trainer, log: dict) -> None:
        pass

    def on_validation_end(self, trainer, log: dict) -> None:
        pass

    def on_checkpoint(self, trainer, info: dict) -> None:
        pass

    def on_epoch_end(self, trainer, epoch: int) -> None:
        pass

    def on_fit_end(self, trainer) -> None:
        pass


class ProgressPrinter(Callback):
    """One line per `every` steps: step, loss, loss scale and (fabric) simulated cycles."""

    def __init__(self, every: int = 1, stream=None):
        self.every = every
        self.stream = stream or sys.stdout

    def on_step_end(self, trainer, log: dict) -> None:
        if log["step"] % self.every:
            return
        parts = [f"step {log['step']:4d}", f"loss {log['loss']:.6g}"]
        if log["scale"] != 1.0:
            parts.append(f"scale {log['scale']:g}")
        if not log["taken"]:
            parts.append("skipped (overflow)")
        if "cycles" in log:
            parts.append(f"{log['cycles']:,} cycles")
        print("  ".join(parts), file=self.stream)

    def on_validation_end(self, trainer, log: dict) -> None:
        print(f"step {log['step']:4d}  val_loss {log['val_loss']:.6g}", file=self.stream)


BUILTIN = {"progress": ProgressPrinter}


def resolve_callbacks(specs) -> list[Callback]:
    """Callback objects, or their YAML forms (module docstring)."""
    out = []
    for i, spec in enumerate(specs or ()):
        if isinstance(spec, str):
            spec = {"class": spec}
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - {"class", "args"})
            if unknown or "class" not in spec:
                raise ValueError(f"callbacks[{i}]: expected {{class: ..., args: {{...}}}}, "
                                 f"got {spec}")
            name = spec["class"]
            cls = BUILTIN.get(name) or load_object(name, f"callbacks[{i}]")
            spec = cls(**(spec.get("args") or {}))
        if not isinstance(spec, Callback):
            raise ValueError(f"callbacks[{i}]: {type(spec).__name__} is not a "
                             "frontend.training.Callback")
        out.append(spec)
    return out
