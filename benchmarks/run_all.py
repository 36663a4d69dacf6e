"""Run every benchmark script and regenerate the results table of benchmarks/README.md.

    python benchmarks/run_all.py --quick      # small settings, about 10 minutes on 2 cores
    python benchmarks/run_all.py              # full settings
    python benchmarks/run_all.py --only kernels --no-readme

Each script of REGISTRY runs as its own process (`python SCRIPT --json RESULTS/NAME.json
ARGS...`), writing its JSON (and PNGs) through benchmarks/harness.py into benchmarks/results/
(each JSON records the arguments it ran with; the table names the mode). The table between
the README's `<!-- results:begin -->` and `<!-- results:end -->` markers is then rebuilt
from the JSON files: one line per registered script (a script that is not there reads
"not present", a failed one "failed" with its exit code), each script's headline, its
detail table and its pictures, with the machine, the mode and the measured wall time.

Exits 1 if a present script failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A registered script: benchmarks/<name>.py, with its arguments per mode."""

    name: str
    quick: tuple[str, ...] = ()
    full: tuple[str, ...] = ()


REGISTRY = (
    Benchmark("engine_speed", quick=("--grid", "32", "--cycles", "200"),
              full=("--grid", "128", "--cycles", "2000")),
    Benchmark("kernel_cycles", quick=("--quick",)),
    Benchmark("fabric_fidelity"),  # one fixed set of small cases: nothing to shorten
    Benchmark("models", quick=("--quick",)),
    Benchmark("training", quick=("--quick",)),
    Benchmark("zoo"),  # every model is tiny: one setting
    Benchmark("fidelity_real", quick=("--grids", "2,4")),  # 8 x 8 is most of its time
    Benchmark("stream_chain"),  # nine small chains, one setting
    Benchmark("one_program"),  # four small models, one setting
    Benchmark("zoo_one_program", quick=("--quick",)),  # about an hour for the whole zoo
)


@dataclasses.dataclass
class Outcome:
    """What one registered script did: status is "ok", "failed (exit N)", "timed out",
    "not present" or "not run"; payload is its JSON (None if there is none)."""

    name: str
    status: str
    wall_s: float | None = None
    cpu_s: float | None = None  # user + system CPU seconds of the script's process
    json_path: Path | None = None
    payload: dict | None = None
    log_tail: str = ""


def read_payload(path: Path) -> dict | None:
    """The script's JSON, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def children_cpu_s() -> float | None:
    """CPU seconds used so far by finished child processes (None where not measurable)."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_one(bench: Benchmark, bench_dir: Path, results: Path, quick: bool,
            timeout_s: float) -> Outcome:
    script = bench_dir / f"{bench.name}.py"
    if not script.is_file():
        return Outcome(bench.name, "not present")
    out = results / f"{bench.name}.json"
    out.unlink(missing_ok=True)  # a stale file must not pass for this run's result
    cmd = [sys.executable, str(script), "--json", str(out),
           *(bench.quick if quick else bench.full)]
    start, cpu0 = time.perf_counter(), children_cpu_s()
    try:
        proc = subprocess.run(cmd, cwd=bench_dir.parent, capture_output=True, text=True,
                              timeout=timeout_s)
        code, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as err:
        code, log = None, f"{err.stdout or ''}{err.stderr or ''}"
        log = log.decode() if isinstance(log, bytes) else log
    wall = time.perf_counter() - start
    cpu1 = children_cpu_s()
    cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    (results / f"{bench.name}.log").write_text(f"$ {' '.join(cmd)}\n{log}")
    status = "ok" if code == 0 else ("timed out" if code is None else f"failed (exit {code})")
    payload = read_payload(out)
    if status == "ok" and payload is None:
        status = "failed (no JSON written)"
    tail = "\n".join(log.strip().splitlines()[-12:])
    return Outcome(bench.name, status, wall, cpu, out, payload, tail)


def collect(bench: Benchmark, bench_dir: Path, results: Path) -> Outcome:
    """An outcome from the JSON an earlier run left (for --no-run)."""
    if not (bench_dir / f"{bench.name}.py").is_file():
        return Outcome(bench.name, "not present")
    out = results / f"{bench.name}.json"
    payload = read_payload(out)
    return Outcome(bench.name, "ok" if payload else "not run", json_path=out, payload=payload)


# ---- the README block ------------------------------------------------------------------
def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: list, rows: list) -> list[str]:
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def machine_line(outcomes: list[Outcome]) -> str:
    """The machine as the scripts' JSON recorded it (the first that has it), with the load
    average each script saw when it finished (the cores may be shared)."""
    for o in outcomes:
        m = (o.payload or {}).get("machine")
        if m:
            line = (f"{m.get('cpu', '?')}, {m.get('cpu_count', '?')} cores, "
                    f"{m.get('platform', '?')}; Python {m.get('python', '?')}, "
                    f"JAX {m.get('jax', '?')} on {m.get('backend', '?')}")
            loads = [f"{x.name} {x.payload['machine']['load_avg_1m']:.1f}" for x in outcomes
                     if (x.payload or {}).get("machine", {}).get("load_avg_1m") is not None]
            return line + (f"; load average (1 min) at the end of {', '.join(loads)}"
                           if loads else "")
    return "unknown (no script wrote its machine)"


def _seconds(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "-"


def render(outcomes: list[Outcome], mode: str, total_s: float | None, readme_dir: Path,
           when: str | None = None, root: Path | None = None,
           ran: list[str] | None = None) -> str:
    """The markdown between the markers: summary table, then each script's details.
    `ran`: the scripts this run ran when not all of them (the others' rows come from the
    JSON files earlier runs left).

    Links are relative to readme_dir; relative paths in the JSON are taken from `root`
    (default: readme_dir's parent, the repository, where the scripts run)."""
    root = root or readme_dir.parent
    when = when or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    what = "the whole run" if ran is None else f"this run ({', '.join(ran)})"
    took = f", {what} took {total_s:.0f} s" if total_s is not None else ""
    cpus = [o.cpu_s for o in outcomes if o.cpu_s is not None]
    if cpus:
        took += f" of wall time and {sum(cpus):.0f} s of CPU time (user + system)"
    lines = [f"Mode `{mode}`, {when}{took}.", "",
             f"Machine: {machine_line(outcomes)}.", ""]
    summary = []
    for o in outcomes:
        headline = (o.payload or {}).get("headline") or []
        if o.status == "ok" and not headline:
            headline = ["(its JSON has no headline)"]
        summary.append([f"`{o.name}`", o.status, _seconds(o.wall_s), _seconds(o.cpu_s),
                        "<br>".join(map(str, headline)) or "-"])
    lines += markdown_table(["benchmark", "status", "wall s", "CPU s", "headline"], summary)
    for o in outcomes:
        payload = o.payload or {}
        table = payload.get("table")
        pngs = payload.get("pngs") or []
        if o.status != "ok" or not (table or pngs):
            continue
        lines += ["", f"### {o.name}", ""]
        if o.json_path is not None:
            lines += [f"JSON: `{relative(o.json_path, readme_dir, root)}`", ""]
        if table:
            lines += markdown_table(table["columns"], table["rows"])
        for png in pngs:
            rel = relative(Path(png), readme_dir, root)
            lines += ["", f"![{o.name}]({rel})"]
    return "\n".join(lines)


def relative(path: Path, base: Path, root: Path) -> str:
    """path (absolute, or relative to root) as linked from folder `base`."""
    path = path if path.is_absolute() else root / path
    return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()


def replace_block(text: str, block: str, where: str = "README") -> str:
    """text with everything between BEGIN and END replaced by block (markers kept)."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0 or end < start:
        raise ValueError(f"{where} needs the markers {BEGIN} and {END}, in that order, "
                         "around the results table")
    return text[:start + len(BEGIN)] + "\n" + block.strip() + "\n" + text[end:]


def update_readme(readme: Path, block: str) -> None:
    readme.write_text(replace_block(readme.read_text(), block, str(readme)))


# ---- command line ----------------------------------------------------------------------
def main(argv=None, registry=REGISTRY, bench_dir: Path = HERE) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small settings (about 10 min)")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help=f"run these only: {', '.join(b.name for b in registry)}")
    parser.add_argument("--results", type=Path, default=None,
                        help="folder for JSON, PNG and logs (default benchmarks/results, "
                             "in both modes)")
    parser.add_argument("--readme", type=Path, default=bench_dir / "README.md")
    parser.add_argument("--no-readme", action="store_true", help="leave the README alone")
    parser.add_argument("--no-run", action="store_true",
                        help="rebuild the README table from the JSON already in --results")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per script")
    args = parser.parse_args(argv)
    names = [b.name for b in registry]
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; registered: {names}")
    chosen = [b for b in registry if not args.only or b.name in args.only]
    results = (args.results or (bench_dir / "results")).resolve()
    results.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    outcomes = []
    for bench in registry:  # scripts not chosen keep the figures their JSON already holds
        if args.no_run or bench not in chosen:
            outcome = collect(bench, bench_dir, results)
        else:
            outcome = run_one(bench, bench_dir, results, args.quick, args.timeout)
        wall = f"{outcome.wall_s:7.1f} s" if outcome.wall_s is not None else ""
        cpu = f" (CPU {outcome.cpu_s:.1f} s)" if outcome.cpu_s is not None else ""
        print(f"{bench.name:16s} {outcome.status:26s} {wall}{cpu}", flush=True)
        if outcome.status.startswith(("failed", "timed out")) and outcome.log_tail:
            print("\n".join("    " + line for line in outcome.log_tail.splitlines()))
        outcomes.append(outcome)
    total = None if args.no_run else time.perf_counter() - start
    if total is not None:
        print(f"all in {total:.0f} s; results in {results}")
    if not args.no_readme:
        block = render(outcomes, "quick" if args.quick else "full", total,
                       args.readme.resolve().parent,
                       ran=None if args.only is None else [b.name for b in chosen])
        update_readme(args.readme, block)
        print(f"table written to {args.readme}")
    failed = [o for o in outcomes if o.status.startswith(("failed", "timed out"))]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
