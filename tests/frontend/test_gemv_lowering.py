"""Products of few rows: one row lowered to the GEMV kernel (`frontend.lowering.common.
_gemv`: y = B^T x + c0 for x of shape (1, k)); a few, with `compile(...,
gemm_orientation="auto")`, to SUMMA tiles run transposed where that is faster.

Tolerances: fp32 nodes within `frontend.validate`'s fp32 bounds (assert_close's rtol 1.3e-6,
atol 1e-5: the GEMV sums k products in order, eager in its own order); the 16-bit run within
MIXED_ULPS epsilons of autocast (as tests/frontend/test_frontend_mixed.py states).
"""

import pytest
import torch

import frontend
from frontend import amp
from frontend.zoo import MLP
from tests.frontend.models import CONFIG, words_apart


class Head(torch.nn.Module):
    """A linear layer with bias, a ReLU and one without bias: two products of one row."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(24, 40)
        self.fc2 = torch.nn.Linear(40, 7, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class RuntimeRight(torch.nn.Module):
    """A row times a computed matrix (an attention score of one query): B is a runtime
    tensor, so its transpose is a move."""

    def forward(self, q, keys):
        return q @ torch.tanh(keys).t()


def _kinds(cm):
    return [p.stage.kind for p in cm.prepared]


@pytest.mark.parametrize("mode", ["sequential", "pipelined"])
def test_row_products_are_gemv_stages_and_match_eager(mode):
    torch.manual_seed(0)
    model = Head().eval()
    x = torch.randn(1, 24)
    cm = frontend.compile(model, (x,), config=CONFIG, mode=mode)
    assert _kinds(cm).count("gemv") == 2 and "gemm_summa" not in _kinds(cm)
    rows = cm.validate(x)  # every node within its fp32 bound, read back where it lies
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x))
    # the placement planned with the kernel's model, which is exact: each GEMV stage ran
    # its predicted cycles in the engine
    simulated = {r.name: r.kernel_cycles for r in cm.last.results}
    for p in cm.prepared:
        if p.stage.kind == "gemv":
            assert simulated[p.stage.name] == p.kernel.model_cycles
    assert 0 < cm.utilization < 1


def test_two_rows_stay_summa():
    torch.manual_seed(0)
    cm = frontend.compile(Head().eval(), (torch.randn(2, 24),), config=CONFIG)
    assert "gemv" not in _kinds(cm) and _kinds(cm).count("gemm_summa") == 2


def test_runtime_matrix_moves_transposed():
    torch.manual_seed(1)
    q, keys = torch.randn(1, 16), torch.randn(12, 16)
    cm = frontend.compile(RuntimeRight(), (q, keys), config=CONFIG)
    assert "gemv" in _kinds(cm)
    rows = cm.validate(q, keys)
    assert all(r.ok for r in rows)
    torch.testing.assert_close(cm(q, keys), RuntimeRight()(q, keys))


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_mixed_precision_row_products(half):
    before = amp.get_half_dtype()
    try:
        amp.set_half_dtype(half)
        torch.manual_seed(2)
        model, x = Head().eval(), torch.randn(1, 24)
        cm = frontend.compile(model, (x,), config=CONFIG, precision="mixed")
        gemvs = [p.kernel.info for p in cm.prepared if p.stage.kind == "gemv"]
        assert len(gemvs) == 2 and {g["dtype"] for g in gemvs} == {amp.get_half_dtype().fabric}
        rows = cm.validate(x)  # within MIXED_ULPS of autocast, or it raises
        assert all(r.ok for r in rows)
    finally:
        amp.set_half_dtype(before.name)


def test_one_program_runs_gemv_stages():
    """The GEMV's tiles merge into the one fabric program like any kernel: two samples
    started by their data, each sample's words those of the parts run apart."""
    torch.manual_seed(3)
    model = Head().eval()
    cm = frontend.compile(model, (torch.randn(1, 24),), config=CONFIG, colors="fit")
    xs = [torch.randn(1, 24) for _ in range(2)]
    apart = words_apart(cm, xs)
    run = cm.one_program_stream([(x,) for x in xs], start="data")
    assert all(run.same_words(s, words) for s, words in enumerate(apart))


@pytest.mark.parametrize("mode", ["sequential", "pipelined"])
def test_gemm_orientation_auto_gives_the_same_words_faster(mode):
    """`compile(..., gemm_orientation="auto")`: the MLP's products of 4 rows run transposed
    (C^T = B^T A^T, fmas along C's 24 and 8 columns instead of down 4 rows); every element
    is the same sum in the same order, and its other stages are exact, so the outputs are
    those of "rows" bit for bit, in fewer kernel cycles."""
    torch.manual_seed(4)
    model, x = MLP().eval(), torch.randn(4, 16)
    rows = frontend.compile(model, (x,), config=CONFIG, mode=mode)
    auto = frontend.compile(model, (x,), config=CONFIG, mode=mode, gemm_orientation="auto")
    flipped = [p for p in auto.prepared if p.kernel.info.get("orientation") == "cols"]
    assert flipped and all(p.stage.kind == "gemm_summa" for p in flipped)
    assert all(p.kernel.info["orientation"] == "rows" for p in rows.prepared
               if p.stage.kind == "gemm_summa")
    assert torch.equal(auto(x), rows(x))
    assert all(r.ok for r in auto.validate(x))

    def gemm_cycles(cm):
        return sum(r.kernel_cycles for r in cm.last.results
                   if r.name in {p.stage.name for p in cm.prepared
                                 if p.stage.kind == "gemm_summa"})

    assert gemm_cycles(auto) < gemm_cycles(rows)


def test_gemm_orientation_names_the_choices():
    with pytest.raises(frontend.FrontendError, match="gemm_orientation.*'rows', 'auto'.*'cols'"):
        frontend.compile(Head().eval(), (torch.randn(2, 24),), config=CONFIG,
                         gemm_orientation="cols")


def test_transposed_tiles_in_the_one_program():
    """SUMMA tiles run transposed merge into the one fabric program like any kernel (their
    layouts are what their load writes): samples started by their data give the words of
    the parts run apart."""
    torch.manual_seed(5)
    model = MLP().eval()
    cm = frontend.compile(model, (torch.randn(4, 16),), config=CONFIG, colors="fit",
                          gemm_orientation="auto")
    assert any(p.kernel.info.get("orientation") == "cols" for p in cm.prepared)
    xs = [torch.randn(4, 16) for _ in range(2)]
    apart = words_apart(cm, xs)
    run = cm.one_program_stream([(x,) for x in xs], start="data")
    assert all(run.same_words(s, words) for s, words in enumerate(apart))
