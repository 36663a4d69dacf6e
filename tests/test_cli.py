"""The `wafer` command line: figures, the demo through the installed script, argument errors
and the benchmark runner's handling (the benchmarks themselves are too slow to run here)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frontend import cli

# the installed console script beside this Python, else the module (the same main)
SCRIPT = Path(sys.executable).with_name("wafer")
WAFER = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "frontend.cli"]

def wafer(*args, timeout=120):
    return subprocess.run([*WAFER, *args], capture_output=True, text=True, timeout=timeout)


def test_info_table_has_wse2_figures(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "757 x 996" in out and "48 KiB" in out
    assert "wse3" in out and "small(8,8)" in out
    assert "* unverified" in out
    fma_f32 = next(line for line in out.splitlines() if line.startswith("SIMD fma/f32"))
    assert "1/cycle*" in fma_f32


def test_info_json_parses(capsys):
    assert cli.main(["info", "--json"]) == 0
    presets = {p["preset"]: p for p in json.loads(capsys.readouterr().out)["presets"]}
    wse2 = presets["wse2"]
    assert (wse2["rows"], wse2["cols"]) == (757, 996)
    assert wse2["sram_bytes"] == 48 * 1024 and wse2["num_colors"] == 24
    assert {"op": "fma", "dtype": "f32", "width": 1, "verified": False} in wse2["simd"]
    assert presets["wse3"]["unverified"] == ["clock", "usable"]


def test_info_small_grid(capsys):
    assert cli.main(["info", "--preset", "small", "--grid", "4x5", "--json"]) == 0
    (small,) = json.loads(capsys.readouterr().out)["presets"]
    assert (small["rows"], small["cols"], small["pes"]) == (4, 5, 20)


def test_run_writes_png(tmp_path):
    proc = wafer("run", "--fabric-demo", "--grid", "2x3", "--n", "8", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "exact match" in proc.stdout
    assert (tmp_path / "busy_heatmap.png").stat().st_size > 1000


def test_run_user_factory(tmp_path):
    (tmp_path / "tiny_model.py").write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU()), "
        "(torch.randn(3, 6),)\n")
    proc = subprocess.run([*WAFER, "run", "tiny_model:make", "--grid", "12x12", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all nodes within tolerance" in proc.stdout and "aten.addmm.default" in proc.stdout
    assert (tmp_path / "out" / "placement.png").stat().st_size > 1000


def test_run_mixed_precision_in_process(tmp_path, capsys):
    """`wafer run --dtype bf16`: the demo MLP in mixed precision, checked against eager
    autocast; the report names the format of every node."""
    from frontend import amp

    before = amp.get_half_dtype()
    try:
        assert cli.main(["run", "--dtype", "bf16", "--out", str(tmp_path)]) == 0
    finally:
        amp.set_half_dtype(before.name)
    out = capsys.readouterr().out
    assert "precision: mixed, bfloat16" in out and "err autocast" in out
    assert "all nodes within tolerance" in out and " bf16 " in out


@pytest.mark.parametrize("args, words", [
    (["run", "--grid", "8y8"], "8y8"),
    (["run", "nocolon"], "MODULE:FACTORY"),
    (["run", "no_such_module_xyz:make"], "cannot load"),
    (["run", "--dtype", "fp8"], "fp8"),
    (["nosuch"], "nosuch"),
])
def test_bad_arguments_one_line_exit_2(args, words):
    proc = wafer(*args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "error" in lines[0]


@pytest.mark.parametrize("args, words", [
    (["run", "--fabric-demo", "--grid", "4x1"], "at least 2 columns"),
    (["run", "--preset", "wse2", "--grid", "4x4"], "small preset only"),
    (["info", "--preset", "wse2", "--grid", "2x2"], "small preset only"),
    (["bench", "--only", "nosuch"], "invalid choice: 'nosuch'"),
])
def test_bad_arguments_in_process(args, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_bench_without_benchmarks_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "benchmarks_dir", lambda: tmp_path / "missing")
    assert cli.main(["bench"]) == 2
    assert "no benchmarks/ folder" in capsys.readouterr().err


def test_bench_commands_and_status(tmp_path, monkeypatch, capsys):
    """The runner passes --quick settings per script and fails when a script fails."""
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        code = 3 if cmd[1].endswith("kernels.py") else 0
        return subprocess.CompletedProcess(cmd, code, stdout="", stderr="boom\n")

    monkeypatch.setattr(cli, "benchmarks_dir", lambda: bench)
    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    assert cli.main(["bench", "--quick", "--only", "engine_speed", "kernels"]) == 1
    out = capsys.readouterr().out
    assert [Path(c[1]).name for c in calls] == ["engine_speed.py", "kernels.py"]
    assert calls[0][-4:] == ["--grid", "32", "--cycles", "200"]
    assert calls[1][-1] == "--quick"
    assert str(bench / "results" / "quick" / "kernels.json") in calls[1]
    assert "engine_speed" in out and "ok" in out
    assert "FAILED (exit 3)" in out and "boom" in out
