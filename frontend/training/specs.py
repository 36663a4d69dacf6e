"""The parts of a training run as plain data: what a `Trainer` argument or a YAML key may
say, checked and turned into the objects a run needs. Every function here takes either the
object itself (a Python config) or the plain-data form a YAML file holds; a bad value raises
a ValueError that names the key and what it accepts.

    backend:    frontend.backend("fabric", config=FabricConfig.small(12, 12), mode="train",
                                 execution="pipelined")
                YAML: {name: fabric, config: {preset: small, rows: 12, cols: 12}, mode: train,
                       execution: pipelined}
    model:      an nn.Module, or {name: mlp|lenet|gpt, args: {...}, seed: 0} (frontend.zoo)
                or {factory: "package.module:callable", args: {...}, seed: 0}
    optimizer:  {type: sgd|adamw, lr: ..., <torch's hyperparameters>}, or a torch.optim.SGD /
                AdamW built on the model's parameters (one parameter group)
    loss:       a callable loss_fn(output, *targets), or mse | l1 | cross_entropy
    precision:  fp32 | mixed | float16 | bfloat16 | cbfloat16 (fp16, bf16, cb16), or
                {dtype: ..., loss_scale: dynamic, init_scale: .., steps_per_increase: ..,
                 min_loss_scale: .., max_loss_scale: .., overflow_tolerance: ..,
                 max_gradient_norm: ..}
    loop:       {epochs: 1, max_steps: null, val_every: null}
    checkpoint: {dir: path, every: null, resume: null | path | latest}
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F

from fabric.config import FabricConfig
from frontend import zoo
from frontend.amp import HALF_DTYPES, get_half_dtype, half_dtype
from frontend.errors import user_code_error
from frontend.schedule import DEFAULT_MODE, check_mode

BACKENDS = ("fabric", "cpu")
MODES = ("train", "validate", "compile_only")
OPTIMIZERS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
# the keyword arguments each fabric optimizer takes from torch's
HYPERPARAMETERS = {"sgd": ("lr", "momentum", "dampening", "weight_decay", "nesterov",
                           "maximize"),
                   "adamw": ("lr", "betas", "eps", "weight_decay", "maximize")}
SCALER_KEYS = ("loss_scale", "init_scale", "steps_per_increase", "min_loss_scale",
               "max_loss_scale", "overflow_tolerance", "max_gradient_norm")


def _check_keys(what: str, given: Mapping, allowed) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"{what}: unknown keys {unknown}; allowed: {sorted(allowed)}")


def _mapping(what: str, spec) -> dict:
    if not isinstance(spec, Mapping):
        raise ValueError(f"{what} must be a mapping, got {type(spec).__name__} {spec!r}")
    return dict(spec)


def load_object(spec: str, what: str):
    """'package.module:name' -> the object."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"{what}: expected 'package.module:name', got {spec!r}")
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{what}: cannot load {spec!r}: {e}") from e


def check_args(fn, args: Mapping, what: str) -> None:
    """Raise a ValueError naming `what` (the config key `args` came from, e.g. "data.args")
    when `fn` cannot be called with `args` as keywords: an unknown key (a typo) or a
    missing one, with the arguments `fn` takes. Callables without a signature pass."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none to check against
        return
    try:
        signature.bind(**args)
    except TypeError as e:
        takes = [p.name for p in signature.parameters.values()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        raise ValueError(f"{what}: {e} for {getattr(fn, '__name__', fn)}(); it takes "
                         f"{', '.join(takes) or 'no arguments'}") from None


def call_factory(spec: str, what: str, args: Mapping):
    """The object at `spec` ('package.module:name', the config key `what`) called with
    `args`; an exception from it becomes a UserCodeError naming `what`, `spec` and the
    line of the user's file that raised."""
    factory = load_object(spec, what)
    check_args(factory, args, f"{what.rpartition('.')[0]}.args")
    try:
        return factory(**args)
    except Exception as e:
        raise user_code_error(f"{what} {spec!r}", e) from e


# ---- backend ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Backend:
    """Where a Trainer runs. name: "fabric" (the simulator) or "cpu" (eager PyTorch).
    config: the fabric (fabric only). mode: "train"; "validate" (also compares each step's
    gradients with eager autograd at the same weights, into the history); "compile_only"
    (lower and place the step, run nothing). max_cycles: per graph run. execution: how
    each graph of a step runs on the fabric (`frontend.schedule.MODES`): "pipelined" (the
    default: every stage resident on a tile sized for a pipeline, stages overlapping as the
    dataflow allows) or "sequential" (one stage at a time), as `frontend.compile`'s `mode`;
    None on the cpu, which has no execution mode."""

    name: str = "fabric"
    config: FabricConfig | None = None
    mode: str = "train"
    max_cycles: int = 5_000_000
    execution: str | None = DEFAULT_MODE


def fabric_config(spec) -> FabricConfig:
    """A FabricConfig, or {preset: small, rows: R, cols: C} / {preset: wse2|wse3}."""
    if isinstance(spec, FabricConfig):
        return spec
    spec = _mapping("backend.config", spec)
    _check_keys("backend.config", spec, ("preset", "rows", "cols"))
    preset = spec.get("preset", "small")
    if preset == "small":
        try:
            return FabricConfig.small(int(spec["rows"]), int(spec["cols"]))
        except KeyError as e:
            raise ValueError(f"backend.config: preset small needs rows and cols, got "
                             f"{spec}") from e
    if preset in ("wse2", "wse3"):
        return getattr(FabricConfig, preset)()
    raise ValueError(f"backend.config: preset must be small, wse2 or wse3, got {preset!r}")


def backend(name: str = "fabric", config=None, mode: str = "train",
            max_cycles: int = 5_000_000, execution: str | None = None) -> Backend:
    """The settings of a run's device: `frontend.backend("fabric", config=..., mode=...,
    execution=...)` (see `Backend`)."""
    if name not in BACKENDS:
        raise ValueError(f"backend name must be one of {list(BACKENDS)}, got {name!r}")
    if mode not in MODES:
        raise ValueError(f"backend mode must be one of {list(MODES)}, got {mode!r}")
    if name == "cpu" and (config is not None or mode != "train" or execution is not None):
        raise ValueError("backend 'cpu' takes no fabric config and runs mode 'train' only, "
                         "in eager PyTorch (no execution mode)")
    if not (isinstance(max_cycles, int) and max_cycles > 0):
        raise ValueError(f"backend max_cycles must be a positive integer, got {max_cycles!r}")
    if name == "fabric":
        config = fabric_config(config) if config is not None else FabricConfig.small(32, 32)
        execution = check_mode(DEFAULT_MODE if execution is None else execution,
                               "backend execution")
    return Backend(name, config, mode, max_cycles, execution)


def resolve_backend(device, backend_spec) -> Backend:
    """`device` ("fabric" | "cpu") or `backend` (a Backend or its YAML mapping): exactly
    one of them, or neither (the fabric with its defaults)."""
    if device is not None and backend_spec is not None:
        raise ValueError(f"device and backend are mutually exclusive: give device={device!r} "
                         "or backend=frontend.backend(...), not both (the backend carries "
                         "the device's settings)")
    if backend_spec is None:
        device = "fabric" if device is None else device
        if device not in BACKENDS:
            raise ValueError(f"device must be one of {list(BACKENDS)}, got {device!r}")
        return backend(device)
    if isinstance(backend_spec, Backend):
        return backend_spec
    spec = _mapping("backend", backend_spec)
    _check_keys("backend", spec, ("name", "config", "mode", "max_cycles", "execution"))
    return backend(**spec)


# ---- model, loss, optimizer ------------------------------------------------------------
def resolve_model(spec) -> torch.nn.Module:
    if isinstance(spec, torch.nn.Module):
        return spec
    spec = _mapping("model", spec)
    _check_keys("model", spec, ("name", "factory", "args", "seed"))
    if ("name" in spec) == ("factory" in spec):
        raise ValueError(f"model: give exactly one of name (one of {sorted(zoo.MODELS)}) "
                         f"and factory ('package.module:callable'), got {spec}")
    args = _mapping("model.args", spec.get("args") or {})
    torch.manual_seed(int(spec.get("seed", 0)))
    if "name" in spec:
        if spec["name"] in zoo.MODELS:
            check_args(zoo.MODELS[spec["name"]], args, "model.args")
        return zoo.build(spec["name"], **args)
    model = call_factory(spec["factory"], "model.factory", args)
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model.factory {spec['factory']!r} returned a "
                         f"{type(model).__name__}, not an nn.Module")
    return model


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """F.cross_entropy over the last dimension: logits (..., V), integer targets (...)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


LOSSES: dict[str, Callable] = {"mse": F.mse_loss, "l1": F.l1_loss,
                               "cross_entropy": cross_entropy}


def resolve_loss(spec) -> Callable:
    if callable(spec):
        return spec
    if spec not in LOSSES:
        raise ValueError(f"loss must be a callable or one of {sorted(LOSSES)}, got {spec!r}")
    return LOSSES[spec]


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    """kind: "sgd" | "adamw"; hyper: torch's keyword arguments (lr included)."""

    kind: str
    hyper: dict


def resolve_optimizer(spec, model: torch.nn.Module) -> OptimizerSpec:
    if isinstance(spec, torch.optim.Optimizer):
        return _from_torch(spec, model)
    spec = _mapping("optimizer", spec)
    kind = str(spec.pop("type", "")).lower()
    if kind not in OPTIMIZERS:
        raise ValueError(f"optimizer.type must be one of {sorted(OPTIMIZERS)}, got {kind!r}")
    _check_keys(f"optimizer ({kind})", spec, HYPERPARAMETERS[kind])
    if "lr" not in spec:
        raise ValueError(f"optimizer ({kind}): lr is required")
    if "betas" in spec:
        spec["betas"] = tuple(float(b) for b in spec["betas"])
    return OptimizerSpec(kind, spec)


def _from_torch(opt: torch.optim.Optimizer, model: torch.nn.Module) -> OptimizerSpec:
    kind = {torch.optim.SGD: "sgd", torch.optim.AdamW: "adamw"}.get(type(opt))
    if kind is None:
        raise ValueError(f"optimizer: {type(opt).__name__} has no fabric kernel; use "
                         "torch.optim.SGD or torch.optim.AdamW (or {type: sgd|adamw, ...})")
    if len(opt.param_groups) != 1:
        raise ValueError(f"optimizer: {len(opt.param_groups)} parameter groups; the fabric "
                         "optimizers take one (the same hyperparameters for every weight)")
    group = opt.param_groups[0]
    if {id(p) for p in group["params"]} != {id(p) for p in model.parameters()}:
        raise ValueError("optimizer: it was not built on exactly this model's parameters")
    if kind == "adamw" and group.get("amsgrad"):
        raise ValueError("optimizer: AdamW(amsgrad=True) has no fabric kernel")
    hyper = {k: group[k] for k in HYPERPARAMETERS[kind]}
    if isinstance(hyper["lr"], torch.Tensor):
        hyper["lr"] = float(hyper["lr"])
    return OptimizerSpec(kind, hyper)


# ---- precision, loop, checkpoints ------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PrecisionSpec:
    """mode: "fp32" | "mixed"; half: the 16-bit format's name (mixed only); scaler: the
    GradScaler's keyword arguments (mixed: dynamic loss scaling by default; fp32: none
    unless given, e.g. {max_gradient_norm: 1.0} or a fixed loss_scale)."""

    mode: str
    half: str | None
    scaler: dict | None

    def half_name(self) -> str | None:
        """The half dtype a mixed run uses (the spec's, else frontend.amp's current one);
        None in fp32."""
        if self.mode != "mixed":
            return None
        return self.half or get_half_dtype().name


def resolve_precision(spec) -> PrecisionSpec:
    if isinstance(spec, PrecisionSpec):
        return spec
    if isinstance(spec, str):
        spec = {"dtype": spec}
    spec = _mapping("precision", spec)
    _check_keys("precision", spec, ("dtype",) + SCALER_KEYS)
    dtype = spec.pop("dtype", "fp32")
    scaler = {k: spec[k] for k in SCALER_KEYS if k in spec}
    if dtype in ("fp32", "float32"):
        return PrecisionSpec("fp32", None, scaler or None)
    try:  # "mixed": the half dtype of frontend.amp when the Trainer is made
        half = None if dtype == "mixed" else half_dtype(dtype).name
    except ValueError as e:
        raise ValueError(f"precision: dtype must be fp32, mixed or one of "
                         f"{sorted(HALF_DTYPES)}, got {dtype!r}") from e
    return PrecisionSpec("mixed", half, scaler)


@dataclasses.dataclass(frozen=True)
class LoopSpec:
    """epochs: passes over the train loader; max_steps: stop after this many optimizer steps
    in all (None: no limit); val_every: validate every this many steps (None: at the end of
    each epoch; only with a val_loader)."""

    epochs: int = 1
    max_steps: int | None = None
    val_every: int | None = None


def _positive(what: str, value, allow_none: bool = True):
    if value is None and allow_none:
        return None
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def resolve_loop(spec) -> LoopSpec:
    if isinstance(spec, LoopSpec):
        return spec
    spec = _mapping("loop", spec or {})
    _check_keys("loop", spec, ("epochs", "max_steps", "val_every"))
    return LoopSpec(_positive("loop.epochs", spec.get("epochs", 1), allow_none=False),
                    _positive("loop.max_steps", spec.get("max_steps")),
                    _positive("loop.val_every", spec.get("val_every")))


@dataclasses.dataclass(frozen=True)
class CheckpointSpec:
    """dir: where checkpoints go (step_<k>.pt); every: save every this many steps (None: at
    the end of fit only); resume: a checkpoint file to continue from, "latest" (the highest
    step in dir), or None."""

    dir: str | None = None
    every: int | None = None
    resume: str | None = None


def resolve_checkpoint(spec) -> CheckpointSpec:
    if isinstance(spec, CheckpointSpec):
        return spec
    spec = _mapping("checkpoint", spec or {})
    _check_keys("checkpoint", spec, ("dir", "every", "resume"))
    out = CheckpointSpec(None if spec.get("dir") is None else str(spec["dir"]),
                         _positive("checkpoint.every", spec.get("every")),
                         None if spec.get("resume") is None else str(spec["resume"]))
    if (out.every is not None or out.resume == "latest") and out.dir is None:
        raise ValueError("checkpoint: 'every' and resume 'latest' need a dir")
    return out
