"""Elementwise math of an (m, n) fp32 tensor in 2D blocks on a rectangle: tanh, erf, sin,
cos, tan, atan, asin, acos, sinh, cosh, exp, exp2, expm1, log, log1p, reciprocal, sigmoid,
rsqrt, sqrt, abs, itof, signbit, trunc, floor or round, built from `mathlib`'s sequences of
PE builtins (no communication). Layout as `base.Blocks` (each PE's block row major, packed; a
register holds each PE's element count).

Cycle model (exact): T = 2 + fn_cycles(e_max) + stalls(e_max) (task start and end, one
straight list of synchronous ops over the PE's e elements; `mathlib` gives the formulas;
stalls: the element groups of its ops that wait under the bank read-pair rule with the
tile's bank-aware layout, `fabric.banks.read_pair_stalls`):

| fn | fn_cycles | WSE-2, even e | fp32 error | special values |
|---|---|---|---|---|
| tanh | tanh_cycles | 32 e | TANH_ULPS (3) | +-inf: +-1 |
| erf | sequence_cycles | 75.5 e | ERF_ULPS (4) | +-inf: +-1 |
| sin, cos | sequence_cycles | 42 e | TRIG_ULPS (3) where abs(x) < TRIG_MAX (65536) | NaN beyond |
| tan | sequence_cycles | 44 e | TAN_ULPS (4) where abs(x) < TRIG_MAX | NaN beyond, +-0: +-0 |
| atan | sequence_cycles | 33.5 e | ATAN_ULPS (3) | +-inf: +-pi/2, +-0: +-0 |
| asin | sequence_cycles | 48 e | ASIN_ULPS (2) | abs(x) > 1: NaN, +-0: +-0 |
| acos | sequence_cycles | 50.5 e | ACOS_ULPS (1) | abs(x) > 1: NaN, 1: +0, -1: pi |
| sinh | sequence_cycles | 47 e | SINH_ULPS (2) | abs(x) > 89.416, +-inf: +-inf |
| cosh | sequence_cycles | 28 e | COSH_ULPS (2) | abs(x) > 89.416, +-inf: inf |
| exp | exp_cycles | 16 e | EXP_ULPS (1) where exp(x) >= EXP_TINY | +inf: inf, -inf: 0 |
| expm1 | sequence_cycles | 38 e | EXPM1_ULPS (2) where the result is normal | +inf: inf, -inf: -1 |
| exp2 | sequence_cycles | 15 e | EXP2_ULPS (1) where 2^x is normal | x >= 128: inf, x < -126: 0 |
| log | log_cycles | 48 e | LOG_ULPS (1) | 0: -inf, x < 0: NaN |
| log1p | log1p_cycles | 63.5 e | LOG1P_ULPS (2) | -1: -inf, x < -1: NaN |
| abs | 2 c(shl) | 2 e | exact | NaN: NaN, -0: +0 |
| itof | c(itof) | e | x an int32 word: rounded once | - |
| signbit | c(shr) + c(itof) | 2 e | exact (a 0/1 mask) | -0: 1 |
| reciprocal | reciprocal_cycles (*) | 26 e | RECIPROCAL_REFINED_ULPS (1) | +-0: +-inf, +-inf: 0 |
| sigmoid | sigmoid_cycles | 30.5 e | SIGMOID_ULPS (3) | +inf: 1, -inf: 0 |
| rsqrt | rsqrt_cycles(specials=True) | 25 e | RSQRT_ULPS (2) | +-0: +-inf, +inf: 0, x < 0: NaN |
| sqrt | sqrt_cycles | 19 e | SQRT_ULPS (3) | +-0: +-0, +inf: inf, x < 0: NaN |
| trunc | c(`trunc_code`) | 12 e | exact | +-inf, NaN: themselves, -0.5: -0 |
| floor | c(`floor_code`) | 15 e | exact | +-inf, NaN: themselves, -0: -0 |
| round | c(`round_code`) | 10.5 e | exact, half to even | +-inf, NaN: themselves, -0.5: -0 |

(*) refined, with specials.

The special values are eager PyTorch's (NaN gives NaN everywhere) with the fabric's flush of
subnormals: results below 2^-126 come out as 0 and subnormal inputs read as 0 (docs/
numerics.md, "Special values").

16-bit storage (dtype "f16", "bf16" or "cb16"; acc_dtype "f32" only, the polynomials need
fp32): x and y are 16-bit symbols; x is widened exactly (`to_f32`) into an fp32 working
vector, the fp32 code runs unchanged on it (in place) and y is rounded once (`to_half`):
    T = 2 + 2 ceil(e_max / w_cvt) + fn_cycles(e_max)
(w_cvt: the ("cvt", "f16") width). The result is the fp32 kernel's output on the same
inputs rounded to dtype: a few fp32 ulps from the exact value, so the correctly rounded
16-bit value except near ties (at most 1 ulp of dtype off). exp overflows to infinity in
fp16 above about 11.09 (cbfloat16: 22.18), as the rounding of the fp32 result. bf16
subnormal inputs (below 2^-126) widen exactly but the fp32 ops flush them to zero (log
reads its input's bits and handles them exactly).

trunc clears x's fraction bits, exact for every fp32 value with integer ops only: the
biased exponent b = (x << 1) >> 24 (an int, made a float exactly by itof) gives the count of
fraction bits f = 150 - b (23 - the unbiased exponent); f <= 0 (|x| >= 2^23, inf, NaN) keeps
x, f >= 24 (|x| < 1) keeps only the sign bit (a signed zero). The float steps f' =
clamp(f + 8 max(f - 23, 0), 0, 31) (exact on small integers) map both ends into the shift
range, and y = (x >> f') << f'. floor(x) = t - s with t = trunc(x) and s the sign bit of
x - t (1 exactly where x is negative with a fraction: x - t is then in (-1, 0); an integer x
gives x - t = +0; inf - inf is NaN but inf - s is inf), the subtraction exact (t an integer
below 2^23 in magnitude where s = 1). round (half to even, as torch.round): on a = |x|,
(min(a, 2^23) + 2^23) - 2^23 rounds a below 2^23 to an integer half to even, exactly (the
sum lies in [2^23, 2^24], where the ulp is 1), and gives 2^23 from there on; its max with
d = a >> (31 [a < 2^23]) (a itself from 2^23 on, inf and NaN included, +0 below) is the
magnitude, and x's sign bit is added back (round(-0.3) = -0).

Example:
    >>> k = build_unary(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 10, 6, "tanh")
    >>> y = run_kernel(k, {"x": x}).output                       # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.isa import SIMD_NAME, Op
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Blocks, Kernel, check_dtypes, check_sram
from fabric.numerics.packing import words_for
from fabric.program import Program, Rect, Tile


def trunc_code(y, x, s) -> list:
    """y = trunc(x) by its bits (module docstring); s: 2 scratch vectors; y may be x."""
    e, f = s
    return [
        ins.shl(e, x, 1), ins.shr(e, e, 24),  # the biased exponent b, an int
        ins.itof(e, e), ins.mul(e, e, -1.0), ins.add(e, e, 150.0),  # fraction bits 150 - b
        ins.sub(f, e, 23.0), ins.max_(f, f, 0.0),  # 24 and above (|x| < 1) go past 31
        ins.fma(e, e, f, 8.0), ins.max_(e, e, 0.0), ins.min_(e, e, 31.0),
        ins.ftoi(e, e),  # an integer already: exact
        ins.shr(y, x, e), ins.shl(y, y, e),
    ]


def floor_code(y, x, s) -> list:
    """y = floor(x) = trunc(x) - signbit(x - trunc(x)); s: 3 scratch vectors; y may be x."""
    e, f, t = s
    return [*trunc_code(t, x, (e, f)), ins.sub(f, x, t), ins.shr(f, f, 31), ins.itof(f, f),
            ins.sub(y, t, f)]


ROUND_BIG = 2.0**23  # from here on every fp32 value is an integer


def round_code(y, x, s) -> list:
    """y = round(x), half to even (torch.round), exact for every fp32 value (module
    docstring); s: 3 scratch vectors; y may be x."""
    a, g, d = s[:3]
    return [
        ins.shl(a, x, 1), ins.shr(a, a, 1),  # |x|
        ins.isubv(g, x, a),  # the sign bit of x
        # d = |x| where |x| >= 2^23 (inf, NaN too), +0 below: |x| >> 31 [|x| < 2^23]
        ins.add(d, a, -ROUND_BIG), ins.shr(d, d, 31), ins.shl(d, d, 5), ins.shr(d, a, d),
        ins.min_(a, a, ROUND_BIG), ins.add(a, a, ROUND_BIG),
        ins.sub(a, a, ROUND_BIG),  # round(min(|x|, 2^23)), half to even, exact
        ins.max_(a, a, d),
        ins.iaddv(y, a, g),
    ]


def code_cycles(code_of, scratch: int):
    """cycles_of(config, e) of a straight code sequence (`mathlib.sequence_cycles`)."""
    code = code_of(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(scratch)])
    return lambda config, e: ml.sequence_cycles(config, code, e)


FUNCTIONS = {  # fn -> (code_of(y, x, scratch), scratch vectors, cycles_of(config, e))
    "tanh": (lambda y, x, s: ml.tanh(y, x, s), 4, ml.tanh_cycles),
    "erf": (ml.erf, 6, code_cycles(ml.erf, 6)),
    "exp": (lambda y, x, s: ml.exp(y, x, s), 2, ml.exp_cycles),
    "sin": (ml.sin, 6, code_cycles(ml.sin, 6)),
    "cos": (ml.cos, 6, code_cycles(ml.cos, 6)),
    "expm1": (ml.expm1, 4, code_cycles(ml.expm1, 4)),
    "log": (lambda y, x, s: ml.log(y, x, s), 4, ml.log_cycles),
    # with specials, x is read into scratch first, so y may be x (as the 16-bit path runs it)
    "reciprocal": (lambda y, x, s: ml.reciprocal(y, x, s, refined=True, specials=True), 5,
                   lambda config, e: ml.reciprocal_cycles(config, e, True, specials=True)),
    "sigmoid": (lambda y, x, s: ml.sigmoid(y, x, s), 4, ml.sigmoid_cycles),
    "rsqrt": (lambda y, x, s: ml.rsqrt(y, x, s, specials=True), 4,
              lambda config, e: ml.rsqrt_cycles(config, e, specials=True)),
    "sqrt": (lambda y, x, s: ml.sqrt(y, x, s), 4, ml.sqrt_cycles),
    "log1p": (lambda y, x, s: ml.log1p(y, x, s), 6, ml.log1p_cycles),
    # an int32 word as the nearest fp32 (exact below 2^24 in magnitude)
    "itof": (lambda y, x, s: [ins.itof(y, x)], 0,
             lambda config, e: math.ceil(e / config.simd_width(*SIMD_NAME[Op.ITOF]))),
    # 1.0 where x's sign bit is set (-0, negative NaNs too), else 0.0: exact
    "signbit": (lambda y, x, s: [ins.shr(y, x, 31), ins.itof(y, y)], 0,
                lambda config, e: (math.ceil(e / config.simd_width(*SIMD_NAME[Op.SHR]))
                                   + math.ceil(e / config.simd_width(
                                       *SIMD_NAME[Op.ITOF])))),
    # |x|: the sign bit cleared (NaN stays NaN, -0 gives +0), exact
    "abs": (lambda y, x, s: [ins.shl(y, x, 1), ins.shr(y, y, 1)], 0,
            lambda config, e: 2 * math.ceil(e / config.simd_width(*SIMD_NAME[Op.SHL]))),
    # x's fraction bits cleared, exact (module docstring); floor from it, exact
    "trunc": (trunc_code, 2, code_cycles(trunc_code, 2)),
    "floor": (floor_code, 3, code_cycles(floor_code, 3)),
    # half to even (torch.round), exact (module docstring)
    "round": (round_code, 3, code_cycles(round_code, 3)),
    "tan": (ml.tan, 6, code_cycles(ml.tan, 6)),
    "atan": (ml.atan, 6, code_cycles(ml.atan, 6)),
    "asin": (ml.asin, 6, code_cycles(ml.asin, 6)),
    "acos": (ml.acos, 6, code_cycles(ml.acos, 6)),
    "sinh": (ml.sinh, 6, code_cycles(ml.sinh, 6)),
    "cosh": (ml.cosh, 4, code_cycles(ml.cosh, 4)),
    "exp2": (ml.exp2, 2, code_cycles(ml.exp2, 2)),
}
# fp32 words per element of each function's kernel: x, y and the scratch vectors
UNARY_WORDS = {fn: 2 + scratch for fn, (_, scratch, _) in FUNCTIONS.items()}


def unary_cycles(config, fn: str, e: int) -> int:
    """fn_cycles(e) of the table above: the cycles of fn over e elements on one PE (task
    start and end apart)."""
    return FUNCTIONS[fn][2](config, e)


def build_unary(config: FabricConfig, rect: Rect, m: int, n: int, fn: str = "tanh",
                dtype: str = "f32", acc_dtype: str = "f32") -> Kernel:
    """y = fn(x) for x of shape (m, n); fn one of FUNCTIONS ("tanh", "erf", "sin", "cos",
    "tan", "atan", "asin", "acos", "sinh", "cosh", "exp", "exp2", "expm1", "log", "log1p",
    "reciprocal", "sigmoid", "rsqrt", "sqrt", "abs", "itof", "signbit", "trunc", "floor",
    "round").
    Inputs {"x"}; output (m, n).

    dtype: storage format of x and y ("f32", "f16", "bf16", "cb16"); acc_dtype: "f32" only
    (a 16-bit computation raises ValueError; see the module docstring)."""
    if fn not in FUNCTIONS:
        raise ValueError(f"unary: fn must be one of {sorted(FUNCTIONS)}, got {fn!r}")
    check_dtypes(f"unary {fn}", dtype, acc_dtype, half_acc=False)
    return build_blockwise(config, rect, m, n, fn, *FUNCTIONS[fn], dtype)


def blockwise_code(tile: Tile, size: int, xs: list, code_of, scratch: int, dtype: str,
                   out: str = "y", length_reg: str | None = None) -> list:
    """The code of `build_blockwise` on one PE's block of `size` elements: declares the
    output `out`, the scratch vectors and (16-bit) the fp32 copies "w_<input>" of the
    inputs `xs` (their DSDs, in memory; in 16-bit storage the first may be a `FabIn`, which
    its widening reads once, as the stream form takes it). length_reg: the register every
    DSD takes its length from (None: the symbols' whole size)."""
    def vector(name, fmt):
        return Mem(tile.symbol(name, fmt, size).name, length_reg=length_reg)

    y = vector(out, dtype)
    work = [vector(f"s{i}", "f32") for i in range(scratch)]
    if dtype == "f32":
        return code_of(y, *xs, work)
    names = [x.symbol if isinstance(x, Mem) else "x" for x in xs]
    ws = [vector(f"w_{name}", "f32") for name in names]
    return [*(ins.to_f32(w, x, dtype) for w, x in zip(ws, xs)), *code_of(ws[0], *ws, work),
            ins.to_half(y, ws[0], dtype)]


def build_blockwise(config: FabricConfig, rect: Rect, m: int, n: int, fn: str, code_of,
                    scratch: int, cycles_of, dtype: str = "f32",
                    inputs: tuple[str, ...] = ("x",)) -> Kernel:
    """The kernel of one straight code sequence y = f(x, ...) over every PE's block:
    code_of(y, *input DSDs, scratch DSDs) gives the code, cycles_of(config, e) its cycles.
    `inputs`: the names of the (m, n) inputs, all in the same block layout.

    dtype "f32": the inputs, y and the scratch vectors are fp32 symbols. A 16-bit dtype:
    the inputs and y are 16-bit symbols, every input is widened (to_f32) into an fp32 vector
    "w_<name>", the code runs on those with y the first one's (code_of must allow y to be
    its first input) and to_half(y, w) rounds the result once."""
    check_dtypes(fn, dtype, "f32")
    blocks = Blocks.of(rect, m, n)
    size = blocks.mb * blocks.nb
    half = dtype != "f32"
    stored = len(inputs) + 1  # the inputs and y, in dtype
    f32_vectors = scratch + (len(inputs) if half else stored)
    words = stored * words_for(dtype, size) + (f32_vectors - (0 if half else stored)) * size
    check_sram(config, fn, words,
               f"a block of {blocks.mb} x {blocks.nb} ({m} x {n} on {rect.rows} x "
               f"{rect.cols} PEs, dtype {dtype}, {f32_vectors} fp32 words per element)")
    tile = Tile(fn)
    # every DSD takes its length from register "n": each PE's own element count
    xs = [Mem(tile.symbol(name, dtype, size).name, length_reg="n") for name in inputs]
    code = blockwise_code(tile, size, xs, code_of, scratch, dtype, length_reg="n")
    tile.local_task("main", code)
    prog = Program(config)
    counts = blocks.counts()
    prog.place(tile, rect, params={"n": counts.astype(np.int32)})

    def load(sim, values):
        for name in inputs:
            sim.memcpy_h2d(name, blocks.scatter(values[name]), rect)

    def read(sim):
        return blocks.gather(np.asarray(sim.memcpy_d2h("y", rect), np.float32))

    e = int(counts.max())
    convert = (len(inputs) + 1) * math.ceil(e / config.simd_width("cvt", "f16")) if half else 0
    # plus the element groups that wait under the bank read-pair rule (the layout's pairs)
    model = 2 + convert + cycles_of(config, e) + read_pair_stalls(config, tile, code, e)
    return Kernel(fn, config, rect, prog, load, read, lambda sim: sim.launch("main", rect),
                  model, 0, {"m": m, "n": n, "block": (blocks.mb, blocks.nb), "dtype": dtype,
                             "acc_dtype": "f32"})
