"""16-bit GEMM (SUMMA, Cannon) and GEMV: every 16-bit dtype with both accumulation formats,
bit-exact against a numpy emulation of the kernel's order and rounding, cycles against the
analytic models at the 16-bit SIMD widths, efficiency against the 16-bit fma peak.

Emulation (`sequential_matmul`, `gemv_reference` with a dtype): the inputs rounded to the
16-bit format (the host load rounds to nearest even), products exact in fp32 (at most
2 x 11 significand bits), sums rounded to fp32 in the kernel's fixed order, and to 16 bits
after every step (acc_dtype = dtype, fmach) or once at the end (acc_dtype "f32"). Gaussian
inputs: fp32 sums are order-dependent, so any reordering, lost or repeated term shows; no
fp32 intermediate comes near the subnormal range, where the engine flushes to zero.

Cycles: the GEMM models follow each PE's tasks (`gemm_cycles`) and land within 1 % on these
sizes, whether the main thread paces the fma chain (ceil(Mb / w) <= CHAIN_CYCLES: Mb <= 24
with fmachs, w = 2; Mb <= 48 with fmach, w = 4 on wse2) or the datapath does, as in fp32.
The GEMV model is exact (chain reduction, or a tree on even blocks; an uneven tree within
10 %, as in fp32).
"""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.kernels import gemv as gv
from fabric.kernels.base import run_kernel
from fabric.kernels.gemm_cannon import build_gemm_cannon, cannon_reference
from fabric.kernels.gemm_common import copy_cycles
from fabric.kernels.gemm_summa import build_gemm_summa, summa_reference
from fabric.numerics import round_to
from tests.kernels.kernel_cases import check_cycles

CONFIG = FabricConfig.small(4, 4)  # as tests/kernels/test_gemm.py; one engine compile
HALVES = ("f16", "bf16", "cb16")
EPS = {"f16": 2.0**-10, "bf16": 2.0**-7, "cb16": 2.0**-9}


def gaussian(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check_gemm_cycles(result, kernel):
    got, model = result.cycles, kernel.model_cycles
    assert abs(got - model) <= 0.01 * model, (kernel.info, got, model)


def check_half_efficiency(result, kernel):
    """Against the ("fma", "f16") peak: 4 fmas per PE per cycle on wse2."""
    assert kernel.config.simd_width("fma", "f16") == 4
    pes = kernel.rect.rows * kernel.rect.cols
    assert result.efficiency(kernel) == pytest.approx(kernel.fmas / (4 * pes * result.cycles))


GEMM_CASES = [  # dtype, acc_dtype, rect, m, k, n
    ("f16", "f32", Rect(0, 0, 2, 2), 64, 16, 32),  # Mb = 32: fmachs datapath bound
    ("f16", "f16", Rect(0, 0, 3, 4), 50, 37, 45),  # uneven splits, 6 merged steps
    ("bf16", "f32", Rect(0, 0, 3, 4), 50, 37, 45),
    ("bf16", "bf16", Rect(0, 0, 2, 2), 96, 16, 16),  # Mb = 48: fmach and main thread balanced
    ("cb16", "f32", Rect(1, 1, 2, 3), 7, 9, 4),  # single-column blocks, tiny
    ("cb16", "cb16", Rect(0, 0, 2, 2), 32, 24, 32),
    ("cb16", "f32", Rect(0, 0, 3, 3), 6, 1, 5),  # k < R: PEs without A or B blocks
]


@pytest.mark.parametrize("dtype, acc, rect, m, k, n", GEMM_CASES)
def test_summa_half_bit_exact_cycles_efficiency(dtype, acc, rect, m, k, n):
    a, b = gaussian(m + k, m, k), gaussian(k + n, k, n)
    kernel = build_gemm_summa(CONFIG, rect, m, k, n, dtype=dtype, acc_dtype=acc)
    assert (kernel.info["dtype"], kernel.info["acc_dtype"]) == (dtype, acc)
    result = run_kernel(kernel, {"A": a, "B": b})
    want = summa_reference(a, b, dtype=dtype, acc_dtype=acc)
    np.testing.assert_array_equal(result.output, want)
    np.testing.assert_array_equal(round_to(result.output, dtype), result.output)  # 16-bit
    check_gemm_cycles(result, kernel)
    check_half_efficiency(result, kernel)
    assert result.stats.consumed == result.stats.injected + result.stats.forked


@pytest.mark.parametrize("dtype, acc, rect, m, k, n", [
    ("f16", "f32", Rect(1, 0, 3, 3), 40, 29, 35),  # offset, uneven splits, odd ring
    ("f16", "f16", Rect(0, 0, 2, 2), 96, 16, 16),
    ("bf16", "bf16", Rect(1, 0, 3, 3), 40, 29, 35),
    ("cb16", "f32", Rect(0, 0, 2, 2), 64, 16, 32),
])
def test_cannon_half_bit_exact_cycles_efficiency(dtype, acc, rect, m, k, n):
    a, b = gaussian(m * k, m, k), gaussian(k * n, k, n)
    kernel = build_gemm_cannon(CONFIG, rect, m, k, n, dtype=dtype, acc_dtype=acc)
    result = run_kernel(kernel, {"A": a, "B": b})
    np.testing.assert_array_equal(
        result.output, cannon_reference(a, b, rect.rows, dtype=dtype, acc_dtype=acc))
    check_gemm_cycles(result, kernel)
    check_half_efficiency(result, kernel)


@pytest.mark.parametrize("kind, dtype, acc, rect, m, k, n", [
    ("summa", "f16", "f32", Rect(0, 0, 2, 2), 64, 16, 32),
    ("summa", "bf16", "bf16", Rect(0, 0, 3, 4), 50, 37, 45),  # non-square, uneven blocks
    ("cannon", "cb16", "f32", Rect(1, 0, 3, 3), 40, 29, 35),  # uneven blocks, odd ring
    ("cannon", "f16", "f16", Rect(0, 0, 2, 2), 96, 16, 16),
])
def test_half_c0_bit_exact_bounded_and_cycles(kind, dtype, acc, rect, m, k, n):
    """C = C0 + A @ B with C0 in the accumulator's format: an fp32 accumulator starts from
    the fp32 C0 as given (rounded to 16 bits once, with the sums, at the end); a 16-bit one
    from C0 rounded to the dtype (the load), then rounds after every step. Bit for bit
    against the emulation; against float64 C0 + A16 @ B16 within gamma_{K+1} (fp32 u, or
    the dtype's eps / 2) of |C0| + |A16||B16|, plus the final rounding (eps / 2 relative)
    of an fp32 accumulator. The cycles drop by the zeroing mov, exactly as the model's."""
    a, b, c0 = gaussian(m + k, m, k), gaussian(k + n, k, n), gaussian(m * n, m, n)
    build = build_gemm_summa if kind == "summa" else build_gemm_cannon
    plain = build(CONFIG, rect, m, k, n, dtype=dtype, acc_dtype=acc)
    kernel = build(CONFIG, rect, m, k, n, dtype=dtype, acc_dtype=acc, with_c0=True)
    result = run_kernel(kernel, {"A": a, "B": b, "C0": c0})
    want = (summa_reference(a, b, dtype=dtype, acc_dtype=acc, c0=c0) if kind == "summa" else
            cannon_reference(a, b, rect.rows, dtype=dtype, acc_dtype=acc, c0=c0))
    np.testing.assert_array_equal(result.output, want)

    a16, b16 = (round_to(v, dtype).astype(np.float64) for v in (a, b))
    exact = c0.astype(np.float64) + a16 @ b16
    scale = np.abs(c0).astype(np.float64) + np.abs(a16) @ np.abs(b16)
    u16 = EPS[dtype] / 2
    if acc == "f32":
        u32 = 2.0**-24
        bound = (k + 1) * u32 / (1 - (k + 1) * u32) * scale * (1 + u16) + u16 * np.abs(exact)
    else:
        bound = (k + 1) * u16 / (1 - (k + 1) * u16) * scale
    assert (np.abs(result.output - exact) <= bound).all()

    check_gemm_cycles(result, kernel)
    fmt = "f32" if acc == "f32" else "f16"  # the zeroing's mov width: the accumulator's
    mb, nb = kernel.info["block"]
    saved = -(-mb * nb // CONFIG.simd_width("mov", fmt))
    base = run_kernel(plain, {"A": a, "B": b})
    assert base.cycles - result.cycles == plain.model_cycles - kernel.model_cycles == saved


@pytest.mark.parametrize("dtype", HALVES)
def test_emulation_is_close_to_the_exact_product(dtype):
    """The reference itself: against float64 A16 @ B16, an fp32 accumulator loses at most
    gamma_K(fp32) |A||B| plus the final rounding (eps / 2 relative); a 16-bit one at most
    gamma_K(eps / 2) |A||B| (K rounded steps, each relative eps / 2)."""
    m, k, n = 6, 40, 5
    a, b = gaussian(1, m, k), gaussian(2, k, n)
    a16, b16 = (round_to(v, dtype).astype(np.float64) for v in (a, b))
    exact, scale = a16 @ b16, np.abs(a16) @ np.abs(b16)
    u32, u16 = 2.0**-24, EPS[dtype] / 2
    wide = summa_reference(a, b, dtype=dtype, acc_dtype="f32").astype(np.float64)
    bound = k * u32 / (1 - k * u32) * scale * (1 + u16) + u16 * np.abs(exact)
    assert (np.abs(wide - exact) <= bound).all()
    narrow = summa_reference(a, b, dtype=dtype, acc_dtype=dtype).astype(np.float64)
    gamma = k * u16 / (1 - k * u16)
    assert (np.abs(narrow - exact) <= gamma * scale).all()


GEMV_CASES = [  # dtype, acc, rect, m, n, algo
    ("f16", "f32", Rect(0, 0, 4, 4), 64, 64, "chain"),
    ("f16", "f16", Rect(1, 1, 3, 3), 50, 37, "tree"),  # uneven tree: within 10 %
    ("bf16", "f32", Rect(1, 0, 3, 4), 50, 37, "chain"),
    ("bf16", "bf16", Rect(2, 0, 2, 4), 20, 29, "chain"),
    ("cb16", "f32", Rect(0, 0, 1, 1), 5, 1, "chain"),  # one PE, one column: no broadcast
    ("cb16", "cb16", Rect(0, 0, 4, 4), 64, 64, "tree"),
]


@pytest.mark.parametrize("dtype, acc, rect, m, n, algo", GEMV_CASES)
def test_gemv_half_bit_exact_and_model(dtype, acc, rect, m, n, algo):
    A, x, b = gaussian(m, m, n), gaussian(n, n), gaussian(m + n, m)
    kernel = gv.build_gemv(CONFIG, rect, m, n, dtype=dtype, algo=algo, acc_dtype=acc)
    assert (kernel.info["dtype"], kernel.info["acc_dtype"]) == (dtype, acc)
    result = run_kernel(kernel, {"A": A, "x": x, "b": b})
    want = gv.gemv_reference(A, x, b, rect.rows, rect.cols, algo, dtype=dtype, acc_dtype=acc)
    np.testing.assert_array_equal(result.output, want)
    even = m % rect.rows == 0 and n % rect.cols == 0
    check_cycles(result, kernel, exact=algo == "chain" or even)
    check_half_efficiency(result, kernel)
    w = CONFIG.simd_width("mul_acc32" if acc == "f32" else "fma", "f16")
    assert kernel.info["bound_cycles"] == kernel.info["block"][0] * kernel.info["block"][1] // w


def test_copy_cycles_and_local_product_widths():
    assert list(copy_cycles([0, 1, 2, 16])) == [1, 4, 5, 33]
    # fmachs at 2 per cycle: 16 rows take 8 cycles, under the 7-instruction loop from 16 on
    assert gv.local_product_cycles(16, 2, 2, 2) == 8 + 2 + (8 + 8 + 1) + 1
    # fmach at 4 per cycle, zeroing 16 bits at 4, widening at 2 (cvt)
    assert gv.local_product_cycles(16, 3, 4, 4, 2) == 4 + 2 + (7 + 4 + 1) + (4 + 1) + 8


def test_half_kernels_sram():
    """A and C take half-words; the B scalars (bs) one word each, as fp32 B does, plus the
    16-bit B block; an fp32 accumulator adds the 16-bit C. Cannon, 32 x 32 blocks, two
    panels each: fp32 2048 (A) + 2048 (B) + 1024 (C) words; 16-bit 1024 + 2048 + 512 (bbuf)
    + 512 (C), + 1024 (acc)."""
    size = {(dtype, acc): build_gemm_cannon(CONFIG, Rect(0, 0, 2, 2), 64, 64, 64, dtype=dtype,
                                            acc_dtype=acc).info["sram_bytes_per_pe"]
            for dtype, acc in (("f32", "f32"), ("f16", "f32"), ("f16", "f16"))}
    assert size["f16", "f32"] == size["f32", "f32"]  # same schedule table in all three
    assert size["f32", "f32"] - size["f16", "f16"] == 4 * 1024


def test_format_errors_name_kernel_and_parameter():
    rect = Rect(0, 0, 2, 2)
    for name, build in (("gemm_summa", build_gemm_summa), ("gemm_cannon", build_gemm_cannon)):
        with pytest.raises(ValueError, match=f"{name}: dtype must be one of"):
            build(CONFIG, rect, 8, 8, 8, dtype="f64")
        with pytest.raises(ValueError, match=f"{name}: acc_dtype must be 'f32' or the dtype"):
            build(CONFIG, rect, 8, 8, 8, dtype="f16", acc_dtype="bf16")
        with pytest.raises(ValueError, match=f"{name}: acc_dtype"):
            build(CONFIG, rect, 8, 8, 8, acc_dtype="f16")  # fp32 data, 16-bit sums
    with pytest.raises(ValueError, match="gemv: acc_dtype"):
        gv.build_gemv(CONFIG, rect, 8, 8, dtype="cb16", acc_dtype="f16")
    # the copy of B into bs takes one more color than fp32 SUMMA
    with pytest.raises(ValueError, match="needs 25 colors"):
        build_gemm_summa(FabricConfig.small(12, 12), Rect(0, 0, 12, 12), 12, 12, 12,
                         dtype="bf16")
    with pytest.raises(ValueError, match="needs 5 distinct colors"):
        build_gemm_summa(CONFIG, rect, 8, 8, 8, dtype="f16", colors=[0, 1, 2, 3])
