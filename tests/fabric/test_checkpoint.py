"""Checkpoints: a run saved half way and resumed in a new session ends exactly as one
uninterrupted run, and a checkpoint that does not fit (other config, other program,
damaged file, not a checkpoint, other format version) is refused with a clear message; a
save is atomic and a stale temporary file shadows nothing."""

import dataclasses

import numpy as np
import pytest

from fabric import (
    CheckpointError,
    FabricError,
    Port,
    Program,
    Simulator,
    checkpoint,
    load_checkpoint,
)
from tests.fabric.programs import ROW, ROW_Q2, pe, sender_tile, slow_receiver_tile

N = 20  # wavelets; the slow receiver takes about 19 cycles each, so a run is ~385 cycles


def slow_stream(n: int = N) -> Program:
    """PE (0, 0) streams n wavelets to a slow receiver at PE (0, 1): buffers back up."""
    prog = Program(ROW)
    prog.place(sender_tile(0, n), pe(0, 0))
    prog.place(slow_receiver_tile(0, n), pe(0, 1))
    prog.route(pe(0, 0), 0, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 0, Port.WEST, Port.RAMP)
    return prog


def started(prog: Program) -> Simulator:
    sim = Simulator(ROW, prog)
    sim.memcpy_h2d("x", np.arange(N, dtype=np.float32), pe(0, 0))
    sim.launch("main")
    return sim


def leaves(sim) -> dict:
    return {f.name: np.asarray(getattr(sim.state, f.name))
            for f in dataclasses.fields(sim.state)}


def assert_same_run(a: Simulator, b: Simulator) -> None:
    """Every state leaf and every counter equal, bit for bit (wall and compile times and the
    last run's own length aside)."""
    for name, value in leaves(a).items():
        np.testing.assert_array_equal(value, leaves(b)[name], err_msg=name)
    sa, sb = dataclasses.asdict(a.stats()), dataclasses.asdict(b.stats())
    for key in sa.keys() - {"wall_s", "compile_s", "run_cycles"}:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)


def test_resumed_run_matches_uninterrupted_run(tmp_path):
    whole = started(slow_stream())
    whole.run()
    half = started(slow_stream())
    half.run(max_cycles=whole.stats().cycles // 2, raise_on_limit=False)
    assert half.stats().in_flight > 0  # saved mid-stream, with wavelets in the buffers
    # a file under the name a save once used for its temporary file is neither overwritten
    # nor read
    stale = tmp_path / "half.ckpt.tmp"
    stale.write_bytes(b"stale")
    half.save(tmp_path / "half.ckpt")
    assert stale.read_bytes() == b"stale"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["half.ckpt", "half.ckpt.tmp"]
    resumed = Simulator.load(tmp_path / "half.ckpt", ROW, slow_stream())
    assert_same_run(resumed, half)
    resumed.run()
    assert_same_run(resumed, whole)
    assert resumed.host_cycles == whole.host_cycles > 0
    np.testing.assert_array_equal(resumed.memcpy_d2h("y"), whole.memcpy_d2h("y"))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A checkpoint of the slow stream right after launch, and its bytes."""
    path = tmp_path_factory.mktemp("ckpt") / "start.ckpt"
    checkpoint.save_checkpoint(started(slow_stream()), path)
    return path, path.read_bytes()


def refused(path, config=ROW, prog=None) -> str:
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, config, prog or slow_stream())
    assert isinstance(err.value, FabricError) and isinstance(err.value, ValueError)
    return str(err.value)


def test_load_builds_with_the_saved_table_rows(tmp_path):
    """A session built with a table floor (one engine for programs of several sizes) resumes
    from its checkpoint: Simulator.load builds the program with the saved table rows."""
    sim = Simulator(ROW, slow_stream(), min_table_rows=(128, 128))
    sim.memcpy_h2d("x", np.arange(N, dtype=np.float32), pe(0, 0))
    sim.launch("main")
    sim.run(max_cycles=50, raise_on_limit=False)
    sim.save(tmp_path / "floor.ckpt")
    resumed = Simulator.load(tmp_path / "floor.ckpt", ROW, slow_stream())
    assert resumed.tables.instr.shape == sim.tables.instr.shape != started(
        slow_stream()).tables.instr.shape
    assert_same_run(resumed, sim)
    resumed.run()
    sim.run()
    assert_same_run(resumed, sim)


def test_other_config_is_named(saved):
    msg = refused(saved[0], config=ROW_Q2)
    assert "another config" in msg and "queue_depth: saved 4, given 2" in msg, msg


def test_other_program_is_named(saved):
    msg = refused(saved[0], prog=slow_stream(N + 1))
    assert "another program" in msg and "instr" in msg, msg


def test_truncated_file(saved, tmp_path):
    path = tmp_path / "cut.ckpt"
    path.write_bytes(saved[1][: len(saved[1]) // 2])
    assert "truncated or corrupt" in refused(path)


def test_corrupt_file(saved, tmp_path):
    data = bytearray(saved[1])
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the stored arrays
    path = tmp_path / "flipped.ckpt"
    path.write_bytes(bytes(data))
    assert "truncated or corrupt" in refused(path)


def test_changed_array_with_valid_zip(saved, tmp_path):
    """An archive rewritten with one state array changed (its zip CRCs all valid) is caught
    by the state leaf digests in the header."""
    with np.load(saved[0]) as npz:
        arrays = {name: npz[name] for name in npz.files}
    name = max((n for n in arrays if n.startswith("state/")), key=lambda n: arrays[n].nbytes)
    flipped = arrays[name].copy()
    flipped.view(np.uint8).reshape(-1)[flipped.nbytes // 2] ^= 0x01
    path = tmp_path / "rewritten.ckpt"
    with open(path, "wb") as f:  # a file object: savez appends .npz to a bare name
        np.savez(f, **{**arrays, name: flipped})
    msg = refused(path)
    assert f"corrupt: the stored arrays {name} do not match the sha256 digests" in msg, msg


def test_not_a_checkpoint(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert "not a wafer-fabric checkpoint" in refused(text)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    assert "not a wafer-fabric checkpoint (no valid header)" in refused(other)


def test_other_format_version(monkeypatch, tmp_path):
    monkeypatch.setattr(checkpoint, "VERSION", checkpoint.VERSION + 1)
    path = tmp_path / "future.ckpt"
    checkpoint.save_checkpoint(started(slow_stream()), path)
    monkeypatch.undo()
    assert f"format version {checkpoint.VERSION + 1}" in refused(path)
