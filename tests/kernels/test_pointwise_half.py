"""16-bit elementwise, map, broadcast, tanh / exp / gelu and resident kernels (fp16, bf16,
cbfloat16), against numpy emulations and PyTorch's CPU fp16 / bf16 ops, with exact cycles.

Emulations (bit-exact):
- elementwise / map / broadcast: inputs rounded to the 16-bit dtype, the float32 op (the
  scalar in fp32, or rounded to dtype for acc_dtype = dtype), the result rounded once with
  `fabric.numerics.round_to` (the kernels' `*_reference` functions). PyTorch's fp16 / bf16
  tensor-tensor ops and x * s with a Python scalar s compute the same way (fp32 opmath, one
  rounding), so they match bit for bit. PyTorch on CPU rounds the scalar of x + s to the
  tensor's dtype first (on CUDA it keeps it in fp32): that is acc_dtype = dtype here, and
  acc_dtype "f32" matches (x.float() + s).to(dtype).
- tanh / exp / gelu: the fp32 kernel run on the same 16-bit inputs, its output rounded to
  dtype. Against PyTorch (and, for cbfloat16, the float64 value rounded to dtype): at most
  1 ulp of dtype, since the fp32 results (within a few fp32 ulps) round to the correctly
  rounded value except near ties. PyTorch's tanh-form gelu cancels in 1 + tanh(u) in fp32
  for x below about -3 (fp16 results 3 ulps and bf16 results flushed to 0 near x = -5), so
  the PyTorch comparison of gelu covers x >= -3 and the float64 one all x where the
  kernel's bound holds (x above about -9.9, where sigmoid(2u) is at least FLT_MIN).
Inputs stay well inside every format's normal range where the engine flushes fp32
subnormals (bf16), and one 4 x 4 config serves every kernel (one engine compile per table
bucket).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from fabric import FabricConfig, Rect, Simulator
from fabric.kernels import activations as act
from fabric.kernels import elementwise as ew
from fabric.kernels import mathlib as ml
from fabric.kernels.base import run_kernel
from fabric.kernels.resident import build_resident
from fabric.kernels.unary import build_unary
from fabric.numerics import round_to, to_half

CONFIG = FabricConfig.small(4, 4)
RECT = Rect(0, 0, 3, 2)
M, N = 10, 7  # blocks of 4/3 rows by 4/3 columns: four block classes, odd sizes
HALVES = ("f16", "bf16", "cb16")
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16}


def _normal(seed, *shape, scale=1.0):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def _torch(x, dtype):
    """An fp32 array as a torch tensor of the 16-bit dtype (exact: the values are rounded to
    dtype first)."""
    return torch.from_numpy(round_to(x, dtype)).to(TORCH[dtype])


def _numpy(t):
    return t.float().numpy()


def _ulps(a, b, dtype):
    """Distance in ulps of dtype between 16-bit values a and b (same-sign ordering of the
    patterns; +-0 are both 0)."""
    def order(values):
        p = to_half(values, dtype).astype(np.int64)
        return np.where(p & 0x8000, -(p & 0x7FFF), p)
    return np.abs(order(a) - order(b))


def _run(kernel, inputs, expected):
    res = run_kernel(kernel, inputs)
    np.testing.assert_array_equal(res.output, expected)
    assert res.cycles == kernel.model_cycles, (kernel.name, kernel.info)
    return res


# ---- elementwise, map, broadcast --------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALVES)
def test_elementwise_half_bit_exact_and_cycles(dtype):
    x, y = _normal(1, M, N), _normal(2, M, N)
    L = 16  # largest block, 4 x 4
    for op, acc in [("add", "f32"), ("sub", dtype), ("mul", "f32"), ("mul", dtype)]:
        k = ew.build_elementwise(CONFIG, RECT, M, N, op, dtype=dtype, acc_dtype=acc)
        assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, acc)
        assert k.model_cycles == math.ceil(L / CONFIG.simd_width(op, "f16")) + 2 == 6
        res = _run(k, {"x": x, "y": y}, ew.elementwise_reference(x, y, op, dtype))
        if dtype in TORCH:
            t = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op]
            np.testing.assert_array_equal(res.output,
                                          _numpy(t(_torch(x, dtype), _torch(y, dtype))))


@pytest.mark.parametrize("dtype", HALVES)
def test_map_half_scalar_in_fp32_or_dtype(dtype):
    x = _normal(3, M, N, scale=4.0)
    L = 16
    cvt = math.ceil(L / CONFIG.simd_width("cvt", "f16"))
    cases = [  # op, scalar, acc, widened
        ("mul", 0.1, "f32", True), ("mul", 0.1, dtype, False), ("add", 0.1, "f32", True),
        ("add", 0.1, dtype, False), ("mul", 1.25, "f32", False), ("relu", 0.0, "f32", False),
        ("max", 0.3, "f32", False), ("min", 0.3, dtype, False)]
    for op, s, acc, widened in cases:
        k = ew.build_map(CONFIG, RECT, M, N, op, s, dtype=dtype, acc_dtype=acc)
        assert k.info["widened"] == widened, (op, s, acc)
        if widened:  # to_f32, the fp32 op (mul 1, add 2 wide), to_half
            assert k.model_cycles == 2 * cvt + math.ceil(L / CONFIG.simd_width(op)) + 2
        else:
            assert k.model_cycles == math.ceil(L / CONFIG.simd_width(ew.SIMD[op], "f16")) + 2
        res = _run(k, {"x": x}, ew.map_reference(x, op, s, dtype, acc))
        if dtype not in TORCH:
            continue
        t, h = _torch(x, dtype), TORCH[dtype]
        if op == "mul":  # torch: x * s with s in fp32 (acc f32), or a 16-bit tensor s
            want = t * (s if acc == "f32" else torch.tensor(s, dtype=h))
        elif op == "add":  # torch CPU rounds the scalar of x + s to dtype (acc = dtype)
            want = (t.float() + s).to(h) if acc == "f32" else t + s
        else:
            want = torch.clamp(t, min=s) if op in ("relu", "max") else torch.clamp(t, max=s)
        np.testing.assert_array_equal(res.output, _numpy(want), err_msg=f"{op} {s} {acc}")
    # the scalar's rounding matters: 0.1 in fp32 and in dtype give different products
    assert not np.array_equal(ew.map_reference(x, "mul", 0.1, dtype, "f32"),
                              ew.map_reference(x, "mul", 0.1, dtype, dtype))


@pytest.mark.parametrize("dtype", HALVES)
def test_broadcast_half_load_and_multicast(dtype):
    x = _normal(4, M, N)
    for vector, mode, op in [("row", "load", "sub"), ("col", "multicast", "mul"),
                             ("row", "multicast", "add")]:
        v = _normal(5, N if vector == "row" else M)
        k = ew.build_broadcast_op(CONFIG, RECT, M, N, op, vector, mode, dtype=dtype)
        res = _run(k, {"x": x, "v": v}, ew.broadcast_op_reference(x, v, op, vector, dtype))
        if mode == "load":  # plus the busiest PE's groups waiting on a bank pair
            stalls = int(res.stats.bank_stall.max())
            assert k.model_cycles == math.ceil(16 / CONFIG.simd_width(op, "f16")) + 2 + stalls
        if dtype in TORCH:
            tv = _torch(v, dtype)
            tv = tv[None, :] if vector == "row" else tv[:, None]
            t = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op]
            np.testing.assert_array_equal(res.output, _numpy(t(_torch(x, dtype), tv)))


# ---- tanh, exp, gelu ----------------------------------------------------------------------------
UNARY_M, UNARY_N = 40, 30  # 14 x 15 = 210 elements on the largest PE


def _gelu64(x):
    """Tanh-form gelu in float64 as x / (1 + exp(-2u)) (1 + tanh(u) cancels for negative x
    even in float64)."""
    x = x.astype(np.float64)
    return x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_clamped(x):
    """Where sigmoid(2u) is below FLT_MIN (2u < -87.33, x below about -9.9) the kernel's
    x sigmoid(2u) is -0 (activations docstring): the float64 comparison leaves those out."""
    x = x.astype(np.float64)
    return x * (act.GELU_A + act.GELU_B * x * x) < -87.33


FNS = {  # build(dtype), input, float64 function, torch function
    "tanh": (lambda dt: build_unary(CONFIG, RECT, UNARY_M, UNARY_N, "tanh", dtype=dt),
             lambda: _normal(6, UNARY_M, UNARY_N, scale=3.0), np.tanh, torch.tanh),
    "exp": (lambda dt: build_unary(CONFIG, RECT, UNARY_M, UNARY_N, "exp", dtype=dt),
            lambda: np.random.default_rng(7).uniform(-10, 12, (UNARY_M, UNARY_N))
            .astype(np.float32), np.exp, torch.exp),
    "gelu": (lambda dt: act.build_gelu(CONFIG, RECT, UNARY_M, UNARY_N, dtype=dt),
             lambda: _normal(8, UNARY_M, UNARY_N, scale=3.0), _gelu64,
             lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # exp overflows to infinity in fp16
@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("fn", list(FNS))
def test_math_half_is_the_rounded_fp32_kernel(fn, dtype):
    build, inputs, exact, torch_fn = FNS[fn]
    x = round_to(inputs(), dtype)
    k = build(dtype)
    assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, "f32")
    e = 14 * 15
    cycles = {"tanh": ml.tanh_cycles, "exp": ml.exp_cycles, "gelu": act.gelu_cycles}[fn]
    f32 = run_kernel(build("f32"), {"x": x}).output
    res = _run(k, {"x": x}, round_to(f32, dtype))
    stalls = int(res.stats.bank_stall.max())  # groups waiting on a bank pair (every PE)
    assert k.model_cycles == 2 + 2 * math.ceil(e / CONFIG.simd_width("cvt", "f16")) + cycles(
        CONFIG, e) + stalls
    # within 1 ulp of dtype of the correctly rounded value and of PyTorch
    keep = ~_gelu_clamped(x) if fn == "gelu" else np.ones(x.shape, bool)
    with np.errstate(over="ignore"):
        want = round_to(exact(x.astype(np.float64)), dtype)
    assert _ulps(res.output[keep], want[keep], dtype).max() <= 1
    if dtype in TORCH:
        got = _numpy(torch_fn(_torch(x, dtype)))
        keep = x >= -3 if fn == "gelu" else np.ones(x.shape, bool)
        assert _ulps(res.output[keep], got[keep], dtype).max() <= 1
    if fn == "exp" and dtype == "f16":  # above log(65504) = 11.09 fp16 overflows, as torch
        assert np.isinf(res.output[x > 11.1]).all() and (x > 11.1).any()


# ---- resident ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALVES)
def test_resident_half_round_trip(dtype):
    x = _normal(9, 9, 7, scale=100.0)
    k = build_resident(CONFIG, Rect(1, 1, 2, 3), 9, 7, dtype=dtype)
    res = run_kernel(k, {"x": x})
    np.testing.assert_array_equal(res.output, round_to(x, dtype))
    assert res.cycles == 0 and res.output.dtype == np.float32


def test_resident_half_holds_twice_the_table():
    # 100 x 200 on one PE: 80,000 B in fp32 (above 48 KiB), 40,000 B in 16 bits
    with pytest.raises(ValueError, match="48 KiB"):
        build_resident(CONFIG, Rect(0, 0, 1, 1), 100, 200)
    k = build_resident(CONFIG, Rect(0, 0, 1, 1), 100, 200, dtype="bf16")
    x = _normal(10, 100, 200)
    sim = Simulator(CONFIG, k.program)
    k.load(sim, {"x": x})
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(k.read(sim), want)


# ---- layout and errors ------------------------------------------------------------------------
def test_half_symbols_hold_the_fp32_layout():
    """Half-word slot i of every 16-bit symbol holds what word i holds in fp32."""
    x = round_to(_normal(11, M, N), "f16")  # exact in both formats
    for build in (lambda dt: ew.build_map(CONFIG, RECT, M, N, "relu", dtype=dt),
                  lambda dt: build_unary(CONFIG, RECT, M, N, "exp", dtype=dt),
                  lambda dt: build_resident(CONFIG, RECT, M, N, dtype=dt)):
        slots = []
        for dt in ("f32", "f16"):
            k = build(dt)
            sim = Simulator(CONFIG, k.program)
            k.load(sim, {"x": x})
            rects = [p.rect for p in k.program.placements]
            slots.append([np.asarray(sim.memcpy_d2h("x", r), np.float32) for r in rects])
        for a, b in zip(*slots):
            np.testing.assert_array_equal(a, b)


def test_dtype_errors_name_kernel_and_parameter():
    with pytest.raises(ValueError, match=r"unary tanh: acc_dtype must be one of \['f32'\]"):
        build_unary(CONFIG, RECT, M, N, "tanh", dtype="f16", acc_dtype="f16")
    with pytest.raises(ValueError, match="gelu: acc_dtype .* computes in fp32 only"):
        act.build_gelu(CONFIG, RECT, M, N, dtype="bf16", acc_dtype="bf16")
    with pytest.raises(ValueError, match="elementwise: dtype must be one of"):
        ew.build_elementwise(CONFIG, RECT, M, N, "add", dtype="f64")
    with pytest.raises(ValueError, match=r"map: acc_dtype must be one of \['f32', 'f16'\]"):
        ew.build_map(CONFIG, RECT, M, N, "mul", 0.5, dtype="f16", acc_dtype="bf16")
    with pytest.raises(ValueError, match="broadcast_op: acc_dtype"):
        ew.build_broadcast_op(CONFIG, RECT, M, N, dtype="f32", acc_dtype="f16")
    with pytest.raises(ValueError, match="resident: dtype"):
        build_resident(CONFIG, RECT, M, N, dtype="float16")
