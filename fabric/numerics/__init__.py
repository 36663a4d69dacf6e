"""16-bit numerics: the formats (fp16, bf16, cbfloat16), fp32 <-> 16-bit conversions for the
host (numpy) and the engine (jax.numpy), and the packing of 16-bit values into SRAM words.

See docs/numerics.md for the rules.
"""

from fabric.numerics.convert import (
    decode,
    decode_code,
    encode,
    encode_code,
    from_half,
    round_to,
    to_half,
)
from fabric.numerics.formats import BY_CODE, F32_CODE, FORMATS, HALF_DTYPES, Format, code_of
from fabric.numerics.packing import from_words, host_dtype, to_words, words_for

__all__ = [
    "BY_CODE", "F32_CODE", "FORMATS", "HALF_DTYPES", "Format", "code_of", "decode",
    "decode_code", "encode", "encode_code", "from_half", "from_words", "host_dtype",
    "round_to", "to_half", "to_words", "words_for",
]
