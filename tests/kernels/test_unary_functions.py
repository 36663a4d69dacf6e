"""The transcendental unary kernels (exp, exp2, expm1, erf, sin, cos, tan, atan, asin, acos,
tanh, sinh, cosh, log, sigmoid, rsqrt, sqrt and gelu in both forms), round (half to even,
exact) and those with parameters (elu, SELU and CELU as elus, pow):
accuracy over dense sweeps, special values against eager PyTorch, the fabric against its
numpy mirror bit for bit, exact cycles, and 16-bit storage.

- Sweeps (host): `mathlib_numpy.emulate` runs each kernel's instruction list in numpy as the
  fabric computes it, over a few hundred thousand points per function in both fma modes
  (one rounding or two); the error is |got - ref| / ulp(ref), ref the float64 value rounded
  to fp32 (math.erfc for the erf form), and must not exceed the bound the kernel states
  (round: 0, over the half-integer ties of +-2^23 sampled, every binade and the integers
  beyond 2^23).
- Fabric (one 4x4 config, one table floor: one engine per datapath): each kernel runs on
  16 PEs over 1024 points (the special values, then an even sample of the sweep); its
  output equals the mirror's bit for bit in one fma mode, so the sweep's bound holds on the
  fabric; cycles equal the model.
- Special values: +-inf, NaN, +-1e30, +-100, +-1e-30, +-1e-40 (subnormal), +-0 against
  torch's fp32 function with the fabric's flush of subnormals applied to torch's input
  (except for log, which reads subnormal inputs exactly) and output (docs/numerics.md,
  "Special values"): equal where torch gives inf, NaN or 0 (the
  sign of zero too, except the erf gelu: +0 where torch gives -0), within the bound
  elsewhere. The erf gelu of +inf is compared with float64 torch (inf): torch's vectorized
  fp32 kernel returns NaN there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fabric import FabricConfig, Rect
from fabric.instructions import Mem
from fabric.kernels import activations as act
from fabric.kernels import mathlib as ml
from fabric.kernels import mathlib_numpy as mn
from fabric.kernels import unary_params as up
from fabric.kernels.base import run_kernel
from fabric.kernels.unary import FUNCTIONS, build_unary, code_cycles
from fabric.numerics import round_to, to_half
from tests.kernels.kernel_cases import bits_equal

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 4, 4)
M, N = 16, 64  # 64 points per PE
MIN_TABLE_ROWS = (128, 256)  # the largest program here (the erf gelu): one engine for all
F32 = np.finfo(np.float32)
TINY = float(F32.tiny)
INF, NAN = math.inf, math.nan
SPECIALS = [INF, -INF, NAN, 1e30, -1e30, 100.0, -100.0, 1e-30, -1e-30, 1e-40, -1e-40, 0.0, -0.0]
SWEEP = 200_000


def _log2_sweep(lo, hi, n):
    return np.exp2(np.linspace(lo, hi, n))


def _both_signs(v):
    return np.concatenate([v, -v])


@dataclasses.dataclass
class Fn:
    """A kernel under test: its builder, its instruction list, references and bound."""

    build: Callable  # dtype -> Kernel
    code: Callable  # (y, x, scratch) -> instructions
    cycles: Callable  # (config, e) -> cycles of the code
    torch_fn: Callable
    exact: Callable  # float64 -> float64
    sweep: np.ndarray
    ulps: Callable  # x (float64) -> allowed ulps per point
    zero_sign: bool = True  # compare the sign of zero results with torch's
    reads_subnormals: bool = False  # log reads its input's bits: subnormals are values
    max_x: float = math.inf  # |x| below which the bound holds (sin, cos: NaN from there on)


def _unary(fn):
    code, _, cycles = FUNCTIONS[fn]
    return {"build": lambda dt: build_unary(CONFIG, RECT, M, N, fn, dtype=dt), "code": code,
            "cycles": cycles}


def _gelu(approximate):
    return {"build": lambda dt: act.build_gelu(CONFIG, RECT, M, N, dtype=dt,
                                               approximate=approximate),
            "code": act.CODE[approximate],
            "cycles": lambda c, e: act.gelu_cycles(c, e, approximate)}


def _elu(alpha=1.0, scale=1.0, input_scale=1.0):
    code = up.elu_code(alpha, scale, input_scale)
    return {"build": lambda dt: up.build_elu(CONFIG, RECT, M, N, alpha, scale, input_scale,
                                             dtype=dt),
            "code": code, "cycles": code_cycles(code, 5),
            "exact": lambda x: up.elu_reference(x, alpha, scale, input_scale).astype(np.float64),
            "torch_fn": lambda t: torch.ops.aten.elu(t, alpha, scale, input_scale),
            "sweep": np.concatenate([np.linspace(-30, 5, SWEEP), np.linspace(-0.6, 0, 30_000),
                                     -_log2_sweep(-120, 4, 30_000)]),
            "ulps": _const(up.ELU_ULPS), "zero_sign": False}


def _pow(p):
    code, scratch = up.pow_code(p), up.pow_scratch(p)
    positive = np.concatenate([np.exp(np.linspace(-20, 20, SWEEP)), np.linspace(0.5, 2, 30_000)])
    return {"build": lambda dt: up.build_pow(CONFIG, RECT, M, N, p, dtype=dt), "code": code,
            "cycles": code_cycles(code, scratch), "torch_fn": lambda t: torch.pow(t, p),
            "exact": lambda x: np.power(x, p),
            # negative x: odd and even powers of an integer p, NaN for the others
            "sweep": np.concatenate([positive, -positive[::20]]),
            "ulps": lambda x: up.pow_ulps(x, p)}


def _const(bound):
    return lambda x: np.full(np.shape(x), float(bound))


def _gelu_tanh_ulps(x):
    return act.gelu_tolerance(x, "tanh") / np.spacing(np.maximum(
        np.abs(act.gelu_reference(x, "tanh")), np.float32(TINY))).astype(np.float64)


def _erfc(v):
    return np.vectorize(math.erfc, otypes=[np.float64])(v)


RNG = np.random.default_rng(5)
FNS = {
    "exp": Fn(**_unary("exp"), torch_fn=torch.exp, exact=np.exp,
              sweep=np.concatenate([np.linspace(-88, 89.5, SWEEP), RNG.uniform(-1, 1, 30_000)]),
              ulps=_const(ml.EXP_ULPS)),
    "erf": Fn(**_unary("erf"), torch_fn=torch.erf,
              exact=lambda x: np.vectorize(math.erf, otypes=[np.float64])(x),
              sweep=np.concatenate([np.linspace(-10, 10, SWEEP), np.linspace(-1, 1, 30_000),
                                    _both_signs(_log2_sweep(-125, 0, 30_000))]),
              ulps=_const(ml.ERF_ULPS)),
    "sin": Fn(**_unary("sin"), torch_fn=torch.sin, exact=np.sin,
              sweep=np.concatenate([np.linspace(1 - ml.TRIG_MAX, ml.TRIG_MAX - 1, SWEEP),
                                    np.linspace(-7, 7, 30_000), np.arange(1, 20_000) * np.pi,
                                    _both_signs(_log2_sweep(-125, 0, 30_000))]),
              ulps=_const(ml.TRIG_ULPS), max_x=ml.TRIG_MAX),
    "cos": Fn(**_unary("cos"), torch_fn=torch.cos, exact=np.cos,
              sweep=np.concatenate([np.linspace(1 - ml.TRIG_MAX, ml.TRIG_MAX - 1, SWEEP),
                                    np.linspace(-7, 7, 30_000),
                                    (np.arange(1, 20_000) - 0.5) * np.pi]),
              ulps=_const(ml.TRIG_ULPS), max_x=ml.TRIG_MAX),
    "expm1": Fn(**_unary("expm1"), torch_fn=torch.expm1, exact=np.expm1,
                sweep=np.concatenate([np.linspace(-90, 89.5, SWEEP), np.linspace(-1, 1, 30_000),
                                      _both_signs(_log2_sweep(-125, 0, 30_000))]),
                ulps=_const(ml.EXPM1_ULPS)),
    "tanh": Fn(**_unary("tanh"), torch_fn=torch.tanh, exact=np.tanh,
               sweep=np.concatenate([np.linspace(-10, 10, SWEEP),
                                     _both_signs(_log2_sweep(-126, 3.4, 30_000))]),
               ulps=_const(ml.TANH_ULPS)),
    "log": Fn(**_unary("log"), torch_fn=torch.log, exact=np.log,
              sweep=np.concatenate([_log2_sweep(-149, 127.99, SWEEP), np.linspace(0.5, 2, 30_000)]),
              ulps=_const(ml.LOG_ULPS), reads_subnormals=True),
    "sigmoid": Fn(**_unary("sigmoid"), torch_fn=torch.sigmoid,
                  exact=lambda x: 1 / (1 + np.exp(-x)),
                  sweep=np.concatenate([np.linspace(-100, 100, SWEEP),
                                        _both_signs(_log2_sweep(-126, 7, 30_000))]),
                  ulps=_const(ml.SIGMOID_ULPS)),
    "rsqrt": Fn(**_unary("rsqrt"), torch_fn=torch.rsqrt, exact=lambda x: 1 / np.sqrt(x),
                sweep=np.concatenate([_log2_sweep(-126, 127.99, SWEEP),
                                      np.linspace(0.25, 4, 30_000)]),
                ulps=_const(ml.RSQRT_ULPS)),
    "sqrt": Fn(**_unary("sqrt"), torch_fn=torch.sqrt, exact=np.sqrt,
               sweep=np.concatenate([_log2_sweep(-126, 127.99, SWEEP),
                                     np.linspace(0.25, 4, 30_000)]),
               ulps=_const(ml.SQRT_ULPS)),
    "tan": Fn(**_unary("tan"), torch_fn=torch.tan, exact=np.tan,
              sweep=np.concatenate([np.linspace(1 - ml.TRIG_MAX, ml.TRIG_MAX - 1, SWEEP),
                                    np.linspace(-7, 7, 30_000),
                                    (np.arange(1, 20_000) - 0.5) * np.pi,  # near the poles
                                    _both_signs(_log2_sweep(-125, 0, 30_000))]),
              ulps=_const(ml.TAN_ULPS), max_x=ml.TRIG_MAX),
    "atan": Fn(**_unary("atan"), torch_fn=torch.atan, exact=np.arctan,
               sweep=np.concatenate([np.linspace(-10, 10, SWEEP),
                                     _both_signs(np.linspace(0.3, 2.6, 30_000)),  # the splits
                                     _both_signs(_log2_sweep(-125, 127.9, 30_000))]),
               ulps=_const(ml.ATAN_ULPS)),
    # NaN beyond |x| = 1: the special values
    "asin": Fn(**_unary("asin"), torch_fn=torch.asin, exact=np.arcsin,
               sweep=np.concatenate([np.linspace(-1, 1, SWEEP),
                                     _both_signs(_log2_sweep(-125, 0, 30_000)),
                                     _both_signs(1 - _log2_sweep(-24, -1, 30_000))]),
               ulps=_const(ml.ASIN_ULPS)),
    "acos": Fn(**_unary("acos"), torch_fn=torch.acos, exact=np.arccos,
               sweep=np.concatenate([np.linspace(-1, 1, SWEEP),
                                     _both_signs(_log2_sweep(-125, 0, 30_000)),
                                     _both_signs(1 - _log2_sweep(-24, -1, 30_000))]),
               ulps=_const(ml.ACOS_ULPS)),
    # up to 89.5: inf from 89.416 on, as the fp32 reference
    "sinh": Fn(**_unary("sinh"), torch_fn=torch.sinh, exact=np.sinh,
               sweep=np.concatenate([np.linspace(-89.5, 89.5, SWEEP), np.linspace(-3, 3, 30_000),
                                     _both_signs(_log2_sweep(-125, 3, 30_000))]),
               ulps=_const(ml.SINH_ULPS)),
    "cosh": Fn(**_unary("cosh"), torch_fn=torch.cosh, exact=np.cosh,
               sweep=np.concatenate([np.linspace(-89.5, 89.5, SWEEP), np.linspace(-3, 3, 30_000),
                                     _both_signs(_log2_sweep(-125, 3, 30_000))]),
               ulps=_const(ml.COSH_ULPS)),
    "exp2": Fn(**_unary("exp2"), torch_fn=torch.exp2, exact=np.exp2,
               sweep=np.concatenate([np.linspace(-127, 128.5, SWEEP), RNG.uniform(-1, 1, 30_000),
                                     np.arange(-126.0, 128.0),  # exact powers of two
                                     np.linspace(-126.6, -125, 10_000)]),  # the flush
               ulps=_const(ml.EXP2_ULPS)),
    # exact: the half-integer ties below 2^23 (+-2^24 sampled: above 2^23 they round to
    # integers in fp32), every binade to 2^127, small values
    "round": Fn(**_unary("round"), torch_fn=torch.round, exact=np.round,
                sweep=np.concatenate([np.arange(-2.0**24, 2.0**24, 97.0) + 0.5,
                                      RNG.uniform(-1e4, 1e4, 30_000),
                                      _both_signs(_log2_sweep(-3, 127.9, 30_000))]),
                ulps=_const(0)),
    "gelu_tanh": Fn(**_gelu("tanh"), torch_fn=lambda t: F.gelu(t, approximate="tanh"),
                    exact=lambda x: act.gelu_reference(x, "tanh").astype(np.float64),
                    sweep=np.concatenate([np.linspace(-12, 12, SWEEP),
                                          _both_signs(_log2_sweep(-125, 7, 30_000))]),
                    ulps=_gelu_tanh_ulps),
    "gelu_none": Fn(**_gelu("none"), torch_fn=F.gelu,
                    exact=lambda x: x * _erfc(-x / math.sqrt(2)) / 2,
                    sweep=np.concatenate([np.linspace(-14, 14, SWEEP),
                                          _both_signs(_log2_sweep(-125, 7, 30_000))]),
                    ulps=_const(act.GELU_ERF_ULPS), zero_sign=False),
    "elu": Fn(**_elu()),
    "selu": Fn(**_elu(1.6732632423543772, 1.0507009873554805)),  # F.selu's
    "celu_2": Fn(**_elu(2.0, 1.0, 0.5)),  # F.celu(alpha=2)
    "pow_1.5": Fn(**_pow(1.5)),
    "pow_-1.3": Fn(**_pow(-1.3)),
    "pow_3": Fn(**_pow(3.0)),
    "pow_-2": Fn(**_pow(-2.0)),
}


def _flush(x):
    """Subnormals to signed zero, as the fabric reads and writes them."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < np.float32(TINY), np.copysign(np.float32(0), x), x)


def ulp_error(got, ref64):
    """|got - ref| in ulps of ref rounded to fp32; equal values (inf, NaN) are 0 apart."""
    with np.errstate(all="ignore"):
        ref = np.asarray(ref64, np.float64).astype(np.float32)
        ulp = np.spacing(np.maximum(np.abs(ref), np.float32(TINY))).astype(np.float64)
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / ulp
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def _emulate(name, x, fused):
    code = FNS[name].code(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(6)])
    return mn.emulate(code, {"x": x}, fused)["y"].view(np.float32)


def _domain(name, x, ref):
    """The points where the stated bound applies, and those that flush to zero."""
    with np.errstate(all="ignore"):
        mag = np.abs(ref)
        if name == "exp":
            return ref >= ml.EXP_TINY * (1 + 1e-6), ref < ml.EXP_TINY * (1 - 1e-6)
        if name == "gelu_tanh":  # x sigmoid(z): -0 where sigmoid(z) < FLT_MIN
            z = 2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
            sig = 1 / (1 + np.exp(-z))
            return (mag >= TINY) & (sig >= TINY * (1 + 1e-3)), sig < TINY * (1 - 1e-3)
        if name == "gelu_none":  # within FLT_MIN for |x| < 2^-125
            return (mag >= TINY) & (np.abs(x) >= 2.0**-125), mag < TINY * (1 - 1e-3)
        if name.startswith("pow"):  # exp's domain
            return mag >= ml.EXP_TINY * (1 + 1e-6), mag < ml.EXP_TINY * (1 - 1e-6)
        if name == "celu_2":  # x / 2 below FLT_MIN flushes to 0 first
            tiny = np.abs(x) < 2 * TINY
            return (mag >= TINY) & ~tiny, np.where(tiny, x <= 0, mag < TINY)
        return mag >= TINY, mag < TINY


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("name", list(FNS))
def test_within_stated_ulps_over_dense_sweep(name, fused):
    fn = FNS[name]
    x = fn.sweep.astype(np.float32)
    x64 = x.astype(np.float64)
    got = _emulate(name, x, fused)
    with np.errstate(all="ignore"):
        ref = fn.exact(x64)
    bounded, flushed = _domain(name, x64, ref)
    err = ulp_error(got[bounded], ref[bounded])
    excess = err - fn.ulps(x64[bounded])
    worst = int(np.argmax(excess))
    assert excess.max() <= 0, (f"{name}: {err[worst]:.1f} ulps at x={x[bounded][worst]!r} "
                               f"(got {got[bounded][worst]!r}, ref {ref[bounded][worst]!r})")
    assert bounded.sum() > 0.9 * x.size
    assert (got[flushed] == 0).all(), name  # below FLT_MIN (exp: EXP_TINY): exactly 0


def test_gauss_tail_relative_and_erf_absolute_error():
    """Phi(-b) = erfc(b / sqrt 2) / 2 within GAUSS_ULPS (relative: the tail keeps its digits)
    for b in [0, GAUSS_MAX], and erf(z) = 1 - 2 Phi(-b) at z = b / sqrt 2 (z >= 0) within
    (2 GAUSS_ULPS + 1) 2^-25 (4.5e-7) in absolute terms, against float64 math.erf."""
    b = np.concatenate([np.linspace(0, ml.GAUSS_MAX, SWEEP),
                        _log2_sweep(-40, 0, 20_000)]).astype(np.float32)
    b64 = b.astype(np.float64)
    q_ref = _erfc(b64 / math.sqrt(2)) / 2
    erf_ref = np.vectorize(math.erf, otypes=[np.float64])(b64 / math.sqrt(2))
    s = [Mem(f"s{i}") for i in range(4)]
    for fused in (False, True):
        q = mn.emulate(ml.gauss_tail(Mem("y"), Mem("x"), s), {"x": b}, fused)["y"]
        q = q.view(np.float32)
        normal = q_ref >= TINY
        assert ulp_error(q[normal], q_ref[normal]).max() <= ml.GAUSS_ULPS
        assert (q[~normal] == 0).all()
        erf_abs = np.abs((1 - 2 * q.astype(np.float64)) - erf_ref)
        assert erf_abs.max() <= (2 * ml.GAUSS_ULPS + 1) * 2.0**-25, erf_abs.max()


# ---- the fabric ---------------------------------------------------------------------------
def _points(name):
    """The kernel's 1024 inputs: the special values, then an even sample of the sweep."""
    sweep = FNS[name].sweep
    sample = sweep[np.linspace(0, sweep.size - 1, M * N - len(SPECIALS)).astype(int)]
    return np.concatenate([SPECIALS, sample]).astype(np.float32)


@pytest.fixture(scope="module")
def fabric_runs():
    """name -> (inputs, fp32 kernel output, cycles, model, the busiest PE's bank stalls),
    each run on first use."""
    cache = {}

    def get(name):
        if name not in cache:
            x = _points(name)
            k = FNS[name].build("f32")
            res = run_kernel(k, {"x": x.reshape(M, N)}, min_table_rows=MIN_TABLE_ROWS)
            cache[name] = (x, res.output.reshape(-1), res.cycles, k.model_cycles,
                           int(res.stats.bank_stall.max()))
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(FNS))
def test_fabric_is_the_mirror_bit_for_bit_with_exact_cycles(fabric_runs, name):
    """Exact cycles: the formula's, plus the groups the engine counts waiting on the bank
    read-pair rule (every PE alike: one block size)."""
    x, y, cycles, model, stalls = fabric_runs(name)
    assert any(bits_equal(y, _emulate(name, x, fused)) for fused in (True, False)), name
    e = M * N // 16
    assert cycles == model == 2 + FNS[name].cycles(CONFIG, e) + stalls


@pytest.mark.parametrize("name", list(FNS))
def test_special_values_as_torch(fabric_runs, name):
    fn = FNS[name]
    x, y, *_ = fabric_runs(name)
    got = y[:len(SPECIALS)]
    xs = np.array(SPECIALS, np.float32)
    xs = torch.from_numpy(xs if fn.reads_subnormals else _flush(xs))
    want = _flush(fn.torch_fn(xs).numpy())
    if name == "gelu_none":  # torch's vectorized fp32 erf gelu gives NaN for +inf
        want[0] = fn.torch_fn(xs.double()).numpy()[0]
        assert want[0] == INF
    for xi, g, w in zip(SPECIALS, got, want):
        if np.isnan(w):
            assert np.isnan(g), (name, xi, g)
        elif np.isinf(w) or w == 0:
            assert g == w, (name, xi, g, w)
            if fn.zero_sign:
                assert np.signbit(g) == np.signbit(w), (name, xi, g, w)
        elif math.isfinite(xi) and abs(xi) >= fn.max_x:  # beyond the domain: NaN, no value
            assert np.isnan(g), (name, xi, g)
        else:  # finite: torch's value is itself within an ulp of the exact one
            ulps = fn.ulps(np.float64(xi)) + 1
            assert ulp_error(np.float32(g), np.float64(w)) <= ulps, (name, xi, g, w)


@pytest.mark.parametrize("generation", ["wse2", "wse3"])
def test_cycle_formulas_match_instruction_lists(generation):
    config = FabricConfig.small(1, 1, generation=generation)
    # integer ops and fp32 max/min at width 1, fp32 add/sub/mov at 2 (docs/engine.md)
    per_element = {"exp": 16, "tanh": 32, "log": 48, "sigmoid": 30.5, "rsqrt": 25,
                   "sqrt": 19, "gelu_tanh": 34.5, "gelu_none": 51.5, "erf": 75.5, "sin": 42,
                   "cos": 42, "expm1": 38, "tan": 44, "atan": 33.5, "asin": 48, "acos": 50.5,
                   "sinh": 47, "cosh": 28, "exp2": 15, "round": 10.5,
                   "elu": 38.5, "selu": 39.5, "celu_2": 39.5, "pow_1.5": 77.5, "pow_-1.3": 77.5,
                   "pow_3": 72, "pow_-2": 67.5}
    for name, fn in FNS.items():
        code = fn.code(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(6)])
        for e in (1, 2, 7, 100, 4097):
            assert fn.cycles(config, e) == ml.sequence_cycles(config, code, e), (name, e)
        if generation == "wse2":
            assert fn.cycles(config, 1000) == per_element[name] * 1000, name
    assert ml.gauss_tail_cycles(config, 10, times_b=True) == ml.sequence_cycles(
        config, ml.gauss_tail(Mem("y"), Mem("x"), [Mem(f"s{i}") for i in range(4)],
                              times_b=True), 10)


# ---- 16-bit storage -----------------------------------------------------------------------
# exp, tanh, gelu_tanh: test_pointwise_half
HALF_NAMES = ("sigmoid", "rsqrt", "sqrt", "gelu_none", "elu", "pow_3", "round", "atan", "exp2")
TORCH_HALF = {"f16": torch.float16, "bf16": torch.bfloat16}


def _half_inputs(name, dtype):
    rng = np.random.default_rng(11)
    if name in ("rsqrt", "sqrt"):
        x = np.exp(rng.uniform(-8, 8, (M, N)))
    else:
        x = 3 * rng.standard_normal((M, N))
    return round_to(x.astype(np.float32), dtype)


def _half_ulps(a, b, dtype):
    def order(v):
        p = to_half(v, dtype).astype(np.int64)
        return np.where(p & 0x8000, -(p & 0x7FFF), p)
    return np.abs(order(a) - order(b))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "cb16"])
@pytest.mark.parametrize("name", HALF_NAMES)
def test_half_storage_is_the_rounded_fp32_kernel(name, dtype):
    x = _half_inputs(name, dtype)
    k = FNS[name].build(dtype)
    assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, "f32")
    e = M * N // 16
    cvt = math.ceil(e / CONFIG.simd_width("cvt", "f16"))
    res = run_kernel(k, {"x": x}, min_table_rows=MIN_TABLE_ROWS)
    stalls = int(res.stats.bank_stall.max())
    assert res.cycles == k.model_cycles == 2 + 2 * cvt + FNS[name].cycles(CONFIG, e) + stalls
    # the fp32 kernel on the same inputs (its mirror, in the fabric's fma mode), rounded
    f32 = [_emulate(name, x.reshape(-1), fused).reshape(M, N) for fused in (True, False)]
    assert any(np.array_equal(res.output, round_to(y, dtype)) for y in f32)
    with np.errstate(all="ignore"):
        exact = round_to(FNS[name].exact(x.astype(np.float64)), dtype)
    assert _half_ulps(res.output, exact, dtype).max() <= 1
    if dtype in TORCH_HALF:
        t = FNS[name].torch_fn(torch.from_numpy(x).to(TORCH_HALF[dtype])).float().numpy()
        # torch's erf gelu computes 1 + erf(x / sqrt 2), which cancels below x = -3
        keep = x >= -3 if name == "gelu_none" else np.ones(x.shape, bool)
        assert _half_ulps(res.output[keep], t[keep], dtype).max() <= 1
