"""Neighbour access by shifts along the grid axes, with zeros beyond the fabric edge."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from fabric import grid_axes
from fabric.isa import Port


def _shift(x, axis: int, amount: int):
    """y[i] = x[i - amount] along `axis` (amount = +1 or -1), zero-filled at the fabric
    edge; along split rows the boundary row comes from the neighbouring device."""
    n = x.shape[axis]
    pad = jnp.zeros_like(lax.slice_in_dim(x, 0, 1, axis=axis))
    if amount > 0:
        if axis == 0 and grid_axes.sharded():
            pad = grid_axes.boundary_from_previous(lax.slice_in_dim(x, n - 1, n, axis=0))
        return jnp.concatenate([pad, lax.slice_in_dim(x, 0, n - 1, axis=axis)], axis=axis)
    if axis == 0 and grid_axes.sharded():
        pad = grid_axes.boundary_from_next(lax.slice_in_dim(x, 0, 1, axis=0))
    return jnp.concatenate([lax.slice_in_dim(x, 1, n, axis=axis), pad], axis=axis)


def from_neighbour(x, port: Port):
    """Value held by the neighbour reached through `port` (zeros at the edge).

    x: [R, C, ...]; NORTH is row - 1, EAST is col + 1.
    """
    if port == Port.NORTH:
        return _shift(x, 0, +1)
    if port == Port.SOUTH:
        return _shift(x, 0, -1)
    if port == Port.EAST:
        return _shift(x, 1, -1)
    if port == Port.WEST:
        return _shift(x, 1, +1)
    raise ValueError(f"{port!r} has no neighbour")


def arriving(sent, port: Port):
    """What arrives at each PE through its `port` when every PE sends `sent` the opposite way.

    A wavelet sent EAST by PE (r, c) arrives at (r, c + 1) through WEST, so the arrivals on
    WEST are the EAST sends of the west neighbour.
    """
    return from_neighbour(sent, port)
