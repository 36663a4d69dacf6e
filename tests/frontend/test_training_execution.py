"""The backend's execution mode in training (`frontend.backend(..., execution=)`): a
pipelined run trains like a sequential one, in fewer cycles per step; both graphs of the
step are compiled in the mode (placed for a pipeline, their cycles their latency); a bad
name is refused with the accepted ones, in Python, YAML and on the command line."""

from __future__ import annotations

import pytest
import torch
import yaml

import frontend
from frontend.placement import place
from frontend.training import tasks
from frontend.training.cli import with_execution
from frontend.training.config_file import load_config, make_trainer
from tests.frontend.models import CONFIG

SGD = {"type": "sgd", "lr": 0.05, "momentum": 0.9}


@pytest.fixture(scope="module")
def runs():
    """{execution: the Trainer after 2 steps of the MLP on CONFIG}, same model and data."""
    train, _ = tasks.regression(batch=4, batches=2, val_batches=1)
    out = {}
    for execution in ("sequential", "pipelined"):
        trainer = frontend.Trainer(
            backend=frontend.backend("fabric", config=CONFIG, execution=execution),
            model={"name": "mlp", "seed": 3}, optimizer=SGD, loop={"max_steps": 2})
        trainer.fit(train)
        out[execution] = trainer
    return out


def test_pipelined_training_gives_the_sequential_losses_and_weights(runs):
    seq, pipe = runs["sequential"], runs["pipelined"]
    # the modes differ only in the tiles, so in the order of the GEMMs' partial sums (fp32,
    # sums of at most 32 products of magnitude ~1: a few ulps, 1e-6 relative at most after
    # two steps of lr 0.05); the losses agree to fp32 rounding
    torch.testing.assert_close(torch.tensor(pipe.losses), torch.tensor(seq.losses),
                               rtol=1e-5, atol=0)
    for (name, a), (_, b) in zip(pipe.model.named_parameters(),
                                 seq.model.named_parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def test_pipelined_steps_take_fewer_cycles(runs):
    seq, pipe = runs["sequential"].history, runs["pipelined"].history
    for s, p in zip(seq, pipe):
        assert 0 < p["cycles"] < s["cycles"]
        assert p["utilization"] > s["utilization"]  # the same multiply-adds in fewer cycles


def test_both_graphs_are_compiled_for_a_pipeline(runs):
    step = next(iter(runs["pipelined"].runner.steps.values()))
    assert step.step.execution == "pipelined"
    for cm in (step.step.forward, step.step.backward):
        assert cm.mode == "pipelined"
        want = place(cm.lowered.stages, cm.config, cm.edges, balance="cycles")
        assert cm.placement.rects == want.rects
        assert cm.cycles == cm.latency  # a graph's cycles: its latency
    # a step's cycles: the graphs' latencies and the gradients' moves to the homes
    assert step.cycles == step.step.forward.latency + step.step.backward.latency \
        + step.grad_move_cycles
    log = runs["pipelined"].history[-1]
    peak = CONFIG.simd_width("fma", "f32") * CONFIG.num_pes
    assert log["cycles"] == step.cycles
    assert log["utilization"] == pytest.approx(step.fmas / (peak * step.cycles))


@pytest.mark.parametrize("call, match", [
    (lambda: frontend.backend("fabric", config=CONFIG, execution="streamed"),
     r"backend execution must be one of \['sequential', 'pipelined'\], got 'streamed'"),
    (lambda: frontend.Trainer(backend={"name": "fabric", "execution": "parallel"},
                              model={"name": "mlp"}, optimizer=SGD),
     r"backend execution must be one of \['sequential', 'pipelined'\], got 'parallel'"),
    (lambda: frontend.backend("cpu", execution="pipelined"), "no execution mode"),
    (lambda: frontend.backend("cpu", execution="sequential"), "no execution mode"),
])
def test_a_bad_execution_is_refused_with_the_accepted_ones(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_yaml_key_round_trips(tmp_path):
    backend = {"name": "fabric", "config": {"preset": "small", "rows": 12, "cols": 12},
               "mode": "train", "execution": "sequential"}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"backend": backend, "model": {"name": "mlp"},
                                    "optimizer": SGD}))
    loaded = load_config(path)
    assert loaded["backend"] == backend
    trainer = make_trainer(loaded)
    assert trainer.backend == frontend.backend("fabric", config=CONFIG, execution="sequential")
    assert make_trainer({**loaded, "backend": {"name": "fabric"}}).backend.execution \
        == "pipelined"  # the default
    assert frontend.backend("cpu").execution is None


def test_the_command_lines_execution_replaces_the_configs():
    assert with_execution({"backend": {"name": "fabric", "execution": "sequential",
                                       "mode": "train"}}, None, "pipelined") \
        == {"name": "fabric", "execution": "pipelined", "mode": "train"}
    assert with_execution({"device": "fabric"}, None, "pipelined") \
        == {"name": "fabric", "execution": "pipelined"}
    assert with_execution({"backend": {"name": "fabric", "mode": "validate"}}, "fabric",
                          "pipelined") == {"name": "fabric", "execution": "pipelined"}
