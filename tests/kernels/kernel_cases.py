"""Shared config and checks of the collective, GEMV and elementwise kernel tests.

One config for the three modules (each distinct FabricConfig costs an XLA compile of the
engine), plus the fabric tests' hop-latency-2 row; every program they build stays in the
smallest table bucket.
"""

from __future__ import annotations

import itertools

import numpy as np

from fabric import FabricConfig, Rect
from fabric.kernels.base import Kernel, KernelResult, run_kernel

CONFIG = FabricConfig.small(8, 8)
ROW_L2 = FabricConfig.small(1, 8, hop_latency=2)  # as the fabric tests' hop-latency config
FULL = Rect(0, 0, 8, 8)
ODD = Rect(1, 2, 3, 5)  # non-square, off the corner, lines of 5 and 3 PEs


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(gen: np.random.Generator, *shape: int) -> np.ndarray:
    return gen.standard_normal(shape).astype(np.float32)


def check_cycles(result: KernelResult, kernel: Kernel, exact: bool = True) -> None:
    """Measured kernel cycles against the model: equal, or within 10 %."""
    got, model = result.cycles, kernel.model_cycles
    if exact:
        assert got == model, f"{kernel.name} {kernel.info}: {got} cycles, model {model}"
    else:
        assert abs(got - model) <= 0.10 * model, (
            f"{kernel.name} {kernel.info}: {got} cycles, model {model}")


def run_exact(kernel: Kernel, inputs: dict, expected: np.ndarray,
              exact_cycles: bool = True) -> KernelResult:
    """Run, then check the output bit for bit (fp32, same operation order as the numpy
    reference) and the cycles against the model."""
    result = run_kernel(kernel, inputs)
    np.testing.assert_array_equal(result.output, expected)
    check_cycles(result, kernel, exact_cycles)
    return result


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """fp32 arrays equal bit for bit, any NaN equal to any NaN (at the same places)."""
    return np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(
        a.view(np.uint32)[~np.isnan(a)], b.view(np.uint32)[~np.isnan(b)])


F32_TINY = float(np.finfo(np.float32).tiny)


def flush_subnormals(x) -> np.ndarray:
    """fp32 x with its subnormals flushed to zero of their sign, as fp32 ops on the PE read
    them."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < np.float32(F32_TINY), np.copysign(np.float32(0), x), x)


def ulp_error(got, ref) -> np.ndarray:
    """|got - ref| in ulps of ref (fp32); equal values (inf, NaN) are 0 apart."""
    with np.errstate(all="ignore"):
        ulp = np.spacing(np.maximum(np.abs(ref), np.float32(F32_TINY))).astype(np.float64)
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / ulp
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def pair_grid(firsts, seconds) -> tuple[np.ndarray, np.ndarray]:
    """Every (first, second) pair of two lists of fp32 values, as two flat arrays."""
    pairs = np.array(list(itertools.product(firsts, seconds)), np.float32)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def grid_then_sample(grid: tuple, sweep: tuple, size: int) -> tuple[np.ndarray, np.ndarray]:
    """`size` pairs for one kernel run: the grid's pairs, then an even sample of the
    sweep's (both (a, b) arrays)."""
    pick = np.linspace(0, sweep[0].size - 1, size - grid[0].size).astype(int)
    return tuple(np.concatenate([g, s[pick]]) for g, s in zip(grid, sweep))
