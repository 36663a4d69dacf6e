"""PE-minor reads and writes ([R, X, C] arrays: SRAM, FIFO data) against numpy indexing,
with flat indices and with the (row, offset) indices of arrays too large for int32."""

import jax.numpy as jnp
import numpy as np
import pytest

from fabric import pe_minor

R, X, C, N = 3, 7, 5, 4


@pytest.fixture(params=["flat", "row_offset"])
def index_kind(request, monkeypatch):
    if request.param == "row_offset":  # as for the SRAM of a whole wafer
        monkeypatch.setattr(pe_minor, "FLAT_LIMIT", 1)
    return request.param


def test_read_matches_numpy(index_kind):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 2**32, (R, X, C), dtype=np.uint64).astype(np.uint32)
    at = rng.integers(0, X, (R, C, N)).astype(np.int32)
    got = np.asarray(pe_minor.read(jnp.asarray(data), jnp.asarray(at)))
    r, c = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    np.testing.assert_array_equal(got, data[r[..., None], at, c[..., None]])
    got1 = np.asarray(pe_minor.read(jnp.asarray(data), jnp.asarray(at[..., 0])))
    np.testing.assert_array_equal(got1, data[r, at[..., 0], c])


def test_write_matches_numpy_and_drops_addresses_outside(index_kind):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 1000, (R, X, C)).astype(np.int32)
    # distinct addresses per PE, some outside 0 .. X-1 (written nowhere)
    at = np.stack([rng.permutation(X + 3)[:N] - 1 for _ in range(R * C)]).reshape(R, C, N)
    values = rng.integers(-1000, 0, (R, C, N)).astype(np.int32)
    got = np.asarray(pe_minor.write(jnp.asarray(data), jnp.asarray(at.astype(np.int32)),
                                    jnp.asarray(values), unique=True))
    want = data.copy()
    for r in range(R):
        for c in range(C):
            for n in range(N):
                if 0 <= at[r, c, n] < X:
                    want[r, at[r, c, n], c] = values[r, c, n]
    np.testing.assert_array_equal(got, want)
