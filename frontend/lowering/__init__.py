"""ATen graph -> stages: a rule per op, in small files by op family (see `core`), every
family listed in `families`."""

from frontend.lowering import families  # noqa: F401  (the rule table: every rule module)
from frontend.lowering.core import (
    EXPERTS,
    GEMM_ORIENTATIONS,
    LOOKUPS,
    RULES,
    Lowered,
    check_experts,
    check_gemm_orientation,
    check_lookups,
    lower,
    rule,
    supported_ops,
)
from frontend.lowering.experts import picked_products

__all__ = ["EXPERTS", "GEMM_ORIENTATIONS", "LOOKUPS", "RULES", "Lowered", "check_experts",
           "check_gemm_orientation", "check_lookups", "lower", "picked_products", "rule",
           "supported_ops"]
