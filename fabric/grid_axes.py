"""The grid's rows split over devices: neighbour rows across a split and fabric-wide
reductions.

`run` may execute the step inside `jax.shard_map` with the rows split over a mesh axis
(ROW_AXIS); while that trace runs, `sharded()` is true, row shifts fetch the boundary row
of the neighbouring device with `ppermute`, and `global_any` reduces over all devices.
Outside it everything is plain single-device code.
"""

from __future__ import annotations

import contextlib

import jax.numpy as jnp
from jax import lax

ROW_AXIS = "rows"
_DEVICES = [0]  # devices the rows are split over while a sharded trace runs (0: none)


@contextlib.contextmanager
def split_rows(devices: int):
    """Trace code for a fabric whose rows are split in `devices` equal blocks."""
    _DEVICES.append(devices)
    try:
        yield
    finally:
        _DEVICES.pop()


def sharded() -> bool:
    return _DEVICES[-1] > 1


def boundary_from_previous(last_row):
    """The last row of the previous device's block (zeros on the first device).
    last_row: [1, C, ...]."""
    n = _DEVICES[-1]
    return lax.ppermute(last_row, ROW_AXIS, [(d, d + 1) for d in range(n - 1)])


def boundary_from_next(first_row):
    """The first row of the next device's block (zeros on the last device)."""
    n = _DEVICES[-1]
    return lax.ppermute(first_row, ROW_AXIS, [(d + 1, d) for d in range(n - 1)])


def global_any(flag):
    """Scalar bool: `flag` (any shape) is true anywhere on the fabric."""
    local = jnp.any(flag)
    if not sharded():
        return local
    return lax.psum(local.astype(jnp.int32), ROW_AXIS) > 0
