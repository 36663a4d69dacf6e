"""16-bit formats: fp32 <-> fp16 / bf16 bit-exact against numpy and ml_dtypes on every 16-bit
pattern and on random fp32 inputs (ties, overflow, underflow, subnormals, NaN, inf);
cbfloat16 round trip on every pattern, rounding against a plain-Python reference written from
the documented rules, and its range and precision figures. The jax.numpy versions (under jit,
format chosen per element) must equal the numpy ones bit for bit."""

from __future__ import annotations

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from fabric.numerics import FORMATS, decode_code, encode_code, from_half, round_to, to_half

ALL16 = np.arange(1 << 16, dtype=np.uint32)
HOST = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
# overflowing and NaN casts in numpy are what these tests feed in on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _f32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


def _bits(values):
    return np.asarray(values, np.float32).view(np.uint32)


def _special_fp32(dtype):
    """fp32 inputs at the edges of `dtype`: ties between neighbours, the overflow threshold,
    the subnormal range, fp32 subnormals, signed zeros, infinities and NaNs with payloads."""
    fmt = FORMATS[dtype]
    grid = from_half(np.arange(0, fmt.inf_bits + 1, dtype=np.uint32), dtype).astype(np.float64)
    mids = (grid[:-1] + grid[1:]) / 2  # exact ties (fit in fp32: one bit more than the format)
    near = np.concatenate([np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                           np.nextafter(mids.astype(np.float32), np.float32(0))])
    edges = np.array([fmt.max, fmt.max * (1 + 2.0 ** -(fmt.mbits + 1)), 2 * fmt.max,
                      fmt.min_normal, fmt.min_subnormal, fmt.min_subnormal / 2,
                      fmt.min_subnormal * 0.75, fmt.min_subnormal / 4, 3.4e38, 0.0])
    values = np.concatenate([mids, edges]).astype(np.float32)
    values = np.concatenate([values, near, -values])
    bits = np.concatenate([_bits(values), np.array(
        [0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFA00001, 0x7F802000, 0x7FBFFFFF,
         0x00000001, 0x007FFFFF, 0x00400000, 0x80400001, 0x00008000, 0x00018000], np.uint32)])
    return bits


def _random_fp32(n, seed):
    return np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_decode_every_pattern_matches_reference(dtype):
    want = ALL16.astype(np.uint16).view(HOST[dtype]).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(_bits(from_half(ALL16, dtype)), want)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_encode_matches_reference(dtype):
    bits = np.concatenate([_special_fp32(dtype), _random_fp32(1 << 20, 1),
                           _bits(from_half(ALL16, dtype))])
    want = _f32(bits).astype(HOST[dtype]).view(np.uint16)
    got = to_half(_f32(bits), dtype)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(hex(bits[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def _reference_round(x: float, fmt) -> float:
    """Round x to `fmt` from its documented rules, in exact rational arithmetic: nearest
    value of the form k * 2^(e - mbits) (e >= 1 - bias), ties to even k, infinity beyond the
    largest finite value, the sign kept (also on zero)."""
    if math.isnan(x) or math.isinf(x):
        return x
    a = Fraction(abs(x))
    if a == 0:
        return x
    emin = 1 - fmt.bias
    e = max(math.frexp(abs(x))[1] - 1, emin)
    quantum = Fraction(2) ** (e - fmt.mbits)
    r = round(a / quantum) * quantum  # Fraction rounding: ties to even
    out = math.inf if r > Fraction(fmt.max) else float(r)
    return math.copysign(out, x)


@pytest.mark.parametrize("dtype", ["f16", "cb16"])
def test_rounding_against_plain_python_reference(dtype):
    """fp16 checks the reference itself against numpy; cbfloat16 is then checked by it."""
    fmt = FORMATS[dtype]
    rng = np.random.default_rng(2)
    # random magnitudes over the whole format range and beyond, plus random fp32 patterns
    mags = np.exp2(rng.uniform(math.log2(fmt.min_subnormal) - 3, math.log2(fmt.max) + 2, 3000))
    values = np.concatenate([(mags * rng.choice([-1, 1], mags.size)).astype(np.float32),
                             _f32(_special_fp32(dtype)), _f32(_random_fp32(2000, 3))])
    got = round_to(values, dtype).astype(np.float64)
    want = np.array([_reference_round(float(v), fmt) for v in values])
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    same |= np.isnan(got) & np.isnan(want)
    bad = np.nonzero(~same)[0]
    assert bad.size == 0, [(values[i], got[i], want[i]) for i in bad[:5]]


def test_cbfloat16_round_trip_every_pattern():
    """decode then encode gives back each of the 65,536 patterns (NaN payloads included)."""
    np.testing.assert_array_equal(to_half(from_half(ALL16, "cb16"), "cb16"), ALL16)
    assert np.all(np.isnan(from_half(ALL16, "cb16")) == (((ALL16 >> 9) & 63 == 63)
                                                        & ((ALL16 & 511) != 0)))


def test_cbfloat16_range_and_precision():
    f = FORMATS["cb16"]
    assert (f.ebits, f.mbits, f.bias) == (6, 9, 31)
    assert f.max == (2 - 2.0 ** -9) * 2.0 ** 31 == 4290772992.0
    assert f.min_normal == 2.0 ** -30 and f.min_subnormal == 2.0 ** -39 and f.eps == 2.0 ** -9
    # the same figures read off the bit patterns
    values = from_half(np.array([0x7DFF, 0x0200, 0x0001, 0x7E00, 0x3E01, 0x3E00]), "cb16")
    assert values[0] == f.max and values[1] == f.min_normal and values[2] == f.min_subnormal
    assert values[3] == np.inf and values[5] == 1.0 and values[4] - values[5] == f.eps
    # and the other formats' figures agree with numpy / ml_dtypes
    for dtype, host in HOST.items():
        info = ml_dtypes.finfo(host)
        fmt = FORMATS[dtype]
        assert (fmt.max, fmt.min_normal, fmt.eps) == (float(info.max), float(info.tiny),
                                                      float(info.eps))
        assert fmt.min_subnormal == float(info.smallest_subnormal)


def test_fp16_overflow_becomes_inf_cbfloat16_stays_finite():
    x = np.array([70000.0, -1e6, 4e9], np.float32)
    assert np.all(np.isinf(round_to(x, "f16")))
    cb = round_to(x, "cb16")
    assert np.all(np.isfinite(cb))
    np.testing.assert_allclose(cb, x, rtol=2.0 ** -10)  # half an ulp: 2^-(mbits+1)


def test_jax_versions_equal_numpy_under_jit():
    """One jitted call converts every format, chosen per element (code 0 = fp32 unchanged)."""
    codes = {"f16": 1, "bf16": 2, "cb16": 3}  # fp32 (0) is checked after the loop
    fp32 = np.concatenate([_random_fp32(1 << 16, 4), _special_fp32("cb16")[:4096]])
    n = ALL16.size
    data = np.concatenate([np.tile(ALL16, 3), np.tile(fp32[:n], 4)])
    code = np.concatenate([np.repeat([1, 2, 3], n), np.repeat([0, 1, 2, 3], n)]).astype(np.int32)
    dec, enc = jax.jit(lambda b, c: (decode_code(b, c), encode_code(b, c)))(
        jnp.asarray(data), jnp.asarray(code))
    dec, enc = np.asarray(dec), np.asarray(enc)
    for dtype, c in codes.items():
        sel = code == c
        np.testing.assert_array_equal(dec[sel][:n], _bits(from_half(data[sel][:n], dtype)))
        np.testing.assert_array_equal(enc[sel][n:], to_half(_f32(data[sel][n:]), dtype))
    np.testing.assert_array_equal(dec[code == 0], data[code == 0])
    np.testing.assert_array_equal(enc[code == 0], data[code == 0])
