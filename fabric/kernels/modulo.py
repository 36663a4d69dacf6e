"""fmod and remainder of an (m, n) fp32 tensor on a rectangle (torch.fmod, torch.remainder:
C's fmod and Python's %), by a number fixed at build time or elementwise by a second (m, n)
tensor, exact where |x / y| < FMOD_QUOTIENT_MAX = 2^22 and NaN from there on
(`fabric.kernels.mathlib_mod`: the method and its proof). Layout as `base.Blocks` (each PE's
block row major, packed; a register holds each PE's element count); no communication.

Cycle model (exact): T = 2 + fn_cycles(e_max) + stalls(e_max), fn_cycles the synchronous
ops of `mathlib_mod.fmod` over the PE's e elements (`mathlib.sequence_cycles`), stalls the
element groups that wait under the bank read-pair rule (`fabric.banks.read_pair_stalls`).
WSE-2, even e: by a tensor, fmod 68.5 e, remainder 82 e; by a number, fmod 45 e (46 e
outside 2^-62 <= |y| < 2^64, where x is scaled first), remainder 53.5 e (54.5 e for y < 0
or outside that range). 16-bit storage (dtype "f16", "bf16",
"cb16") as `unary.build_blockwise`: widened exactly, the fp32 code, one rounding of the
result (exact wherever the fp32 result fits the 16-bit format).

Example:
    >>> k = build_modulo(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 10, 6, "remainder", 2.5)
    >>> y = run_kernel(k, {"x": x}).output                       # doctest: +SKIP
"""

from __future__ import annotations

from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Kernel, check_dtypes
from fabric.kernels.mathlib_mod import FMOD_SCALAR_SCRATCH, FMOD_SCRATCH, fmod
from fabric.kernels.unary import build_blockwise
from fabric.program import Rect

MODULO_OPS = ("fmod", "remainder")


def modulo_code(op: str, divisor: float | None = None):
    """(code_of, scratch vectors, cycles_of(config, e)) of `op` by the number `divisor`
    (code_of(y, x, scratch)) or, with divisor None, by a tensor (code_of(y, x, d, scratch))."""
    if op not in MODULO_OPS:
        raise ValueError(f"modulo: op must be one of {MODULO_OPS}, got {op!r}")
    remainder = op == "remainder"
    if divisor is None:
        def code_of(y, x, d, s):
            return fmod(y, x, d, s, remainder)
        scratch = FMOD_SCRATCH
        code = code_of(Mem("y"), Mem("x"), Mem("d"), [Mem(f"s{i}") for i in range(scratch)])
    else:
        value = float(divisor)

        def code_of(y, x, s):
            return fmod(y, x, value, s, remainder)
        scratch = FMOD_SCALAR_SCRATCH
        code = code_of(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(scratch)])
    return code_of, scratch, lambda config, e: ml.sequence_cycles(config, code, e)


def modulo_cycles(config, op: str, e: int, divisor: float | None = None) -> int:
    """fn_cycles(e) of the module docstring: `op` over e elements on one PE (task start
    and end apart)."""
    return modulo_code(op, divisor)[2](config, e)


def modulo_words(divisor: float | None = None) -> int:
    """fp32 words per element of the kernel: x, y (and the divisor tensor) and scratch."""
    return 2 + FMOD_SCALAR_SCRATCH if divisor is not None else 3 + FMOD_SCRATCH


def build_modulo(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "fmod",
                 divisor: float | None = None, dtype: str = "f32",
                 acc_dtype: str = "f32") -> Kernel:
    """y = op(x, divisor) for x of shape (m, n), op "fmod" or "remainder"; divisor a number,
    or None for a tensor divisor: inputs {"x", "d"} of shape (m, n) (broadcast on the host),
    else {"x"}. Output (m, n).

    dtype: storage format of x, d and y ("f32", "f16", "bf16", "cb16"); acc_dtype "f32"
    only (the method needs fp32)."""
    code_of, scratch, cycles_of = modulo_code(op, divisor)
    check_dtypes(f"modulo {op}", dtype, acc_dtype, half_acc=False)
    inputs = ("x",) if divisor is not None else ("x", "d")
    return build_blockwise(config, rect, m, n, op, code_of, scratch, cycles_of, dtype,
                           inputs=inputs)
