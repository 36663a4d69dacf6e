"""How an embedding by token ids is looked up (`frontend.compile(..., lookups=)`): rows
gathered per call ("gather") or a one-hot product on the fabric ("onehot"), the same
values either way (the product sums one row times 1 and zeros, exact in fp32); an index
outside the table refused before the call in both; "onehot" a static model that runs as
one fabric program."""

import numpy as np
import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend.errors import FrontendError, PlacementError
from tests.frontend.models import TinyGPT


class Lookup(torch.nn.Module):
    """An embedding and a linear layer: the lookup's rows are a stage's input."""

    def __init__(self, vocab=24, dim=8):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, 4)

    def forward(self, idx):
        return self.out(self.tok(idx))


FABRIC = FabricConfig.small(6, 6)


def test_onehot_lookups_give_the_gathered_rows_exactly():
    """The embedding node's values under "onehot" are the table's rows bit for bit (those
    the gather moves), and the model's outputs those of eager within fp32 tolerance."""
    torch.manual_seed(0)
    model = Lookup().eval()
    idx = torch.tensor([[3, 0, 23, 3], [7, 11, 5, 19]])
    outs = {}
    for lookups in ("gather", "onehot"):
        cm = frontend.compile(model, (idx,), FABRIC, lookups=lookups)
        cm.validate(idx)  # every node's value read back against eager (raises if not)
        outs[lookups] = cm(idx)
        rows = cm.last.value(cm.lowered.env["embedding"].index)
        np.testing.assert_array_equal(rows.numpy(), model.tok.weight.detach()[idx].numpy())
    kinds = {p.stage.kind for p in cm.prepared}
    assert {"compare", "gemm_summa"} <= kinds  # the one-hot product on the fabric
    torch.testing.assert_close(outs["onehot"], outs["gather"], rtol=0, atol=0)
    torch.testing.assert_close(outs["onehot"], model(idx), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lookups", ["gather", "onehot"])
def test_an_index_outside_the_table_is_refused_before_the_call(lookups):
    idx = torch.tensor([[3, 0, 23, 3], [7, 11, 5, 19]])
    cm = frontend.compile(Lookup().eval(), (idx,), FABRIC, lookups=lookups)
    bad = idx.clone()
    bad[1, 2] = 24
    with pytest.raises(IndexError, match=r"embedding index out of range \[0, 24\) in input "
                                         r"'idx': min 0, max 24"):
        cm(bad)
    if lookups == "onehot":  # the one program's samples are checked too
        with pytest.raises(IndexError, match="out of range"):
            cm.one_program_stream([(idx,), (bad,)])


def test_an_unknown_lookup_is_refused_naming_the_choices():
    idx = torch.tensor([[1, 2]])
    with pytest.raises(FrontendError, match=r"lookups must be one of \['gather', 'onehot'\], "
                                            r"got 'table'"):
        frontend.compile(Lookup().eval(), (idx,), FABRIC, lookups="table")


def test_gathers_are_refused_in_one_program_naming_the_way_out():
    idx = torch.tensor([[1, 2]])
    cm = frontend.compile(Lookup().eval(), (idx,), FABRIC)
    with pytest.raises(PlacementError, match='gathers operand .* by each call\'s indices.*'
                                             'lookups="onehot"'):
        cm.one_program(idx)


class CountsTokens(torch.nn.Module):
    """XLM's lengths: the tokens that are not padding, counted per row, scale a lookup."""

    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(24, 4)

    def forward(self, idx):
        lengths = (idx != 2).sum(dim=1)
        return self.tok(idx) * lengths[:, None, None]


@pytest.mark.parametrize("lookups", ["gather", "onehot"])
def test_a_count_of_checked_ids_per_call_or_on_the_fabric(lookups):
    """The count's 0/1 mask moves in per call from the host's values (lookups "gather"),
    or is computed on the fabric from the ids' words ("onehot"), so that one program holds
    it; the same counts either way."""
    idx = torch.tensor([[1, 2, 2, 5], [2, 7, 7, 7]])
    model = CountsTokens().eval()
    cm = frontend.compile(model, (idx,), FABRIC, lookups=lookups)
    gathered = [p.stage.name for p in cm.prepared
                if any(op.gather is not None for op in p.stage.operands)]
    assert bool(gathered) == (lookups == "gather")
    for call in (idx, torch.tensor([[2, 2, 2, 2], [0, 1, 3, 4]])):
        torch.testing.assert_close(cm(call), model(call), rtol=0, atol=0)


@pytest.mark.long
def test_a_token_model_runs_as_one_program():
    """TinyGPT (embeddings, attention, layer norms) with lookups "onehot" and the tiles
    its colors fit: one fabric program, two samples streamed, each sample's words those
    of a call on it run part by part, bit for bit."""
    torch.manual_seed(0)
    model = TinyGPT(layers=1).eval()
    xs = [torch.randint(0, 32, (1, 4)) for _ in range(2)]
    cm = frontend.compile(model, (xs[0],), FabricConfig.small(8, 8), colors="fit",
                          lookups="onehot")
    stream = cm.one_program_stream([(x,) for x in xs])
    for s, x in enumerate(xs):
        out = cm(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
        assert stream.same_words(s, cm.last.words), s
    assert stream.period < stream.latency
