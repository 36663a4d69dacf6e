"""The `torch.compile` backend "fabric" (registered through the `torch_dynamo_backends`
entry point): dynamo hands over a GraphModule per captured graph; it takes the same path as
`frontend.compile`. A graph the lowering cannot handle runs eagerly, with a warning that
names the op."""

from __future__ import annotations

import warnings

import torch

from fabric.config import FabricConfig
from frontend.amp import resolve_half
from frontend.capture import from_graph_module
from frontend.color_fit import check_period_share
from frontend.compiled import CompiledModel
from frontend.errors import UnsupportedOpError
from frontend.graph_colors import DEFAULT_COLOR_POLICY, check_color_policy
from frontend.program_calls import DEFAULT_SIMULATION, check_simulation
from frontend.schedule import DEFAULT_MODE, check_mode

DEFAULT_CONFIG = FabricConfig.small(32, 32)


def fabric_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """Compile one dynamo graph for the fabric; returns a callable with the graph's outputs.

    options (from `torch.compile(model, backend="fabric", options={...})`): "config" (a
    FabricConfig, default small(32, 32)), "fallback" (run unsupported graphs eagerly with a
    warning, default True), "precision" ("fp32" or "mixed"), "half" (the 16-bit format
    under "mixed"), "mode" ("pipelined", the default, or "sequential") and "colors" ("fit",
    "refuse" or "report", the default: a pipelined graph short of colors), "period_share"
    and "simulate" ("parts", the default, or "program"), as `frontend.compile`'s.

    The fabric's programs have static shapes. A graph with symbolic sizes (dynamo makes one
    when a second call has other shapes, e.g. the short last batch of an eval loop) is
    compiled once per concrete set of shapes and sizes, on its first call with them."""
    options = dict(options or {})
    settings = {"config": options.pop("config", None) or DEFAULT_CONFIG,
                "fallback": options.pop("fallback", True)}
    precision = options.pop("precision", "fp32")
    settings["precision"] = precision
    settings["half"] = resolve_half(precision, options.pop("half", None))
    settings["mode"] = check_mode(options.pop("mode", DEFAULT_MODE))
    settings["colors"] = check_color_policy(options.pop("colors", DEFAULT_COLOR_POLICY))
    settings["period_share"] = options.pop("period_share", None)
    check_period_share(settings["period_share"], settings["mode"])
    settings["simulate"] = check_simulation(options.pop("simulate", DEFAULT_SIMULATION),
                                            settings["mode"])
    if options:
        raise ValueError(f"fabric backend: unknown options {sorted(options)} (config, "
                         "fallback, precision, half, mode, colors, period_share, simulate)")
    if any(_symbolic(a) for a in example_inputs):
        return PerShape(gm, settings)
    return _compile(gm, example_inputs, **settings)


def _compile(module: torch.nn.Module, example_inputs, config, fallback, precision, half,
             mode, colors, period_share=None, simulate=DEFAULT_SIMULATION):
    """The fabric's callable for `module` on inputs shaped like `example_inputs` (static),
    or `module` itself, run eagerly, when an op has no rule and `fallback` is on."""
    try:
        cm = CompiledModel(from_graph_module(module, example_inputs), config, 5_000_000,
                           precision, example_inputs, half, mode, colors, period_share,
                           simulate=simulate)
    except UnsupportedOpError as exc:
        if not fallback:
            raise
        warnings.warn(f"fabric backend: running this graph eagerly: {exc}".splitlines()[0],
                      stacklevel=3)
        return module.forward
    fabric_backend.last = cm
    return cm


def _symbolic(value) -> bool:
    """A SymInt input, or a tensor with a symbolic size."""
    if isinstance(value, torch.SymInt):
        return True
    return isinstance(value, torch.Tensor) and any(
        isinstance(d, torch.SymInt) for d in value.shape)


class PerShape:
    """A dynamo graph with symbolic sizes, compiled for the fabric once per concrete call
    signature (tensor shapes and dtypes, the values of the integer inputs)."""

    def __init__(self, gm: torch.fx.GraphModule, settings: dict):
        self.gm = gm
        self.settings = settings
        self.compiled: dict[tuple, object] = {}

    def __call__(self, *args):
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else int(a)
                    for a in args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if key not in self.compiled:
            static = _WithSizes(self.gm, args)
            self.compiled[key] = _compile(static, tensors, **self.settings)
        return self.compiled[key](*tensors)


class _WithSizes(torch.nn.Module):
    """`gm` with its integer (size) inputs fixed to one call's values: a module of tensor
    inputs only, with static shapes, that torch.export can capture."""

    def __init__(self, gm: torch.fx.GraphModule, args):
        super().__init__()
        self.gm = gm
        self.sizes = {i: int(a) for i, a in enumerate(args) if not isinstance(a, torch.Tensor)}
        self.count = len(args)

    def forward(self, *tensors):
        rest = iter(tensors)
        return self.gm(*(self.sizes[i] if i in self.sizes else next(rest)
                         for i in range(self.count)))


fabric_backend.last = None
