"""Lower bounds on moves between placed tiles (`frontend.move_bounds`): the formula on
hand-made tiles, and every bound at or below the cycles of the move the planner makes and
the engine runs (theory for the mesh: ramps and the links crossing a line between tiles)."""

import numpy as np
import pytest
import torch

from fabric import FabricConfig, Rect
from fabric.kernels import build_elementwise
from fabric.kernels.layout import probe_inputs, probe_output
from fabric.kernels.redistribute import plan_redistribution
from frontend.move_bounds import critical_path, edge_words, move_bound, rate_bound
from frontend.stages import Limits, Operand, Stage
from frontend.values import Tensor

CONFIG = FabricConfig.small(6, 6)
M, N = 12, 16  # an elementwise tensor: 192 words


def test_tiles_side_by_side_on_one_row_share_one_link():
    # Mixtral's expert weights on 1 x 17 PEs, their add on 1 x 7 beside them
    assert move_bound(Rect(19, 0, 1, 17), Rect(19, 17, 1, 7), 8288) == 8288
    # on two rows each, two links
    assert move_bound(Rect(0, 0, 2, 3), Rect(0, 3, 2, 3), 60) == 30


def test_a_translation_below_passes_each_columns_words_over_its_link():
    # 10 words a PE, 2 rows: each column's link carries both rows' words
    assert move_bound(Rect(0, 0, 2, 3), Rect(2, 0, 2, 3), 60) == 20


def test_ramps_bound_a_move_to_few_pes():
    # 32 words into one PE: its ramp, one a cycle; the lines are crossed on 5 rows / cols
    assert move_bound(Rect(0, 0, 4, 4), Rect(10, 10, 1, 1), 32) == 32
    assert move_bound(Rect(0, 0, 1, 1), Rect(3, 3, 2, 2), 12) == 12
    assert move_bound(Rect(0, 0, 2, 2), Rect(0, 5, 2, 2), 0) == 0


def _elementwise_map(rect: Rect):
    return probe_inputs(build_elementwise(CONFIG, rect, M, N), {"x": (M, N), "y": (M, N)})["x"]


@pytest.mark.parametrize("src, dst", [
    (Rect(0, 0, 1, 4), Rect(0, 4, 1, 2)),   # side by side on one row: one link
    (Rect(0, 0, 2, 2), Rect(2, 0, 2, 2)),   # a translation below
    (Rect(0, 0, 2, 3), Rect(3, 3, 3, 3)),   # diagonal
    (Rect(0, 0, 3, 2), Rect(4, 4, 1, 1)),   # into one PE
], ids=["one-row", "below", "diagonal", "one-pe"])
def test_the_bound_is_at_most_the_simulated_move(src, dst):
    source = probe_output(build_elementwise(CONFIG, src, M, N))
    plan = plan_redistribution(CONFIG, source, _elementwise_map(dst))
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    _, cycles, _ = plan.run(source.to_words(x))
    bound = move_bound(src, dst, M * N)
    assert bound <= cycles, (bound, cycles)
    if src.row == dst.row and src.rows == 1:  # one link: the bound is most of the move's
        assert cycles <= 1.25 * bound, (bound, cycles)  # time (its start and hops apart)


def _stage(name, base, shape, operands):
    tensor = Tensor(name, base, shape, "stage")
    return Stage(name, None, "elementwise", tensor, None, operands, tensor.numel,
                 Limits(shape[0], shape[1] if len(shape) > 1 else 1))


def test_edge_words_count_each_element_read_once():
    a = _stage("a", 0, (4, 4), [])
    # b reads a's first row four times (a broadcast) and a's last element
    index = torch.cat([torch.arange(4).repeat(4), torch.tensor([15])])
    b = _stage("b", 16, (17,), [Operand("x", (17,), index=index)])
    assert edge_words([a, b], [("a", "b")]) == {("a", "b"): 5}


def test_the_rate_bound_is_the_larger_of_kernel_and_move():
    rects = {"a": Rect(0, 0, 1, 4), "b": Rect(0, 4, 1, 2)}
    words = {("a", "b"): 100}
    assert rate_bound({"a": 30, "b": 10}, rects, words) == 100  # the move: one link
    assert rate_bound({"a": 300, "b": 10}, rects, words) == 300  # the kernel
    assert rate_bound({"a": 30, "b": 10}, rects, {}) == 30


def test_the_critical_path_is_the_longest_chain_of_kernels_and_moves():
    # a -> b -> d and a -> c -> d (a residual's two branches), b and c side by side
    rects = {"a": Rect(0, 0, 1, 4), "b": Rect(1, 0, 1, 4), "c": Rect(0, 4, 1, 2),
             "d": Rect(2, 0, 1, 4)}
    words = {("a", "b"): 40, ("a", "c"): 40, ("b", "d"): 40, ("c", "d"): 40}
    order = ["a", "b", "c", "d"]
    # moves: a -> b below, 10 words per column link: 10; a -> c on one row: 40;
    # b -> d below: 10; c -> d, to the left and below: the line between them crossed on
    # c's row and d's, 20 words each
    assert [move_bound(rects[p], rects[c], 40) for p, c in words] == [10, 40, 10, 20]
    # by b: 100 + 10 + 50 + 10 = 170; by c: 100 + 40 + 5 + 20 = 165
    assert critical_path(order, {"a": 100, "b": 50, "c": 5, "d": 7}, rects, words) == (
        177, ["a", "b", "d"])
    # a slower c takes the way over: 100 + 40 + 60 + 20 + 7
    assert critical_path(order, {"a": 100, "b": 50, "c": 60, "d": 7}, rects, words) == (
        227, ["a", "c", "d"])
    # no edges: the slowest stage alone; no stages: nothing
    assert critical_path(order, {"a": 1, "b": 9, "c": 2, "d": 3}, rects, {}) == (9, ["b"])
    assert critical_path([], {}, {}, {}) == (0, [])
