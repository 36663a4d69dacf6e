"""Imports every rule family so that its rules register."""

from frontend.lowering import (  # noqa: F401
    backward,
    conv,
    elementwise,
    embedding,
    layout,
    masks,
    matmul,
    norms,
    reductions,
)
