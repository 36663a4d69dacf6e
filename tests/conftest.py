"""Test set-up: strict JAX promotion, CPU only, and shared small configs."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One on-disk cache of compiled engines for every process of a test run (pytest-xdist
# workers, notebook kernels, CLI subprocesses inherit the variable): each fabric config
# compiles once per run instead of once per process. Keyed by JAX on the computation and
# its flags, so a stale entry is never used.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), "wafer-fabric-jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
# A size limit turns on JAX's file lock around every read and write of that cache: without
# one an entry is written in place, unlocked, and a worker starting the same compile could
# read another's half-written executable (a segfault, seen once in a CI run). 4 GiB, far
# above a whole run's entries (about 60 MB), so nothing is evicted.
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))


def _pin_xdist_worker() -> None:
    """Give each pytest-xdist worker its own share of the cores, before JAX makes its CPU
    client. XLA:CPU splits some loops of the engine's cycle over every core it sees, and
    each split loop waits for a thread hand-off every simulated cycle: with two workers on
    two cores, both oversubscribed, a frontend training step ran 30% slower than with each
    worker on one core of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    if count > len(cores):
        return
    share = len(cores) // count
    index = int(worker[2:]) % count
    os.sched_setaffinity(0, set(cores[index * share:(index + 1) * share]))


_pin_xdist_worker()

import jax
import pytest

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True)
def _strict_promotion():
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield
