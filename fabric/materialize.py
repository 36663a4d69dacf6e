"""Force XLA to compute per-PE values once before they are broadcast over a wider axis.

XLA:CPU fuses an elementwise producer into every consumer loop, so a per-PE mask that feeds
a [R, C, K] update is recomputed K times together with everything it depends on. A value
that leaves a conditional is a real buffer, so passing it through a `lax.cond` whose
predicate XLA cannot fold (the cycle counter is never negative) makes it computed once.
`lax.optimization_barrier` does not do this on the CPU backend.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def materialize(tree, cycle):
    """`tree` unchanged, computed into buffers before its consumers run."""
    # the branches differ, so XLA cannot merge them away; the second is never taken
    return lax.cond(cycle >= 0, lambda t: t, lambda t: jax.tree.map(jnp.zeros_like, t), tree)
