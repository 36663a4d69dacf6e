"""Shared benchmark harness: machine info, median-of-repeats timing, JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

import jax


def machine_info() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def median_time(fn, repeats: int) -> tuple[float, list[float]]:
    """Median wall seconds of `repeats` calls of fn() (fn must block until done)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def write_json(path: str | os.PathLike, payload: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**payload, "machine": machine_info()}, indent=2) + "\n")
