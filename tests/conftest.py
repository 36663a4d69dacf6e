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

import jax
import pytest

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True)
def _strict_promotion():
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield
