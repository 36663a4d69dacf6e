"""A model compiled for a fabric under the SRAM banks' read-pair rule
(`FabricConfig.bank_conflicts`): the same output bits as without it, and the GEMM's
predicted cycles, which count the conflicts of its tile's layout, those the engine
simulates. The frontend lays its SUMMA tiles out bank-aware (`frontend.tile_shapes.
SUMMA_BANK_AWARE`), where the rule costs the GEMM nothing; in the kernel's declared layout
every fma element waits, and the balance, planning with those cycles, gives it more PEs."""

import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend import gemm_split
from frontend.lowering import common
from frontend.report import stage_rows


@pytest.mark.parametrize("bank_aware", [True, False], ids=["bank_aware", "declared"])
def test_linear_under_the_read_pair_rule(bank_aware, monkeypatch):
    for module in (common, gemm_split):
        monkeypatch.setattr(module, "SUMMA_BANK_AWARE", bank_aware)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    x = torch.randn(32, 64)
    runs = {}
    for conflicts in (False, True):
        # the read-pair rule alone (fmas async): with synchronous fmas the balance takes
        # other tiles, where uneven blocks keep some conflicts in either layout
        config = FabricConfig.small(4, 4, bank_conflicts=conflicts, async_memory_ops=True)
        cm = frontend.compile(model, (x,), config=config)
        runs[conflicts] = cm, cm(x)
    (off, y_off), (on, y_on) = runs[False], runs[True]
    assert torch.equal(y_on, y_off)
    torch.testing.assert_close(y_on, model(x))
    gemm_off, gemm_on = (next(r for r in stage_rows(cm) if r["stage"] == "addmm")
                         for cm in (off, on))
    # the conflicts cost the GEMM cycles its model predicts (within 0.5 %, as without them)
    assert abs(gemm_on["predicted"] / gemm_on["simulated"] - 1) < 0.005
    if bank_aware:  # no read pair waits: the tiles and cycles of the machine without it
        assert (gemm_on["simulated"], gemm_on["pes"]) == (gemm_off["simulated"],
                                                          gemm_off["pes"])
    else:  # more PE-cycles for the same fmas
        assert gemm_on["simulated"] * gemm_on["pes"] > gemm_off["simulated"] * gemm_off["pes"]
        assert gemm_on["pes"] > gemm_off["pes"]
