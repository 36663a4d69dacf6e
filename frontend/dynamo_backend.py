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
from frontend.compiled import CompiledModel
from frontend.errors import UnsupportedOpError

DEFAULT_CONFIG = FabricConfig.small(32, 32)


def fabric_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """Compile one dynamo graph for the fabric; returns a callable with the graph's outputs.

    options (from `torch.compile(model, backend="fabric", options={...})`): "config" (a
    FabricConfig, default small(32, 32)), "fallback" (run unsupported graphs eagerly with a
    warning, default True), "precision" ("fp32" or "mixed") and "half" (the 16-bit format
    under "mixed"), as `frontend.compile`'s."""
    options = dict(options or {})
    config = options.pop("config", None) or DEFAULT_CONFIG
    fallback = options.pop("fallback", True)
    precision = options.pop("precision", "fp32")
    half = resolve_half(precision, options.pop("half", None))
    if options:
        raise ValueError(f"fabric backend: unknown options {sorted(options)} (config, "
                         "fallback, precision, half)")
    try:
        cm = CompiledModel(from_graph_module(gm, example_inputs), config, 5_000_000,
                           precision, example_inputs, half)
    except UnsupportedOpError as exc:
        if not fallback:
            raise
        warnings.warn(f"fabric backend: running this graph eagerly: {exc}".splitlines()[0],
                      stacklevel=2)
        return gm.forward
    fabric_backend.last = cm

    def run(*args):
        out = cm(*args)
        return out

    return run


fabric_backend.last = None
