"""A model compiled for a fabric under the SRAM banks' read-pair rule
(`FabricConfig.bank_conflicts`): the same output bits as without it, and the GEMM's
predicted cycles, which count the conflicts of its tile's layout, those the engine
simulates (the balance plans with them: the GEMM takes more PEs)."""

import torch

import frontend
from fabric import FabricConfig
from frontend.report import stage_rows


def test_linear_under_the_read_pair_rule():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    x = torch.randn(32, 64)
    runs = {}
    for conflicts in (False, True):
        cm = frontend.compile(model, (x,), config=FabricConfig.small(4, 4,
                                                                      bank_conflicts=conflicts))
        runs[conflicts] = cm, cm(x)
    (off, y_off), (on, y_on) = runs[False], runs[True]
    assert torch.equal(y_on, y_off)
    torch.testing.assert_close(y_on, model(x))
    gemm_off, gemm_on = (next(r for r in stage_rows(cm) if r["stage"] == "addmm")
                         for cm in (off, on))
    # the conflicts cost the GEMM cycles its model predicts (within 0.5 %, as without them)
    assert abs(gemm_on["predicted"] / gemm_on["simulated"] - 1) < 0.005
    # more PE-cycles for the same fmas
    assert gemm_on["simulated"] * gemm_on["pes"] > gemm_off["simulated"] * gemm_off["pes"]
    assert gemm_on["pes"] > gemm_off["pes"]
