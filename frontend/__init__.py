"""PyTorch frontend: an nn.Module to kernels placed on the simulated fabric, run and checked
against eager PyTorch.

    cm = frontend.compile(model, example_inputs, config=FabricConfig.small(32, 32))
    out = cm(*inputs); print(cm.report()); cm.validate(*inputs); cm.plot_placement("p.png")

Mixed precision: `frontend.amp.set_half_dtype("bfloat16")`, then
`frontend.compile(..., precision="mixed")`.
"""

from frontend import amp
from frontend.compiled import CompiledModel, compile  # noqa: A004
from frontend.errors import (
    FrontendError,
    PlacementError,
    UnsupportedOpError,
    ValidationError,
)

__all__ = ["amp", "CompiledModel", "FrontendError", "PlacementError", "UnsupportedOpError",
           "ValidationError", "compile"]
