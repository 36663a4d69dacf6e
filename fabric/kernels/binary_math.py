"""Elementwise math of two (m, n) fp32 tensors in 2D blocks on a rectangle: atan2(a, b),
hypot(a, b) and pow(a, b) = a ** b (torch's argument order: inputs "a" and "b"), built from
`mathlib`'s sequences of PE builtins (`mathlib_binary`, `mathlib_pow`; no communication),
with the code of `unary.build_blockwise` (layout of `base.Blocks`, each PE's block row
major, packed; a register holds each PE's element count).

Cycle model (exact): T = 2 + fn_cycles(e_max) + stalls(e_max) (task start and end, one
straight list of synchronous ops over the PE's e elements, `mathlib.sequence_cycles`;
stalls: the element groups that wait under the bank read-pair rule, as `build_blockwise`
adds them):

| fn | WSE-2, even e | fp32 error | special values |
|---|---|---|---|
| atan2 | 66.5 e | ATAN2_ULPS (2) | torch's (sign bits: +-0, +-pi; +-inf: k pi / 4) |
| hypot | 51.5 e | HYPOT_ULPS (1) | an infinite input: +inf (NaN too), overflow: +inf |
| pow | 124 e | POW_ULPS (3) where a ** b >= EXP_TINY | torch's (C99 powf; `mathlib_pow`) |

pow's error grows slowly with |b log|a|| (`mathlib.pow_ulps_bound`: 1 ulp up to |u| = 16,
2 up to 48, 3 to the ends of the range); results below EXP_TINY = 2^-125.5 flush to 0, as
exp's.

16-bit storage (dtype "f16", "bf16" or "cb16"): both inputs are widened exactly into fp32
vectors, the fp32 code runs on them (the output in the first one's) and the result is
rounded once: T = 2 + 3 ceil(e_max / w_cvt) + fn_cycles(e_max) (+ stalls).

Example:
    >>> k = build_binary_math(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 10, 6, "atan2")
    >>> z = run_kernel(k, {"a": y, "b": x}).output  # atan2(y, x)   # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Kernel, check_dtypes
from fabric.kernels.unary import build_blockwise
from fabric.program import Rect

# fn -> (code_of(out, a, b, scratch), scratch vectors): fn(a, b), torch's argument order
FUNCTIONS = {
    "atan2": (ml.atan2, ml.ATAN2_SCRATCH),
    "hypot": (ml.hypot, ml.HYPOT_SCRATCH),
    "pow": (ml.pow_, ml.POW_SCRATCH),
}
INPUTS = ("a", "b")  # the kernels' input names: torch.fn(a, b) (the output is "y")
# fp32 words per element of each function's fp32 kernel: two inputs, the output, the scratch
BINARY_MATH_WORDS = {fn: 3 + scratch for fn, (_, scratch) in FUNCTIONS.items()}
BINARY_MATH_ULPS = {"atan2": ml.ATAN2_ULPS, "hypot": ml.HYPOT_ULPS, "pow": ml.POW_ULPS}
REFERENCES = {"atan2": np.arctan2, "hypot": np.hypot, "pow": np.power}


def _code(fn: str, e: int | None = None) -> list:
    code_of, scratch = FUNCTIONS[fn]
    mems = [Mem(name, length=e) for name in ("y", *INPUTS)]
    return code_of(*mems, [Mem(f"s{i}", length=e) for i in range(scratch)])


def binary_math_cycles(config, fn: str, e: int) -> int:
    """fn_cycles(e) of the table above: the cycles of fn over e elements on one PE (task
    start and end apart)."""
    return ml.sequence_cycles(config, _code(fn, e), e)


def build_binary_math(config: FabricConfig, rect: Rect, m: int, n: int, fn: str = "atan2",
                      dtype: str = "f32", acc_dtype: str = "f32") -> Kernel:
    """y = atan2(a, b) (fn "atan2": a the ordinate, b the abscissa), hypot(a, b) (fn
    "hypot") or a ** b (fn "pow": a the base, b the exponent). Inputs {"a", "b"}; every
    input and the output (m, n).

    dtype: storage format of the inputs and the output ("f32", "f16", "bf16", "cb16");
    acc_dtype: "f32" only (the sequences need fp32; a 16-bit one raises ValueError)."""
    if fn not in FUNCTIONS:
        raise ValueError(f"binary math: fn must be one of {sorted(FUNCTIONS)}, got {fn!r}")
    check_dtypes(f"binary math {fn}", dtype, acc_dtype, half_acc=False)
    code_of, scratch = FUNCTIONS[fn]
    kernel = build_blockwise(config, rect, m, n, fn, code_of, scratch,
                             lambda cfg, e: binary_math_cycles(cfg, fn, e), dtype, INPUTS)
    kernel.info.update(fn=fn)
    return kernel


def binary_math_reference(fn: str, a, b) -> np.ndarray:
    """numpy's float64 fn(a, b) (np.arctan2, np.hypot, np.power: C99's special values, as
    torch's) rounded to fp32, with the fabric's flush of subnormal inputs and results (pow:
    results in [FLT_MIN, EXP_TINY) stay, where the kernel gives 0)."""
    tiny = np.float32(np.finfo(np.float32).tiny)

    def flush(v):
        v = np.asarray(v, np.float32)
        return np.where(np.abs(v) < tiny, np.copysign(np.float32(0), v), v)

    a64, b64 = (flush(v).astype(np.float64) for v in (a, b))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return flush(REFERENCES[fn](a64, b64).astype(np.float32))
