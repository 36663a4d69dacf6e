"""Layout-matched tiles in a pipelined placement (`frontend.companions`): an elementwise
stage that reads its GEMM's whole output takes the GEMM's tile shape right below it, so
the move between them is one color; kept only where the balance's rate does not suffer.
Compile only, but for the one program of the stacked MLP."""

import numpy as np
import pytest
import torch

import frontend
from fabric import FabricConfig, Rect
from frontend import gemm_split
from frontend.architectures import build, fabric_config
from frontend.companions import Groups, companion_groups, pack_groups, riders
from frontend.graph_colors import graph_colors
from frontend.lowering import common
from frontend.move_bounds import critical_path, edge_words, rate_bound
from frontend.placement import WAY_SLACK, place
from frontend.runtime import prepare
from tests.frontend.models import CONFIG, MLP, TinyGPT, lenet_with_statistics

# Which stages ride is a matter of the stages' cycles: the scenarios below (a rider that
# would lengthen the way, slow the rate, or spare a move) were laid out where the GEMMs'
# fmas run async beside their chains; with them synchronous (the presets, the SDK's rule)
# the GEMMs take longer and other riders pay. The mechanisms are the same on either.
OVERLAPPED = CONFIG.replace(async_memory_ops=True)


def _mlp():
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(3, 16)
    return frontend.compile(model, (x,), CONFIG), model, x


def _colors(cm, stack: str):
    placement = place(cm.lowered.stages, CONFIG, cm.edges, balance="cycles", stack=stack)
    prepared = prepare(cm.lowered.stages, placement.rects, cm.lowered.tensors, CONFIG)
    return placement, graph_colors(prepared, CONFIG, "report")


def test_an_elementwise_stage_rides_below_its_gemm_on_one_color():
    cm, _, _ = _mlp()
    rects = cm.placement.rects
    gemm, relu = rects["addmm"], rects["relu_relu"]
    assert relu == Rect(gemm.row + gemm.rows, gemm.col, gemm.rows, gemm.cols)
    assert len(cm.colors.edge_colors("addmm", "relu_relu")) == 1
    # the scale rides below the second GEMM, whose output it reads whole, and the residual
    # add below the scale
    second = rects["addmm_1"]
    for k, name in enumerate(("mul_mul", "add_add"), start=1):
        assert rects[name] == Rect(second.row + k * second.rows, second.col, second.rows,
                                   second.cols)
    # balanced apart, the same model's moves need more colors than the fabric has
    plain, apart = _colors(cm, stack="off")
    assert plain.rects != cm.placement.rects
    assert apart.assignment.needed > len(CONFIG.program_colors) >= cm.colors.assignment.needed
    assert max(cm.placement.predicted.values()) <= max(plain.predicted.values())
    assert cm.placement.riders == {"relu_relu": "addmm", "mul_mul": "addmm_1",
                                   "add_add": "addmm_1"} and not plain.riders
    cm(torch.randn(3, 16))
    assert "relu_relu" in next(line for line in cm.report().splitlines()
                               if "(below addmm, on its tile shape)" in line)


def test_the_stacked_mlp_runs_as_one_program():
    """Its colors fit: one fabric program, the words of the parts run apart, bit for bit."""
    cm, model, x = _mlp()
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x))
    run = cm.one_program(x)
    for p in cm.prepared:
        for k, w in run.words[0][p.stage.name].items():
            np.testing.assert_array_equal(w, cm.last.words[p.stage.name][k])
    assert run.same_words(0, cm.last.words)
    other = {s: {k: w + 1 for k, w in ws.items()} for s, ws in cm.last.words.items()}
    assert not run.same_words(0, other)
    assert not run.same_words(0, {"no such stage": {"z": np.zeros(1)}})


@pytest.mark.parametrize("act", [torch.nn.GELU("tanh"), torch.nn.Tanh(), torch.nn.Sigmoid(),
                                 torch.nn.LeakyReLU(0.1)], ids=lambda a: type(a).__name__)
def test_activations_in_blocks_ride_too(act):
    """gelu, the unary functions and leaky_relu lay their blocks out as relu does
    (`Blocks.of`): below a GEMM they ride it where riders are judged by the rate alone.
    On the GEMM's 1 x 8 tile the activation takes several times the cycles it takes on a
    tile of its own, which the spare PEs give it (tanh 1,074 against 109), so judged by
    one sample's way through the pipeline as well (the default) it stays apart: the same
    rate, a shorter way."""
    torch.manual_seed(0)
    cm = frontend.compile(torch.nn.Sequential(torch.nn.Linear(16, 32), act).eval(),
                          (torch.randn(8, 16),), OVERLAPPED)
    stages = cm.lowered.stages
    last = stages[-1].name
    by_rate = place(stages, OVERLAPPED, cm.edges, balance="cycles", stack="rate")
    assert by_rate.riders == {last: "addmm"}
    gemm = by_rate.rects["addmm"]
    assert by_rate.rects[last] == Rect(gemm.row + gemm.rows, gemm.col, gemm.rows, gemm.cols)
    assert not cm.placement.riders
    assert cm.placement.rects == place(stages, OVERLAPPED, cm.edges, balance="cycles",
                                       stack="off").rects
    words = edge_words(stages, cm.edges)
    names = [s.name for s in stages]

    def way(p):
        return critical_path(names, p.predicted, p.rects, words)

    assert rate_bound(by_rate.predicted, by_rate.rects, words) == rate_bound(
        cm.placement.predicted, cm.placement.rects, words)
    assert way(cm.placement)[0] < way(by_rate)[0]
    assert way(cm.placement)[1] == ["addmm", last]
    assert cm.placement.predicted[last] * 3 < by_rate.predicted[last]


def test_riders_that_lengthen_the_way_stay_apart():
    """GPT-J on small(12, 12): judged by the rate alone, three stages ride their GEMMs
    at the same period; on their roots' tiles they make one sample's way through the
    pipeline 11 % longer (the timeline's latency 27,625 cycles against 24,955), so by
    default they stay apart. A `stack` of another name is refused."""
    pytest.importorskip("transformers")
    model, inputs = build("gptj")
    config = fabric_config("gptj").replace(async_memory_ops=True)
    cm = frontend.compile(model, inputs, config=config)
    stages = cm.lowered.stages
    by_rate = place(stages, config, cm.edges, balance="cycles", stack="rate")
    assert len(by_rate.riders) == 3 and not cm.placement.riders
    assert cm.placement.left_for_way and not by_rate.left_for_way
    words = edge_words(stages, cm.edges)
    names = [s.name for s in stages]
    assert rate_bound(by_rate.predicted, by_rate.rects, words) == rate_bound(
        cm.placement.predicted, cm.placement.rects, words)
    way = critical_path(names, cm.placement.predicted, cm.placement.rects, words)[0]
    assert way * (1 + WAY_SLACK) < critical_path(names, by_rate.predicted, by_rate.rects,
                                                 words)[0]
    with pytest.raises(ValueError, match="stack must be one of 'latency', 'rate', 'off'"):
        place(stages, config, cm.edges, balance="cycles", stack="yes")


def test_a_relayout_is_no_ride():
    """LeNet's batch norm reads the convolution's output in another order (channels
    first): it rides nothing; the relu after it could ride the batch norm's affine stage,
    but a group has a GEMM at its root."""
    torch.manual_seed(0)
    cm = frontend.compile(lenet_with_statistics().eval(), (torch.randn(2, 1, 8, 8),), CONFIG,
                          mode="sequential")
    stages = cm.lowered.stages
    hosts = riders(stages)
    norm = "_native_batch_norm_legit_no_training_affine"
    assert norm not in hosts
    assert hosts["relu_relu"] == [norm]
    names = [s.name for s in stages]
    roots = {names[r]: names[root] for r, root in companion_groups(stages, CONFIG).roots.items()}
    assert roots == {"add_add": "addmm"}


@pytest.mark.parametrize("bank_aware", [False, True], ids=["declared", "bank_aware"])
def test_riders_that_would_slow_the_pipeline_stay_apart(bank_aware, monkeypatch):
    """TinyGPT's residual adds ride its projections only if the balance loses no rate.
    With its SUMMA tiles in their declared layout (every fma element waiting on the
    read-pair rule) it would, so the tiles are the plain balance's; laid out bank-aware,
    as the frontend builds them, its gelus on their GEMMs' shapes would be the slowest
    stages: they are left apart, one balance at a time, and the adds ride."""
    for module in (common, gemm_split):
        monkeypatch.setattr(module, "SUMMA_BANK_AWARE", bank_aware)
    torch.manual_seed(0)
    cm = frontend.compile(TinyGPT().eval(), (torch.randint(0, 32, (2, 4)),), OVERLAPPED)
    stages = cm.lowered.stages
    assert companion_groups(stages, OVERLAPPED).roots  # riders exist
    plain = place(stages, OVERLAPPED, cm.edges, balance="cycles", stack="off")
    if bank_aware:
        assert cm.placement.riders and cm.placement.rects != plain.rects
        gelus = {s.name for s in stages if s.kind == "gelu"}
        could = {stages[i].name for i in companion_groups(stages, OVERLAPPED).roots}
        assert gelus and gelus <= could and not gelus & set(cm.placement.riders)
        assert {s.split("_")[0] for s in cm.placement.riders} == {"add"}
    else:
        assert not cm.placement.riders and cm.placement.rects == plain.rects


@pytest.mark.long  # two MoE models compiled on small(24, 24): 15-20 s each
@pytest.mark.parametrize("name, lookup", [("mixtral", "index_4"), ("qwen2-moe", "index_8")])
def test_blocks_ride_where_the_moves_beside_them_would_bound_the_rate(name, lookup):
    """The MoE models' expert weights, picked by a one-hot product cut into column blocks:
    each block's add rides below its block. Balanced apart, the kernels alone would be
    faster, but each add then sits beside its block and takes its words over a few links:
    with the moves weighed (`frontend.move_bounds`), apart is the slower. Qwen2-MoE with
    every rider is slower still (its first projection's riders hold it back): those are
    left apart, the blocks' adds ride."""
    pytest.importorskip("transformers")
    model, inputs = build(name)
    config = fabric_config(name).replace(async_memory_ops=True)
    cm = frontend.compile(model, inputs, config=config)
    stages = cm.lowered.stages
    adds = [s.name for s in stages if s.node.name == lookup and s.kind == "elementwise"
            and s.name.startswith(f"{lookup}_add")]
    assert len(adds) > 1
    assert [cm.placement.riders[a] for a in adds] == [f"{lookup}_onehot_n{i}"
                                                      for i in range(len(adds))]
    plain = place(stages, config, cm.edges, balance="cycles", stack="off")
    assert max(plain.predicted.values()) < max(cm.placement.predicted.values())
    words = edge_words(stages, cm.edges)
    assert rate_bound(plain.predicted, plain.rects, words) > rate_bound(
        cm.placement.predicted, cm.placement.rects, words)
    could = companion_groups(stages, config).roots
    assert (len(could) > len(cm.placement.riders)) == (name == "qwen2-moe")


def test_groups_stack_riders_under_their_root_in_graph_order():
    class S:  # the fields pack_groups reads
        def __init__(self, name):
            self.name = name

    stages = [S("g"), S("other"), S("r1"), S("r2")]
    shapes = [(2, 3), (1, 2), (2, 3), (2, 3)]
    rects = pack_groups(stages, shapes, {"r1": "g", "r2": "g"}, FabricConfig.small(6, 6))
    assert rects == [Rect(0, 0, 2, 3), Rect(0, 3, 1, 2), Rect(2, 0, 2, 3), Rect(4, 0, 2, 3)]
    # a block taller than the fabric does not pack
    assert pack_groups(stages, shapes, {"r1": "g", "r2": "g"}, FabricConfig.small(5, 6)) is None
    groups = Groups(stages, FabricConfig.small(6, 6), {2: 0, 3: 0})
    assert groups.tie([(2, 3), (1, 2), (1, 1), (1, 1)])[2:] == [(2, 3), (2, 3)]
    assert [groups.weight(i) for i in range(4)] == [3, 1, 0, 0]


def test_a_tensor_knows_an_index_of_all_its_elements_in_order():
    from frontend.values import Tensor

    t = Tensor("t", 10, (2, 3), "stage")
    assert t.in_order(torch.arange(10, 16)) and t.in_order(torch.arange(10, 16).reshape(3, 2))
    assert not t.in_order(torch.arange(10, 15))  # not all of them
    assert not t.in_order(torch.arange(10, 16).flip(0))  # not in order
    assert not t.in_order(torch.arange(11, 17))  # another tensor's
