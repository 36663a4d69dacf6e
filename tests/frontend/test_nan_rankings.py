"""A NaN reaching a ranking whose lowering does not order NaN (topk, sort, argmax,
max.dim, min.dim) raises RankingNaNError after the call, naming the FX node, its source
line and where the NaN is, instead of returning an answer eager would not give
(`frontend.nan_rankings`); without NaN the rankings are eager's."""

import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend import RankingNaNError

CONFIG = FabricConfig.small(6, 6)
NAN = float("nan")


class Ranks(torch.nn.Module):
    """A ranking of x, or of log(x) computed on the fabric (NaN where x < 0)."""

    def __init__(self, op: str, computed: bool = False):
        super().__init__()
        self.op, self.computed = op, computed

    def forward(self, x):
        y = torch.log(x) if self.computed else x
        if self.op == "topk":
            return torch.topk(y, 2).values
        if self.op == "sort":
            return torch.sort(y).values
        if self.op == "argmax":
            return torch.argmax(y, dim=1)
        return torch.max(y, dim=1).indices


@pytest.mark.parametrize("op", ["topk", "sort", "argmax", "max.dim"])
def test_a_nan_input_to_a_ranking_is_named(op):
    x = torch.tensor([[1.0, 4.0, 3.0, 2.0], [5.0, 1.0, 7.0, 0.5]])
    model = Ranks(op).eval()
    cm = frontend.compile(model, (x,), CONFIG)
    got = cm(x)
    assert torch.equal(got, model(x))  # exact without NaN
    bad = x.clone()
    bad[1, 2] = NAN
    target = {"topk": "topk", "sort": "sort", "argmax": "argmax", "max.dim": "max"}[op]
    with pytest.raises(RankingNaNError, match=rf"FX node '\w+' \(aten\.{target}\.\w+\) at "
                                              r".*test_nan_rankings\.py.*: its input holds NaN"
                                              r" at \(1, 2\) in this call; the fabric's "
                                              rf"{target} does not order NaN"):
        cm(bad)


def test_a_nan_the_fabric_computes_is_found_where_it_lies():
    x = torch.tensor([[1.0, 4.0, 3.0, 2.0], [5.0, 1.0, 7.0, 0.5]])
    model = Ranks("argmax", computed=True).eval()
    cm = frontend.compile(model, (x,), CONFIG)
    assert torch.equal(cm(x), model(x))
    bad = x.clone()
    bad[0, 3] = -1.0  # log(-1) = NaN, computed on the fabric
    with pytest.raises(RankingNaNError, match=r"aten\.argmax\.default.*NaN at \(0, 3\)"):
        cm(bad)
    with pytest.raises(RankingNaNError):  # validation runs the call
        cm.validate(bad)
    # by parts too, each sample of a stream named
    with pytest.raises(RankingNaNError, match=r"^sample 2 of the stream: FX node"):
        cm.stream([(x,), (x,), (bad,)])


def test_integer_inputs_are_not_taken_for_nan():
    """Negative int32 words read as floats are NaN bit patterns: integer inputs are not
    checked (they hold no NaN)."""
    x = torch.tensor([[-1, 4, -3, 2], [5, -1, 7, 0]])
    model = Ranks("sort").eval()
    cm = frontend.compile(model, (x,), CONFIG)
    assert torch.equal(cm(x), model(x))


def test_a_stream_simulated_as_one_program_is_checked_per_sample():
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    model = Ranks("argmax").eval()
    cm = frontend.compile(model, (x,), FabricConfig.small(5, 5), simulate="program")
    bad = x.clone()
    bad[0, 1] = NAN
    with pytest.raises(RankingNaNError, match=r"^sample 1 of the stream: FX node .*NaN at "
                                              r"\(0, 1\)"):
        cm.stream([(x,), (bad,)])
    assert torch.equal(cm.stream([(x,)])[0], model(x))
