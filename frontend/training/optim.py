"""Optimizers whose weights and state live on the simulated fabric: `FabricSGD` and
`FabricAdamW`, with torch.optim.SGD / torch.optim.AdamW semantics (foreach=False order).

Layout: every parameter gets its own optimizer kernel (`fabric.kernels.optimizers`) on the
rectangle Rect(0, 0, min(R, m), min(C, n)) of `config` (R x C), in a Simulator of its own:
the parameter, viewed as an (m, n) matrix (`as_matrix`: a 0-dim tensor is 1 x 1, a vector
of n is 1 x n, a tensor of shape (d0, d1, ...) is d0 x d1...), sits in 2D blocks in PE SRAM
with its state (momentum buffer; exp_avg and exp_avg_sq). The weights and the state stay
there between steps; a step writes the gradient and the step's scalars through host I/O,
launches the kernel and runs it. `parameters()` reads the weights back (host I/O).
Resident use (`frontend.training.resident`): the step's graphs take the weights from the
kernel's SRAM over the mesh (`resident`, `weight_map`) and move the gradients straight into
its "g" symbol (`put_grad_words`, `grad_map`); `step_resident` then writes only the scalars.

Every Simulator is built with the same table rows (`min_table_rows`, default the frontend's
`frontend.tables.MIN_TABLE_ROWS`), so all the kernels of a config share one compiled engine,
the engine of a training step compiled for the same config.

Cycles: `cycles` is the sum over parameters of the kernel cycles of the last step (the
kernels run one after another, one Simulator each; on one fabric with disjoint tiles they
would overlap, and `max(cycles_per_param.values())` is that figure); `host_cycles` the host
I/O of the last step (gradients in, scalars in), apart.

Example:
    >>> opt = FabricSGD(model.named_parameters(), lr=0.1, momentum=0.9,   # doctest: +SKIP
    ...                 config=FabricConfig.small(4, 4))
    >>> opt.step({name: grad, ...}); opt.copy_to(model); opt.cycles     # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

from fabric import FabricConfig, Simulator
from fabric.kernels import (
    Kernel,
    WordMap,
    build_adamw,
    build_sgd,
    probe_inputs,
    read_words,
    write_step_scalars,
    write_words,
)
from fabric.program import Rect
from frontend.tables import MIN_TABLE_ROWS

MAX_CYCLES = 1_000_000


def as_matrix(shape: tuple[int, ...]) -> tuple[int, int]:
    """The (m, n) matrix view of a parameter of `shape` (module docstring)."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, int(shape[0])
    return int(shape[0]), math.prod(int(s) for s in shape[1:])


def tile_rect(config: FabricConfig, m: int, n: int) -> Rect:
    """The rectangle at the origin that an (m, n) matrix occupies: one block per PE, at most
    the whole fabric."""
    return Rect(0, 0, min(config.rows, m), min(config.cols, n))


def home_rect(home: Rect, m: int, n: int) -> Rect:
    """The part of `home` (a stage's tile) an (m, n) matrix occupies: its top-left corner,
    one block per PE."""
    return Rect(home.row, home.col, min(home.rows, m), min(home.cols, n))


def named_tensors(params, what: str) -> dict[str, torch.Tensor]:
    """{name: tensor} from a mapping or an iterable of (name, tensor) pairs
    (`model.named_parameters()`); fp32 tensors only."""
    items = list(params.items()) if isinstance(params, Mapping) else list(params)
    out: dict[str, torch.Tensor] = {}
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"{what}: params must be a dict {{name: tensor}} or "
                            f"model.named_parameters(), got an item {type(item).__name__}")
        name, t = item
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: parameter {name!r} is a {type(t).__name__}, not a tensor")
        if t.dtype != torch.float32:
            raise ValueError(f"{what}: parameter {name!r} is {t.dtype}; the fabric's "
                             "optimizers keep fp32 weights")
        if name in out:
            raise ValueError(f"{what}: parameter name {name!r} appears twice")
        out[name] = t
    if not out:
        raise ValueError(f"{what}: no parameters given")
    return out


def run_on(sim: Simulator, kernel: Kernel) -> int:
    """Launch `kernel` on `sim`, run it to quiet; its kernel cycles."""
    kernel.launch(sim)
    sim.run(max_cycles=MAX_CYCLES)
    return sim.last_run_cycles


class _Slot:
    """One parameter on the fabric: its kernel, its Simulator, its step count."""

    def __init__(self, name: str, value: torch.Tensor, kernel: Kernel,
                 min_table_rows: tuple[int, int]):
        self.name = name
        self.shape = tuple(value.shape)
        self.kernel = kernel
        self.sim = Simulator(kernel.config, kernel.program, min_table_rows=min_table_rows)
        self.step = 0
        self._maps: dict[str, WordMap] | None = None
        kernel.load(self.sim, {"w": self.matrix(value)})

    def maps(self) -> dict[str, WordMap]:
        """{"w": map, "g": map} of the weights and the gradient in the kernel's SRAM, in
        the parameter's shape (probed once)."""
        if self._maps is None:
            m, n = self.kernel.info["m"], self.kernel.info["n"]
            probed = probe_inputs(self.kernel, {"w": (m, n), "g": (m, n)})
            self._maps = {k: WordMap(self.shape, v.rect, v.symbols, v.dtypes)
                          for k, v in probed.items()}
        return self._maps

    def matrix(self, t: torch.Tensor) -> np.ndarray:
        return t.detach().to(torch.float32).reshape(self.kernel.info["m"],
                                                    self.kernel.info["n"]).numpy()

    def read(self) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(np.array(v)).reshape(self.shape)
                for k, v in self.kernel.read(self.sim).items()}


class FabricOptimizer:
    """Common part of the fabric optimizers: parameters on the fabric, step, state."""

    kind = ""  # "sgd" or "adamw"
    state_names: tuple[str, ...] = ()  # the kernel's state tensors (read/load names)

    def __init__(self, params, lr: float, hyper: dict, config: FabricConfig | None,
                 min_table_rows: tuple[int, int] | None,
                 homes: Mapping[str, Rect] | None = None):
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr >= 0.0):
            raise ValueError(f"{self.kind}: lr must be a finite value >= 0, got {lr!r}")
        self.lr = float(lr)
        self.hyper = hyper
        self.config = config or FabricConfig.small(4, 4)
        self.min_table_rows = tuple(min_table_rows or MIN_TABLE_ROWS)
        self.sources = named_tensors(params, self.kind)
        self._slots: dict[str, _Slot] = {}
        for name, t in self.sources.items():
            self._slots[name] = self._slot(name, t, (homes or {}).get(name))
        self.grads: dict[str, torch.Tensor] | None = None  # pending gradients (set_grads)
        self.resident_grads: set[str] = set()  # pending gradients in SRAM (put_grad_words)
        self.cycles = 0
        self.host_cycles = 0
        self.cycles_per_param: dict[str, int] = {}

    def _build(self, rect: Rect, m: int, n: int) -> Kernel:
        raise NotImplementedError

    def _slot(self, name: str, value: torch.Tensor, home: Rect | None) -> _Slot:
        m, n = as_matrix(tuple(value.shape))
        rect = tile_rect(self.config, m, n) if home is None else home_rect(home, m, n)
        if rect.row_end > self.config.rows or rect.col_end > self.config.cols:
            raise ValueError(f"{self.kind}: home {home} of parameter {name!r} lies outside "
                             f"the {self.config.rows}x{self.config.cols} fabric")
        return _Slot(name, value, self._build(rect, m, n), self.min_table_rows)

    # ---- where the parameters live ------------------------------------------------------
    def rehome(self, homes: Mapping[str, Rect]) -> None:
        """Move parameters to new home tiles {name: Rect} (the top-left part of each that
        the parameter needs): weights, state and step counts carry over unchanged."""
        for name, home in homes.items():
            old = self._slots[name]
            m, n = old.kernel.info["m"], old.kernel.info["n"]
            if old.kernel.rect == home_rect(home, m, n):
                continue
            values = old.read()
            slot = self._slot(name, values["w"], home)
            slot.kernel.load(slot.sim, {k: slot.matrix(values[k]) for k in self.state_names})
            slot.step = old.step
            self._slots[name] = slot

    def program(self, name: str):
        """The optimizer program of parameter `name` (its kernel's, on its home)."""
        return self._slots[name].kernel.program

    def weight_map(self, name: str) -> WordMap:
        """Where parameter `name`'s weights sit in PE memory (its shape's element order)."""
        return self._slots[name].maps()["w"]

    def grad_map(self, name: str) -> WordMap:
        """The slots a step reads parameter `name`'s gradient from."""
        return self._slots[name].maps()["g"]

    def resident(self, name: str) -> tuple[WordMap, dict[str, np.ndarray]]:
        """(map, words) of parameter `name`'s weights as they are in PE memory (no host
        I/O: a look at the SRAM a later program on those PEs starts from)."""
        wmap = self.weight_map(name)
        return wmap, read_words(self._slots[name].sim, wmap)

    def put_grad_words(self, name: str, gmap: WordMap, words: dict[str, np.ndarray]) -> None:
        """Gradient words moved over the mesh into parameter `name`'s "g" symbol: `gmap`
        (a part of `grad_map(name)`, relabelled to the moving tensor's elements) names the
        slots `words` fill. The gradient is then pending (`resident_grads`) for the next
        `step()` and for a GradScaler."""
        write_words(self._slots[name].sim, gmap, words, mapped_only=True)
        self.resident_grads.add(name)

    def grad_words(self, name: str) -> tuple[WordMap, dict[str, np.ndarray]]:
        """(map, words) of parameter `name`'s pending gradient in its "g" symbol."""
        gmap = self.grad_map(name)
        return gmap, read_words(self._slots[name].sim, gmap)

    # ---- gradients ----------------------------------------------------------------------
    def check_grads(self, grads: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """`grads` checked against the parameters: known names, same shapes, floating."""
        unknown = sorted(set(grads) - set(self._slots))
        if unknown:
            raise ValueError(f"{self.kind}: gradients for unknown parameters {unknown}; "
                             f"parameters: {sorted(self._slots)}")
        out = {}
        for name, g in grads.items():
            if not isinstance(g, torch.Tensor) or not g.is_floating_point():
                raise TypeError(f"{self.kind}: the gradient of {name!r} must be a floating "
                                f"tensor, got {type(g).__name__}")
            if tuple(g.shape) != self._slots[name].shape:
                raise ValueError(f"{self.kind}: the gradient of {name!r} has shape "
                                 f"{tuple(g.shape)}, the parameter {self._slots[name].shape}")
            out[name] = g.detach().to(torch.float32)
        return out

    def set_grads(self, grads: Mapping[str, torch.Tensor]) -> None:
        """Hold `grads` for the next `step()` (and for a GradScaler's unscale_)."""
        self.grads = self.check_grads(grads)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the pending gradients, host-held and in SRAM (a step that is skipped)."""
        self.grads = None
        self.resident_grads = set()

    # ---- the step -----------------------------------------------------------------------
    def step(self, grads: Mapping[str, torch.Tensor] | None = None) -> None:
        """One optimizer step with `grads` (default: the pending ones of `set_grads`).
        Parameters without a gradient are left alone and their step count does not move
        (torch skips a parameter whose .grad is None)."""
        if grads is None:
            if self.grads is None and not self.resident_grads:
                raise ValueError(f"{self.kind}: step() without gradients: pass them or "
                                 "call set_grads first")
            if self.resident_grads:  # some (or all) pending gradients are in SRAM
                self.step_resident(sorted(self.resident_grads), self.grads)
                self.grads = None
                return
            grads = self.grads
        grads = self.check_grads(grads)
        self._step({name: slot.matrix(g) for name, g in grads.items()
                    for slot in (self._slots[name],)})
        self.grads = None

    def step_resident(self, names, grads: Mapping[str, torch.Tensor] | None = None) -> None:
        """One optimizer step of parameters `names` with the gradients already in their "g"
        symbols (`put_grad_words`; only the step's scalars come from the host), and of the
        parameters of `grads` {name: gradient} the host writes."""
        unknown = sorted(set(names) - set(self._slots))
        if unknown:
            raise ValueError(f"{self.kind}: step_resident: unknown parameters {unknown}")
        host = self.check_grads(grads or {})
        both = sorted(set(names) & set(host))
        if both:
            raise ValueError(f"{self.kind}: step_resident: gradients of {both} are both in "
                             "PE memory and given")
        todo = {name: self._slots[name].matrix(g) for name, g in host.items()}
        todo.update(dict.fromkeys(names))
        self._step({name: todo[name] for name in self._slots if name in todo})
        self.resident_grads = set()

    def _step(self, grads: dict[str, np.ndarray | None]) -> None:
        """grads: {name: (m, n) gradient the host writes, or None: already in SRAM}."""
        self.cycles = self.host_cycles = 0
        self.cycles_per_param = {}
        for name, g in grads.items():
            slot = self._slots[name]
            host0 = slot.sim.host_cycles
            slot.step += 1
            if g is not None:
                slot.kernel.load(slot.sim, {"g": g})
            write_step_scalars(slot.sim, slot.kernel, lr=self.lr, step=slot.step)
            cycles = run_on(slot.sim, slot.kernel)
            self.cycles_per_param[name] = cycles
            self.cycles += cycles
            self.host_cycles += slot.sim.host_cycles - host0

    # ---- reading back -------------------------------------------------------------------
    def parameters(self) -> dict[str, torch.Tensor]:
        """{name: weights} read back from PE memory (host I/O), in the parameters' shapes."""
        return {name: slot.read()["w"] for name, slot in self._slots.items()}

    def copy_to(self, model: torch.nn.Module) -> None:
        """Copy the weights on the fabric into `model`'s parameters of the same names."""
        params = dict(model.named_parameters())
        missing = sorted(set(self._slots) - set(params))
        if missing:
            raise ValueError(f"{self.kind}: the model has no parameters {missing}")
        with torch.no_grad():
            for name, w in self.parameters().items():
                params[name].copy_(w)

    def load_parameters(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Write `weights` {name: tensor of that parameter's shape} into PE memory (host
        I/O); parameters not named keep their weights."""
        for name, w in weights.items():
            if name not in self._slots:
                raise ValueError(f"{self.kind}: no parameter {name!r}; parameters: "
                                 f"{sorted(self._slots)}")
            slot = self._slots[name]
            if tuple(w.shape) != slot.shape:
                raise ValueError(f"{self.kind}: weights of {name!r} have shape "
                                 f"{tuple(w.shape)}, the parameter {slot.shape}")
            slot.kernel.load(slot.sim, {"w": slot.matrix(w)})

    def io_cycles(self) -> int:
        """Host I/O cycles of all the parameters' Simulators since they were built."""
        return sum(slot.sim.host_cycles for slot in self._slots.values())

    @property
    def param_names(self) -> list[str]:
        return list(self._slots)

    def layout(self, name: str) -> tuple[int, int, Rect]:
        """(m, n, rect) of parameter `name` on the fabric."""
        k = self._slots[name].kernel
        return k.info["m"], k.info["n"], k.rect

    # ---- state --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """{"state": {name: {"step": t, <state tensors>}}, "param_groups": [{"lr", the
        hyperparameters, "params": names}]}: torch's form, keyed by name; the weights are
        not in it (they come with the model). State tensors are read back from the fabric."""
        state = {}
        for name, slot in self._slots.items():
            entry: dict = {"step": slot.step}
            if self.state_names:
                values = slot.read()
                entry.update({k: values[k] for k in self.state_names})
            state[name] = entry
        group = {"lr": self.lr, **self.hyper, "params": list(self._slots)}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: Mapping) -> None:
        """Restore the step counts, the learning rate and the state tensors (written into
        PE memory). The hyperparameters must be the ones these kernels were built with."""
        group = state_dict["param_groups"][0]
        for key, value in self.hyper.items():
            if group.get(key) != value:
                raise ValueError(f"{self.kind}: load_state_dict: {key}={group.get(key)!r} in "
                                 f"the state dict, this optimizer was built with {value!r}")
        state = state_dict["state"]
        if set(state) != set(self._slots):
            raise ValueError(f"{self.kind}: load_state_dict: parameters "
                             f"{sorted(set(state) ^ set(self._slots))} are in only one of "
                             "the state dict and the optimizer")
        for name, slot in self._slots.items():
            entry = state[name]
            step = int(entry["step"])
            if step < 0:
                raise ValueError(f"{self.kind}: load_state_dict: step of {name!r} is {step}")
            values = {}
            for key in self.state_names:
                t = torch.as_tensor(entry[key])
                if tuple(t.shape) != slot.shape:
                    raise ValueError(f"{self.kind}: load_state_dict: {key} of {name!r} has "
                                     f"shape {tuple(t.shape)}, the parameter {slot.shape}")
                values[key] = slot.matrix(t)
            slot.kernel.load(slot.sim, values)
            slot.step = step
        self.lr = float(group["lr"])

    def steps(self) -> dict[str, int]:
        return {name: slot.step for name, slot in self._slots.items()}


class FabricSGD(FabricOptimizer):
    """torch.optim.SGD on the fabric (bit for bit: `fabric.kernels.optimizers`).

    Args:
        params: {name: fp32 tensor} or model.named_parameters().
        lr, momentum, dampening, weight_decay, nesterov, maximize: torch's.
        config: the fabric of every parameter's Simulator (default small(4, 4)).
        min_table_rows: the Simulators' table rows (default frontend.tables.MIN_TABLE_ROWS:
            the engine of the frontend's models).
        homes: {name: Rect} home tiles (default: at the origin; module docstring).
    """

    kind = "sgd"

    def __init__(self, params, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 config: FabricConfig | None = None,
                 min_table_rows: tuple[int, int] | None = None,
                 homes: Mapping[str, Rect] | None = None):
        hyper = {"momentum": float(momentum), "dampening": float(dampening),
                 "weight_decay": float(weight_decay), "nesterov": bool(nesterov),
                 "maximize": bool(maximize)}
        self.state_names = ("momentum_buffer",) if momentum else ()
        super().__init__(params, lr, hyper, config, min_table_rows, homes)

    def _build(self, rect: Rect, m: int, n: int) -> Kernel:
        return build_sgd(self.config, rect, m, n, **self.hyper)


class FabricAdamW(FabricOptimizer):
    """torch.optim.AdamW on the fabric (state bit for bit, weights within the kernel's
    ADAMW_UPDATE_RTOL per step: `fabric.kernels.optimizers`). amsgrad is not supported.

    Args:
        params: {name: fp32 tensor} or model.named_parameters().
        lr, betas, eps, weight_decay, maximize: torch's.
        config, min_table_rows, homes: as FabricSGD's.
    """

    kind = "adamw"
    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, maximize: bool = False,
                 config: FabricConfig | None = None,
                 min_table_rows: tuple[int, int] | None = None,
                 homes: Mapping[str, Rect] | None = None):
        hyper = {"betas": (float(betas[0]), float(betas[1])), "eps": float(eps),
                 "weight_decay": float(weight_decay), "maximize": bool(maximize)}
        super().__init__(params, lr, hyper, config, min_table_rows, homes)

    def _build(self, rect: Rect, m: int, n: int) -> Kernel:
        return build_adamw(self.config, rect, m, n, **self.hyper)

    def load_state_dict(self, state_dict: Mapping) -> None:
        # a round trip through torch.save may turn the betas tuple into a list
        group = state_dict["param_groups"][0]
        if "betas" in group:
            group = {**group, "betas": tuple(float(b) for b in group["betas"])}
            state_dict = {**state_dict, "param_groups": [group]}
        super().load_state_dict(state_dict)
