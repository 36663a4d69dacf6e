"""Rules behind the last zoo architectures, each against eager fp32 PyTorch (outputs and
`validate` node by node):

- position ids computed from token ids (RoBERTa's create_position_ids_from_input_ids: a
  mask of the int32 ids, cumsum, arithmetic, a lookup by the computed ids, and the token
  type buffer gathered by them): exact (every step is integer arithmetic in fp32 below
  2^24, the lookups pick rows, one fp32 add as eager's); an index outside the table gives
  a -inf row, never a zero row;
- cumsum of float tensors: fp32 running sums (rtol 1e-5: a few roundings of an 8-term sum);
- group norm: rtol 1e-4 / atol 1e-5 (the layer norm kernel's mean, variance and rsqrt in
  fp32 against eager's; values of order 1);
- as_strided through its input's traced storage (contiguous and permuted inputs): exact (a
  re-indexing); reading memory the input does not hold is refused;
- casts: integer casts of computed values are identities; truncating a float and reading
  an integer input as float are refused by name;
- indexing by a runtime index beside constant ones (CLIP's pooled token): exact (a lookup).
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from tests.frontend.models import CONFIG

PAD = 1


class Positions(nn.Module):
    """Token + position + token type embeddings with RoBERTa's position ids."""

    def __init__(self, vocab=16, positions=12, dim=8):
        super().__init__()
        torch.manual_seed(0)
        self.tok = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.pos = nn.Embedding(positions, dim, padding_idx=PAD)
        self.types = nn.Embedding(2, dim)
        self.register_buffer("type_ids", torch.zeros(1, positions, dtype=torch.long))

    def forward(self, ids):  # (B, T) int64
        mask = ids.ne(PAD).int()
        pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + PAD
        types = torch.gather(self.type_ids.expand(ids.shape[0], -1), 1, pos)
        return self.tok(ids) + self.pos(pos) + self.types(types)


def _ids():
    ids = torch.randint(2, 16, (2, 6), generator=torch.Generator().manual_seed(3))
    ids[0, 4:] = PAD  # right padding
    ids[1, 0] = PAD
    return ids


def _kinds(cm):
    return {s.kind for s in cm.lowered.stages}


def test_position_ids_from_token_ids_are_exact():
    model, ids = Positions().eval(), _ids()
    cm = frontend.compile(model, (ids,), config=CONFIG)
    assert {"compare", "cumsum", "gemm_summa"} <= _kinds(cm)
    rows = cm.validate(ids)
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        torch.testing.assert_close(cm.outputs(), model(ids), rtol=0, atol=0)
    other = _ids().flip(1)  # another call, other padding: the same compiled model
    with torch.no_grad():
        torch.testing.assert_close(cm(other), model(other), rtol=0, atol=0)


class PastTheTable(nn.Module):
    """Positions that run past a 4-row table (eager raises IndexError)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.pos = nn.Embedding(4, 3)

    def forward(self, ids):
        return self.pos(torch.cumsum(ids.ne(PAD).int(), dim=1).long())


def test_a_computed_index_outside_the_table_gives_minus_inf_rows():
    model = PastTheTable().eval()
    cm = frontend.compile(model, (torch.tensor([[1, 1, 5, 5, 5, 1]]),), config=CONFIG)
    out = cm(torch.full((1, 6), 5))  # positions 1 .. 6 in a table of 4
    torch.testing.assert_close(out[0, :3], model.pos.weight.detach()[1:], rtol=0, atol=0)
    assert bool(torch.isneginf(out[0, 3:]).all())


class Running(nn.Module):
    def forward(self, x):  # (2, 5, 8)
        return torch.cumsum(x * 2.0, dim=1) + torch.cumsum(x, dim=-1)


def test_cumsum_of_a_float_tensor():
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(4))
    cm = frontend.compile(Running(), (x,), config=CONFIG)
    assert all(r.ok for r in cm.validate(x))
    torch.testing.assert_close(cm(x), Running()(x), rtol=1e-5, atol=1e-6)


class IdsCumsum(nn.Module):
    def forward(self, ids):
        return torch.cumsum(ids, dim=1)


class Truncate(nn.Module):
    def forward(self, x):
        return (x * 3.0).int()


@pytest.mark.parametrize("model,x,what", [
    (IdsCumsum(), torch.ones(1, 4, dtype=torch.long), "cumsum of an integer input"),
    (Truncate(), torch.randn(2, 3), "cast of a torch.float32 tensor to torch.int32"),
])
def test_integer_cases_without_a_lowering_are_refused_by_name(model, x, what):
    with pytest.raises(frontend.UnsupportedOpError, match=what):
        frontend.compile(model, (x,), config=CONFIG)


class IdsArithmetic(nn.Module):
    def forward(self, ids):  # float and integer results, as eager promotes
        return ids * 2.0, ids + 1, ids.float() * 0.5


def test_integer_inputs_in_arithmetic_are_read_as_numbers():
    """An integer input's int32 words are converted (itof, exact below 2^24) before any
    kernel that reads numbers: ids * 2.0 is float, ids + 1 stays integer, as in eager."""
    ids = torch.tensor([[1, 5, 70000, -3], [0, 2, 9, 16_000_000]])
    cm = frontend.compile(IdsArithmetic(), (ids,), config=CONFIG)
    got, want = cm(ids), IdsArithmetic()(ids)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=0, atol=0)  # integers below 2^24: exact
    assert "itof" in {p.stage.kind for p in cm.prepared}


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(2, 4, 3)
        self.gn = nn.GroupNorm(2, 4)
        self.gn_one = nn.GroupNorm(1, 4, affine=False)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 1.5)
            self.gn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):  # (2, 2, 10)
        return self.gn_one(self.gn(self.conv(x)) * 3.0)


def test_group_norm_with_and_without_affine():
    x = torch.randn(2, 2, 10, generator=torch.Generator().manual_seed(5))
    model = Grouped().eval()
    cm = frontend.compile(model, (x,), config=CONFIG)
    assert all(r.ok for r in cm.validate(x))
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-5)
    # the affine group norm's weight and bias: one stage, a channel's values per row of
    # its (N C, L) matrix; the one without them has no stage after its layer norm
    kinds = {s.name: s.kind for s in cm.lowered.stages}
    affine = [name for name, kind in kinds.items() if kind == "affine"]
    assert len(affine) == 1 and affine[0].startswith("native_group_norm")
    assert "elementwise" not in kinds.values()
    (stage,) = [s for s in cm.lowered.stages if s.kind == "affine"]
    assert [o.shape for o in stage.operands] == [(8, 8), (8,), (8,)]


class Strided(nn.Module):
    def forward(self, x):  # (2, 3, 4)
        y = (x * 2.0).as_strided((3, 2), (4, 1), 1)  # a contiguous input's storage
        z = (x + 1.0).permute(2, 0, 1).as_strided((4, 3), (1, 4))  # a permuted one's
        pooled = F.adaptive_avg_pool1d(x.reshape(2, 12, 1) - 1.0, 1)  # Swin's tail
        return y.sum() + z * 0.5 + pooled.mean()


def test_as_strided_is_a_reindexing():
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(6))
    cm = frontend.compile(Strided(), (x,), config=CONFIG)
    assert all(r.ok for r in cm.validate(x))
    torch.testing.assert_close(cm(x), Strided()(x), rtol=1e-6, atol=1e-6)


class BeyondTheSlice(nn.Module):
    def forward(self, x):  # (2, 4): the slice's storage is x's, its elements are not all
        return (x * 2.0)[:, :2].as_strided((2, 4), (4, 1)) + 1.0


def test_as_strided_reading_outside_its_input_is_refused():
    with pytest.raises(frontend.UnsupportedOpError, match="does not hold"):
        frontend.compile(BeyondTheSlice(), (torch.randn(2, 4),), config=CONFIG)


def test_integer_input_beyond_what_fp32_holds_is_refused():
    ids = torch.tensor([[1, 5, 70000, -3]])
    cm = frontend.compile(IdsArithmetic(), (ids,), config=CONFIG)
    with pytest.raises(frontend.FrontendError, match=r"input 'ids' holds 16777217 at \(0, 2\)"):
        cm(torch.tensor([[1, 5, 2 ** 24 + 1, -3]]))


@pytest.mark.parametrize("name, pick", [
    # CLIP's pooled token: the end-of-text id's position, the first maximum of the ids
    ("argmax", lambda x, ids: x[torch.arange(3), ids.argmax(-1)]),
    # a classifier's last real token: a count of the ids that are not padding, minus one
    ("last", lambda x, ids: x[torch.arange(3), (ids != 0).sum(-1) - 1]),
    ("negative constant", lambda x, ids: x[torch.tensor([-1, 0, 1]), ids.argmax(-1)]),
    ("an input's ids", lambda x, ids: x[torch.tensor([0, 2]), ids[0, :2]]),
])
def test_a_runtime_index_beside_constant_ones(name, pick):
    """Adjacent index tensors, one computed at run time: a lookup along the flattened
    indexed dimensions by the runtime index times its stride plus the constants' offsets,
    exact (it picks rows)."""
    from tests.frontend.models import Fn

    x = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[3, 1, 4, 1, 0], [2, 7, 1, 8, 2], [0, 0, 9, 0, 0]])
    cm = frontend.compile(Fn(pick).eval(), (x, ids), config=CONFIG)
    for call in (ids, ids.flip(-1)):
        torch.testing.assert_close(cm(x, call), pick(x, call), rtol=0, atol=0)
