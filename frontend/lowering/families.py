"""The rule table: every rule module of the lowering, listed once.

Each module registers its rules in `core.RULES` when it runs (`core.rule`); this is the one
place that imports rule modules for that, and the package's `__init__` imports it, so the
table is whole before `lower` runs. Rule files import `common` and `core`, and another rule
module only for a name they use (a rule they build on, a symbolic value), never to register
rules. The cases of an op exclude each other, so the order in which modules register does
not change which rule lowers a node (only the order in which an ambiguity error names the
cases).
"""

from frontend.lowering import (
    asserts,
    backward,
    backward_conv,
    backward_embedding,
    backward_norms,
    backward_pool,
    binary_math,
    complex_values,
    conv,
    elementwise,
    embedding,
    embedding_bag,
    experts,
    grid_sample,
    layout,
    losses,
    masks,
    matmul,
    modulo,
    norms,
    order_statistics,
    pool3d,
    powers,
    ranking,
    reductions,
    resample,
    routing,
    scatter,
    scatter_reduce,
    scatter_value,
    spectral,
)

FAMILIES = (asserts, backward, backward_conv, backward_embedding, backward_norms, backward_pool,
            binary_math, complex_values, conv, elementwise, embedding, embedding_bag, experts,
            grid_sample, layout, losses, masks, matmul, modulo, norms, order_statistics, pool3d,
            powers, ranking, reductions, resample, routing, scatter, scatter_reduce, scatter_value,
            spectral)
