"""Stages and moves run on windows of the fabric (`fabric.window`) give what they give on the
whole fabric: per stage the same kernel, move, host and load cycles, the same transfers, and
bit for bit the same outputs.

Reference: `Execution(..., windows=False)`, every program on the whole fabric as before
windows.
"""

import importlib

import numpy as np
import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend.runtime import Execution
from tests.frontend.models import CONFIG, MLP, LeNet, TinyGPT

BIG = FabricConfig.small(24, 24)  # windows of 8, 16 and 24 PEs a side, and the whole fabric


def gpt():
    return TinyGPT(vocab=32, d=32, heads=2, layers=1, block=8)


# on the tests' fabric (12 x 12) the windows are 8 x 8 or the whole fabric
CASES = [pytest.param(MLP, lambda: (torch.randn(2, 16),), CONFIG, id="mlp"),
         pytest.param(LeNet, lambda: (torch.randn(1, 1, 8, 8),), CONFIG, id="lenet"),
         pytest.param(gpt, lambda: (torch.randint(0, 32, (1, 8)),), CONFIG, id="gpt"),
         pytest.param(gpt, lambda: (torch.randint(0, 32, (1, 8)),), BIG, id="gpt-24",
                      marks=pytest.mark.long)]


def _figures(results):
    return [(r.name, r.kernel_cycles, r.move_cycles, r.host_cycles, r.load_cycles,
             r.moved_words, r.busy, r.sram_bytes, r.transfers) for r in results]


@pytest.mark.parametrize("make, inputs, config", CASES)
def test_windows_equal_the_whole_fabric(make, inputs, config):
    torch.manual_seed(0)
    args = inputs()
    cm = frontend.compile(make().eval(), args, config=config)
    assert any(not p.window.whole for p in cm.prepared)  # windows are used
    windowed = cm.run(*args)
    whole = Execution(cm.config, cm.prepared, cm.lowered.tensors, cm.last_inputs,
                      cm.max_cycles, cm.table_rows, windows=False)
    assert _figures(windowed.results) == _figures(whole.results)
    assert windowed.words.keys() == whole.words.keys()
    for t in windowed.words:
        for k, w in windowed.words[t].items():
            np.testing.assert_array_equal(w, whole.words[t][k], err_msg=f"{t} {k}")



def test_a_models_programs_are_built_once_not_per_call():
    """Every stage's and move's program is built (`fabric.build`) on the model's first
    call and kept (`fabric.build.build_once`): a second call builds none, and gives the
    same outputs and cycles."""
    build_module = importlib.import_module("fabric.build")  # the module, not the function
    torch.manual_seed(0)
    x = torch.randn(2, 16)
    cm = frontend.compile(MLP().eval(), (x,), CONFIG, mode="pipelined")
    builds = []
    real = build_module.build
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build_module, "build", lambda *a, **k: builds.append(1) or real(*a, **k))
        first = cm(x)
        once, cycles = len(builds), [(r.kernel_cycles, r.move_cycles) for r in cm.last.results]
        second = cm(x)
    assert once >= len(cm.prepared) and len(builds) == once  # the stages' and the moves'
    assert torch.equal(first, second)
    assert [(r.kernel_cycles, r.move_cycles) for r in cm.last.results] == cycles
