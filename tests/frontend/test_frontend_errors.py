"""Error paths: an unsupported op, a model too big for the fabric (what it needs at least,
against what the fabric has), wrong inputs."""

import math

import pytest
import torch
import torch.nn as nn

import frontend
from fabric import FabricConfig
from frontend import placement
from frontend.capture import capture_module
from frontend.lowering import lower
from tests.frontend.models import CONFIG, MLP

SMALL = FabricConfig.small(4, 4)


class LogGamma(nn.Module):
    def forward(self, x):
        return torch.lgamma(x) + 1.0


def test_unsupported_op_names_op_node_and_source_line():
    with pytest.raises(frontend.UnsupportedOpError) as info:
        frontend.compile(LogGamma(), (torch.randn(2, 8),), config=CONFIG)
    msg = str(info.value)
    assert "aten.lgamma.default" in msg
    assert "FX node 'lgamma'" in msg
    assert "test_frontend_errors.py" in msg and "torch.lgamma(x)" in msg
    assert "Supported ops:" in msg and "aten.addmm.default" in msg


class PoolingIndices(nn.Module):
    def forward(self, x):
        return nn.functional.max_pool2d(x, 2, return_indices=True)[1]


def test_a_rule_that_covers_part_of_an_op_gives_the_reason():
    """max pooling computes the maxima, not their indices: returning them names that."""
    with pytest.raises(frontend.UnsupportedOpError, match="not computed on the fabric"):
        frontend.compile(PoolingIndices(), (torch.randn(1, 2, 4, 4),), config=CONFIG)


def test_model_too_big_for_the_fabric():
    """Every stage too big for 4 PEs: the first is described, the others counted, and each
    has its kernel's own message on a line of its own."""
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    with pytest.raises(frontend.PlacementError) as info:
        frontend.compile(model, (torch.randn(64, 256),), config=FabricConfig.small(2, 2))
    first, *kernels = str(info.value).splitlines()
    assert "stages need at least" in first and "PEs (4 available)" in first
    assert "B of SRAM (196608 B available: 4 PEs x 49152 B)" in first
    assert ("stage 'addmm' (gemm_summa: A 64x256, B 256x256, C0 64x256 -> 64x256) fits no "
            "tile") in first
    assert first.endswith("so do 1 more stages (below)")
    assert [line.split(" on ")[0] for line in kernels] == ["addmm", "addmm_1"]


def test_a_layer_no_fabric_holds_is_told_with_what_it_needs():
    """nn.Linear(4096, 4096) on 16 PEs: the 64 MiB weight needs 1367 PEs' SRAM at least, and
    SUMMA (a color per tile row and column, 24 colors) takes at most 2 x 22 PEs for a
    2-row output: no fabric of 48 KiB PEs holds it, whatever its size."""
    with pytest.raises(frontend.PlacementError) as info:
        frontend.compile(nn.Linear(4096, 4096), (torch.randn(2, 4096),), config=SMALL)
    first, kernel = str(info.value).splitlines()
    # A, B (the weight), C (the bias rows, C0, are its initial words: held once)
    gemm = 4 * (2 * 4096 + 4096 * 4096 + 2 * 4096)
    pes = math.ceil(gemm / 49152)  # the GEMM's PEs by its data
    assert first == (
        f"the model does not fit small(4,4): its 1 stages need at least {pes} PEs (16 "
        f"available) and {gemm} B of SRAM (786432 B available: 16 PEs x 49152 B); "
        "stage 'addmm' (gemm_summa: A 2x4096, B 4096x4096, C0 2x4096 -> 2x4096) fits no "
        "tile of "
        "small(4,4): on the largest its kernel takes there, 2 x 4 PEs, it needs at least "
        f"{math.ceil(gemm / 8)} B per PE (49152 B available), and no fabric with 49152 B per "
        "PE and 21 program colors holds it: its kernel takes at most 2 x 19 PEs")
    # SUMMA takes a color per row and per column: 2 + 19 of the 21 colors left to a
    # program by the host's 3 reserved ones (docs/engine.md, "Reserved colors")
    assert kernel.startswith("addmm on 2 x 4 PEs: gemm_summa m=2 k=4096 n=4096 on 2x4 PEs")
    # (its accumulator padded by a word: the bank-aware layout the frontend gives SUMMA)
    assert "= 16793820 B per PE, more than the 48 KiB (49152 B) of a PE" in kernel


@pytest.mark.parametrize("features, batch, stage, want", [
    (4096, 2, "relu_relu", (1, 2)),  # 2 blocks of 2 x 4096 (input, output), 64 KiB
    (128, 64, "addmm", (2, 3)),  # 96 KiB of A, B and C (C0 in C's words), SUMMA's panels
])
def test_smallest_tile_is_the_fewest_pes_the_kernel_builds_on(features, batch, stage, want):
    """No tile of the fabric with fewer PEs takes the kernel (each is built and refused);
    its data (`data_bytes`) is at most what the kernel holds on the smallest tile."""
    layer = nn.Sequential(nn.Linear(features, features), nn.ReLU())
    st = next(s for s in lower(capture_module(layer, (torch.randn(batch, features),))).stages
              if s.name == stage)
    assert placement.smallest_tile(st, SMALL) == want
    fewer = [(r, c) for r in range(1, 5) for c in range(1, 5) if r * c < want[0] * want[1]]
    assert all(isinstance(placement.kernel_fit(st, shape, SMALL), str) for shape in fewer)
    kernel = st.build(SMALL, placement.Rect(0, 0, *want))
    held = sum(4 * p.rect.rows * p.rect.cols * sum(s.words for s in p.tile.symbols.values())
               for p in kernel.program.placements)
    assert placement.data_bytes(st) <= held


def test_wrong_input_shape_is_named():
    cm = frontend.compile(MLP(), (torch.randn(2, 16),), config=CONFIG)
    with pytest.raises(frontend.FrontendError, match=r"input 'x' is \(3, 16\)"):
        cm(torch.randn(3, 16))


class ManyLayers(nn.Module):
    """Twelve GEMMs on tiles of several PEs: together their SUMMA colors far exceed 24,
    which the fabric reuses over time (each stage's program holds the colors alone)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(12)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def test_more_colors_than_the_fabric_has_are_reused_over_time():
    torch.manual_seed(0)
    model = ManyLayers().eval()
    x = torch.randn(8, 8)
    cm = frontend.compile(model, (x,), config=CONFIG)
    # SUMMA routes a color per owner column and per owner row (a 1-wide side needs none)
    gemm_colors = sum((p.rect.cols if p.rect.cols > 1 else 0) +
                      (p.rect.rows if p.rect.rows > 1 else 0)
                      for p in cm.prepared if p.stage.kind == "gemm_summa")
    assert gemm_colors > len(CONFIG.program_colors)
    torch.testing.assert_close(cm(x), model(x))


class DataDependent(nn.Module):
    """Python control flow on a tensor's value: export cannot trace it."""

    def forward(self, x):
        y = x * 2.0
        if y.sum() > 0:
            return y + 1.0
        return y - 1.0


def test_a_model_export_cannot_trace_gets_exports_reason_and_no_printed_graph(capfd):
    with pytest.raises(frontend.FrontendError, match=r"could not capture DataDependent: "
                       r"GuardOnDataDependentSymNode(.|\n)*this error's `partial_graph`") as err:
        frontend.compile(DataDependent(), (torch.randn(3),), config=CONFIG)
    assert "aten.mul.Tensor" in str(err.value.partial_graph)  # the graph up to the branch
    assert "def forward" not in capfd.readouterr().err  # export printed it to stderr
