"""The SDK's rule on asynchronous DSD ops (docs/engine.md, "Asynchronous ops need a fabric
operand"): with `FabricConfig.async_memory_ops` False a program whose op on memory alone is
issued asynchronously is refused where it is placed, naming the tile, task, instruction and
the rule; an async op with a fabric operand passes. The GEMM tiles issue their fmas
synchronously there, giving the same words bit for bit (each C element sums its k terms in
the same order) in the cycles their model counts (exact: the chains hold the main thread
through each fma and comm runs after them)."""

import numpy as np
import pytest

from fabric import FabricConfig, Program, Rect, Tile
from fabric import instructions as ins
from fabric.kernels.base import run_kernel
from fabric.kernels.gemm_cannon import build_gemm_cannon
from fabric.kernels.gemm_summa import build_gemm_summa
from fabric.kernels.gemv import build_gemv

STRICT = FabricConfig.small(2, 3, async_memory_ops=False)


def _tile(op) -> Tile:
    tile = Tile("t")
    tile.symbol("x", "f32", 8)
    tile.symbol("y", "f32", 8)
    tile.local_task("main", [ins.set_reg("r", 0), op])
    tile.register("r")
    return tile


def test_an_async_op_on_memory_alone_is_refused_by_the_rule():
    op = ins.add(ins.Mem("y", 0, 8), ins.Mem("x", 0, 8), 1.0, is_async=True)
    with pytest.raises(ValueError) as err:
        Program(STRICT).place(_tile(op), Rect(0, 0, 1, 1))
    text = str(err.value)
    assert "tile 't', task 'main', instruction 1 (add)" in text
    assert "needs a fabric operand" in text and "async_memory_ops=False" in text
    # the presets refuse it too; a fabric without the rule allows it, and so does a strict
    # fabric for the op made synchronous or given a fabric operand
    with pytest.raises(ValueError, match="needs a fabric operand"):
        Program(FabricConfig.small(2, 3)).place(_tile(op), Rect(0, 0, 1, 1))
    Program(FabricConfig.small(2, 3, async_memory_ops=True)).place(_tile(op), Rect(0, 0, 1, 1))
    sync = ins.add(ins.Mem("y", 0, 8), ins.Mem("x", 0, 8), 1.0)
    Program(STRICT).place(_tile(sync), Rect(0, 0, 1, 1))
    send = ins.mov(ins.FabOut(3, 1, 8), ins.Mem("x", 0, 8), is_async=True)
    Program(STRICT).place(_tile(send), Rect(0, 0, 1, 1))


@pytest.mark.parametrize("kind,grid,mkn,dtype", [
    ("summa", (2, 3), (10, 17, 9), "f32"), ("summa", (2, 2), (12, 20, 8), "f16"),
    ("cannon", (2, 2), (8, 12, 2), "f32"), ("cannon", (2, 2), (16, 16, 16), "bf16"),
])
def test_gemm_with_synchronous_fmas_same_words_model_exact(kind, grid, mkn, dtype):
    m, k, n = mkn
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    build = build_gemm_summa if kind == "summa" else build_gemm_cannon
    kw = {} if dtype == "f32" else {"dtype": dtype}
    runs = {}
    for strict in (False, True):
        config = FabricConfig.small(*grid, async_memory_ops=not strict)
        kernel = build(config, Rect(0, 0, *grid), m, k, n, **kw)
        result = run_kernel(kernel, {"A": a, "B": b})
        assert result.cycles == kernel.model_cycles
        runs[strict] = result
    np.testing.assert_array_equal(runs[True].output, runs[False].output)
    assert runs[True].cycles > runs[False].cycles  # the fmas no longer overlap the chains



@pytest.mark.parametrize("grid,mn,dtype,acc", [((2, 3), (10, 17), "f32", "f32"),
                                               ((2, 2), (12, 20), "f16", "f16"),
                                               ((2, 2), (16, 16), "bf16", "f32")])
def test_gemv_with_synchronous_fmas_same_words_model_exact(grid, mn, dtype, acc):
    m, n = mn
    rng = np.random.default_rng(m * n)
    inputs = {"A": rng.standard_normal((m, n)), "x": rng.standard_normal(n),
              "b": rng.standard_normal(m)}
    runs = {}
    for strict in (False, True):
        config = FabricConfig.small(*grid, async_memory_ops=not strict)
        kernel = build_gemv(config, Rect(0, 0, *grid), m, n, dtype=dtype, acc_dtype=acc)
        result = run_kernel(kernel, inputs)
        assert result.cycles == kernel.model_cycles
        runs[strict] = result
    np.testing.assert_array_equal(runs[True].output, runs[False].output)
    assert runs[True].cycles > runs[False].cycles
