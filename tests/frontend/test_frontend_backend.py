"""torch.compile(model, backend="fabric") takes the frontend's path and gives the same
results; a graph with an unsupported op falls back to eager with a warning naming the op."""

import warnings

import pytest
import torch
import torch.nn as nn

import frontend
from fabric import FabricConfig
from frontend.dynamo_backend import fabric_backend
from tests.frontend.models import CONFIG, MLP


def test_backend_is_registered_by_entry_point():
    assert "fabric" in torch._dynamo.list_backends()


def test_torch_compile_matches_frontend_compile():
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(2, 16)
    torch._dynamo.reset()
    opt = torch.compile(model, backend="fabric", options={"config": CONFIG})
    got = opt(x)
    want = frontend.compile(model, (x,), config=CONFIG)(x)
    assert torch.equal(got, want)  # same kernels, same placement: bit-identical
    torch.testing.assert_close(got, model(x))
    assert fabric_backend.last is not None and fabric_backend.last.cycles > 0


def test_torch_compile_simulates_as_one_program_when_asked():
    """options={"simulate": "program"}: each call is one engine run of the graph's one
    fabric program, with the outputs of the parts simulated apart."""
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(2, 16)
    torch._dynamo.reset()
    small = FabricConfig.small(5, 5)
    opt = torch.compile(model, backend="fabric", options={"config": small,
                                                          "simulate": "program"})
    got = opt(x)
    assert torch.equal(got, frontend.compile(model, (x,), config=small)(x))
    cm = fabric_backend.last
    assert cm.simulate == "program" and len(cm.program_stream.words) == 1
    torch._dynamo.reset()
    opt = torch.compile(model, backend="fabric", options={"config": small,
                                                          "mode": "sequential",
                                                          "simulate": "program"})
    with pytest.raises(Exception, match="mode 'sequential' runs one stage at a time"):
        opt(x)


class LogGamma(nn.Module):
    def forward(self, x):
        return torch.lgamma(x) * 2.0


def test_unsupported_graph_falls_back_to_eager_with_a_warning():
    torch._dynamo.reset()
    x = torch.randn(2, 8)
    opt = torch.compile(LogGamma(), backend="fabric", options={"config": CONFIG})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = opt(x)
    torch.testing.assert_close(got, LogGamma()(x))
    assert any("aten.lgamma.default" in str(w.message) for w in caught)


def test_unknown_option_is_named():
    torch._dynamo.reset()
    opt = torch.compile(MLP(), backend="fabric", options={"grid": 3})
    with pytest.raises(Exception, match="unknown options"):
        opt(torch.randn(2, 16))


def test_second_batch_size_compiles_a_static_graph_per_shape():
    """dynamo hands a graph with symbolic sizes on the second shape (a short last batch):
    each shape gets its own static fabric program, and every batch matches eager."""
    torch.manual_seed(0)
    model = MLP().eval()
    torch._dynamo.reset()
    opt = torch.compile(model, backend="fabric", options={"config": CONFIG})
    direct = {}
    for batch in (4, 3, 4, 3):
        x = torch.randn(batch, 16)
        got = opt(x)
        if batch not in direct:
            direct[batch] = frontend.compile(model, (x,), config=CONFIG)
        # bit-identical to frontend.compile's program for this shape: it ran on the fabric
        assert torch.equal(got, direct[batch](x))
        torch.testing.assert_close(got, model(x))
