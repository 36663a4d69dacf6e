"""Products with expert weights picked by computed indices, `experts="dense"`
(`frontend.lowering.experts`), against eager fp32 PyTorch and the default "picked":

- bmm(W[ids], x) and bmm(x, W[ids]) with top-2 routing: one GEMM of every token's rows by
  every expert's weights (no one-hot lookup, no per-token products), every node within its
  tolerance, the outputs those of "picked" up to the order of the sums (a row's unpicked
  experts add zeros to its sum);
- an index past the table (eager: IndexError) poisons its row (not finite), never zeros;
- the picked weights read by anything but bmm are looked up as under "picked";
- a refusal for colors names the picked products and "dense" where they crowd its PE;
- a bad `experts` is refused by name;
- the zoo's Mixtral fits one fabric program with colors "fit" (compile only), which
  "picked" cannot on any tiles (refused, naming "dense").
"""

import pytest
import torch
import torch.nn as nn

import frontend
from fabric.config import FabricConfig
from frontend.architectures import build, fabric_config
from tests.frontend.models import CONFIG

EXPERTS, TOKENS, WIDTH, HIDDEN = 4, 4, 8, 12


class Routed(nn.Module):
    """A router's top-2 experts per token, their weights picked and applied by bmm: the
    (E, HIDDEN, WIDTH) table first (`first`, as Mixtral's experts) or second."""

    def __init__(self, first: bool = True):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.first = first
        self.router = nn.Parameter(torch.randn(WIDTH, EXPERTS, generator=g))
        shape = (EXPERTS, HIDDEN, WIDTH) if first else (EXPERTS, WIDTH, HIDDEN)
        self.w = nn.Parameter(torch.randn(shape, generator=g))

    def forward(self, x):  # x (TOKENS, WIDTH)
        ids = torch.topk(x @ self.router, 2).indices.reshape(-1)  # (2 TOKENS,)
        rows = x.repeat_interleave(2, 0)  # (2 TOKENS, WIDTH)
        if self.first:
            return torch.bmm(self.w[ids], rows.unsqueeze(-1)).squeeze(-1)
        return torch.bmm(rows.unsqueeze(1), self.w[ids]).squeeze(1)


def _x():
    return torch.randn(TOKENS, WIDTH, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("first", [True, False], ids=["W[ids] @ x", "x @ W[ids]"])
def test_dense_product_matches_eager_and_the_picked_one(first):
    model, x = Routed(first), _x()
    dense = frontend.compile(model, (x,), config=CONFIG, experts="dense")
    names = [s.name for s in dense.lowered.stages]
    assert any(n.endswith("_experts") for n in names), names
    assert not any("onehot" in n for n in names), names
    assert all(r.ok for r in dense.validate(x, raise_on_mismatch=False))
    got = dense(x)
    with torch.no_grad():
        want = model(x)
    # fp32 sums of WIDTH products in another order than eager's: a few ulps
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    picked = frontend.compile(model, (x,), config=CONFIG)
    assert not any(s.name.endswith("_experts") for s in picked.lowered.stages)
    torch.testing.assert_close(got, picked(x), rtol=1e-5, atol=1e-5)


class Escaping(Routed):
    """A router with a fifth score, x[:, 0] - 100: never among the top 2 on the example,
    the top where x[t, 0] is large, an index past the table then."""

    def forward(self, x):
        scores = torch.cat([x @ self.router, x[:, :1] - 100.0], dim=1)
        ids = torch.topk(scores, 2).indices.reshape(-1)
        rows = x.repeat_interleave(2, 0)
        return torch.bmm(self.w[ids], rows.unsqueeze(-1)).squeeze(-1)


def test_an_index_out_of_range_poisons_its_rows():
    """Eager raises IndexError for an index past the table; the fabric has no exceptions,
    so a row whose index hits no expert comes out NaN or inf, never a silent zero, and the
    other rows as eager's."""
    model, x = Escaping(), _x()
    cm = frontend.compile(model, (x,), config=CONFIG, experts="dense")
    far = x.clone()
    far[1, 0] = 1000.0
    with pytest.raises(IndexError):
        model(far)
    with torch.no_grad():
        scores = torch.cat([far @ model.router, far[:, :1] - 100.0], dim=1)
    outside = torch.topk(scores, 2).indices.reshape(-1) >= EXPERTS
    assert outside.sum() == 1
    out = cm(far)
    assert not torch.isfinite(out[outside]).any()
    with torch.no_grad():
        want = Routed()(far)  # the router's own top 2 where the fifth score is not picked
    inside = ~outside
    inside[outside.nonzero()[0] ^ 1] = False  # the escaping token's other slot moved up
    torch.testing.assert_close(out[inside], want[inside], rtol=1e-5, atol=1e-3)


class PickedRead(nn.Module):
    """W[ids] read by an add, not a bmm: looked up as under "picked"."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(EXPERTS, 3, 2, generator=torch.Generator()
                                          .manual_seed(2)))

    def forward(self, x):
        ids = torch.topk(x, 1).indices.reshape(-1)
        return self.w[ids] + 1.0


def test_picked_weights_read_otherwise_are_looked_up():
    model, x = PickedRead(), torch.randn(TOKENS, EXPERTS)
    cm = frontend.compile(model, (x,), config=CONFIG, experts="dense")
    assert any("onehot" in s.name for s in cm.lowered.stages)
    with torch.no_grad():
        assert torch.equal(cm(x), model(x))


def test_a_refusal_for_colors_names_the_picked_products_and_dense():
    """On small(12, 12) the balanced tiles need more colors than the fabric has, the
    picked products among the parts crossing the busiest PE: the refusal names them and
    experts="dense" (which here does not suffice either: the router's moves crowd a PE
    too, and that refusal has no hint)."""
    config = FabricConfig.small(12, 12)
    with pytest.raises(frontend.PlacementError,
                       match="(?s)picked per token \\(FX nodes 'bmm'\\).*experts=\"dense\""):
        frontend.compile(Routed(), (_x(),), config=config, colors="refuse")
    with pytest.raises(frontend.PlacementError) as dense:
        frontend.compile(Routed(), (_x(),), config=config, colors="refuse", experts="dense")
    assert "experts=" not in str(dense.value)


def test_a_bad_experts_is_refused():
    with pytest.raises(frontend.FrontendError, match="experts must be one of"):
        frontend.compile(Routed(), (_x(),), config=CONFIG, experts="sparse")


@pytest.mark.long  # two compiles of Mixtral down the colors ladder: minutes
def test_mixtral_fits_one_program_dense():
    """colors "fit": picked, even Mixtral's smallest tiles need more colors than the
    fabric has, and the refusal names its products and experts="dense"; dense, its one
    program is built (compile only). On the machine whose GEMM fmas run async: with them
    synchronous (the presets) the tiles the balance takes need more colors than
    small(24, 24) has, even dense."""
    model, inputs = build("mixtral")
    config = fabric_config("mixtral").replace(async_memory_ops=True)
    with pytest.raises(frontend.PlacementError,
                       match="(?s)picked per token \\(FX nodes 'bmm_2', 'bmm_3'\\).*"
                       "experts=\"dense\""):
        frontend.compile(model, inputs, config=config, colors="fit", lookups="onehot")
    cm = frontend.compile(model, inputs, config=config, colors="fit", lookups="onehot",
                          experts="dense")
    assert cm.colors.assignment.used <= len(cm.config.program_colors)
    cm.model_program(gated=True)
