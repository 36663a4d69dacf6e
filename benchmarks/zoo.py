"""Model zoo: every architecture of frontend.architectures through the frontend, fp32.

Per model, in the execution mode asked (`--mode`, default the frontend's, pipelined):
whether it compiles (else the ATen op that stops it), simulated cycles (pipelined: one
sample's latency, and the cycles per sample of a stream, the period, beside the figures
the placement planned with), PEs used, fma
utilization (over the period when pipelined), the colors one fabric program of it would
need (pipelined), the largest node error against eager PyTorch (validate), the
output's error against eager, and the wall seconds of compile and simulation. Each runs on
its own fabric (`frontend.architectures.fabric_config`: small(12, 12), the frontend tests'
fabric, or a larger one for a model that needs more PEs), or on small(grid, grid) for all
with --grid.

    python benchmarks/zoo.py --json benchmarks/results/zoo.json [--only gpt2 llama]
                             [--mode pipelined|sequential] [--gemm-orientation rows|auto]
                             [--update]

`--update` measures the models named and keeps the other rows of the JSON file already
there (its headline and table made again over all of them).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from harness import with_kept_rows, write_json  # noqa: E402

import frontend  # noqa: E402
from fabric import FabricConfig  # noqa: E402
from frontend.architectures import (  # noqa: E402
    ARCHITECTURES,
    build,
    fabric_config,
    output_tensor,
)
from frontend.lowering import GEMM_ORIENTATIONS  # noqa: E402
from frontend.placement import planned  # noqa: E402
from frontend.report import stage_rows  # noqa: E402
from frontend.schedule import DEFAULT_MODE, MODES  # noqa: E402

OUTPUT_TOL = 1e-4  # rtol and atol of the output against eager fp32, as the zoo test's


def measure(name: str, config: FabricConfig, mode: str, gemm_orientation: str = "rows"
            ) -> dict:
    """One architecture: compiled or the op that stops it, and its figures."""
    arch = ARCHITECTURES[name]
    row = {"model": name, "family": arch.family, "source": arch.source,
           "fabric": config.name, "mode": mode, "gemm_orientation": gemm_orientation}
    model, inputs = build(name)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's export internals
            cm = frontend.compile(model, inputs, config=config, mode=mode,
                                  gemm_orientation=gemm_orientation)
    except frontend.UnsupportedOpError as exc:
        first = str(exc).splitlines()[0]
        op = re.search(r"\((aten\.[\w.]+)\)", first)
        return {**row, "status": "stops", "stopped_by": op.group(1) if op else first,
                "compile_s": time.perf_counter() - t0}
    except frontend.PlacementError as exc:  # every op lowers; the fabric is too small
        return {**row, "status": "too big", "stopped_by": str(exc).splitlines()[0][:120],
                "compile_s": time.perf_counter() - t0}
    except frontend.FrontendError as exc:
        return {**row, "status": "error", "stopped_by": str(exc).splitlines()[0][:200],
                "compile_s": time.perf_counter() - t0}
    compile_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    rows = cm.validate(*inputs, raise_on_mismatch=False)
    simulate_s = time.perf_counter() - t1
    with torch.no_grad():
        want = output_tensor(model(*inputs))
    got = output_tensor(cm.outputs()).float()
    matches = bool(torch.allclose(got, want, rtol=OUTPUT_TOL, atol=OUTPUT_TOL))
    return {**row, **_bottleneck(cm), **_plan(cm),
            "status": "runs" if matches and all(r.ok for r in rows) else "differs",
            "cycles": cm.cycles, "period": cm.period, "pes_used": cm.placement.pes_used,
            "utilization": cm.utilization,
            "colors_needed": cm.colors.assignment.needed if cm.colors else None,
            "max_node_error": max(r.max_abs for r in rows),
            "output_error": float((got - want).abs().max()),
            "compile_s": compile_s, "simulate_s": simulate_s}


def _bottleneck(cm) -> dict:
    """What bounds the period: the stage (or the host link) of the slowest rate, its
    kernel's simulated cycles and its rate (the kernel plus the moves it waits for,
    `frontend.schedule`); a kernel far below its rate is a stage bound by its moves."""
    neck = cm.timeline.bottleneck
    stage = next((r for r in stage_rows(cm) if r["stage"] == neck), None)
    return {"bottleneck": neck,
            "bottleneck_kernel_cycles": stage["simulated"] if stage else 0,
            "bottleneck_rate": stage["rate"] if stage else cm.timeline.host_rate}


def _plan(cm) -> dict:
    """What the pipelined placement planned (`frontend.placement.planned`: the kernels'
    models and the moves' bounds, host I/O apart): one sample's way and the slowest
    stage's cycles per sample, beside which the simulated latency and period show what
    the plan leaves out (moves longer than their bounds, the host link, buffers)."""
    if cm.mode != "pipelined":
        return {}
    way, _, rate = planned([p.stage for p in cm.prepared], cm.placement)
    return {"planned_latency": way, "planned_period": rate}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--grid", type=int, default=None,
                    help="run every model on small(grid, grid) (default: each on its own "
                         "fabric, small(12, 12) unless it needs more PEs)")
    ap.add_argument("--only", nargs="+", choices=list(ARCHITECTURES), metavar="NAME",
                    help="these architectures only")
    ap.add_argument("--mode", choices=list(MODES), default=DEFAULT_MODE,
                    help=f"execution mode (default {DEFAULT_MODE})")
    ap.add_argument("--gemm-orientation", choices=list(GEMM_ORIENTATIONS), default="rows",
                    help="which way SUMMA tiles run their fmas (frontend.compile's)")
    ap.add_argument("--quick", action="store_true",
                    help="the same (every model is tiny); kept for run_all's modes")
    ap.add_argument("--update", action="store_true",
                    help="keep the other models' rows of the --json file already there")
    args = ap.parse_args(argv)
    results = []
    for name in args.only or list(ARCHITECTURES):
        config = (FabricConfig.small(args.grid, args.grid) if args.grid
                  else fabric_config(name))
        results.append(measure(name, config, args.mode, args.gemm_orientation))
        r = results[-1]
        print(f"{name:16} {r['status']:7} "
              + (f"{r['cycles']} cycles, {r['pes_used']} PEs, output error "
                 f"{r['output_error']:.1e}" if "cycles" in r else r["stopped_by"]),
              flush=True)
    if args.update:
        results = with_kept_rows(args.json, results, ARCHITECTURES)
    runs = [r for r in results if r["status"] == "runs"]
    stops: dict[str, list[str]] = {}
    for r in results:
        if r["status"] in ("stops", "error", "too big"):
            stops.setdefault(r["stopped_by"], []).append(r["model"])
    columns = ["model", "family", "fabric", "status", "cycles", "period", "PEs", "util %",
               "colors", "bottleneck: kernel / rate", "planned: latency / period",
               "max node err", "output err", "compile s", "sim s"]
    table = [[r["model"], r["family"], r["fabric"], r["status"] if "cycles" in r else
              f"{r['status']}: {r['stopped_by']}", r.get("cycles", ""), r.get("period", ""),
              r.get("pes_used", ""),
              round(100 * r["utilization"], 3) if "utilization" in r else "",
              r.get("colors_needed") or "",
              f"{r['bottleneck']}: {r['bottleneck_kernel_cycles']} / {r['bottleneck_rate']}"
              if "bottleneck" in r else "",
              f"{r['planned_latency']} / {r['planned_period']}" if "planned_latency" in r
              else "",
              f"{r['max_node_error']:.1e}" if "max_node_error" in r else "",
              f"{r['output_error']:.1e}" if "output_error" in r else "",
              round(r["compile_s"], 1), round(r["simulate_s"], 1) if "simulate_s" in r
              else ""] for r in results]
    headline = [f"{len(runs)} of {len(results)} architectures compile, run and match eager "
                f"fp32 (output within {OUTPUT_TOL:g}), {args.mode} mode"
                + ("" if args.gemm_orientation == "rows" else
                   f", gemm_orientation {args.gemm_orientation!r}")]
    bound = [r for r in runs if r["bottleneck_kernel_cycles"] < r["bottleneck_rate"] / 2]
    if runs:
        headline.append(f"period bound by moves (the bottleneck's kernel under half its rate):"
                        f" {len(bound)} of {len(runs)}"
                        + (f" ({', '.join(r['model'] for r in bound)})" if bound else ""))
    planned_runs = [r for r in runs if "planned_latency" in r]
    if planned_runs:
        lat = sorted(r["cycles"] / r["planned_latency"] for r in planned_runs)
        per = sorted(r["period"] / r["planned_period"] for r in planned_runs)
        headline.append(f"simulated against planned: latency median {statistics.median(lat):.2f} x "
                        f"({lat[0]:.2f} to {lat[-1]:.2f}), cycles per sample median "
                        f"{statistics.median(per):.2f} x ({per[0]:.2f} to {per[-1]:.2f})")
    headline += [f"stopped by {op}: {', '.join(models)}" for op, models in
                 sorted(stops.items(), key=lambda kv: -len(kv[1]))]
    fabrics = sorted({r["fabric"] for r in results})
    write_json(args.json, {"benchmark": "zoo", "config": ", ".join(fabrics), "mode": args.mode,
                           "results": results,
                           "headline": headline, "table": {"columns": columns,
                                                           "rows": table}})
    for line in headline:
        print(line)
    return 0 if all(r["status"] in ("runs", "stops", "too big") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
