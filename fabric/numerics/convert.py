"""fp32 <-> 16-bit conversions by bit manipulation, one algorithm for every format.

`encode` rounds fp32 bit patterns to a 16-bit format (round to nearest, ties to even;
overflow to infinity; fp32 subnormal inputs are converted exactly as their values, not
flushed); `decode` widens 16-bit patterns to fp32 (exact: every value of every format is an
fp32 value). Both work on uint32 arrays with numpy (host) or jax.numpy (engine, under jit)
and take the format parameters as scalars or as arrays broadcast against the data, so the
engine can pick a format per operand at run time.

Example:
    >>> import numpy as np
    >>> x = np.array([1.0, 65520.0, 1e-8], np.float32)
    >>> to_half(x, "f16")          # 1.0, overflow to inf, underflow to 0
    array([15360, 31744,     0], dtype=uint16)
    >>> from_half(to_half(x, "cb16"), "cb16")
    array([1.000000e+00, 6.553600e+04, 9.997166e-09], dtype=float32)
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from fabric.numerics.formats import F32_CODE, PARAM_TABLE, half_format

# fp32 layout
_EXP_SHIFT, _MAN_MASK, _EXP_ALL = 23, 0x7FFFFF, 0xFF
_MAX_MBITS = 10  # the subnormal normalisation below unrolls over this many mantissa bits


def encode(bits, ebits, mbits, bias, canonical_nan, xp=np):
    """fp32 bit patterns -> 16-bit patterns (in the low half of a uint32).

    Args:
        bits: uint32[...] fp32 bit patterns.
        ebits, mbits, bias: int32 scalars or arrays broadcast against `bits`.
        canonical_nan: bool scalar or array (see `Format.canonical_nan`).
        xp: numpy or jax.numpy.
    Returns:
        uint32[...], values 0..0xFFFF.
    """
    u32, i32 = xp.uint32, xp.int32
    bits = xp.asarray(bits).astype(u32)
    ebits, mbits, bias = (xp.asarray(v).astype(i32) for v in (ebits, mbits, bias))
    one = xp.asarray(1, u32)
    sign = (bits >> 16) & xp.asarray(0x8000, u32)
    exp = ((bits >> _EXP_SHIFT) & _EXP_ALL).astype(i32)
    man = bits & _MAN_MASK
    is_special = exp == _EXP_ALL
    # 24-bit significand and the target's biased exponent of a normal result (signed)
    sig = xp.where(exp != 0, man | (1 << _EXP_SHIFT), man)
    target_exp = xp.maximum(exp, 1) - 127 + bias
    # bits dropped: 23 - mbits, plus the extra ones of a subnormal result; from 25 on every
    # significand (< 2^24) rounds to 0, so the shift is capped there
    shift = xp.minimum(_EXP_SHIFT - mbits + xp.maximum(1 - target_exp, 0), 25).astype(u32)
    q = sig >> shift
    rem = sig & ((one << shift) - one)
    half = one << (shift - one)
    up = (rem > half) | ((rem == half) & ((q & one) == one))
    q = q + up.astype(u32)
    # a normal result adds its exponent field minus 1 (the significand carries the hidden
    # 1); a carry out of the mantissa moves to the next binade, the largest one to infinity
    mbits_u = mbits.astype(u32)
    mag = (xp.maximum(target_exp - 1, 0).astype(u32) << mbits_u) + q
    inf = ((one << ebits.astype(u32)) - one) << mbits_u
    mag = xp.where((mag >= inf) | (is_special & (man == 0)), inf, mag)
    payload = man >> (_EXP_SHIFT - mbits).astype(u32)
    payload = xp.where(payload == 0, one, payload)
    payload = xp.where(xp.asarray(canonical_nan), one << (mbits_u - one), payload)
    mag = xp.where(is_special & (man != 0), inf | payload, mag)
    return sign | mag


def decode(half, ebits, mbits, bias, xp=np):
    """16-bit patterns (low half of a uint32) -> fp32 bit patterns, exactly.

    Args:
        half: uint32[...] (bits above 15 are ignored).
        ebits, mbits, bias: int32 scalars or arrays broadcast against `half`.
    Returns:
        uint32[...] fp32 bit patterns; NaN payloads are kept (shifted to the top).
    """
    u32, i32 = xp.uint32, xp.int32
    half = xp.asarray(half).astype(u32) & 0xFFFF
    ebits, mbits, bias = (xp.asarray(v).astype(i32) for v in (ebits, mbits, bias))
    one = xp.asarray(1, u32)
    mbits_u = mbits.astype(u32)
    sign = (half & 0x8000) << 16
    emax = (one << ebits.astype(u32)) - one
    e = (half >> mbits_u) & emax
    m = half & ((one << mbits_u) - one)
    up = (_EXP_SHIFT - mbits).astype(u32)
    normal = ((e.astype(i32) - bias + 127).astype(u32) << _EXP_SHIFT) | (m << up)
    special = xp.asarray(0x7F800000, u32) | (m << up)
    # subnormal: m * 2^(1 - bias - mbits); p = index of m's highest set bit
    p = xp.zeros_like(m).astype(i32)
    for k in range(1, _MAX_MBITS):
        p = p + (m >> k != 0).astype(i32)
    sub_exp = p + 128 - bias - mbits
    sub_normal = ((xp.maximum(sub_exp, 0).astype(u32) << _EXP_SHIFT)
                  | ((m << (_EXP_SHIFT - p).astype(u32)) & _MAN_MASK))
    # a subnormal that is an fp32 subnormal too (bf16): the mantissa moves as it is
    sub_tiny = m << xp.clip(150 - bias - mbits, 0, 31).astype(u32)
    sub = xp.where(sub_exp >= 1, sub_normal, sub_tiny)
    out = xp.where(e == emax, special, xp.where(e == 0, xp.where(m == 0, 0, sub), normal))
    return (sign | out).astype(u32)


# ---- host (numpy) ----------------------------------------------------------------------------
def to_half(values, dtype: str) -> np.ndarray:
    """Round `values` (cast to fp32 first) to 16-bit `dtype` patterns: uint16[...]."""
    fmt = half_format(dtype)
    bits = np.asarray(values, np.float32).view(np.uint32)
    out = encode(bits, fmt.ebits, fmt.mbits, fmt.bias, fmt.canonical_nan, np)
    return out.astype(np.uint16)


def from_half(patterns, dtype: str) -> np.ndarray:
    """16-bit `dtype` patterns -> their exact fp32 values: float32[...]."""
    fmt = half_format(dtype)
    out = decode(np.asarray(patterns).astype(np.uint32), fmt.ebits, fmt.mbits, fmt.bias, np)
    return np.asarray(out, np.uint32).view(np.float32)


def round_to(values, dtype: str) -> np.ndarray:
    """fp32 values rounded to `dtype` and widened back: float32[...]."""
    return from_half(to_half(values, dtype), dtype)


# ---- engine (jax.numpy, format chosen per element) -------------------------------------------
def _params(code):
    table = jnp.asarray(PARAM_TABLE)
    row = table[jnp.clip(code, 0, table.shape[0] - 1)]
    return row[..., 0], row[..., 1], row[..., 2], row[..., 3] != 0


def encode_code(bits, code):
    """fp32 bit patterns -> patterns of format `code` (int32 array broadcast against `bits`;
    0 = fp32: unchanged). uint32 in, uint32 out."""
    code = jnp.asarray(code)
    ebits, mbits, bias, canonical = _params(code)
    half = encode(bits, ebits, mbits, bias, canonical, jnp)
    return jnp.where(code == F32_CODE, bits, half)


def decode_code(bits, code):
    """Patterns of format `code` -> fp32 bit patterns (0 = fp32: unchanged). uint32 in/out."""
    code = jnp.asarray(code)
    ebits, mbits, bias, _ = _params(code)
    return jnp.where(code == F32_CODE, bits, decode(bits, ebits, mbits, bias, jnp))
