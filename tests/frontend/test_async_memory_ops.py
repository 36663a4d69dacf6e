"""Models compiled for a fabric that follows the SDK's rule on asynchronous ops (the
presets: `FabricConfig.async_memory_ops=False`, an async DSD op needs a fabric operand, so the
GEMMs', the GEMV's fmas and the moves' local copies run synchronously): every node within
its tolerance of eager PyTorch in both execution modes and as one fabric program (whose
words are the parts' run apart, bit for bit), and no faster than where such ops overlap."""

import numpy as np
import pytest
import torch

import frontend
from fabric import FabricConfig
from tests.frontend.models import MLP

STRICT = FabricConfig.small(5, 5)
RELAXED = FabricConfig.small(5, 5, async_memory_ops=True)


@pytest.mark.parametrize("mode", ["pipelined", "sequential"])
def test_a_model_under_the_rule_validates_and_takes_longer(mode):
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(3, 16)
    strict = frontend.compile(model, (x,), STRICT, mode=mode)
    assert all(r.ok for r in strict.validate(x))
    relaxed = frontend.compile(model, (x,), RELAXED, mode=mode)
    relaxed(x)
    assert strict.cycles > relaxed.cycles


def test_one_program_under_the_rule_gives_the_parts_words():
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(3, 16)
    cm = frontend.compile(model, (x,), STRICT, mode="pipelined")
    cm(x)
    run = cm.one_program(x)
    for p in cm.prepared:
        for k, w in run.words[0][p.stage.name].items():
            np.testing.assert_array_equal(w, cm.last.words[p.stage.name][k],
                                          err_msg=f"stage {p.stage.name}, symbol {k}")
