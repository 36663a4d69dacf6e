"""Checkpoints of a fabric training run (frontend.training.checkpoint): save at step k, load
into fresh optimizer and scaler objects, continue to step n: bit-identical to the
uninterrupted run. The model and loop are test_amp_scaler.py's (nn.Linear(4, 3), mse,
compile_training_step + FabricSGD(momentum=0.9) + GradScaler), on the frontend tests'
CONFIG and MIN_TABLE_ROWS (one engine compile). Nothing damaged is loaded: a flipped byte
anywhere, a truncated file, a file that is not a checkpoint are refused with a
CheckpointError naming the file; a save killed half way leaves the last good checkpoint; a
Trainer refuses a checkpoint of another precision with a message saying so."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import fabric
import frontend
from frontend.errors import CheckpointError, FrontendError
from frontend.tables import MIN_TABLE_ROWS
from frontend.training import (
    GradScaler,
    compile_training_step,
    load_checkpoint,
    optimizer_step,
    save_checkpoint,
)
from frontend.training.checkpoint import write_checkpoint_file
from frontend.training.optim import FabricSGD
from tests.frontend.models import CONFIG

FABRIC = {"config": CONFIG, "min_table_rows": MIN_TABLE_ROWS}
N, K = 4, 2
ROOT = Path(__file__).resolve().parents[2]
# what a Trainer of an fp32 run stores with its checkpoint after step 1 of batch 0
FP32_TRAINER = {"trainer": {"step": 1, "epoch": 0, "next_batch": 1, "history": [],
                            "val_history": [], "device": "fabric", "precision": "fp32"}}


def _setup():
    torch.manual_seed(4)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(6, 4), torch.randn(6, 3)
    step = compile_training_step(model, (x,), (y,), F.mse_loss, CONFIG)
    return model, step, x, y


def _fresh(model):
    opt = FabricSGD(model.named_parameters(), lr=0.1, momentum=0.9, **FABRIC)
    # a small steps_per_increase: the scale doubles within the run, so its state matters
    return opt, GradScaler(init_scale=2.0**10, steps_per_increase=3)


def _train(model, step, x, y, opt, scaler, n):
    losses = []
    for _ in range(n):
        loss, grads = step((x,), (y,))
        opt.set_grads(grads)
        assert optimizer_step(loss, opt, scaler)
        opt.copy_to(model)
        losses.append(loss.detach().clone())
    return losses


def _assert_identical(a_opt, a_scaler, b_opt, b_scaler):
    wa, wb = a_opt.parameters(), b_opt.parameters()
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name
    sa, sb = a_opt.state_dict()["state"], b_opt.state_dict()["state"]
    for name in sa:
        assert sa[name]["step"] == sb[name]["step"] == N
        assert torch.equal(sa[name]["momentum_buffer"], sb[name]["momentum_buffer"]), name
    assert a_scaler.get_scale() == b_scaler.get_scale()
    assert a_scaler.state_dict() == b_scaler.state_dict()


def test_resume_is_bit_identical(tmp_path):
    model, step, x, y = _setup()
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt, scaler = _fresh(model)
    want = _train(model, step, x, y, opt, scaler, N)
    assert scaler.get_scale() == 2.0**11  # doubled after 3 clean steps: state crosses k

    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(init[n])
    opt_a, scaler_a = _fresh(model)
    got = _train(model, step, x, y, opt_a, scaler_a, K)
    path = tmp_path / "ckpt.pt"
    report = save_checkpoint(path, opt_a, scaler_a, extra={"step": K})
    assert report.file_bytes == os.path.getsize(path)
    assert report.weights_bytes > 0 and report.optimizer_bytes > 0 and report.scaler_bytes > 0
    assert report.host_cycles > 0 and report.n_params == 2
    assert f"{report.file_bytes} B" in str(report)

    # fresh objects, built from different weights: everything must come from the file
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    opt_b, scaler_b = _fresh(model)
    assert load_checkpoint(path, opt_b, scaler_b) == {"step": K}
    opt_b.copy_to(model)
    got += _train(model, step, x, y, opt_b, scaler_b, N - K)
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), (i, g, w)
    _assert_identical(opt, scaler, opt_b, scaler_b)
    # the file is a plain torch.save dict
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["format"] == 2 and set(ckpt["weights"]) == {"weight", "bias"}


def _sgd() -> FabricSGD:
    """A FabricSGD of nn.Linear(4, 3)'s parameters, at random weights."""
    params = {"weight": torch.randn(3, 4), "bias": torch.randn(3)}
    return FabricSGD(params, lr=0.1, momentum=0.9, **FABRIC)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A checkpoint of a FabricSGD (momentum buffers, no scaler) as an fp32 Trainer writes
    it, and its bytes."""
    path = tmp_path_factory.mktemp("good") / "good.pt"
    save_checkpoint(path, _sgd(), extra=FP32_TRAINER)
    return path, path.read_bytes()


def _refused(path, opt, scaler=None) -> str:
    """The message of the CheckpointError load_checkpoint raises; it names the file."""
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, opt, scaler)
    assert isinstance(err.value, FrontendError) and isinstance(err.value, fabric.CheckpointError)
    msg = str(err.value)
    assert repr(os.fspath(path)) in msg, msg
    return msg


def test_load_errors(good, tmp_path):
    ckpt = torch.load(good[0], weights_only=True)
    opt = _sgd()
    opt.step({n: torch.ones_like(t) for n, t in ckpt["weights"].items()})  # differs
    before = opt.parameters()

    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    assert "does not end with the sha256 digest" in _refused(junk, opt)
    plain = tmp_path / "plain.pt"
    torch.save({"weight": torch.zeros(3, 4)}, plain)  # a torch file without the digest
    assert "or not a training checkpoint (format 1 had no digest)" in _refused(plain, opt)
    write_checkpoint_file(plain, {"weight": torch.zeros(3, 4)})
    assert "is not a format-2 checkpoint" in _refused(plain, opt)
    assert "no such file" in _refused(tmp_path / "absent.pt", opt)

    def _variant(name, weights):
        p = tmp_path / name
        write_checkpoint_file(p, {**ckpt, "weights": weights})
        return p

    assert "missing from the checkpoint ['bias']" in _refused(
        _variant("m.pt", {"weight": ckpt["weights"]["weight"]}), opt)
    assert "not in the optimizer ['extra']" in _refused(
        _variant("x.pt", {**ckpt["weights"], "extra": torch.zeros(1)}), opt)
    assert "parameter 'bias' has shape (4,)" in _refused(
        _variant("s.pt", {**ckpt["weights"], "bias": torch.zeros(4)}), opt)
    assert "holds no scaler state" in _refused(good[0], opt, GradScaler())
    # a failed load wrote nothing: the weights and step counts are the stepped ones
    for name, w in opt.parameters().items():
        assert torch.equal(w, before[name]) and not torch.equal(w, ckpt["weights"][name])
    assert opt.steps() == {"weight": 1, "bias": 1}


def test_damaged_files_are_refused(good, tmp_path):
    path, data = good
    weights = torch.load(path, weights_only=True)["weights"]
    opt = _sgd()
    before = opt.parameters()

    def damaged(new: bytes) -> Path:
        p = tmp_path / "damaged.pt"
        p.write_bytes(new)
        return p

    def flipped(offset: int) -> bytes:
        new = bytearray(data)
        new[offset] ^= 0xFF
        return bytes(new)

    in_weight = data.index(weights["weight"].numpy().tobytes()) + 5
    in_key = data.index(b"momentum_buffer")  # a key of the pickled optimizer state
    for offset in (in_weight, in_key):
        msg = _refused(damaged(flipped(offset)), opt)
        assert "is corrupt: the sha256 of its first" in msg, msg
        assert "does not match the digest saved at its end" in msg, msg
    msg = _refused(damaged(data[: len(data) // 2]), opt)
    assert "does not end with the sha256 digest" in msg and "it is truncated" in msg, msg
    # any byte: one in every 11 through the zip's headers, padding, central directory and
    # end record, and the digest itself (every byte would take seconds, to no more effect)
    for offset in [*range(0, len(data), 11), len(data) - 1]:
        _refused(damaged(flipped(offset)), opt)
    for name, w in opt.parameters().items():
        assert torch.equal(w, before[name]), name


# Saves checkpoint k to argv[2] (the contents of argv[1], extra {"step": k}), then starts
# k + 1 with a file that takes half of the write and hangs: the parent kills it there.
_KILLED_SAVE = """
import builtins, sys, time
from fabric import checkpoint as fabric_checkpoint
from frontend.training import checkpoint

contents = checkpoint.read_checkpoint_file(sys.argv[1])
checkpoint.write_checkpoint_file(sys.argv[2], {**contents, "extra": {"step": 1}})

class Stalls:
    def __init__(self, f):
        self.f = f
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.f.close()
    def write(self, data):
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        print("half written", flush=True)
        time.sleep(600)

# write_atomic's open (a module global shadows the builtin)
fabric_checkpoint.open = lambda name, mode: Stalls(builtins.open(name, mode))
checkpoint.write_checkpoint_file(sys.argv[2], {**contents, "extra": {"step": 2}})
"""


def test_save_killed_half_way_leaves_the_last_good_checkpoint(good, tmp_path):
    path = tmp_path / "ckpt.pt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    child = subprocess.Popen([sys.executable, "-c", _KILLED_SAVE, str(good[0]), str(path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 300)
        line = child.stdout.readline() if ready else b""
    finally:
        os.kill(child.pid, signal.SIGKILL)  # mid-write, or a child that failed: reaped below
        _, err = child.communicate()
    assert line == b"half written\n", err.decode()[-3000:]
    assert child.returncode == -signal.SIGKILL
    opt = _sgd()
    assert load_checkpoint(path, opt) == {"step": 1}
    want = torch.load(good[0], weights_only=True)["weights"]
    for name, w in opt.parameters().items():
        assert torch.equal(w, want[name]), name
    (stale,) = tmp_path.glob("ckpt.pt.*.tmp")  # the killed save's half-written file
    assert 0 < stale.stat().st_size < len(good[1])
    # the next save neither reads nor removes the stale file
    half = stale.read_bytes()
    save_checkpoint(path, opt, extra={"step": 3})
    assert load_checkpoint(path, opt) == {"step": 3}
    assert stale.read_bytes() == half
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt", stale.name]


def test_other_precision_is_refused_before_loading(good, tmp_path):
    """An fp32 run's checkpoint resumed by a bfloat16 run (which has a GradScaler, the
    checkpoint none): the Trainer names the precisions, on the fabric and in eager."""
    bf16 = frontend.Trainer(backend=frontend.backend("fabric", config=CONFIG),
                            model=torch.nn.Linear(4, 3), optimizer={"type": "sgd", "lr": 0.1,
                                                                    "momentum": 0.9},
                            precision="bfloat16", checkpoint={"resume": str(good[0])})
    with pytest.raises(CheckpointError) as err:
        bf16.fit([])
    assert f"checkpoint {str(good[0])!r} is of a fp32 run; this Trainer runs bfloat16" \
        == str(err.value)

    batches = [(torch.randn(2, 4), torch.randn(2, 3))]
    common = {"device": "cpu", "optimizer": {"type": "sgd", "lr": 0.1}}
    frontend.Trainer(**common, model=torch.nn.Linear(4, 3),
                     checkpoint={"dir": str(tmp_path), "every": 1}).fit(batches)
    resume = {"dir": str(tmp_path), "resume": "latest"}
    latest = os.path.join(str(tmp_path), "step_1.pt")
    with pytest.raises(CheckpointError) as err:
        frontend.Trainer(**common, model=torch.nn.Linear(4, 3), precision="bfloat16",
                         checkpoint=resume).fit(batches)
    assert f"checkpoint {latest!r} is of a fp32 run; this Trainer runs bfloat16" \
        == str(err.value)
    data = bytearray(Path(latest).read_bytes())
    data[len(data) // 2] ^= 0xFF  # the eager runner's checkpoints are checked the same way
    Path(latest).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="is corrupt"):
        frontend.Trainer(**common, model=torch.nn.Linear(4, 3),
                         checkpoint=resume).fit(batches)
