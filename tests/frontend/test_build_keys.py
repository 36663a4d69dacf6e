"""Kernels built alike share their weighing and probes (frontend/build_keys.py): keys equal
exactly for closures of the same code over equal plain values, none for anything else,
and a compiled model's shared maps those of probing each stage alone."""

import numpy as np
import torch

import frontend
from fabric import FabricConfig, Rect
from fabric.kernels import build_elementwise, probe_inputs, probe_output
from frontend.build_keys import build_key, shared, shared_builds


def _factory(*values, **named):
    return lambda cfg, rect: (cfg, rect, values, named)


def test_equal_code_and_values_give_equal_keys():
    assert build_key(_factory(4, "add", (1, 2))) == build_key(_factory(4, "add", (1, 2)))
    assert build_key(_factory(4)) != build_key(_factory(8))
    assert build_key(_factory(1)) != build_key(_factory(1.0))  # 1 and 1.0 apart
    assert build_key(_factory(1)) != build_key(_factory(True))
    assert build_key(_factory(dtype="f16")) != build_key(_factory(dtype="bf16"))
    # another code object of the same text is another builder
    assert build_key(lambda cfg, rect: 0) != build_key(lambda cfg, rect: 0)


def test_nested_closures_and_functions_are_followed():
    def outer(op):
        inner = _factory(op)
        return lambda cfg, rect, **fmt: inner(cfg, rect)

    assert build_key(outer(np.add)) == build_key(outer(np.add))
    assert build_key(outer(np.add)) != build_key(outer(np.multiply))
    assert build_key(outer(max)) == build_key(outer(max))

    def with_default(cfg, rect, j0=3):
        return j0

    assert build_key(with_default) is not None


def test_values_that_cannot_be_keyed_give_none():
    assert build_key(_factory(np.ones(3))) is None  # an array
    assert build_key(_factory(torch.ones(3))) is None
    assert build_key(_factory([1, 2])) is None  # a list may change
    assert build_key(_factory(object())) is None
    assert build_key(_factory(FabricConfig.small(2, 2).tile)) is None  # a bound method

    def deep(n):
        return _factory() if n == 0 else _factory(deep(n - 1))

    assert build_key(deep(2)) is not None
    assert build_key(deep(20)) is None  # nested past MAX_DEPTH


def test_shared_only_inside_a_compile_scope():
    assert shared("fits") is None  # outside: nothing shared
    with shared_builds():
        shared("fits")["k"] = 1
        assert shared("fits") == {"k": 1} and shared("probes") == {}
        with shared_builds():  # a compile within a compile: its own
            assert shared("fits") == {}
        assert shared("fits") == {"k": 1}
    assert shared("fits") is None


def test_a_setting_changed_between_compiles_is_not_met_stale(monkeypatch):
    """Two compiles of one model, the SUMMA layout setting its GEMM build reads from the
    module changed between them: the second weighs the GEMM with the new setting (the
    same build key: the setting is read, not closed over)."""
    from frontend.lowering import common
    from frontend.tile_shapes import kernel_fit

    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64)
    config = FabricConfig.small(4, 4)
    fits = {}
    for aware in (True, False):
        monkeypatch.setattr(common, "SUMMA_BANK_AWARE", aware)
        cm = frontend.compile(model, (x,), config=config)
        gemm = next(s for s in cm.lowered.stages if s.kind == "gemm_summa")
        fits[aware] = kernel_fit(gemm, (2, 2), config)
        assert fits[aware] == gemm.build(config, Rect(0, 0, 2, 2)).model_cycles
    assert fits[True] < fits[False]  # the declared layout's read pairs wait


def test_stages_built_alike_share_maps_equal_to_their_own_probes():
    """A chain of six equal linear layers with relus (their weights are operands, not
    part of the build): the prepared maps of every stage equal a probe of that stage's
    own kernel at its tile."""
    torch.manual_seed(0)
    layers = [m for _ in range(6) for m in (torch.nn.Linear(16, 16), torch.nn.ReLU())]
    config = FabricConfig.small(8, 8)
    cm = frontend.compile(torch.nn.Sequential(*layers).eval(), (torch.randn(4, 16),),
                          config=config)
    keys = [p.stage.build_key for p in cm.prepared]
    assert None not in keys and len(set(keys)) < len(keys)  # some stages build alike
    for p in cm.prepared:
        kernel = p.stage.build(config, p.rect)
        own_in = probe_inputs(kernel, {op.name: op.shape for op in p.stage.operands})
        for name, m in p.in_maps.items():
            assert m.same_placement(own_in[name]), (p.stage.name, name)
        assert p.out_map.same_placement(probe_output(kernel)), p.stage.name


def test_elementwise_builds_of_equal_shapes_share_a_key():
    a = _factory(build_elementwise, 4, 4)
    assert build_key(a) == build_key(_factory(build_elementwise, 4, 4))
