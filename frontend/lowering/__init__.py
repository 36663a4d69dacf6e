"""ATen graph -> stages: a rule per op, in small files by op family (see `core`)."""

from frontend.lowering import losses  # noqa: F401  (cross-entropy rules register)
from frontend.lowering.core import RULES, Lowered, lower, rule, supported_ops

__all__ = ["RULES", "Lowered", "lower", "rule", "supported_ops"]
