"""The `wafer` command line: figures, the demo through the installed script, argument errors,
errors of a run in one line (or the full trace with --traceback) and the benchmark runner's
handling (the benchmarks themselves are too slow to run here)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from frontend import cli
from frontend.errors import UserCodeError

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
    colors = next(line for line in out.splitlines() if line.startswith("colors"))
    assert "24 (3 for memcpy)" in colors
    banks = next(line for line in out.splitlines() if line.startswith("SRAM banks"))
    assert banks.count("8, read-pair rule on") == 3  # strides capped; conflicts counted
    binding = next(line for line in out.splitlines() if line.startswith("data tasks bound"))
    assert binding.split()[-3:] == ["color", "queue", "color"]  # wse2, wse3, small(8,8)
    fma_f32 = next(line for line in out.splitlines() if line.startswith("SIMD fma/f32"))
    assert "1/cycle" in fma_f32 and "*" not in fma_f32  # fmacs: absent from the SIMD table
    cvt = next(line for line in out.splitlines() if line.startswith("SIMD cvt/f32"))
    assert "1/cycle*" in cvt


def test_info_json_parses(capsys):
    assert cli.main(["info", "--json"]) == 0
    presets = {p["preset"]: p for p in json.loads(capsys.readouterr().out)["presets"]}
    wse2 = presets["wse2"]
    assert (wse2["cols"], wse2["rows"]) == (757, 996)
    assert wse2["sram_bytes"] == 48 * 1024 and wse2["num_colors"] == 24
    assert (wse2["sram_banks"], wse2["bank_conflicts"]) == (8, True)
    assert {"op": "fma", "dtype": "f32", "width": 1, "verified": True} in wse2["simd"]
    assert {"op": "max", "dtype": "f32", "width": 1, "verified": True} in wse2["simd"]
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
    assert "12x12, pipelined:" in out  # the default mode
    # its colors fit: the call again as one fabric program, the same words
    _assert_one_program(out)


def _assert_one_program(out: str) -> None:
    """The demo's line on the call as one fabric program: its cycles with the host link
    at least those with host I/O apart, and the words of the parts run apart."""
    found = re.search(r"as one fabric program \(\d+ colors; .*\): (\d+) cycles with the host "
                      r"link's writes and reads \((\d+) with host I/O apart\); every stage's "
                      "words those of the parts run apart, bit for bit", out)
    assert found, out
    assert int(found[1]) > int(found[2])


def test_run_of_a_model_short_of_colors_says_why_it_is_no_one_program(tmp_path, capsys):
    assert cli.main(["run", "--model", "gpt", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"not run as one fabric program: its kernels and moves need (\d+) colors "
                     r"at once and the fabric has 21 .*--colors fit", out)


@pytest.mark.long
def test_run_with_colors_fit_runs_the_gpt_block_as_one_program(tmp_path, capsys):
    """--colors fit: the demo GPT block, short of colors on its balanced tiles, is placed on
    smaller ones that fit and runs again as one fabric program, each kernel started by its
    data, with the words of the parts run apart."""
    assert cli.main(["run", "--model", "gpt", "--colors", "fit", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tiles shrunk for the colors to fit" in out
    assert "started by its data" in out
    _assert_one_program(out)


def test_run_simulates_a_call_as_one_program(tmp_path, capsys):
    """--simulate program: the demo MLP's call is one engine run of its one program; its
    report and numerics are that run's; a model whose colors fall short is refused in
    one line that says how they would fit."""
    assert cli.main(["run", "--simulate", "program", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "pipelined as one fabric program (one engine run" in out
    assert "all nodes within tolerance" in out
    assert "\nas one fabric program (" not in out  # not run a second time
    assert cli.main(["run", "--model", "gpt", "--simulate", "program", "--out",
                     str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(r"simulate='program': the pipelined model does not fit one fabric "
                     r"program: the parts need at least \d+ colors .*compile with "
                     r"colors='fit'", err), err


def test_run_takes_the_execution_mode(tmp_path, capsys):
    assert cli.main(["run", "--mode", "sequential", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "12x12: 23 of 144 PEs" in out and "all nodes within tolerance" in out
    assert "pipelined" not in out and "bottleneck" not in out


@pytest.mark.parametrize("args, words", [
    (["run", "--grid", "8y8"], "8y8"),
    (["run", "nocolon"], "MODULE:FACTORY"),
    (["run", "no_such_module_xyz:make"], "cannot load"),
    (["run", "--dtype", "fp8"], "fp8"),
    (["run", "--mode", "eager"], "'eager'"),
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
    (["run", "--colors", "squeeze"], "invalid choice: 'squeeze'"),
])
def test_bad_arguments_in_process(args, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


# `wafer run MODULE:FACTORY` factories that fail: line numbers matter (the messages cite them)
USER_MODELS = """\
import torch


class LogGamma(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(x) + 1.0


def unsupported():
    return LogGamma(), (torch.randn(2, 8),)


def too_big():
    return torch.nn.Linear(4096, 4096), (torch.randn(2, 4096),)


def broken():
    raise RuntimeError("no file weights.pt")


def not_a_module():
    return torch.tanh, (torch.randn(2),)


def tokens():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 4))
    return model, (torch.tensor([[1, 5, 9, 15]]),)


class Routed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = torch.nn.Parameter(torch.randn(8, 4))
        self.w = torch.nn.Parameter(torch.randn(4, 6, 8))

    def forward(self, x):
        ids = torch.topk(x @ self.router, 2).indices.reshape(-1)
        return torch.bmm(self.w[ids], x.repeat_interleave(2, 0).unsqueeze(-1))


def routed():
    torch.manual_seed(0)
    return Routed(), (torch.randn(4, 8),)
"""


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    """user_models.py (above) and user_import_fails.py (which fails as it is imported) in
    the current folder, where `wafer run` looks for them."""
    (tmp_path / "user_models.py").write_text(USER_MODELS)
    (tmp_path / "user_import_fails.py").write_text("import torch\nLAYER = torch.nn.Linear(4)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    names = ("user_models", "user_import_fails")
    yield
    for name in names:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("args, words", [
    (["run", "user_models:unsupported"],
     ["FX node 'lgamma' (aten.lgamma.default) at", "user_models.py\", line 6, in forward: "
      "return torch.lgamma(x) + 1.0: ATen op aten.lgamma.default has no lowering"]),
    (["run", "user_models:too_big", "--grid", "4x4"], ["the model does not fit small(4,4)"]),
    (["run", "user_models:broken"],
     ["user_models:broken raised RuntimeError at ", "user_models.py:18: no file weights.pt"]),
    (["run", "user_import_fails:make"],
     ["importing user_import_fails raised TypeError at ", "user_import_fails.py:2: "]),
])
def test_errors_of_a_run_take_one_line_exit_2(user_models, capsys, args, words):
    assert cli.main([*args, "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("wafer run: error: "), err
    assert err.rstrip().endswith("(run with --traceback for the full trace)"), err
    for word in words:
        assert word in err


def test_run_looks_token_ids_up_on_the_fabric_for_one_program(user_models, capsys):
    """A model with an embedding: its per-call gathers keep it from one fabric program
    (the run says so and how to lift it); with --lookups onehot (and tiles its colors
    fit) it runs as one."""
    assert cli.main(["run", "user_models:tokens", "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"not run as one fabric program: .*gathers operand .* by each call's "
                     r'indices.*lookups="onehot"', out)
    assert cli.main(["run", "user_models:tokens", "--lookups", "onehot", "--colors", "fit",
                     "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert "all nodes within tolerance" in out and "compare" in out
    _assert_one_program(out)


def test_a_factory_returning_no_module_is_refused(user_models, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "user_models:not_a_module"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "with a torch.nn.Module model, got a builtin_function_or_method" in err, err


@pytest.mark.parametrize("args", [["--traceback", "run", "user_models:broken"],
                                  ["run", "user_models:broken", "--traceback"]])
def test_traceback_flag_shows_the_whole_error(user_models, capsys, args):
    with pytest.raises(UserCodeError) as info:
        cli.main(args)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert capsys.readouterr().err == ""


def test_trace_of_a_failing_run_is_saved_and_the_error_is_one_line(tmp_path, capsys):
    """The demo cut short by --max-cycles: the trace up to the limit is written (stdout
    says where), the error takes one line on stderr, exit code 2. The arguments but
    --max-cycles are test_cli_trace's, whose recording executable it reuses."""
    out = tmp_path / "t.json"
    assert cli.main(["trace", "--grid", "2x3", "--n", "8", "--rect", "0,1,2,2", "--links",
                     "--max-cycles", "20", "--out", str(out)]) == 2
    printed = capsys.readouterr()
    assert printed.err.splitlines() == [
        "wafer trace: error: cycle limit reached: 20 cycles ran (now at cycle 20) and the "
        "fabric is still busy; raise max_cycles (run with --traceback for the full trace)"]
    assert f"trace up to cycle 20 written to {out.resolve()}" in printed.out
    assert json.loads(out.read_text())["otherData"]["end_cycle"] == 20


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
        code = 3 if cmd[1].endswith("kernel_cycles.py") else 0
        return subprocess.CompletedProcess(cmd, code, stdout="", stderr="boom\n")

    monkeypatch.setattr(cli, "benchmarks_dir", lambda: bench)
    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    assert cli.main(["bench", "--quick", "--only", "engine_speed", "kernel_cycles"]) == 1
    out = capsys.readouterr().out
    assert [Path(c[1]).name for c in calls] == ["engine_speed.py", "kernel_cycles.py"]
    assert calls[0][-4:] == ["--grid", "32", "--cycles", "200"]
    assert calls[1][-1] == "--quick"
    assert str(bench / "results" / "quick" / "kernel_cycles.json") in calls[1]
    assert "engine_speed" in out and "ok" in out
    assert "FAILED (exit 3)" in out and "boom" in out


def test_run_takes_the_gemm_orientation(tmp_path, capsys):
    """--gemm-orientation auto: the demo MLP's products of 4 rows run transposed, every
    node within tolerance, and the call as one fabric program (its kernels started by
    their data) gives the words of the parts run apart."""
    assert cli.main(["run", "--gemm-orientation", "auto", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "all nodes within tolerance" in out
    _assert_one_program(out)
    with pytest.raises(SystemExit):
        cli.main(["run", "--gemm-orientation", "cols"])
    assert "'cols'" in capsys.readouterr().err


def test_run_takes_the_experts(user_models, capsys):
    """--experts dense: a model's products with expert weights picked by its router run as
    one GEMM, every node within tolerance, the call as one fabric program."""
    assert cli.main(["run", "user_models:routed", "--experts", "dense", "--colors", "fit",
                     "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert "all nodes within tolerance" in out and "bmm_experts" in out
    _assert_one_program(out)
    with pytest.raises(SystemExit):
        cli.main(["run", "--experts", "sparse"])
    assert "'sparse'" in capsys.readouterr().err
