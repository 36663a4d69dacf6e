"""Loss curves on the fabric against eager PyTorch, step by step, on fixed synthetic tasks:
50 steps of the zoo's MLP (SGD with momentum, mse on a regression task) and 20 of a
one-layer GPT of the zoo (AdamW, cross-entropy on next-token prediction; d=8, vocab 16,
batches of 2 x 4 tokens: the same ~180 stages as at d=16, with narrower GEMMs), in fp32
and in mixed precision with each half dtype (cbfloat16, which PyTorch lacks, against eager
fp32). Tolerances: `frontend.training.curves.CURVE_RTOL` (its docstring says why). Each
run also has to learn: its last losses lie well below its first.

These runs take minutes each (hundreds of simulated graph runs per step): they carry the
`long` mark, stay out of the default `make test` and run in CI through `make test-long`.
"""

from __future__ import annotations

import pytest

import frontend
from frontend.training import tasks
from frontend.training.curves import compare_curves
from tests.frontend.models import CONFIG

PRECISIONS = ("fp32", "float16", "bfloat16", "cbfloat16")
MLP_STEPS, GPT_STEPS = 50, 20


def _curves(common: dict, train, precision: str):
    fabric = frontend.Trainer(backend=frontend.backend("fabric", config=CONFIG),
                              precision=precision, **common)
    fabric.fit(train)
    eager = frontend.Trainer(device="cpu", precision="fp32" if precision == "cbfloat16"
                             else precision, **common)
    eager.fit(train)
    mode = "fp32" if precision == "fp32" else "mixed"
    check = compare_curves(fabric.losses, eager.losses, mode)
    assert check["ok"], (f"{precision}: step {check['worst_step']}: relative loss "
                         f"difference {check['max_rel']:.3g} > {check['rtol']}")
    return fabric, eager


@pytest.mark.long
@pytest.mark.parametrize("precision", PRECISIONS)
def test_mlp_loss_curve_follows_eager(precision):
    train, _ = tasks.regression(batch=4, batches=MLP_STEPS, seed=0)
    fabric, eager = _curves({"model": {"name": "mlp", "seed": 0},
                             "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
                             "loss": "mse"}, train, precision)
    assert len(fabric.history) == MLP_STEPS
    assert all(h["taken"] for h in fabric.history)  # no overflow at these scales
    # per-batch losses are noisy (batches of 4): compare the first and last ten (0.47 here)
    first, last = fabric.losses[:10], fabric.losses[-10:]
    assert sum(last) < 0.6 * sum(first)


@pytest.mark.long
@pytest.mark.parametrize("precision", PRECISIONS)
def test_gpt_loss_curve_follows_eager(precision):
    train, _ = tasks.tokens(vocab=16, block=4, batch=2, batches=GPT_STEPS, seed=0)
    model = {"name": "gpt", "args": {"layers": 1, "vocab": 16, "d": 8, "heads": 2},
             "seed": 0}
    fabric, eager = _curves({"model": model, "loss": "cross_entropy",
                             "optimizer": {"type": "adamw", "lr": 3e-2,
                                           "weight_decay": 0.0}}, train, precision)
    assert len(fabric.history) == GPT_STEPS
    # it learns the successor table: eager fp32 goes from 3.03 to 1.57 (first and last 3)
    first, last = fabric.losses[:3], fabric.losses[-3:]
    assert sum(last) < 0.7 * sum(first)
