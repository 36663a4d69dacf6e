"""The 16-bit floating-point formats of the fabric, in one table.

Every format is IEEE-like: 1 sign bit, `ebits` exponent bits with bias `bias`, `mbits`
explicit mantissa bits; exponent field 0 holds zero and subnormals, the all-ones field holds
infinity (mantissa 0) and NaN (mantissa != 0). Rounding from fp32 is to nearest, ties to
even; values beyond the largest finite one become infinity. docs/numerics.md states the rules
and where each figure comes from.

Format codes (the numbers the engine's tables carry per operand):
    0 = fp32 (a whole 32-bit word, no conversion), 1 = fp16, 2 = bf16, 3 = cbfloat16.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Format:
    """One 16-bit format.

    Args:
        name: the dtype name symbols use ("f16", "bf16", "cb16").
        code: the format code in the engine's tables (1..3).
        ebits, mbits, bias: exponent bits, explicit mantissa bits, exponent bias.
        canonical_nan: fp32 NaN -> 16 bits gives the quiet NaN 0x7f..0 | 1 << (mbits-1) with the
            input's sign (as ml_dtypes does for bf16); otherwise the top `mbits` bits of the
            payload are kept (a payload that truncates to 0 becomes 1, as numpy does for fp16).

    Example:
        >>> FORMATS["cb16"].max
        4290772992.0
    """

    name: str
    code: int
    ebits: int
    mbits: int
    bias: int
    canonical_nan: bool

    @property
    def emax_field(self) -> int:
        """The all-ones exponent field (infinity and NaN)."""
        return (1 << self.ebits) - 1

    @property
    def max(self) -> float:
        """Largest finite value: (2 - 2^-mbits) * 2^(emax_field - 1 - bias)."""
        return float((2.0 - 2.0 ** -self.mbits) * 2.0 ** (self.emax_field - 1 - self.bias))

    @property
    def min_normal(self) -> float:
        return float(2.0 ** (1 - self.bias))

    @property
    def min_subnormal(self) -> float:
        return float(2.0 ** (1 - self.bias - self.mbits))

    @property
    def eps(self) -> float:
        """Distance from 1.0 to the next larger value."""
        return float(2.0 ** -self.mbits)

    @property
    def inf_bits(self) -> int:
        return self.emax_field << self.mbits


F32_CODE = 0
FORMATS = {
    "f16": Format("f16", 1, ebits=5, mbits=10, bias=15, canonical_nan=False),
    "bf16": Format("bf16", 2, ebits=8, mbits=7, bias=127, canonical_nan=True),
    # 6 exponent and 9 mantissa bits are public; bias, subnormals, infinity and NaN are not:
    # IEEE-like rules with bias 2^(6-1) - 1 = 31 (docs/numerics.md)
    "cb16": Format("cb16", 3, ebits=6, mbits=9, bias=31, canonical_nan=False),
}
BY_CODE = {f.code: f for f in FORMATS.values()}
HALF_DTYPES = tuple(FORMATS)

# per-code parameter rows for the engine, which selects a format per operand at run time;
# code 0 (fp32) borrows fp16's row and is passed through unconverted
PARAM_TABLE = np.array(
    [[f.ebits, f.mbits, f.bias, int(f.canonical_nan)]
     for f in (FORMATS["f16"], *(BY_CODE[c] for c in (1, 2, 3)))], np.int32)


def half_format(dtype: str) -> Format:
    """The Format of a 16-bit dtype name; a clear error for anything else."""
    try:
        return FORMATS[dtype]
    except KeyError:
        raise ValueError(f"{dtype!r} is not a 16-bit dtype; 16-bit dtypes: "
                         f"{sorted(FORMATS)}") from None


def code_of(dtype: str) -> int:
    """Format code of a dtype name: 0 for 32-bit dtypes (f32, i32, u32), 1..3 for 16-bit."""
    return FORMATS[dtype].code if dtype in FORMATS else F32_CODE
