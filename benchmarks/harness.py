"""Shared benchmark harness: machine info, warm-up and median-of-repeats timing, JSON output.

Every script in benchmarks/ times the same way:
  - warm-up apart: `warm_up(fn)` runs fn once (engine compile + first execution) and returns
    its seconds, reported as `compile_s`, never mixed into run times;
  - run time: `median_time(run, repeats, setup)` times `repeats` calls of run(setup()), the
    setup (building and loading a simulator) untimed, and returns the median;
  - output: `write_json(path, payload)` adds the machine's description.

Scripts whose figures are simulated cycle counts (exact and deterministic) need no repeats;
they still write their JSON here.

The payload keys `benchmarks/run_all.py` reads to build the README's results table:
  "benchmark": the script's name;
  "headline": a list of short strings, the figures worth one line each;
  "table" (optional): {"columns": [str, ...], "rows": [[cell, ...], ...]}, the details;
  "pngs" (optional): paths of the pictures the script wrote.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    import jax  # here, not at import: run_all and its tests read this module without JAX

    return {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        # other processes share the cores: wall times are only comparable at similar load
        "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def warm_up(fn: Callable[[], object]) -> float:
    """Seconds of one call of fn(), the warm-up (compile and first execution), kept apart
    from the timed runs."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_time(run: Callable, repeats: int,
                setup: Callable[[], object] | None = None) -> tuple[float, list[float]]:
    """(median, all) wall seconds of `repeats` timed calls: run() or, with `setup`,
    run(setup()) where only run is timed. run must block until its work is done."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    times = []
    for _ in range(repeats):
        arg = setup() if setup is not None else None
        start = time.perf_counter()
        if setup is None:
            run()
        else:
            run(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def check_payload(payload: dict) -> None:
    """Raise ValueError naming the key when the fields run_all reads are malformed."""
    if not isinstance(payload.get("benchmark"), str):
        raise ValueError("payload needs a 'benchmark' name (str)")
    headline = payload.get("headline")
    if not (isinstance(headline, list) and headline and all(isinstance(h, str)
                                                            for h in headline)):
        raise ValueError(f"payload 'headline' must be a non-empty list of str, got {headline!r}")
    table = payload.get("table")
    if table is not None:
        columns, rows = table.get("columns"), table.get("rows")
        if not isinstance(columns, list) or not isinstance(rows, list):
            raise ValueError("payload 'table' needs 'columns' and 'rows' lists")
        for i, row in enumerate(rows):
            if len(row) != len(columns):
                raise ValueError(f"payload 'table' row {i} has {len(row)} cells for "
                                 f"{len(columns)} columns")


def write_json(path: str | os.PathLike, payload: dict) -> None:
    """Check the payload, add "machine", write it as indented JSON (folders created)."""
    check_payload(payload)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**payload, "machine": machine_info()}, indent=2) + "\n")


def with_kept_rows(path: str | os.PathLike, measured: list[dict], order) -> list[dict]:
    """`measured` (result dicts keyed by "model") joined with the other models' results of
    the JSON file at `path` (a run with --update: a few models measured again), in the
    order of the names `order`; `measured` alone where there is no file yet."""
    path = Path(path)
    if not path.exists():
        return measured
    new = {r["model"]: r for r in measured}
    kept = {r["model"]: r for r in json.loads(path.read_text())["results"]}
    return [new.get(name) or kept[name] for name in order if name in new or name in kept]
