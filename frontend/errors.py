"""Errors of the frontend: each names what is wrong and where (FX node, ATen op, the user's
source line)."""

from __future__ import annotations


class FrontendError(Exception):
    """Base class of the frontend's errors."""


class UnsupportedOpError(FrontendError):
    """An ATen op (or a use of one) that the lowering has no rule for."""


class PlacementError(FrontendError):
    """The model does not fit the fabric (PEs, SRAM or colors)."""


class ValidationError(FrontendError):
    """Outputs of the simulated fabric differ from eager PyTorch beyond tolerance."""
