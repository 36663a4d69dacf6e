"""What eager PyTorch refuses, the fabric refuses with the same message class, named by its
FX node and the user's source line; a model left in training mode, an empty batch, a model
changing its input or a buffer in place gets a message that says what to do."""

import pytest
import torch
import torch.nn as nn

import frontend
from frontend.lowering import core
from tests.frontend.models import CONFIG, Fn


def test_integer_ids_to_a_float_layer_are_refused_as_eager_refuses_them():
    model = nn.Linear(4, 3).eval()
    ids = torch.randint(0, 5, (2, 4))
    with pytest.raises(RuntimeError) as eager:
        model(ids)
    with pytest.raises(frontend.FrontendError, match=r"'addmm'.*refuses") as fabric:
        frontend.compile(model, (ids,), config=CONFIG)
    assert str(eager.value) in str(fabric.value)  # "mat1 and mat2 must have the same dtype"


@pytest.mark.parametrize("layer, what", [(nn.Dropout(0.5), "dropout"),
                                         (nn.BatchNorm1d(4), "batch norm")])
def test_training_mode_layers_say_call_eval(layer, what):
    model = nn.Sequential(nn.Linear(4, 4), layer).train()
    with pytest.raises(frontend.UnsupportedOpError,
                       match=rf"{what} in training mode: call model.eval\(\)"):
        frontend.compile(model, (torch.randn(2, 4),), config=CONFIG)


def test_empty_batch_is_a_clear_error():
    with pytest.raises(frontend.FrontendError, match=r"shape \(0, 4\), no elements"):
        frontend.compile(nn.Linear(4, 3).eval(), (torch.randn(0, 4),), config=CONFIG)


class UsesALibraryModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(x * 2.0)  # the line an error inside nn.Tanh must point at


def test_error_inside_a_library_module_points_at_the_users_line(monkeypatch):
    monkeypatch.delitem(core.RULES, torch.ops.aten.tanh.default)  # tanh: no rule, for now
    with pytest.raises(frontend.UnsupportedOpError) as err:
        frontend.compile(UsesALibraryModule().eval(), (torch.randn(2, 4),), config=CONFIG)
    message = str(err.value)
    user = f'File "{__file__}"'
    assert user in message and "return self.act(x * 2.0)" in message
    # the user's frame first, torch's own frame after it in parentheses
    assert message.index(user) < message.index("(in torch: ") < message.index("activation.py")


class ChangesItsInput(nn.Module):
    def forward(self, x):
        return x.mul_(2.0)  # the line the error must point at


class CountsItsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls.add_(1.0)  # the line the error must point at
        return x * 2.0


def test_a_model_changing_its_input_in_place_is_refused_with_its_line():
    x = torch.randn(2, 4)
    with pytest.raises(frontend.FrontendError, match=r"changes its input 'x' in place") as err:
        frontend.compile(ChangesItsInput(), (x,), config=CONFIG)
    assert "return x.mul_(2.0)" in str(err.value)


def test_a_model_updating_a_buffer_is_refused_with_its_line():
    with pytest.raises(frontend.FrontendError, match=r"updates its buffers in place \('calls'"
                       ) as err:
        frontend.compile(CountsItsCalls(), (torch.randn(2, 4),), config=CONFIG)
    assert "self.calls.add_(1.0)" in str(err.value)
    assert "put the model in eval mode" in str(err.value)  # it is in training mode


class RescalesOnFirstCall(nn.Module):
    """Halves its weight on its first call in eval mode (as RWKV rescales its layers)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))
        self.rescaled = False

    def forward(self, x):
        if not self.rescaled:
            with torch.no_grad():
                self.weight.div_(2.0)
            self.rescaled = True
        return x * self.weight


def test_a_model_updating_a_parameter_in_eval_mode_is_told_so():
    with pytest.raises(frontend.FrontendError, match=r"updates its parameters in place "
                       r"\('weight'(.|\n)*the model is in eval mode") as err:
        frontend.compile(RescalesOnFirstCall().eval(), (torch.randn(2, 4),), config=CONFIG)
    assert "self.weight.div_(2.0)" in str(err.value)


class ReassignsItsBuffer(nn.Module):
    """CTRL's pattern: a buffer assigned its own value converted to the dtype it has."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(8.0).reshape(2, 4))

    def forward(self, x):
        self.table = self.table.to(dtype=x.dtype)
        return x * self.table


def test_a_buffer_assigned_its_own_value_is_no_update():
    x = torch.randn(2, 4)
    model = ReassignsItsBuffer()
    cm = frontend.compile(model, (x,), config=CONFIG)
    torch.testing.assert_close(cm(x), model(x))


class DrawsWithItsOwnGenerator(nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape, generator=torch.Generator().manual_seed(0))


def test_a_generator_object_in_the_graph_is_refused_by_its_node():
    with pytest.raises(frontend.FrontendError,
                       match=r"holds a Generator object as a constant \(used by FX node 'randn"
                             r".*only tensors, numbers and None"):
        frontend.compile(DrawsWithItsOwnGenerator(), (torch.randn(2, 3),), config=CONFIG)


def test_small_integer_dtypes_are_range_checked_without_wrapping():
    """uint8 pixels pass the +-2^24 check (compared in int64, not wrapped to uint8's 0),
    and come out as eager's x / 255 within one rounding (a product by 1 / 255)."""
    pixels = torch.tensor([[1, 200, 255]], dtype=torch.uint8)
    model = Fn(lambda p: p.float() / 255).eval()
    cm = frontend.compile(model, (pixels,), config=CONFIG)
    torch.testing.assert_close(cm(pixels), model(pixels))
    ids = torch.tensor([[2 ** 25]], dtype=torch.int32)
    cm = frontend.compile(Fn(lambda i: i * 2).eval(), (torch.tensor([[1]], dtype=torch.int32),),
                          config=CONFIG)
    with pytest.raises(frontend.FrontendError, match=r"holds 33554432 at \(0, 0\)"):
        cm(ids)
