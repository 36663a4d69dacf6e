"""A GEMM spread over several tiles in pipelined mode (frontend/gemm_split.py): planned only
where the colors bound its single tile, each part faster by the kernel's model, and the
split model's outputs those of eager PyTorch and of the sequential mode."""

import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend.gemm_split import MIN_SAVING, best_tile, column_parts
from frontend.tile_shapes import summa_tile_colors

WIDE = FabricConfig.small(20, 20)  # wide enough for a color-bound SUMMA tile (R + C = 20)


def test_small_fabric_keeps_one_tile():
    # 12 x 12: a tile of the GEMM's share (36 PEs) never needs 20 colors
    parts = column_parts(FabricConfig.small(12, 12))
    assert [parts(*s) for s in [(32, 64, 192), (32, 64, 64), (4, 16, 16)]] == [1, 1, 1]


@pytest.mark.parametrize("shape", [(32, 64, 64), (32, 64, 192), (16, 32, 96)])
def test_split_where_colors_bind(shape):
    m, k, n = shape
    count = column_parts(WIDE)(m, k, n)
    assert count > 1
    budget = WIDE.num_pes // 4
    single = best_tile(WIDE, m, k, n, budget)
    # the single tile uses (almost) every color: more PEs in one tile are not to be had
    assert summa_tile_colors(*single[1:]) >= len(WIDE.program_colors) - 1
    part = best_tile(WIDE, m, k, -(-n // count), budget // count)
    assert part[0] <= (1 - MIN_SAVING) * single[0]
    assert count * part[1] * part[2] <= budget


def test_small_gemm_not_split():
    # a 32 x 16 by 16 x 32 GEMM (a bmm's batch entry in TinyGPT) fits a tile of few colors
    assert column_parts(WIDE)(32, 16, 32) == 1


def test_split_linear_matches_eager_and_sequential():
    torch.manual_seed(0)
    # the ReLU first: A reaches the parts by moves from its tile, which run at once (the
    # host would write an input into each part's tile in turn on its one link)
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU())
    model.eval()
    x = torch.randn(32, 64)
    piped = frontend.compile(model, (x,), config=WIDE, mode="pipelined", colors="report")
    names = [s.name for s in piped.lowered.stages if s.kind == "gemm_summa"]
    parts = column_parts(WIDE)(32, 64, 64)  # 3 under the bank read-pair rule
    assert parts > 1 and names == [f"addmm_n{i}" for i in range(parts)]
    seq = frontend.compile(model, (x,), config=WIDE, mode="sequential")
    assert [s.name for s in seq.lowered.stages if s.kind == "gemm_summa"] == ["addmm"]
    rows = piped.validate(x)  # every node, the split addmm's too, within tolerance
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        want = model(x)
    got = piped.outputs()
    torch.testing.assert_close(got, want)
    # each part sums its columns over k in the same order as the single tile's PEs do
    # where their K splits agree; fp32 rounding otherwise, inside assert_close's tolerance
    torch.testing.assert_close(got, seq(x))
    # the parts run at once: the GEMM's stages overlap in the timeline, and the rate of the
    # slowest is below the single tile's cycles in sequential mode
    spans = [piped.timeline.spans[0][name].run for name in names]
    assert max(s.start for s in spans) < min(s.end for s in spans)
    single = next(p.kernel for p in seq.prepared if p.kernel.name == "gemm_summa")
    assert max(s.end - s.start for s in spans) <= (1 - MIN_SAVING) * single.model_cycles


def test_split_linear_in_mixed_precision():
    # autocast runs the linear in float16: each column block a 16-bit SUMMA (one color
    # more per tile), every node within its 16-bit tolerance
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(64, 64)).eval()
    x = torch.randn(32, 64)
    cm = frontend.compile(model, (x,), config=WIDE, mode="pipelined", colors="report",
                          precision="mixed", half="float16")
    blocks = [s for s in cm.lowered.stages if s.kind == "gemm_summa"]
    parts = column_parts(WIDE)(32, 64, 64)
    assert parts > 1 and [s.name for s in blocks] == [f"addmm_n{i}" for i in range(parts)]
    assert {s.dtype for s in blocks} == {"f16"}
    rows = cm.validate(x)
    assert rows and all(r.ok for r in rows)
