"""benchmarks/run_all.py: the registry, the subprocess runs and the README table, on small
fake scripts and fake JSON (the real benchmarks never run here)."""

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


run_all = load("run_all")
harness = load("harness")


def test_no_benchmark_module_shadows_an_installed_package():
    """A script's folder comes first on its import path, so a module there named as an
    installed package replaces it for every library that imports it (transformers imports
    the `kernels` package when it is installed; a benchmarks/kernels.py broke the zoo's
    Hugging Face models)."""
    installed = set(importlib.metadata.packages_distributions())
    assert not {p.stem for p in BENCH.glob("*.py")} & installed

README = f"# t\n\nabove\n\n{run_all.BEGIN}\nold table\n{run_all.END}\n\nbelow\n"
MACHINE = {"cpu": "Test CPU", "cpu_count": 2, "platform": "Linux", "python": "3.11",
           "jax": "0.0", "backend": "cpu"}
PAYLOAD = {"benchmark": "fake", "headline": ["42 things/s", "all | exact"],
           "table": {"columns": ["case", "value"], "rows": [["a", 1], ["b", 2]]},
           "pngs": [], "machine": MACHINE}


def fake_script(folder: Path, name: str, body: str) -> None:
    """A benchmark script taking --json PATH; `body` runs with `path` and `argv` set."""
    (folder / f"{name}.py").write_text(textwrap.dedent("""\
        import json, sys
        argv = sys.argv[1:]
        path = argv[argv.index("--json") + 1]
    """) + textwrap.dedent(body))


@pytest.fixture
def bench_dir(tmp_path):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "README.md").write_text(README)
    payload = {**PAYLOAD, "pngs": ["PNG_PATH"]}
    fake_script(folder, "good", f"""
        payload = json.loads({json.dumps(json.dumps(payload))})
        payload["pngs"] = [path.replace(".json", ".png")]
        payload["headline"].append("args " + " ".join(a for a in argv if a != "--json"
                                                       and a != path))
        open(path, "w").write(json.dumps(payload))
    """)
    fake_script(folder, "broken", "print('boom'); sys.exit(3)\n")
    fake_script(folder, "silent", "pass\n")
    return folder


REGISTRY = (
    run_all.Benchmark("good", quick=("--small",), full=("--big",)),
    run_all.Benchmark("absent", quick=("--quick",)),
)


def table_row(text: str, name: str) -> str:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"| `{name}` |")]
    return line


def test_the_registry_names_every_benchmark_script():
    names = [b.name for b in run_all.REGISTRY]
    assert names[:3] == ["engine_speed", "kernel_cycles", "fabric_fidelity"] and "models" in names
    for name in names[:3]:
        assert (BENCH / f"{name}.py").is_file()
    assert len(set(names)) == len(names)


def test_run_writes_json_and_the_table_with_a_missing_script(bench_dir):
    readme = bench_dir / "README.md"
    code = run_all.main(["--quick"], registry=REGISTRY, bench_dir=bench_dir)
    assert code == 0
    results = bench_dir / "results"  # both modes write there
    assert json.loads((results / "good.json").read_text())["benchmark"] == "fake"
    assert (results / "good.log").read_text().startswith("$ ")
    text = readme.read_text()
    assert text.startswith("# t\n\nabove\n\n") and text.endswith(f"{run_all.END}\n\nbelow\n")
    assert "old table" not in text
    good = table_row(text, "good")
    # quick arguments were passed; a '|' inside a cell is escaped
    cells = [c.strip() for c in good.split(" | ")]
    assert cells[1] == "ok" and cells[2].isdigit() and cells[3].isdigit()  # wall s, CPU s
    assert "42 things/s<br>all \\| exact<br>args --small" in good
    assert "| not present | - | - | - |" in table_row(text, "absent")
    assert "Mode `quick`" in text and "the whole run took" in text
    assert "Machine: Test CPU, 2 cores, Linux; Python 3.11, JAX 0.0 on cpu." in text
    assert "| case | value |" in text and "| b | 2 |" in text
    assert "![good](results/good.png)" in text
    assert "JSON: `results/good.json`" in text


def test_full_mode_uses_the_full_arguments_and_results_folder(bench_dir):
    run_all.main(["--only", "good"], registry=REGISTRY, bench_dir=bench_dir)
    text = (bench_dir / "README.md").read_text()
    assert "args --big" in text and "Mode `full`" in text
    assert (bench_dir / "results" / "good.json").is_file()
    assert "| not present |" in table_row(text, "absent")  # not run, still listed
    assert "this run (good) took" in text


def test_failures_are_reported_not_hidden(bench_dir, capsys):
    registry = (run_all.Benchmark("broken"), run_all.Benchmark("silent"))
    code = run_all.main([], registry=registry, bench_dir=bench_dir)
    assert code == 1
    text = (bench_dir / "README.md").read_text()
    assert "| failed (exit 3) |" in table_row(text, "broken")
    assert "| failed (no JSON written) |" in table_row(text, "silent")
    assert "boom" in capsys.readouterr().out  # the failing script's output is shown


def test_a_stale_json_does_not_pass_for_a_failed_run(bench_dir):
    results = bench_dir / "results"
    results.mkdir()
    (results / "broken.json").write_text(json.dumps(PAYLOAD))
    run_all.main([], registry=(run_all.Benchmark("broken"),), bench_dir=bench_dir)
    assert not (results / "broken.json").exists()
    assert "42 things" not in (bench_dir / "README.md").read_text()


def test_no_run_rebuilds_the_table_from_existing_json(bench_dir):
    results = bench_dir / "results"
    results.mkdir()
    (results / "good.json").write_text(json.dumps(PAYLOAD))
    code = run_all.main(["--no-run"], registry=REGISTRY, bench_dir=bench_dir)
    assert code == 0
    text = (bench_dir / "README.md").read_text()
    assert "42 things/s" in table_row(text, "good")
    assert "| ok | - | - |" in table_row(text, "good")
    assert "the whole run took" not in text
    assert not (results / "good.log").exists()  # nothing ran


def test_render_of_fake_outcomes(tmp_path):
    loaded = {**PAYLOAD, "machine": {**MACHINE, "load_avg_1m": 3.46}}
    outcomes = [
        run_all.Outcome("a", "ok", 12.3, 20.4, tmp_path / "a.json", loaded),
        run_all.Outcome("b", "ok", 1.0, None, tmp_path / "b.json", {"benchmark": "b"}),
        run_all.Outcome("c", "not present"),
    ]
    text = run_all.render(outcomes, "quick", 99.6, tmp_path, when="today")
    assert text.splitlines()[0] == ("Mode `quick`, today, the whole run took 100 s of wall "
                                    "time and 20 s of CPU time (user + system).")
    assert table_row(text, "a") == "| `a` | ok | 12 | 20 | 42 things/s<br>all \\| exact |"
    assert table_row(text, "b") == "| `b` | ok | 1 | - | (its JSON has no headline) |"
    assert table_row(text, "c") == "| `c` | not present | - | - | - |"
    assert text.count("### ") == 1  # only `a` has details
    assert "on cpu; load average (1 min) at the end of a 3.5." in text


def test_replace_block_is_idempotent_and_needs_markers():
    once = run_all.replace_block(README, "new")
    assert run_all.replace_block(once, "new") == once
    assert f"{run_all.BEGIN}\nnew\n{run_all.END}" in once
    with pytest.raises(ValueError, match="results:begin"):
        run_all.replace_block("# no markers\n", "new", "x/README.md")


def test_unknown_benchmark_is_one_clear_error(bench_dir, capsys):
    with pytest.raises(SystemExit) as info:
        run_all.main(["--only", "nope"], registry=REGISTRY, bench_dir=bench_dir)
    assert info.value.code == 2
    assert "unknown benchmark(s) ['nope']" in capsys.readouterr().err


@pytest.mark.parametrize("payload, words", [
    ({"headline": ["x"]}, "'benchmark'"),
    ({"benchmark": "x"}, "'headline'"),
    ({"benchmark": "x", "headline": []}, "'headline'"),
    ({"benchmark": "x", "headline": ["h"], "table": {"columns": ["a"], "rows": [[1, 2]]}},
     "row 0 has 2 cells for 1 columns"),
])
def test_harness_checks_the_fields_the_table_reads(payload, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        harness.check_payload(payload)


def test_harness_median_times_only_the_run():
    calls = []
    median, times = harness.median_time(lambda x: calls.append(x), 3,
                                        setup=lambda: len(calls))
    assert calls == [0, 1, 2] and len(times) == 3 and median == sorted(times)[1]
    with pytest.raises(ValueError, match="repeats"):
        harness.median_time(lambda: None, 0)


def test_run_all_and_harness_load_without_jax():
    """run_all stays light: JAX is imported only by the scripts it runs."""
    code = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); import harness, run_all; "
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_with_kept_rows_measures_again_and_keeps_the_rest_in_order(tmp_path):
    path = tmp_path / "zoo.json"
    assert harness.with_kept_rows(path, [{"model": "b", "v": 2}], "abc") == [
        {"model": "b", "v": 2}]  # no file yet: what was measured
    path.write_text(json.dumps({"results": [{"model": "a", "v": 1}, {"model": "b", "v": 0},
                                            {"model": "d", "v": 4}]}))
    rows = harness.with_kept_rows(path, [{"model": "c", "v": 3}, {"model": "b", "v": 2}],
                                  "abcd")
    assert rows == [{"model": m, "v": v} for m, v in zip("abcd", (1, 2, 3, 4))]
