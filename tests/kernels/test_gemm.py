"""GEMM kernels (SUMMA and Cannon on a folded ring) against numpy and their cycle models.

Numerics: the kernels sum every C element over k one fma at a time in a known order
(k = 0 .. K-1 for SUMMA; from block (i + j) mod P on for Cannon). With inputs whose products
are exact in fp32 (11-bit integers times powers of two), whether an fma rounds once or twice
makes no difference, so the result must equal the numpy fp32 reference in that order bit
for bit: any reordering, lost or repeated term shows. Gaussian inputs are checked against
float64 numpy within the worst-case bound of a K-term fp32 dot product,
gamma_K * (|A| @ |B|) with gamma_K = K u / (1 - K u), u = 2^-24.

Every program here fits one engine executable (one config, one table bucket).
"""

import numpy as np
import pytest

from fabric import FabricConfig, Rect, Simulator
from fabric.build import build
from fabric.kernels.base import run_kernel
from fabric.kernels.gemm_cannon import (
    build_gemm_cannon,
    cannon_order,
    cannon_reference,
    fold,
    ring_colors,
    ring_flows,
)
from fabric.kernels.gemm_common import CHAIN_CYCLES
from fabric.kernels.gemm_summa import build_gemm_summa, summa_reference, summa_steps

CONFIG = FabricConfig.small(4, 4)
MODEL_TOLERANCE = 0.05  # the models land within 0.1 % on these sizes (`gemm_cycles`)


def exact_product_data(rng, shape):
    """fp32 values m * 2^e with |m| < 2^11: every product of two is exact in fp32."""
    mant = rng.integers(-2**11, 2**11, shape)
    return (mant * 2.0 ** rng.integers(-8, 8, shape)).astype(np.float32)


def assert_within_dot_bound(c, a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    u = 2.0**-24
    k = a.shape[1]
    gamma = k * u / (1 - k * u)
    bound = gamma * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    assert (err <= bound).all(), f"max error {err.max():.3g}, worst ratio {(err / bound).max()}"


def run(kernel, a, b):
    return run_kernel(kernel, {"A": a, "B": b})


# ---- SUMMA ------------------------------------------------------------------------------------
@pytest.mark.parametrize("rect, m, k, n", [
    (Rect(0, 0, 2, 2), 32, 32, 32),  # 16 x 16 blocks, two steps
    (Rect(0, 0, 3, 4), 50, 37, 45),  # non-square, uneven M, N and K splits: 6 merged steps
])
def test_summa_exact_order_and_cycles(rect, m, k, n):
    rng = np.random.default_rng(m + k + n)
    a, b = exact_product_data(rng, (m, k)), exact_product_data(rng, (k, n))
    kernel = build_gemm_summa(CONFIG, rect, m, k, n)
    result = run(kernel, a, b)
    np.testing.assert_array_equal(result.output, summa_reference(a, b))
    assert abs(result.cycles - kernel.model_cycles) <= MODEL_TOLERANCE * kernel.model_cycles, (
        result.cycles, kernel.model_cycles)
    assert result.stats.consumed == result.stats.injected + result.stats.forked


def test_summa_gaussian_on_an_offset_rectangle_with_single_column_blocks():
    """2 x 3 PEs at (1, 1) of the fabric; N = 4 over 3 columns gives blocks of 2, 1, 1
    columns (PEs with Nb = 1 issue their fmas from one chain)."""
    rng = np.random.default_rng(1)
    m, k, n = 7, 9, 4
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    kernel = build_gemm_summa(CONFIG, Rect(1, 1, 2, 3), m, k, n)
    result = run(kernel, a, b)
    assert_within_dot_bound(result.output, a, b)
    np.testing.assert_allclose(result.output, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    ea, eb = exact_product_data(rng, (m, k)), exact_product_data(rng, (k, n))
    np.testing.assert_array_equal(run(kernel, ea, eb).output, summa_reference(ea, eb))


def test_summa_steps_merge_both_k_splits():
    # K = 10 over 4 columns (3, 3, 2, 2) and 3 rows (4, 3, 3)
    assert summa_steps(10, 3, 4) == [(0, 3, 0, 0), (3, 4, 1, 0), (4, 6, 1, 1), (6, 7, 2, 1),
                                     (7, 8, 2, 2), (8, 10, 3, 2)]
    assert [s[:2] for s in summa_steps(64, 4, 4)] == [(0, 16), (16, 32), (32, 48), (48, 64)]


# ---- small blocks: the models against simulation ---------------------------------------------
# The frontend's GEMMs have blocks of a few rows, where the main thread paces the kernel (the
# chains' 12 cycles per fma, then each comm op's dispatch, wavelets and wait for its partner):
# the models follow that path within 0.5 % on these shapes. 5 % is the bound the placement
# needs (a model 25 % off misplaces) and leaves room for the datapath's path, which the
# 64-row case takes (within 1 %).
SMALL_BLOCK_TOLERANCE = 0.05


@pytest.mark.parametrize("kind, rect, m, k, n, with_c0", [
    ("summa", Rect(0, 0, 1, 2), 2, 4, 4, False),  # 1 x 2 blocks, 4 one-row steps
    ("summa", Rect(0, 0, 1, 4), 4, 16, 32, False),  # one row: A multicasts only
    ("summa", Rect(0, 0, 2, 2), 8, 8, 8, True),
    ("summa", Rect(0, 0, 3, 3), 9, 9, 9, False),
    ("summa", Rect(0, 0, 2, 4), 8, 32, 64, True),
    ("summa", Rect(0, 0, 4, 4), 4, 64, 4, False),  # 1 x 1 blocks: one chain, 16 ops a group
    ("summa", Rect(0, 0, 3, 4), 17, 23, 47, True),  # uneven blocks and K steps
    ("summa", Rect(0, 0, 1, 4), 64, 16, 32, False),  # 64 rows: the datapath's path
    ("cannon", Rect(0, 0, 3, 3), 12, 24, 30, False),  # odd ring: sends wait for receivers
    ("cannon", Rect(0, 0, 4, 4), 16, 16, 16, True),
])
def test_models_hold_for_small_blocks(kind, rect, m, k, n, with_c0):
    rng = np.random.default_rng(m + k + n)
    inputs = {"A": rng.standard_normal((m, k), dtype=np.float32),
              "B": rng.standard_normal((k, n), dtype=np.float32)}
    if with_c0:
        inputs["C0"] = rng.standard_normal((m, n), dtype=np.float32)
    build = build_gemm_summa if kind == "summa" else build_gemm_cannon
    kernel = build(CONFIG, rect, m, k, n, with_c0=with_c0)
    result = run_kernel(kernel, inputs)
    model = kernel.model_cycles
    assert abs(result.cycles - model) <= SMALL_BLOCK_TOLERANCE * model, (result.cycles, model)


# ---- Cannon -----------------------------------------------------------------------------------
@pytest.mark.parametrize("rect, m, k, n", [
    (Rect(0, 0, 2, 2), 32, 32, 32),
    (Rect(1, 0, 3, 3), 40, 29, 35),  # offset rectangle, uneven splits, odd ring
])
def test_cannon_exact_order_and_cycles(rect, m, k, n):
    rng = np.random.default_rng(m * k + n)
    a, b = exact_product_data(rng, (m, k)), exact_product_data(rng, (k, n))
    kernel = build_gemm_cannon(CONFIG, rect, m, k, n)
    result = run(kernel, a, b)
    np.testing.assert_array_equal(result.output, cannon_reference(a, b, rect.rows))
    assert abs(result.cycles - kernel.model_cycles) <= MODEL_TOLERANCE * kernel.model_cycles, (
        result.cycles, kernel.model_cycles)


def test_cannon_gaussian_4x4():
    rng = np.random.default_rng(2)
    m, k, n = 9, 8, 11
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    kernel = build_gemm_cannon(CONFIG, Rect(0, 0, 4, 4), m, k, n)
    result = run(kernel, a, b)
    assert_within_dot_bound(result.output, a, b)
    np.testing.assert_allclose(result.output, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


# ---- an initial accumulator C0 (C = C0 + A @ B) ----------------------------------------------
@pytest.mark.parametrize("kind, rect, m, k, n", [
    ("summa", Rect(0, 0, 2, 2), 32, 32, 32),
    ("summa", Rect(0, 0, 3, 4), 50, 37, 45),  # non-square, uneven M, N and K blocks
    ("cannon", Rect(1, 0, 3, 3), 40, 29, 35),  # offset, uneven blocks, odd ring
])
def test_c0_starts_the_sums_and_saves_the_zeroing(kind, rect, m, k, n):
    """C0 + A @ B, each element summed from its C0 word in the kernel's k order: bit for bit
    with exact products (fp32 C0 of any value; its sums round as the reference's do), a
    bias row broadcast over the m rows too. Against the same kernel without C0, the
    simulated cycles drop by exactly what the model drops: the zeroing mov of ceil(Mb Nb /
    w_mov) cycles (zero_c's 8 stay)."""
    rng = np.random.default_rng(m + 2 * k + n)
    a, b = exact_product_data(rng, (m, k)), exact_product_data(rng, (k, n))
    c0 = rng.standard_normal((m, n), dtype=np.float32)
    bias = np.broadcast_to(rng.standard_normal(n, dtype=np.float32), (m, n))
    build = build_gemm_summa if kind == "summa" else build_gemm_cannon
    plain, fused = build(CONFIG, rect, m, k, n), build(CONFIG, rect, m, k, n, with_c0=True)
    assert fused.info["with_c0"] and not plain.info["with_c0"]

    def reference(init):
        if kind == "summa":
            return summa_reference(a, b, c0=init)
        return cannon_reference(a, b, rect.rows, c0=init)

    base = run(plain, a, b)
    for init in (c0, bias):
        result = run_kernel(fused, {"A": a, "B": b, "C0": init})
        np.testing.assert_array_equal(result.output, reference(init))
        assert abs(result.cycles - fused.model_cycles) <= MODEL_TOLERANCE * fused.model_cycles
        mb, nb = fused.info["block"]
        saved = -(-mb * nb // CONFIG.simd_width("mov", "f32"))
        assert base.cycles - result.cycles == plain.model_cycles - fused.model_cycles == saved
    # gaussian A and B: within the dot-product bound of [A | C0] @ [B ; I] (C0 as terms of
    # weight 1, a K + N term bound, looser than the K + 1 terms each element sums)
    ga, gb = (rng.standard_normal(s, dtype=np.float32) for s in ((m, k), (k, n)))
    got = run_kernel(fused, {"A": ga, "B": gb, "C0": c0}).output
    assert_within_dot_bound(got, np.hstack([ga, c0]),
                            np.vstack([gb, np.eye(n, dtype=np.float32)]))
    with pytest.raises(ValueError, match="expects C0"):
        fused.load(Simulator(CONFIG, fused.program), {"A": a, "B": b, "C0": c0[:, :-1]})


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 11, 40])  # 40: colored greedily
def test_folded_ring_neighbours_and_colors(p):
    pos = fold(p)
    assert sorted(pos) == list(range(p))
    assert all(abs(pos[l] - pos[(l + 1) % p]) <= 2 for l in range(p))
    flows, colors = ring_flows(p), ring_colors(p)
    assert max(colors) + 1 <= 3
    routers = [set(range(min(s, d), max(s, d) + 1)) for s, d in flows]
    for f in range(p):
        for g in range(f):
            if routers[f] & routers[g]:
                assert colors[f] != colors[g]
    # every link carries one flow per direction
    for direction in (1, -1):
        links = [x for s, d in flows if (d - s) * direction > 0
                 for x in range(min(s, d), max(s, d))]
        assert len(links) == len(set(links))


def test_cannon_order_starts_at_the_skewed_block():
    ks = [(0, 3), (3, 3), (6, 2)]
    assert cannon_order(1, 1, ks) == [6, 7, 0, 1, 2, 3, 4, 5]


# ---- errors, tables ---------------------------------------------------------------------------
def test_blocks_too_big_for_sram():
    with pytest.raises(ValueError, match=r"48 KiB.*") as err:
        build_gemm_summa(CONFIG, Rect(0, 0, 2, 2), 160, 160, 160)
    assert "abuf" in str(err.value) and "m=160" in str(err.value)
    with pytest.raises(ValueError, match="48 KiB"):
        build_gemm_cannon(CONFIG, Rect(0, 0, 2, 2), 200, 200, 200)


def test_bad_shapes():
    with pytest.raises(ValueError, match="square"):
        build_gemm_cannon(CONFIG, Rect(0, 0, 2, 3), 8, 8, 8)
    with pytest.raises(ValueError, match="m >= 3"):
        build_gemm_summa(CONFIG, Rect(0, 0, 3, 2), 2, 8, 8)
    with pytest.raises(ValueError, match="dtype must be one of"):
        build_gemm_summa(CONFIG, Rect(0, 0, 2, 2), 8, 8, 8, dtype="f64")
    with pytest.raises(ValueError, match="needs 4 distinct colors"):
        build_gemm_summa(CONFIG, Rect(0, 0, 2, 2), 8, 8, 8, colors=[0, 1])
    with pytest.raises(ValueError, match="needs 26 colors"):
        build_gemm_summa(FabricConfig.small(13, 13), Rect(0, 0, 13, 13), 13, 13, 13)
    kernel = build_gemm_summa(CONFIG, Rect(0, 0, 2, 2), 8, 8, 8)
    with pytest.raises(ValueError, match="expects A"):
        kernel.load(Simulator(CONFIG, kernel.program), {"A": np.zeros((8, 7)), "B": np.zeros(8)})


def test_programs_share_one_engine_bucket():
    """The programs of this module fit one instruction and one DSD bucket (one compile)."""
    shapes = set()
    for kernel in (build_gemm_summa(CONFIG, Rect(0, 0, 4, 4), 8, 8, 8),
                   build_gemm_summa(CONFIG, Rect(0, 0, 2, 2), 8, 8, 8),
                   build_gemm_cannon(CONFIG, Rect(0, 0, 4, 4), 8, 8, 8),
                   build_gemm_cannon(CONFIG, Rect(0, 0, 2, 2), 8, 8, 8)):
        tables, _ = build(CONFIG, kernel.program)
        shapes.add((tables.instr.shape, tables.dsd.shape))
    assert len(shapes) == 1, shapes
    assert CHAIN_CYCLES < 16  # 16-row blocks keep the datapath, not the main thread, busy
