"""Layout-only ops move data only when the layout truly changes; the placement's tiles are
disjoint, inside the fabric, and know which tiles exchange tensors."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

import frontend
from frontend.capture import EMPTY, capture_module
from frontend.errors import FrontendError
from frontend.validate import golden_values
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


def _graph(*calls):
    """captured-like graph x -> calls (each (op, extra args)) -> output, for golden_values."""
    graph = torch.fx.Graph()
    value = graph.placeholder("x")
    for op, *args in calls:
        value = graph.call_function(op, (value, *args))
    graph.output(value)
    module = torch.fx.GraphModule(nn.Module(), graph)
    return SimpleNamespace(constants={}, fixed_inputs={}, graph=graph, graph_module=module)


def test_golden_view_of_strides_export_took_as_viewable():
    """An exported graph may view a tensor whose eager strides do not allow it (export's
    traced strides did: PatchTST's q_proj input): its golden value is the reshape's, the
    same elements; another error of eager's still names the node."""
    aten = torch.ops.aten
    x = torch.arange(6.0).reshape(2, 3)
    values = golden_values(_graph((aten.t.default,), (aten.view.default, [-1])), {"x": x})
    assert torch.equal(values["view_default"], x.t().reshape(-1))
    with pytest.raises(FrontendError, match="mm_default.*eager PyTorch refuses this node"):
        golden_values(_graph((aten.mm.default, torch.ones(2, 2))), {"x": x})


class FilledEmpty(nn.Module):
    """An empty tensor filled by two slice assignments (DeepSeek-V3's query heads): its
    intermediate, half written, holds unspecified values in eager."""

    def forward(self, x):  # (2, 4)
        out = x.new_empty(2, 6)
        out[:, :4] = torch.relu(x)
        out[:, 4:] = x[:, :2] * 2.0
        return out


def test_empty_tensors_are_zeros_in_the_captured_graph():
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    captured = capture_module(FilledEmpty(), (x,))
    targets = {n.target for n in captured.graph.nodes}
    assert torch.ops.aten.zeros.default in targets and not set(EMPTY) & targets
    cm = frontend.compile(FilledEmpty(), (x,), config=CONFIG)
    assert all(r.ok for r in cm.validate(x))  # the half-written value too: zeros in both
    torch.testing.assert_close(cm(x), FilledEmpty()(x))
