"""A stage's kernel probed on a fabric the size of its tile (`FabricConfig.tile`) has the
memory layout it has in place on the whole fabric: the maps `frontend.runtime` takes from
the tile equal the in-place probes, for every stage of the test models, fp32 and mixed."""

import pytest
import torch

import frontend
from fabric import FabricConfig
from fabric.kernels import probe_inputs, probe_output
from frontend.runtime import probe_on_tile
from tests.frontend.models import CONFIG, MLP, LeNet, TinyGPT

CASES = [("mlp", MLP, (torch.randn(2, 16),), "fp32"),
         ("lenet", LeNet, (torch.randn(2, 1, 8, 8),), "fp32"),
         ("gpt", lambda: TinyGPT(layers=1), (torch.randint(0, 32, (1, 4)),), "fp32"),
         ("gpt", lambda: TinyGPT(layers=1), (torch.randint(0, 32, (1, 4)),), "mixed")]


def same_map(a, b):
    assert (a.shape, a.rect, a.dtypes) == (b.shape, b.rect, b.dtypes)
    assert a.symbols.keys() == b.symbols.keys()
    for k in a.symbols:
        assert (a.symbols[k] == b.symbols[k]).all(), k


@pytest.mark.parametrize("name, make, inputs, precision", CASES)
def test_tile_probes_equal_in_place_probes(name, make, inputs, precision):
    torch.manual_seed(0)
    cm = frontend.compile(make().eval(), inputs, config=CONFIG, precision=precision)
    assert len(cm.prepared) > 3
    for p in cm.prepared:
        in_maps, out_map = probe_on_tile(p.stage, CONFIG, p.rect)
        placed = p.stage.build(CONFIG, p.rect)
        want = probe_inputs(placed, {op.name: op.shape for op in p.stage.operands})
        assert in_maps.keys() == want.keys()
        for k in want:
            same_map(in_maps[k], want[k])
        same_map(out_map, probe_output(placed))


def test_tile_keeps_every_figure_but_the_size():
    config = FabricConfig.small(12, 12, queue_depth=3)
    tile = config.tile(2, 5)
    assert (tile.rows, tile.cols, tile.usable_rows, tile.usable_cols) == (2, 5, 2, 5)
    assert (tile.queue_depth, tile.simd, tile.sram_bytes) == (3, config.simd,
                                                              config.sram_bytes)
