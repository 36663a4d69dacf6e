"""A GEMM spread over several tiles in pipelined mode (frontend/gemm_split.py): planned only
where the colors bound its single tile, each part faster by the kernel's model, and the
split model's outputs those of eager PyTorch and of the sequential mode."""

import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend.gemm_split import MIN_SAVING, best_tile, column_parts
from frontend.lowering.common import column_blocks
from frontend.tile_shapes import summa_tile_colors
from frontend.values import Const, Ref, Tensor

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


@pytest.fixture(scope="module")
def split_linear():
    """(model, x, its pipelined compile): a linear layer between two ReLUs on WIDE."""
    torch.manual_seed(0)
    # the ReLU first: A reaches the parts by moves from its tile, which run at once (the
    # host would write an input into each part's tile in turn on its one link)
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU())
    model.eval()
    x = torch.randn(32, 64)
    return model, x, frontend.compile(model, (x,), config=WIDE, mode="pipelined",
                                      colors="report")


def test_split_linear_matches_eager_and_sequential(split_linear):
    model, x, piped = split_linear
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


def test_an_elementwise_op_after_a_split_gemm_runs_per_block_below_each_part():
    """The ReLU after a wide linear layer cut into column blocks: one stage per block, each
    reading its part's whole output and riding below it (one translation each, not a
    relayout of every block into one tile); one stage in sequential mode, where nothing
    is split."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(16, 1024), torch.nn.ReLU())
    model.eval()
    x = torch.randn(4, 16)
    piped = frontend.compile(model, (x,), config=WIDE, mode="pipelined", colors="report")
    parts = column_parts(WIDE)(4, 16, 1024)
    relus = [s for s in piped.lowered.stages if s.node.name == "relu_1"]
    assert parts > 1 and len(relus) == parts
    for i, s in enumerate(relus):
        assert piped.lowered.tensors[f"addmm_n{i}"].in_order(s.operands[0].index)
        assert piped.placement.riders[s.name] == f"addmm_n{i}"
    seq = frontend.compile(model, (x,), config=WIDE, mode="sequential")
    assert len([s for s in seq.lowered.stages if s.node.name == "relu_1"]) == 1
    with torch.no_grad():
        torch.testing.assert_close(piped(x), model(x))
    assert all(r.ok for r in piped.validate(x))


@pytest.mark.parametrize("act", [torch.nn.GELU("tanh"), torch.nn.LeakyReLU(0.1),
                                 torch.nn.Sigmoid()], ids=lambda a: type(a).__name__)
def test_activations_after_a_split_gemm_run_per_block(act):
    """gelu, leaky_relu (an extremum) and a unary function split as relu does (compile
    only: the ReLU's run above checks the values)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 1024), act).eval()
    cm = frontend.compile(model, (torch.randn(4, 16),), config=WIDE, mode="pipelined",
                          colors="report")
    parts = column_parts(WIDE)(4, 16, 1024)
    last = [s for s in cm.lowered.stages if s.kind != "gemm_summa"]
    assert len(last) == parts
    for i, s in enumerate(last):
        assert cm.lowered.tensors[f"addmm_n{i}"].in_order(s.operands[0].index)


class _Lowered:
    """The one field `column_blocks` reads of a lowering: its tensors, by owner."""

    def __init__(self, *tensors):
        self.tensors = tensors

    def owner(self, gid):
        return next(t for t in self.tensors if t.base <= gid < t.base + t.numel)


def test_column_blocks_are_whole_outputs_of_distinct_stages_side_by_side():
    a, b = Tensor("a", 0, (4, 3), "stage"), Tensor("b", 12, (4, 2), "stage")
    low = _Lowered(a, b, Tensor("x", 20, (4, 5), "input"), Tensor("v", 40, (4, 1), "stage"))
    side = Ref(torch.cat([a.ref().index, b.ref().index], 1))
    assert column_blocks(low, [side], (4, 5)) == [(0, 3), (3, 2)]
    # the first value that has blocks gives them; a constant has none
    assert column_blocks(low, [Const(torch.zeros(4, 5)), side], (4, 5)) == [(0, 3), (3, 2)]
    assert column_blocks(low, [low.tensors[2].ref()], (4, 5)) is None  # a user input
    assert column_blocks(low, [Ref(side.index[:, :4])], (4, 4)) is None  # b cut short
    swapped = Ref(torch.cat([a.ref().index.reshape(3, 4).T, b.ref().index], 1))
    assert column_blocks(low, [swapped], (4, 5)) is None  # a's elements out of order
    # one stage's column broadcast over 5 columns: not side by side
    assert column_blocks(low, [Ref(low.tensors[3].ref().index.expand(4, 5))], (4, 5)) is None
    assert column_blocks(low, [Ref(a.ref().index)], (4, 3)) is None  # one block


# small(6, 6) with 5 colors: each GEMM of the chain below is bound by the colors and cut in
# two, 40 stages for 36 PEs
FEW_COLORS = FabricConfig.small(6, 6).replace(num_colors=5, reserved_colors=())


def _chain(layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(layers)]).eval()


def test_a_split_graph_that_does_not_fit_compiles_unsplit():
    """Its GEMMs split, the chain of 20 linear layers needs more tiles than the fabric has
    PEs; unsplit (20 stages) it fits, and compiles so."""
    assert column_parts(FEW_COLORS)(8, 32, 32) == 2
    cm = frontend.compile(_chain(20), (torch.randn(8, 32),), config=FEW_COLORS,
                          colors="report")
    assert [s.kind for s in cm.lowered.stages] == ["gemm_summa"] * 20
    assert not any("_n" in s.name for s in cm.lowered.stages)
    assert len(cm.placement.rects) == 20


def test_a_graph_too_large_even_unsplit_is_refused_for_its_pes():
    with pytest.raises(frontend.PlacementError, match=r"PEs"):
        frontend.compile(_chain(40), (torch.randn(8, 32),), config=FEW_COLORS,
                         colors="report")


def test_a_refused_graph_with_nothing_split_is_lowered_once(monkeypatch):
    """Where no GEMM was split, the graph refused is the unsplit one: it is not lowered
    again to be refused a second time."""
    import frontend.pipelined_fit as pipelined_fit

    calls = []
    lower = pipelined_fit.lower
    monkeypatch.setattr(pipelined_fit, "lower",
                        lambda *a, **k: calls.append(a[2]) or lower(*a, **k))
    small = FabricConfig.small(2, 2)  # 37 stages of one-row GEMMs: no split, too few PEs
    assert column_parts(small)(1, 32, 32) == 1
    with pytest.raises(frontend.PlacementError, match=r"PEs"):
        frontend.compile(_chain(37), (torch.randn(1, 32),), config=small, colors="report")
    assert len(calls) == 1
    calls.clear()  # split GEMMs refused: the unsplit graph is tried too
    with pytest.raises(frontend.PlacementError, match=r"PEs"):
        frontend.compile(_chain(40), (torch.randn(8, 32),), config=FEW_COLORS,
                         colors="report")
    assert len(calls) == 2 and calls[1] is None
