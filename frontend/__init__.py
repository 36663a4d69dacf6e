"""PyTorch frontend: an nn.Module to kernels placed on the simulated fabric, run and checked
against eager PyTorch.

    cm = frontend.compile(model, example_inputs, config=FabricConfig.small(32, 32))
    out = cm(*inputs); print(cm.report()); cm.validate(*inputs); cm.plot_placement("p.png")
    outs = cm.stream(samples)   # mode="pipelined" (default): samples through resident stages

Mixed precision: `frontend.amp.set_half_dtype("bfloat16")`, then
`frontend.compile(..., precision="mixed")`.

Training: `frontend.Trainer(device="fabric", model=..., optimizer=..., loss=...,
precision=..., loop=...).fit(train_loader)`, or `backend=frontend.backend("fabric",
config=..., mode=..., execution="pipelined" | "sequential")` in place of device
(`frontend.training`).
"""

from frontend import amp
from frontend.compiled import CompiledModel, compile  # noqa: A004
from frontend.errors import (
    CheckpointError,
    FrontendError,
    IntegerRangeError,
    PlacementError,
    RankingNaNError,
    StageRunError,
    UnsupportedOpError,
    UserCodeError,
    ValidationError,
)
from frontend.training import Trainer, backend

__all__ = ["amp", "backend", "CheckpointError", "CompiledModel", "FrontendError",
           "IntegerRangeError", "PlacementError", "RankingNaNError", "StageRunError", "Trainer",
           "UnsupportedOpError", "UserCodeError", "ValidationError", "compile"]
