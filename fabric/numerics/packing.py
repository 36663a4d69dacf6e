"""Host packing of symbol data into 32-bit SRAM words.

SRAM is addressed in 16-bit half-words and held by the engine as 32-bit words. A 32-bit
element (f32, i32, u32) fills one word; 16-bit elements (f16, bf16, cb16) sit two to a word,
little-endian: element 2k in the low half of word k, element 2k+1 in the high half, so half-word
address a is bits 16*(a % 2) .. 16*(a % 2) + 15 of word a // 2. A symbol of n 16-bit elements
takes ceil(n / 2) words (the unused high half of an odd last word stays 0).

Example:
    >>> import numpy as np
    >>> w = to_words(np.array([[1.0, 2.0, 3.0]], np.float32), "f16")
    >>> [hex(v) for v in w[0]]
    ['0x40003c00', '0x4200']
    >>> from_words(w, "f16", 3)
    array([[1., 2., 3.]], dtype=float16)
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from fabric.numerics.convert import from_half, to_half
from fabric.numerics.formats import FORMATS

_WORD_DTYPES = {"f32": np.float32, "i32": np.int32, "u32": np.uint32}
# what memcpy_d2h returns per 16-bit dtype; cbfloat16 has no numpy dtype, so its exact fp32
# values are returned
_HALF_HOST = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "cb16": np.float32}


def _check(dtype: str) -> None:
    if dtype not in _WORD_DTYPES and dtype not in FORMATS:
        raise ValueError(f"unknown dtype {dtype!r}; dtypes: "
                         f"{sorted(_WORD_DTYPES) + sorted(FORMATS)}")


def is_half(dtype: str) -> bool:
    _check(dtype)
    return dtype in FORMATS


def words_for(dtype: str, n: int) -> int:
    """32-bit words that n elements of `dtype` occupy."""
    return -(-n // 2) if is_half(dtype) else n


def host_dtype(dtype: str) -> np.dtype:
    """The numpy dtype the host sees for a symbol dtype."""
    _check(dtype)
    return np.dtype(_HALF_HOST.get(dtype, _WORD_DTYPES.get(dtype)))


def to_words(values, dtype: str) -> np.ndarray:
    """values[..., n] -> uint32[..., words_for(dtype, n)].

    32-bit dtypes are cast and reinterpreted. 16-bit dtypes: np.float16 data for f16 and
    ml_dtypes.bfloat16 data for bf16 keep their bits; anything else is cast to fp32 and
    rounded to nearest even.
    """
    arr = np.asarray(values)
    if not is_half(dtype):
        return np.ascontiguousarray(arr.astype(_WORD_DTYPES[dtype])).view(np.uint32)
    if dtype in ("f16", "bf16") and arr.dtype == _HALF_HOST[dtype]:
        halves = np.ascontiguousarray(arr).view(np.uint16)
    else:
        halves = to_half(arr.astype(np.float32), dtype)
    n = halves.shape[-1]
    if n % 2:
        halves = np.concatenate([halves, np.zeros(halves.shape[:-1] + (1,), np.uint16)], -1)
    pairs = halves.astype(np.uint32).reshape(*halves.shape[:-1], -1, 2)
    return pairs[..., 0] | (pairs[..., 1] << np.uint32(16))


def from_words(words, dtype: str, n: int) -> np.ndarray:
    """uint32[..., words_for(dtype, n)] -> values[..., n] of `host_dtype(dtype)`."""
    words = np.asarray(words, np.uint32)
    if not is_half(dtype):
        return np.ascontiguousarray(words[..., :n]).view(_WORD_DTYPES[dtype])
    halves = np.stack([words & 0xFFFF, words >> np.uint32(16)], -1)
    halves = halves.reshape(*words.shape[:-1], -1)[..., :n].astype(np.uint16)
    if dtype == "cb16":
        return from_half(halves, dtype)
    return np.ascontiguousarray(halves).view(_HALF_HOST[dtype])
