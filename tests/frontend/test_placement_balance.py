"""place()'s objectives: "work" (the default, a model run one stage at a time) keeps its
tiles; "cycles" (a pipelined run) lowers the largest predicted stage cycles, with tiles that
stay disjoint and inside the fabric, and spends an ample fabric's PEs only on steps that
save a measurable share of the period (`frontend.balance.MIN_SAVING`)."""

import math

import numpy as np
import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend.balance import (
    LOOKAHEAD,
    MIN_SAVING,
    PERIOD_SHARE,
    _grow,
    balance_cycles,
    flatter_starts,
    next_split,
    previous_split,
    spare_saving,
    stage_cycles,
    used,
)
from frontend.companions import Groups
from frontend.lowering import lower
from frontend.placement import OBJECTIVES, model_cycles, place
from frontend.skyline import Skyline, pack
from tests.frontend.models import MLP, TinyGPT

GPT_FABRIC = FabricConfig.small(32, 32)


@pytest.fixture(scope="module")
def gpt():
    """TinyGPT compiled in sequential mode (the default objective) on a 32 x 32 fabric."""
    torch.manual_seed(0)
    model = TinyGPT(vocab=64, d=64, heads=4, layers=1, block=32)
    return frontend.compile(model, (torch.randint(0, 64, (1, 32)),), config=GPT_FABRIC,
                            mode="sequential")


def _check_tiles(cm, placement):
    """Every stage has a tile inside the fabric, no PE is in two tiles, and the predicted
    cycles are its kernel's model on that tile."""
    cfg = placement.config
    assert set(placement.rects) == {s.name for s in cm.lowered.stages}
    seen = set()
    for stage in cm.lowered.stages:
        rect = placement.rects[stage.name]
        assert rect.row >= 0 and rect.col >= 0
        assert rect.row_end <= cfg.rows and rect.col_end <= cfg.cols
        pes = set(rect.pes())
        assert not pes & seen, f"{stage.name}'s tile {rect} overlaps another"
        seen |= pes
        assert placement.predicted[stage.name] == \
            (model_cycles(stage, (rect.rows, rect.cols), cfg) or 0)
    assert placement.pes_used == len(seen)


def test_cycles_lowers_the_slowest_stage_of_tinygpt(gpt):
    work = place(gpt.lowered.stages, GPT_FABRIC, gpt.edges, balance="work")
    cycles = place(gpt.lowered.stages, GPT_FABRIC, gpt.edges, balance="cycles")
    _check_tiles(gpt, work)
    _check_tiles(gpt, cycles)
    assert max(cycles.predicted.values()) < max(work.predicted.values())
    assert cycles.edges == work.edges == gpt.edges
    # resident stages compute nothing: their kernels' predicted cycles stay 0 in the
    # placement (their tiles are sized by their words, test_resident_tiles_spread_their_words)
    for stage in gpt.lowered.stages:
        if stage.kind == "resident":
            assert cycles.predicted[stage.name] == 0
    # deterministic: the same tiles again
    assert place(gpt.lowered.stages, GPT_FABRIC, gpt.edges, balance="cycles") == cycles


def test_default_objective_keeps_the_work_tiles(gpt):
    work = place(gpt.lowered.stages, GPT_FABRIC, gpt.edges, balance="work")
    assert place(gpt.lowered.stages, GPT_FABRIC, gpt.edges).rects == work.rects
    assert gpt.placement.rects == work.rects
    assert gpt.placement.predicted == work.predicted


def test_cycles_spends_an_ample_fabric():
    torch.manual_seed(0)
    model = MLP(d_in=64, hidden=64, d_out=64)
    cm = frontend.compile(model, (torch.randn(64, 64),), config=GPT_FABRIC, mode="sequential")
    work = cm.placement
    cycles = place(cm.lowered.stages, GPT_FABRIC, cm.edges, balance="cycles")
    _check_tiles(cm, cycles)
    assert cycles.pes_used > work.pes_used
    assert max(cycles.predicted.values()) < max(work.predicted.values())


def test_unknown_objective_names_the_accepted_ones():
    with pytest.raises(ValueError, match="'work', 'cycles'.*'latency'"):
        place([], GPT_FABRIC, [], balance="latency")
    assert OBJECTIVES == ("work", "cycles")


def test_block_counts_step_to_the_next_block_size():
    # 32 rows: 11 PEs give blocks of 3, 16 the first blocks of 2, 32 blocks of 1
    assert next_split(32, 11, 32) == 16
    assert next_split(32, 16, 32) == 32
    assert next_split(32, 16, 20) is None  # past `most`
    assert next_split(32, 32, 64) is None  # one row each already
    assert previous_split(192, 20) == 18  # 19 PEs give blocks of 11, as 18 do
    assert previous_split(32, 1) is None


def test_spare_pes_go_only_to_steps_that_save_a_share_of_the_period(gpt):
    """On fabrics too large to bind (the tiles stop growing between small(192, 192) and
    small(256, 256)): the period is the one the slowest stage alone sets, and no stage
    has a step left that saves MIN_SAVING of it, so a larger fabric hands out no more PEs."""
    stages = gpt.lowered.stages
    big = FabricConfig.small(256, 256)
    shapes = balance_cycles(stages, big)
    assert shapes == balance_cycles(stages, FabricConfig.small(192, 192))
    cycles = [model_cycles(s, shape, big) or 0 for s, shape in zip(stages, shapes)]
    alone = balance_cycles(stages, big, spare=False)
    period = max(model_cycles(s, shape, big) or 0 for s, shape in zip(stages, alone))
    assert max(cycles) == period  # the spare phase leaves the period as it is
    least = spare_saving(period)
    assert least == math.ceil(MIN_SAVING * period)
    for i, stage in enumerate(stages):
        assert _grow(i, stages, shapes, cycles, big, LOOKAHEAD, least) is None, stage.name
    # without the rule the same fabric would take more PEs: the rule, not the fabric, stops
    # the tiles
    unbounded = balance_cycles(stages, big, min_saving=0)
    assert used(unbounded) > used(shapes)


def test_resident_tiles_spread_their_words(gpt):
    """A resident tile computes nothing but everything it holds passes through its PEs
    (TinyGPT's token table and its gathered rows): the balance weighs its words per PE, so
    with PEs to spare neither stays on one PE, where each call's gather took 2,159 cycles."""
    stages = gpt.lowered.stages
    shapes = balance_cycles(stages, GPT_FABRIC)
    resident = [(s, shape) for s, shape in zip(stages, shapes) if s.kind == "resident"]
    assert resident
    for stage, (r, c) in resident:
        assert stage_cycles(stage, (r, c), GPT_FABRIC) == -(-stage.tensor.numel // (r * c))
        assert r * c > 1, stage.name
    other = next(s for s in stages if s.kind != "resident")
    shape = (2, 2)
    assert stage_cycles(other, shape, GPT_FABRIC) == model_cycles(other, shape, GPT_FABRIC)


def test_the_period_is_set_within_its_share_of_the_fabric(gpt):
    """While the period is set, the tiles take at most PERIOD_SHARE of the PEs: on
    small(16, 16) TinyGPT's slowest stages would take more (and lower the period) with the
    whole fabric, which the spare phase then has less of to shorten the latency."""
    stages, small = gpt.lowered.stages, FabricConfig.small(16, 16)

    def period(shapes):
        return max(stage_cycles(s, shape, small) for s, shape in zip(stages, shapes))
    within = balance_cycles(stages, small, spare=False)
    whole = balance_cycles(stages, small, spare=False, period_share=1.0)
    assert used(within) <= PERIOD_SHARE * small.num_pes < used(whole)
    assert period(whole) < period(within)
    spent = balance_cycles(stages, small)
    # the spare phase has the rest: it may grow the slowest stage too, where that step
    # saves the most cycles per PE
    assert period(spent) <= period(within)
    assert used(spent) > used(within)


def test_tiles_pack_under_short_tiles_beside_tall_ones():
    """A skyline, not shelves: a tile goes where its top is lowest, so the room under a
    short tile beside a tall one is used (on shelves the third tile would start row 2)."""
    grid = FabricConfig.small(4, 6)
    rects = pack([(2, 3), (1, 3), (1, 3)], grid)
    assert [(r.row, r.col) for r in rects] == [(0, 0), (0, 3), (1, 3)]
    assert pack([(2, 3), (1, 3), (1, 3), (3, 6)], grid) is None  # 5 rows of 4
    assert pack([(1, 7)], grid) is None  # wider than the grid
    # any shapes: tiles in the grid, no PE twice, or None only when the PEs run out
    rng = np.random.default_rng(0)
    for _ in range(200):
        shapes = [tuple(int(v) for v in rng.integers(1, 4, 2)) for _ in range(8)]
        rects = pack(shapes, grid)
        if rects is None:
            continue
        seen = set()
        for (r, c), rect in zip(shapes, rects):
            assert (rect.rows, rect.cols) == (r, c)
            assert rect.row_end <= grid.rows and rect.col_end <= grid.cols
            assert not set(rect.pes()) & seen
            seen |= set(rect.pes())


def test_skyline_resumed_at_the_first_changed_tile_packs_as_a_fresh_one():
    """A Skyline starts each packing where its shapes first differ from the last one's; the
    tiles (and None where one does not fit) are those of packing them afresh, over random
    sequences of packings that change one tile, cut or extend the list."""
    grid = FabricConfig.small(6, 8)
    rng = np.random.default_rng(1)
    sky = Skyline(grid)
    shapes = [tuple(int(v) for v in rng.integers(1, 4, 2)) for _ in range(10)]
    for _ in range(300):
        change = rng.integers(3)
        if change == 0:
            shapes[rng.integers(len(shapes))] = tuple(int(v) for v in rng.integers(1, 5, 2))
        elif change == 1 and len(shapes) > 1:
            shapes = shapes[:rng.integers(1, len(shapes))]
        else:
            shapes.append(tuple(int(v) for v in rng.integers(1, 4, 2)))
        assert sky.rects(shapes) == pack(shapes, grid)


def test_tall_starting_tiles_give_way_to_flatter_ones():
    """Starting tiles that do not pack: the tallest moves to a tile of at most its PEs with
    fewer rows that its kernel takes, until they pack (a batch-1 MLP's GEMVs on small(4, 4),
    given starts of 3 x 3, 1 x 1 and 4 x 1: the 4 x 1 finds no room below the first)."""
    torch.manual_seed(0)
    cm = frontend.compile(MLP().eval(), (torch.randn(1, 16),), config=FabricConfig.small(12, 12))
    stages = lower(cm.captured).stages
    kinds = [s.kind for s in stages]
    assert kinds[:3] == ["gemv", "map", "gemv"]  # fc1, relu, fc2, then the scale and add
    small = FabricConfig.small(4, 4)
    shapes = [(3, 3), (1, 1), (4, 1)] + [(1, 1)] * (len(stages) - 3)
    assert pack(shapes, small) is None
    last = 2
    flat = flatter_starts(stages, shapes, small, Groups(stages, small))
    assert flat is not None and pack(flat, small) is not None
    changed = [i for i, (a, b) in enumerate(zip(shapes, flat)) if a != b]
    assert last in changed
    for i in changed:  # fewer rows, no more PEs, a tile its kernel takes
        assert flat[i][0] < shapes[i][0]
        assert flat[i][0] * flat[i][1] <= shapes[i][0] * shapes[i][1]
        assert model_cycles(stages[i], flat[i], small) is not None
    # one row everywhere and still too many PEs: nothing to lower
    assert flatter_starts(stages, [(1, 4)] * 5 + [(1, 1)] * (len(stages) - 5), small,
                           Groups(stages, small)) is None


@pytest.mark.long  # MobileNet-v2's 237 stages: about 40 s to lower and place
def test_sequential_shares_pack_flatter_at_their_minimum():
    """The work objective's minimum shares leave MobileNet-v2's last convolution (a GEMV)
    on a tall tile that does not pack on small(24, 16); made flatter, they pack."""
    pytest.importorskip("transformers")
    from frontend.architectures import build, fabric_config
    from frontend.capture import capture_module

    config = fabric_config("mobilenet-v2")
    stages = lower(capture_module(*build("mobilenet-v2"))).stages
    _assert_disjoint_tiles(place(stages, config, [], balance="work"), stages, config)


def _assert_disjoint_tiles(placement, stages, config):
    """One tile per stage, inside the fabric, no PE in two."""
    assert len(placement.rects) == len(stages) and placement.pes_used <= config.num_pes
    seen = set()
    for rect in placement.rects.values():
        assert not set(rect.pes()) & seen
        seen |= set(rect.pes())


def test_sequential_tiles_where_no_work_shares_pack():
    """The diffusion U-Net's 26 stages on small(12, 12): no work shares pack (its group
    norms' and convolutions' minimum tiles), so "work" takes the tiles "cycles" finds:
    disjoint, inside the fabric, one per stage."""
    from frontend.architectures import build, fabric_config
    from frontend.capture import capture_module
    from frontend.placement import _work_shapes

    config = fabric_config("unet")
    stages = lower(capture_module(*build("unet"))).stages
    assert _work_shapes(stages, config) is None
    _assert_disjoint_tiles(place(stages, config, [], balance="work"), stages, config)
