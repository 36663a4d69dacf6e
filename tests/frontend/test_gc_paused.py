"""The cyclic collector paused for a compile and left as it was found."""

import gc

import pytest
import torch

import frontend
from fabric.config import FabricConfig
from frontend.gc_paused import gc_paused


@pytest.fixture
def collector_state():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_inside_and_restored_after(collector_state):
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()  # a caller that had it off keeps it off
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_restored_when_the_block_raises(collector_state):
    gc.enable()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("a compile that fails")
    assert gc.isenabled()


def test_compile_leaves_the_collector_on(collector_state):
    gc.enable()
    frontend.compile(torch.nn.Linear(4, 3), (torch.randn(2, 4),),
                     config=FabricConfig.small(4, 4))
    assert gc.isenabled()
    with pytest.raises(frontend.FrontendError):  # refused input: still restored
        frontend.compile(torch.nn.Linear(4, 3), (torch.randn(0, 4),),
                         config=FabricConfig.small(4, 4))
    assert gc.isenabled()
