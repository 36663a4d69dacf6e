"""Layout-only ops move data only when the layout truly changes; the placement's tiles are
disjoint, inside the fabric, and know which tiles exchange tensors."""

import torch
import torch.nn as nn

import frontend
from tests.frontend.models import CONFIG


class Chain(nn.Module):
    """relu -> (an optional layout op) -> * 3."""

    def __init__(self, layout):
        super().__init__()
        self.layout = layout

    def forward(self, x):
        y = torch.relu(x)
        if self.layout == "view":
            y = y.view(6, 2, 8).reshape(12, 8)  # the same elements in the same order
        elif self.layout == "transpose":
            y = y.t().contiguous().t()  # a round trip: also the same order
        elif self.layout == "permute":
            y = y.t()  # a real layout change: (8, 12)
        return y * 3.0


def _moves(layout):
    torch.manual_seed(0)
    x = torch.randn(12, 8)
    model = Chain(layout)
    cm = frontend.compile(model, (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), model(x))
    mul = next(r for r in cm.last.results if r.name.startswith("mul"))
    return mul.move_cycles, mul.moved_words, cm


def test_views_move_nothing_extra_and_a_transpose_moves_data():
    plain_cycles, plain_words, _ = _moves("none")
    for layout in ("view", "transpose"):
        assert _moves(layout)[:2] == (plain_cycles, plain_words)
    permuted_cycles, permuted_words, _ = _moves("permute")
    assert permuted_words == plain_words  # every element still moves once
    assert permuted_cycles != plain_cycles  # but in another pattern


def test_placement_is_disjoint_and_knows_its_edges():
    _, _, cm = _moves("none")
    rects = cm.placement.rects
    cells = [(r, c) for rect in rects.values() for r, c in rect.pes()]
    assert len(cells) == len(set(cells))
    assert all(0 <= r < CONFIG.rows and 0 <= c < CONFIG.cols for r, c in cells)
    assert cm.edges == [("relu_relu", "mul_mul")]
    fig = cm.plot_placement()
    assert fig.axes
