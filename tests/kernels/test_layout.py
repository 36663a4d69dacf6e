"""WordMap and the probes of kernel layouts (no engine run: the probes only build programs
and touch SRAM on the host, so these tests compile nothing).

Every probed map is checked against the kernel itself: a random tensor loaded by the
kernel's `load` is read back through the map bit for bit, and words written through an
output map come back from the kernel's `read` unchanged.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric import FabricConfig, Rect, Simulator
from fabric.kernels import (
    build_broadcast_op,
    build_elementwise,
    build_gemm_cannon,
    build_gemm_summa,
    build_gemv,
    build_softmax,
)
from fabric.kernels.base import Blocks
from fabric.kernels.layout import (
    WordMap,
    probe_inputs,
    probe_output,
    read_words,
    write_words,
)

CONFIG = FabricConfig.small(6, 6)


def _random(shapes: dict, seed: int) -> dict:
    gen = np.random.default_rng(seed)
    return {k: gen.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def check_kernel_maps(kernel, shapes: dict, seed: int = 0) -> dict:
    """Probe every input and the output; loading random inputs and reading the words the
    maps name gives them back, and writing a tensor through the output map gives it back
    from `read`. Returns the input maps."""
    maps = probe_inputs(kernel, shapes)
    values = _random(shapes, seed)
    sim = Simulator(kernel.config, kernel.program)
    kernel.load(sim, values)
    for name, wmap in maps.items():
        assert wmap.shape == tuple(shapes[name])
        assert (wmap.coverage() >= 1).all(), f"{kernel.name}: {name} has unplaced elements"
        got = wmap.from_words(read_words(sim, wmap))
        np.testing.assert_array_equal(got, values[name])
    out = probe_output(kernel)
    assert (out.coverage() == 1).all()
    y = np.random.default_rng(seed + 1).standard_normal(out.shape).astype(np.float32)
    sim = Simulator(kernel.config, kernel.program)
    write_words(sim, out, out.to_words(y))
    np.testing.assert_array_equal(kernel.read(sim), y)
    return maps


def test_elementwise_blocks():
    rect = Rect(1, 2, 2, 2)
    k = build_elementwise(CONFIG, rect, 5, 3, "add")
    maps = check_kernel_maps(k, {"x": (5, 3), "y": (5, 3)})
    # the map is the documented 2D block layout: PE (p, q) holds its block row major
    index = np.arange(15).reshape(5, 3)
    layout = Blocks.of(rect, 5, 3)
    for cls in layout.classes():
        blocks = layout.scatter(index)[cls.pes][..., :cls.size].astype(np.int64)
        r, c = cls.rect.row - rect.row, cls.rect.col - rect.col
        got = maps["x"].symbols["x"][r:r + cls.rect.rows, c:c + cls.rect.cols, :blocks.shape[2]]
        np.testing.assert_array_equal(got, blocks)
    assert maps["x"].elements_per_pe().tolist() == [[6, 3], [4, 2]]  # 3 + 2 rows, 2 + 1 cols


def test_broadcast_row_vector_is_duplicated_down_columns():
    k = build_broadcast_op(CONFIG, Rect(0, 0, 3, 2), 6, 5, "add", vector="row")
    maps = check_kernel_maps(k, {"x": (6, 5), "v": (5,)}, seed=1)
    v = maps["v"]
    assert v.coverage().tolist() == [3] * 5  # every element on each of the 3 rows
    held = v.symbols["v"]
    for c in range(2):  # every PE of a column holds the same words
        assert all(np.array_equal(held[r, c], held[0, c]) for r in range(3))


def test_gemv_maps():
    k = build_gemv(CONFIG, Rect(0, 0, 2, 3), 6, 7)
    maps = check_kernel_maps(k, {"A": (6, 7), "x": (7,), "b": (6,)}, seed=2)
    assert set(maps["A"].symbols) == {"A"} and set(maps["x"].symbols) == {"x"}
    assert probe_output(k).shape == (6,)


@pytest.mark.parametrize("builder, rect", [(build_gemm_summa, Rect(0, 1, 2, 3)),
                                           (build_gemm_cannon, Rect(2, 2, 3, 3))])
def test_gemm_maps(builder, rect):
    k = builder(CONFIG, rect, 6, 5, 7)
    maps = check_kernel_maps(k, {"A": (6, 5), "B": (5, 7)}, seed=3)
    assert set(maps["A"].symbols) == {"abuf"} and set(maps["B"].symbols) == {"bbuf"}
    assert set(probe_output(k).symbols) == {"c"}


def test_softmax_maps():
    k = build_softmax(CONFIG, Rect(0, 0, 2, 3), 6, 7)
    maps = check_kernel_maps(k, {"x": (6, 7)}, seed=4)
    # softmax works in place: the output lives where the input was loaded
    assert probe_output(k).same_placement(maps["x"])


def test_compose_is_a_transpose():
    k = build_elementwise(CONFIG, Rect(0, 0, 2, 2), 4, 6)
    ymap = probe_output(k)  # y of shape (4, 6) = x.T for x of shape (6, 4)
    xmap = ymap.compose(np.arange(24).reshape(6, 4).T, (6, 4))
    x = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    np.testing.assert_array_equal(ymap.from_words(xmap.to_words(x)), x.T)


# ---- errors ----------------------------------------------------------------------------------
def test_probe_rejects_a_load_that_computes():
    k = build_elementwise(CONFIG, Rect(0, 0, 2, 2), 4, 4)
    plain = k.load

    def doubling(sim, inputs):
        plain(sim, {**inputs, "y": np.asarray(inputs["y"]) * 2})

    bad = dataclasses.replace(k, load=doubling)
    with pytest.raises(ValueError, match=r"input 'y'.*symbol 'y'.*computes"):
        probe_inputs(bad, {"x": (4, 4), "y": (4, 4)})


def test_probe_rejects_a_load_that_writes_outside_its_symbols():
    """A word written beside every symbol of the tile (its PEs' last word) is named with
    its PE, on a tile away from the fabric's corner; the plain load passes."""
    rect = Rect(1, 1, 2, 2)
    k = build_elementwise(CONFIG, rect, 4, 4)
    probe_inputs(k, {"x": (4, 4), "y": (4, 4)})
    plain = k.load

    def stray(sim, inputs):
        plain(sim, inputs)
        if np.asarray(inputs["x"]).any():  # the probe's batches, not its zeros load
            sim.host_sram()[2, 1, -1] = 7

    with pytest.raises(ValueError, match=rf"word {CONFIG.sram_words - 1} of PE \(2, 1\), "
                                         r"outside every symbol"):
        probe_inputs(dataclasses.replace(k, load=stray), {"x": (4, 4), "y": (4, 4)})


def test_probe_rejects_a_read_that_computes_and_huge_inputs():
    k = build_elementwise(CONFIG, Rect(0, 0, 2, 2), 4, 4)
    plain = k.read
    bad = dataclasses.replace(k, read=lambda sim: plain(sim) + np.float32(0.5))
    with pytest.raises(ValueError, match="read computes"):
        probe_output(bad)
    with pytest.raises(ValueError, match=r"'x' has 16777216 elements"):
        probe_inputs(k, {"x": (4096, 4096)})


def test_wordmap_validation():
    rect = Rect(0, 0, 1, 2)
    with pytest.raises(ValueError, match=r"symbol 'a'.*holds element 6, outside -1..5"):
        WordMap((2, 3), rect, {"a": np.array([[[0, 1, 2], [3, 4, 6]]])})
    with pytest.raises(ValueError, match=r"array shape \(2, 3\)"):
        WordMap((6,), rect, {"a": np.zeros((2, 3), np.int64)})
    with pytest.raises(ValueError, match="no symbols"):
        WordMap((6,), rect, {})
    m = WordMap((2, 2), rect, {"a": np.array([[[0, -1], [1, 3]]])})
    assert m.missing().tolist() == [2]
    with pytest.raises(ValueError, match=r"elements \[2\]"):
        m.from_words({"a": np.zeros((1, 2, 2), np.uint32)})
