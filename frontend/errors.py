"""Errors of the frontend: each names what is wrong and where (FX node, ATen op, the user's
source line)."""

from __future__ import annotations

import fabric


class FrontendError(Exception):
    """Base class of the frontend's errors."""


class UnsupportedOpError(FrontendError):
    """An ATen op (or a use of one) that the lowering has no rule for."""


class PlacementError(FrontendError):
    """The model does not fit the fabric (PEs, SRAM or colors)."""


class ValidationError(FrontendError):
    """Outputs of the simulated fabric differ from eager PyTorch beyond tolerance."""


class CheckpointError(FrontendError, fabric.CheckpointError):
    """A training checkpoint cannot be loaded: the file is missing, unreadable, truncated or
    corrupt (its digest does not match), or it does not fit the optimizer, scaler or run
    resuming from it (the message names the file and what differs).

    It is a `FrontendError` (the frontend raised it) and a `fabric.CheckpointError` (hence a
    ValueError), so one `except fabric.CheckpointError` refuses a bad checkpoint of either
    kind, training or simulator."""
