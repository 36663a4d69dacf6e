"""16-bit softmax, layernorm and row reductions (fp16, bf16, cbfloat16) against numpy and
torch, with exact cycle counts at the 16-bit SIMD widths.

References and tolerances:
- Emulation, bit-exact: with acc_dtype "f32" the 16-bit kernels widen their inputs exactly,
  run the fp32 code unchanged and round the output once, so their output equals the fp32
  kernel (itself checked against numpy in test_rownorm.py) run on the inputs rounded to the
  format, rounded with `fabric.numerics.round_to`. rowreduce: `rowreduce_reference`, a numpy
  fold in the kernel's order (every step rounded for acc_dtype = dtype).
- float64 numpy on the rounded inputs: |out - y| <= ulp(out) / 2 + T, the output rounding
  plus the fp32 kernel's bound T (`softmax_tolerance`, `layernorm_tolerance`).
- torch's CPU fp16 / bf16 softmax and layer_norm (fp32 opmath inside, output rounded once):
  within 1 ulp of the format. Both are roundings of fp32 results whose errors are far below
  half an ulp of the format; two reals less than one spacing apart round to the same or
  adjacent values. Where the fp32 error is absolute rather than relative (layernorm's
  cancellation in x * scale + beta when |y| << |beta|; softmax outputs under exp's floor of
  1.2e-38, which bf16 resolves), the fp32 bound 2 T of the two computations is added.
One 4x4 config, the rectangles of test_rownorm.py and one table floor (the largest program's
bucket): the engine compiles once for the module.
"""

import numpy as np
import pytest
import torch

from fabric import FabricConfig, Rect, Simulator
from fabric.kernels import rownorm as rn
from fabric.kernels import rowreduce as rr
from fabric.kernels.base import Blocks, run_kernel
from fabric.numerics import FORMATS, round_to

CONFIG = FabricConfig.small(4, 4)
HALVES = ("f16", "bf16", "cb16")
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16}  # cb16: no torch dtype
CASES = [  # (rect, m, n, algo)
    (Rect(0, 0, 3, 4), 10, 37, "chain"),  # uneven both ways: padding rows and columns
    (Rect(0, 0, 2, 4), 7, 30, "tree"),
]
rng = np.random.default_rng(16)
FLOOR = (128, 128)  # every program in the 16-bit chain softmax's table bucket: one engine


def ulp(v, dtype):
    """Spacing of `dtype` values at |v| (the subnormal spacing below the normal range)."""
    fmt = FORMATS[dtype]
    a = np.maximum(np.abs(np.asarray(v, np.float64)), fmt.min_normal)
    return np.exp2(np.floor(np.log2(a)) - fmt.mbits)


def assert_close(got, ref, tol, what):
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    bad = np.argwhere(~(err <= tol))
    if bad.size:
        i = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} elements off; at {i}: got {got[i]!r}, "
                             f"reference {ref[i]!r}, |err| {err[i]:.3g} > tol {tol[i]:.3g}")


def assert_bits_equal(got, want):
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def torch_half(fn, dtype, *arrays):
    """fn on the arrays as torch tensors of `dtype`, returned as float32 numpy."""
    ts = [torch.from_numpy(np.ascontiguousarray(a)).to(TORCH[dtype]) for a in arrays]
    return fn(*ts).to(torch.float32).numpy()


@pytest.mark.parametrize("rect,m,n,algo", CASES)
@pytest.mark.parametrize("dtype", HALVES)
def test_softmax_half(dtype, rect, m, n, algo):
    x = (3 * rng.standard_normal((m, n))).astype(np.float32)
    x[0, :] *= 20  # exp's floor
    k = rn.build_softmax(CONFIG, rect, m, n, dtype=dtype, algo=algo)
    assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, "f32")
    res = run_kernel(k, {"x": x}, min_table_rows=FLOOR)
    assert res.cycles == k.model_cycles
    assert res.output.dtype == np.float32
    xh = round_to(x, dtype)
    fp32 = run_kernel(rn.build_softmax(CONFIG, rect, m, n, algo=algo), {"x": xh},
                      min_table_rows=FLOOR).output
    assert_bits_equal(res.output, round_to(fp32, dtype))
    t32 = rn.softmax_tolerance(xh, Blocks.of(rect, m, n))
    # fp32 errors far below an ulp of the format, except under exp's floor (1.2e-38 / sum,
    # which bf16's range resolves)
    above_floor = res.output > 1e-30
    assert np.all((t32 <= ulp(res.output, dtype) / 256)[above_floor])
    assert_close(res.output, rn.softmax_reference(xh),
                 ulp(res.output, dtype) / 2 + t32, "float64")
    if dtype in TORCH:
        ref = torch_half(lambda t: torch.softmax(t, dim=1), dtype, xh)
        one = ulp(np.maximum(np.abs(res.output), np.abs(ref)), dtype)
        assert_close(res.output, ref, one + 2 * t32, "torch")


@pytest.mark.parametrize("rect,m,n,algo", CASES)
@pytest.mark.parametrize("dtype", HALVES)
def test_layernorm_half(dtype, rect, m, n, algo):
    x = (10 + 2 * rng.standard_normal((m, n))).astype(np.float32)  # mean > std
    gamma, beta = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    k = rn.build_layernorm(CONFIG, rect, m, n, eps=1e-5, dtype=dtype, algo=algo)
    assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, "f32")
    res = run_kernel(k, {"x": x, "gamma": gamma, "beta": beta}, min_table_rows=FLOOR)
    assert res.cycles == k.model_cycles
    xh, gh, bh = (round_to(v, dtype) for v in (x, gamma, beta))
    fp32 = run_kernel(rn.build_layernorm(CONFIG, rect, m, n, eps=1e-5, algo=algo),
                      {"x": xh, "gamma": gh, "beta": bh}, min_table_rows=FLOOR).output
    assert_bits_equal(res.output, round_to(fp32, dtype))
    t32 = rn.layernorm_tolerance(xh, gh, bh, Blocks.of(rect, m, n), 1e-5)
    assert_close(res.output, rn.layernorm_reference(xh, gh, bh, 1e-5),
                 ulp(res.output, dtype) / 2 + t32, "float64")
    if dtype in TORCH:
        ref = torch_half(lambda t, g, b: torch.nn.functional.layer_norm(t, (n,), g, b, 1e-5),
                         dtype, xh, gh, bh)
        one = ulp(np.maximum(np.abs(res.output), np.abs(ref)), dtype)
        assert_close(res.output, ref, one + 2 * t32, "torch")


def test_half_layout_matches_fp32():
    """Half-word slot i of a 16-bit x holds what word i of the fp32 x holds (padding too)."""
    rect, m, n = Rect(0, 0, 3, 4), 10, 37
    x = (3 * rng.standard_normal((m, n))).astype(np.float32)
    slots = {}
    for dtype in ("f32", "bf16"):
        k = rn.build_softmax(CONFIG, rect, m, n, dtype=dtype)
        sim = Simulator(CONFIG, k.program, min_table_rows=FLOOR)
        k.load(sim, {"x": x})
        slots[dtype] = np.asarray(sim.memcpy_d2h("x", rect), np.float32)
    fill = slots["f32"] == rn.SOFTMAX_FILL  # padding: -FLT_MAX in fp32, -max(h) in 16 bits
    assert_bits_equal(slots["bf16"], np.where(fill, np.float32(-FORMATS["bf16"].max),
                                              round_to(slots["f32"], "bf16")))


@pytest.mark.parametrize("rule, waits", [(False, (0, 0)), (True, (1.75, 2.75))])
def test_model_grows_as_stated_in_16_bits(rule, waits):
    """A widen and a narrow at the conversion width (1 on WSE-2: fh2s / fs2h have no SIMD
    mode) add 2 cycles per element: softmax about 20.5, layernorm about 8 + 2 / mb (gamma
    and beta widen once per column); under the bank read-pair rule, the fp32 kernels'
    waits besides (test_rownorm.test_model_grows_as_stated)."""
    config = CONFIG.replace(bank_conflicts=rule)
    for build, per_elem, wait in ((rn.build_softmax, 20.5, waits[0]),
                                  (rn.build_layernorm, 8 + 2 / 8, waits[1])):
        big = [build(config, Rect(0, 0, 1, 2), 8, 2 * nb, dtype="f16").model_cycles
               for nb in (64, 128)]
        assert abs((big[1] - big[0]) / (8 * 64) - per_elem - wait) < 0.1


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", HALVES)
def test_rowreduce_half(dtype, op):
    m, r, scale = 10, 7, 1 / 7
    x = (3 * rng.standard_normal((m, r))).astype(np.float32)
    xh = round_to(x, dtype)
    for acc in ("f32", dtype):
        k = rr.build_rowreduce(CONFIG, Rect(0, 0, 3, 1), m, r, op, scale, dtype=dtype,
                               acc_dtype=acc)
        assert (k.info["dtype"], k.info["acc_dtype"]) == (dtype, acc)
        res = run_kernel(k, {"x": x}, min_table_rows=FLOOR)
        assert res.cycles == k.model_cycles == rr.rowreduce_cycles(CONFIG, 4, r, op, dtype, acc)
        assert_bits_equal(res.output, rr.rowreduce_reference(x, op, scale, dtype, acc))
    # the fp32 fold: within half an ulp of the format plus (r - 1) fp32 roundings
    exact = {"sum": xh.astype(np.float64).sum(1), "mean": xh.astype(np.float64).sum(1) * scale,
             "max": xh.max(1)}[op]
    k = rr.build_rowreduce(CONFIG, Rect(0, 0, 3, 1), m, r, op, scale, dtype=dtype)
    got = run_kernel(k, {"x": x}, min_table_rows=FLOOR).output
    bound = ulp(got, dtype) / 2 + (r + 1) * 2.0**-24 * np.abs(xh).sum(1) * (
        scale if op == "mean" else 1)
    assert_close(got, exact, bound, "float64")


@pytest.mark.parametrize("dtype", HALVES)
def test_rowreduce_16_bit_sum_rounds_every_step(dtype):
    """2^p + 1 + 1 + 1 (p the format's mantissa bits + 1): each 16-bit add of 1 is a tie that
    rounds back to 2^p; the fp32 sum 2^p + 3 rounds once, to 2^p + 4."""
    big = 2.0 ** (FORMATS[dtype].mbits + 1)
    x = np.array([[big, 1, 1, 1]] * 3, np.float32)
    want = {dtype: big, "f32": big + 4}
    for acc in (dtype, "f32"):
        k = rr.build_rowreduce(CONFIG, Rect(0, 0, 3, 1), 3, 4, "sum", dtype=dtype,
                               acc_dtype=acc)
        got = run_kernel(k, {"x": x}, min_table_rows=FLOOR).output
        np.testing.assert_array_equal(got, want[acc])


def test_bad_dtypes_are_named():
    rect = Rect(0, 0, 2, 2)
    for build in (rn.build_softmax, rn.build_layernorm):
        with pytest.raises(ValueError, match="acc_dtype"):
            build(CONFIG, rect, 4, 4, dtype="f16", acc_dtype="f16")  # fp32 only
        with pytest.raises(ValueError, match="acc_dtype"):
            build(CONFIG, rect, 4, 4, dtype="f16", acc_dtype="bf16")
        with pytest.raises(ValueError, match="dtype"):
            build(CONFIG, rect, 4, 4, dtype="f64")
    with pytest.raises(ValueError, match="rowreduce: acc_dtype"):
        rr.build_rowreduce(CONFIG, Rect(0, 0, 2, 1), 4, 4, dtype="bf16", acc_dtype="f16")
    with pytest.raises(ValueError, match="rowreduce: dtype"):
        rr.build_rowreduce(CONFIG, Rect(0, 0, 2, 1), 4, 4, dtype="int8")
    with pytest.raises(ValueError, match="48 KiB"):  # 16-bit x plus its fp32 work copies
        rn.build_softmax(CONFIG, Rect(0, 0, 1, 1), 64, 60, dtype="cb16")
