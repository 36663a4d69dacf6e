"""Dynamic loss scaling for training on the fabric: `GradScaler` and `optimizer_step`.

Flow of one step (`optimizer_step(loss, optimizer, scaler)` does it all):
    1. scaled gradients. An eager loss (one with a grad_fn): `scaler.scale(loss)` returns
       loss * scale and its backward leaves the scaled gradients in the `.grad` of the
       tensors the optimizer was built from. A step of `compile_training_step` feeds the
       loss's gradient as a fixed 1.0, so its gradients are unscaled: `scale_grads`
       multiplies them by the scale on the fabric (build_map "mul"). In fp32 with a power
       of two scale both give the same numbers (scaling by 2^k is exact in fp32 barring
       overflow and subnormals); a backward in a 16-bit format would see unscaled values.
    2. `unscale_(optimizer)`: the overflow check, then x * (1 / scale) per gradient, both on
       the fabric. The check: every gradient's sum of squares (build_sumsq, one fp32 value
       per gradient), summed over the parameters ON THE HOST in fp32; the step overflows
       when that global sum (the squared global norm) is inf or NaN (an inf or NaN
       gradient, or a squared norm above FLT_MAX: `fabric.kernels.gradnorm`). On overflow
       the gradients are left as they are (the step will be skipped).
    3. clipping (max_gradient_norm): torch.nn.utils.clip_grad_norm_'s rule on the unscaled
       gradients: norm = sqrt(sum of build_sumsq over the gradients), coef = max_norm /
       (norm + 1e-6); when coef < 1 every gradient is multiplied by coef on the fabric.
    4. `step(optimizer)`: the optimizer step with the unscaled gradients, or nothing on an
       overflow: weights, state and step counts stay bit-identical.
    5. `update()`: the scale for the next step.

Scale rule (loss_scale="dynamic"): counts are kept since the last change of the scale.
After an overflowing step, when overflows / steps exceeds overflow_tolerance the scale
halves (not below min_loss_scale) and the counts restart. After a clean step, when the
clean steps reach steps_per_increase the scale doubles (not above max_loss_scale) and the
counts restart. init_scale and max_loss_scale default to 2**31 with cbfloat16 as the half
format (`half=`, or `frontend.amp.get_half_dtype()` read when the scaler is made) and 2**15
otherwise.
A number as loss_scale fixes the scale: overflowing steps are still skipped, the scale never
moves.

Cycles (kernel cycles, host I/O apart, summed over the kernels run one after another):
`scaler.cycles` = {"scale": .., "overflow_check": .., "unscale": .., "clip": ..} of the
last step, `scaler.host_cycles` the host I/O of those kernels.

Example:
    >>> scaler = GradScaler(steps_per_increase=100)                       # doctest: +SKIP
    >>> loss, grads = train_step((x,), (y,))                               # doctest: +SKIP
    >>> optimizer.set_grads(grads)                                         # doctest: +SKIP
    >>> optimizer_step(loss, optimizer, scaler, max_gradient_norm=1.0)    # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fabric import FabricConfig, Simulator
from fabric.kernels import (
    Redistribution,
    WordMap,
    build_map,
    build_sumsq,
    plan_redistribution,
    probe_inputs,
    probe_output,
    read_words,
    write_words,
)
from fabric.program import Rect
from frontend.amp import get_half_dtype, half_dtype
from frontend.training.optim import FabricOptimizer, run_on

CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_'s guard in max_norm / (norm + eps)


class FabricMath:
    """Sums of squares and scalar products of (m, n) tensors on the fabric, one cached
    Simulator per kernel (a new scalar builds a new map program; the engine stays)."""

    def __init__(self, config: FabricConfig, min_table_rows: tuple[int, int]):
        self.config = config
        self.min_table_rows = min_table_rows
        self._sims: dict[tuple, tuple] = {}
        self._map_cache: dict[tuple, dict[str, WordMap]] = {}
        self._plans: dict[tuple, Redistribution] = {}
        self.host_cycles = 0

    def _sim(self, key: tuple, make, keep: bool = True):
        if key in self._sims:
            return self._sims[key]
        kernel = make()
        pair = (kernel, Simulator(self.config, kernel.program,
                                  min_table_rows=self.min_table_rows))
        if keep:
            self._sims[key] = pair
        return pair

    def _run(self, kernel, sim, x: np.ndarray):
        host0 = sim.host_cycles
        kernel.load(sim, {"x": x})
        cycles = run_on(sim, kernel)
        out = kernel.read(sim)
        self.host_cycles += sim.host_cycles - host0
        return out, cycles

    # ---- on gradients in SRAM (a resident training step's) ---------------------------------
    def _layouts(self, key: tuple, kernel, shape: tuple) -> dict[str, WordMap]:
        """The kernel's input map "x" and, for a map kernel, its output map "z", in the
        gradient's element order (the layout does not depend on the map's scalar)."""
        if key not in self._map_cache:
            m, n = kernel.info["m"], kernel.info["n"]
            maps = {"x": probe_inputs(kernel, {"x": (m, n)})["x"]}
            if key[0] == "mul":
                maps["z"] = probe_output(kernel)
            self._map_cache[key] = {k: WordMap(shape, v.rect, v.symbols, v.dtypes)
                               for k, v in maps.items()}
        return self._map_cache[key]

    def _plan(self, key: tuple, src: WordMap, dst: WordMap) -> Redistribution:
        """A cached plan from `src` to `dst` (no rounds when both place every element on the
        same PE at the same slot: the words are where the next program reads them)."""
        if key not in self._plans:
            self._plans[key] = plan_redistribution(self.config, src, dst)
        return self._plans[key]

    def _feed(self, key: tuple, optimizer, name: str, kernel, sim) -> tuple[dict, int]:
        """Move parameter `name`'s pending gradient from its optimizer's "g" into the
        kernel's "x" (same PEs: local moves, none when the layouts agree). Returns the
        kernel's maps and the move cycles."""
        gmap, words = optimizer.grad_words(name)
        maps = self._layouts(key, kernel, tuple(gmap.shape))
        moved, cycles, _ = self._plan((*key, "in"), gmap, maps["x"]).run(
            words, min_table_rows=self.min_table_rows)
        write_words(sim, maps["x"], moved)
        return maps, cycles

    def sumsq_resident(self, optimizer, name: str) -> tuple[np.float32, int]:
        """(sum of squares, cycles: moves + kernel) of parameter `name`'s gradient in SRAM;
        the one-word result is read by the host."""
        m, n, rect = optimizer.layout(name)
        key = ("sumsq", m, n, rect)
        kernel, sim = self._sim(key, lambda: build_sumsq(self.config, rect, m, n))
        _, move = self._feed(key, optimizer, name, kernel, sim)
        host0 = sim.host_cycles
        cycles = run_on(sim, kernel)
        out = kernel.read(sim)
        self.host_cycles += sim.host_cycles - host0
        return out, cycles + move

    def mul_resident(self, optimizer, name: str, s: float, keep: bool = True) -> int:
        """Parameter `name`'s gradient in SRAM times fp32(s), in place (its "g" symbol);
        cycles: moves in and out + kernel."""
        m, n, rect = optimizer.layout(name)
        s = float(np.float32(s))
        key = ("mul", m, n, rect)
        kernel, sim = self._sim((*key, s),
                                lambda: build_map(self.config, rect, m, n, "mul", s), keep)
        maps, move_in = self._feed(key, optimizer, name, kernel, sim)
        cycles = run_on(sim, kernel)
        gmap = optimizer.grad_map(name)
        back, move_out, _ = self._plan((*key, "out"), maps["z"], gmap).run(
            read_words(sim, maps["z"]), min_table_rows=self.min_table_rows)
        optimizer.put_grad_words(name, gmap, back)
        return move_in + cycles + move_out

    def sumsq(self, x: np.ndarray, rect: Rect) -> tuple[np.float32, int]:
        """(sum of x**2 in fp32, kernel cycles) for x of shape (m, n) on `rect`."""
        m, n = x.shape
        kernel, sim = self._sim(("sumsq", m, n, rect),
                                lambda: build_sumsq(self.config, rect, m, n))
        return self._run(kernel, sim, x)

    def mul(self, x: np.ndarray, rect: Rect, s: float, keep: bool = True
            ) -> tuple[np.ndarray, int]:
        """(x * fp32(s), kernel cycles): one rounding per element. keep=False: do not cache
        the program (a factor that changes every step, as a clipping coefficient)."""
        m, n = x.shape
        s = float(np.float32(s))
        kernel, sim = self._sim(("mul", m, n, rect, s),
                                lambda: build_map(self.config, rect, m, n, "mul", s), keep)
        return self._run(kernel, sim, x)


def _check_scale(name: str, value) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"GradScaler: {name} must be a finite number > 0, got {value!r}")
    return float(value)


class GradScaler:
    """Loss scaling with the overflow check and the unscaling on the fabric (module
    docstring: flow, scale rule, cycles).

    Args:
        loss_scale: "dynamic", or a number (a fixed scale).
        init_scale: the first scale (default 2**31 with cbfloat16, else 2**15).
        steps_per_increase: clean steps after which the scale doubles.
        min_loss_scale, max_loss_scale: bounds of the scale (max default as init_scale).
        overflow_tolerance: the fraction of overflowing steps (since the last change) that
            may pass before the scale halves; 0.0 halves at every overflow.
        max_gradient_norm: clip the global gradient norm to this (None: no clipping);
            `optimizer_step`'s argument overrides it.
        half: the run's 16-bit format (a name, torch dtype or `frontend.amp.HalfDtype`),
            which sets the default scales; None: `frontend.amp.get_half_dtype()`, now.
    """

    def __init__(self, loss_scale="dynamic", init_scale=None, steps_per_increase: int = 2000,
                 min_loss_scale: float = 2.0**-14, max_loss_scale=None,
                 overflow_tolerance: float = 0.0, max_gradient_norm=None, half=None):
        half = half_dtype(half) if half is not None else get_half_dtype()
        default = 2.0**31 if half.name == "cbfloat16" else 2.0**15
        if isinstance(loss_scale, str):
            if loss_scale != "dynamic":
                raise ValueError(f"GradScaler: loss_scale must be 'dynamic' or a number, got "
                                 f"{loss_scale!r}")
            self.dynamic = True
            scale = default if init_scale is None else _check_scale("init_scale", init_scale)
        else:
            self.dynamic = False
            scale = _check_scale("loss_scale", loss_scale)
        if int(steps_per_increase) != steps_per_increase or steps_per_increase < 1:
            raise ValueError(f"GradScaler: steps_per_increase must be an integer >= 1, got "
                             f"{steps_per_increase!r}")
        self.min_loss_scale = _check_scale("min_loss_scale", min_loss_scale)
        self.max_loss_scale = (default if max_loss_scale is None
                               else _check_scale("max_loss_scale", max_loss_scale))
        if self.min_loss_scale > self.max_loss_scale:
            raise ValueError(f"GradScaler: min_loss_scale {self.min_loss_scale} is above "
                             f"max_loss_scale {self.max_loss_scale}")
        if not (isinstance(overflow_tolerance, (int, float))
                and 0.0 <= overflow_tolerance <= 1.0):
            raise ValueError(f"GradScaler: overflow_tolerance must lie in [0, 1], got "
                             f"{overflow_tolerance!r}")
        if max_gradient_norm is not None:
            _check_scale("max_gradient_norm", max_gradient_norm)
        self.steps_per_increase = int(steps_per_increase)
        self.overflow_tolerance = float(overflow_tolerance)
        self.max_gradient_norm = max_gradient_norm
        self.scale_value = (min(max(scale, self.min_loss_scale), self.max_loss_scale)
                            if self.dynamic else scale)
        self.steps_since_change = 0
        self.overflows_since_change = 0
        self.clean_since_change = 0
        self._found_inf: bool | None = None  # None: this step not unscaled yet
        self._fresh = True  # no fabric work yet in this step
        self._math: dict[tuple, FabricMath] = {}
        self.cycles: dict[str, int] = {}
        self.host_cycles = 0
        self.last_norm: float | None = None  # the global norm of the last clipping

    # ---- the scale ----------------------------------------------------------------------
    def get_scale(self) -> float:
        return self.scale_value

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """loss * scale (its backward gives the scaled gradients)."""
        return loss * self.scale_value

    def _fabric(self, optimizer: FabricOptimizer) -> FabricMath:
        key = (optimizer.config, optimizer.min_table_rows)
        if key not in self._math:
            self._math[key] = FabricMath(optimizer.config, optimizer.min_table_rows)
        return self._math[key]

    def _grads(self, optimizer) -> dict:
        """The gradients the step works on: a fabric optimizer's pending ones {name: tensor},
        or a torch optimizer's `.grad` tensors {position: tensor} (eager: the same rule run
        in PyTorch, for a "cpu" run to compare with)."""
        if isinstance(optimizer, torch.optim.Optimizer):
            params = [p for group in optimizer.param_groups for p in group["params"]]
            grads = {i: p.grad for i, p in enumerate(params) if p.grad is not None}
            if not grads:
                raise ValueError("GradScaler: no parameter of the optimizer has a .grad; run "
                                 "backward on scale(loss) first")
            return grads
        if not isinstance(optimizer, FabricOptimizer):
            raise TypeError(f"GradScaler: expected a fabric optimizer (FabricSGD, "
                            f"FabricAdamW) or a torch.optim optimizer, got "
                            f"{type(optimizer).__name__}")
        if optimizer.grads is None and not optimizer.resident_grads:
            raise ValueError("GradScaler: the optimizer holds no gradients; call "
                             "optimizer.set_grads(grads) (or backward on scale(loss)) first")
        return optimizer.grads or {}

    def _map(self, optimizer, factor: float, what: str) -> None:
        """Every pending gradient times fp32(`factor`) (one rounding per element), on the
        fabric (cycles into cycles[what]) or, for a torch optimizer, in place in PyTorch."""
        grads = self._grads(optimizer)
        if isinstance(optimizer, torch.optim.Optimizer):
            for g in grads.values():
                g.mul_(float(np.float32(factor)))
            return
        fm = self._fabric(optimizer)
        host0, total, out = fm.host_cycles, 0, {}
        keep = what != "clip"  # the scale and its inverse recur step after step: kept
        for name, g in grads.items():
            m, n, rect = optimizer.layout(name)
            z, cycles = fm.mul(g.reshape(m, n).numpy(), rect, factor, keep=keep)
            out[name] = torch.from_numpy(np.array(z)).reshape(g.shape)
            total += cycles
        for name in sorted(optimizer.resident_grads):
            total += fm.mul_resident(optimizer, name, factor, keep=keep)
        optimizer.grads = out or None
        self.cycles[what] = self.cycles.get(what, 0) + total
        self.host_cycles += fm.host_cycles - host0

    def _sumsq(self, optimizer, what: str) -> np.float32:
        """The sum over the pending gradients of their sums of squares: each on the fabric
        (or in PyTorch for a torch optimizer), the sum over parameters on the host (fp32, in
        parameter order)."""
        grads = self._grads(optimizer)
        acc = np.float32(0.0)
        if isinstance(optimizer, torch.optim.Optimizer):
            for g in grads.values():
                s = np.float32(g.detach().to(torch.float32).square().sum().item())
                with np.errstate(over="ignore", invalid="ignore"):
                    acc = np.float32(acc + s)
            return acc
        fm = self._fabric(optimizer)
        host0, total = fm.host_cycles, 0
        for name in optimizer.param_names:
            if name in grads:
                m, n, rect = optimizer.layout(name)
                s, cycles = fm.sumsq(grads[name].reshape(m, n).numpy(), rect)
            elif name in optimizer.resident_grads:
                s, cycles = fm.sumsq_resident(optimizer, name)
            else:
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                acc = np.float32(acc + s)
            total += cycles
        self.cycles[what] = self.cycles.get(what, 0) + total
        self.host_cycles += fm.host_cycles - host0
        return acc

    def scale_grads(self, optimizer) -> None:
        """Multiply the optimizer's pending (unscaled) gradients by the scale on the fabric:
        the gradients of the scaled loss, for a backward whose loss gradient is fixed at 1.0
        (compile_training_step)."""
        if self._found_inf is not None:
            raise RuntimeError("GradScaler: scale_grads after unscale_ in the same step; "
                               "the gradients are already unscaled")
        self._begin_step()
        self._map(optimizer, self.scale_value, "scale")

    def _begin_step(self) -> None:
        if self._fresh:  # the first fabric work since update(): this step's figures
            self._fresh = False
            self.cycles = {}
            self.host_cycles = 0

    def unscale_(self, optimizer) -> bool:
        """Check the scaled gradients for overflow and, when clean, divide them by the scale
        (x * (1 / scale)), both on the fabric. Returns whether the step overflowed."""
        if self._found_inf is not None:
            raise RuntimeError("GradScaler: unscale_ was already called for this step; call "
                               "update() after step()")
        self._begin_step()
        total = self._sumsq(optimizer, "overflow_check")
        self._found_inf = not bool(np.isfinite(total))
        if not self._found_inf:
            self._map(optimizer, 1.0 / self.scale_value, "unscale")
        return self._found_inf

    def clip_(self, optimizer, max_norm: float) -> float:
        """Clip the unscaled gradients to a global norm of `max_norm`
        (torch.nn.utils.clip_grad_norm_'s rule, module docstring). Returns the norm before
        clipping. Call after unscale_ on a clean step."""
        _check_scale("max_gradient_norm", max_norm)
        if self._found_inf is None:
            raise RuntimeError("GradScaler: clip_ needs unscaled gradients: call "
                               "unscale_(optimizer) first")
        if self._found_inf:
            raise RuntimeError("GradScaler: the step overflowed; there is nothing to clip")
        norm = float(np.sqrt(np.float32(self._sumsq(optimizer, "clip"))))
        coef = float(max_norm) / (norm + CLIP_EPS)
        if coef < 1.0:
            self._map(optimizer, coef, "clip")
        self.last_norm = norm
        return norm

    def step(self, optimizer) -> bool:
        """The optimizer's step with the unscaled gradients (unscale_ first if not done), or
        nothing when they overflowed. Returns whether the step was taken."""
        if self._found_inf is None:
            self.unscale_(optimizer)
        if self._found_inf:
            # skipped: weights, state and step counts unchanged
            optimizer.zero_grad(set_to_none=True)
            taken = False
        else:
            optimizer.step()
            taken = True
        return taken

    def update(self) -> None:
        """The next step's scale from this step's outcome (module docstring's rule)."""
        if self._found_inf is None:
            raise RuntimeError("GradScaler: update() before unscale_/step for this step")
        found_inf, self._found_inf = self._found_inf, None
        self._fresh = True
        if not self.dynamic:
            return
        self.steps_since_change += 1
        if found_inf:
            self.overflows_since_change += 1
            if self.overflows_since_change / self.steps_since_change > self.overflow_tolerance:
                self._change(max(self.scale_value / 2.0, self.min_loss_scale))
        else:
            self.clean_since_change += 1
            if self.clean_since_change >= self.steps_per_increase:
                self._change(min(self.scale_value * 2.0, self.max_loss_scale))

    def _change(self, scale: float) -> None:
        self.scale_value = scale
        self.steps_since_change = self.overflows_since_change = self.clean_since_change = 0

    @property
    def found_inf(self) -> bool | None:
        """Whether the current step overflowed (None before unscale_)."""
        return self._found_inf

    # ---- state --------------------------------------------------------------------------
    _STATE = ("scale_value", "steps_since_change", "overflows_since_change",
              "clean_since_change", "dynamic", "steps_per_increase", "min_loss_scale",
              "max_loss_scale", "overflow_tolerance", "max_gradient_norm")

    def state_dict(self) -> dict:
        return {key: getattr(self, key) for key in self._STATE}

    def load_state_dict(self, state: dict) -> None:
        missing = [k for k in self._STATE if k not in state]
        if missing:
            raise ValueError(f"GradScaler.load_state_dict: missing keys {missing}")
        for key in self._STATE:
            setattr(self, key, state[key])
        self._found_inf = None
        self._fresh = True


def optimizer_step(loss: torch.Tensor, optimizer, grad_scaler: GradScaler,
                   max_gradient_norm=None, grads_scaled: bool = False) -> bool:
    """One optimizer step with loss scaling (module docstring's flow). Gradients: when
    `loss` has a grad_fn, the backward of scale(loss), read from the `.grad` of the
    optimizer's parameters (cleared first: a fabric optimizer's source tensors, or a torch
    optimizer's parameters, all in PyTorch); otherwise the fabric optimizer's pending
    gradients (`set_grads`): from a backward whose loss gradient is 1.0, scaled on the
    fabric, or with `grads_scaled=True` already those of scale(loss) (a training step run
    with `loss_scale=grad_scaler.get_scale()`). Clips to `max_gradient_norm` (default the
    scaler's). Returns whether the step was taken (False: overflow, skipped)."""
    if isinstance(optimizer, torch.optim.Optimizer):
        if loss.grad_fn is None:
            raise ValueError("optimizer_step: a torch optimizer needs a loss with a grad_fn "
                             "(the eager forward's)")
        optimizer.zero_grad(set_to_none=True)
        grad_scaler.scale(loss).backward()
    elif loss.grad_fn is not None:
        for t in optimizer.sources.values():
            t.grad = None
        grad_scaler.scale(loss).backward()
        grads = {n: t.grad for n, t in optimizer.sources.items() if t.grad is not None}
        optimizer.set_grads(grads)
    else:
        if optimizer.grads is None and not optimizer.resident_grads:
            raise ValueError("optimizer_step: the loss has no grad_fn and the optimizer holds "
                             "no gradients; call optimizer.set_grads(grads) first")
        if not grads_scaled:
            grad_scaler.scale_grads(optimizer)
    grad_scaler.unscale_(optimizer)
    max_norm = max_gradient_norm if max_gradient_norm is not None else \
        grad_scaler.max_gradient_norm
    if max_norm is not None and not grad_scaler.found_inf:
        grad_scaler.clip_(optimizer, max_norm)
    taken = grad_scaler.step(optimizer)
    grad_scaler.update()
    return taken
