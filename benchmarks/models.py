"""Model-level figures: each test model compiled to a simulated fabric and run, in fp32 and
in mixed precision with each half dtype; simulated cycles, fma utilization (useful
multiply-adds over the whole fabric's fma peak: fp32's, or the 16-bit one in mixed
precision), PEs and SRAM used, the largest error of any graph node against eager PyTorch
(fp32; mixed: against eager autocast for float16 / bfloat16, and the output's error
against fp32 for every dtype), and the wall time of the simulation: `frontend.compile`
apart, a warm-up call (the engine compile) apart, then the median of --repeats calls.

Execution modes (fp32): each model compiled in "sequential" and "pipelined" mode and
--samples samples streamed through (`CompiledModel.stream`): latency (first input word to
the first sample's last output word), steady-state cycles per sample, fma utilization over
it, PEs used, wall seconds of the stream's simulation; plus the issue-size GPT block
(TinyGPT d=64, 4 heads, 32 tokens) on small(32, 32) unless --quick. Pipelined rows also
give the colors their stages' kernels and moves need as one program (`cm.colors`: the
greedy's count, the lower bound at the busiest PE) against the fabric's 21; they are
compiled with `colors="report"`, since on these fabrics most need more than 21 (the
parts are simulated apart, each with its own colors, so the other figures stand either
way).

Compile time: wall and CPU seconds of `frontend.compile` of the architectures' GPT-2
(`frontend.architectures`: transformers' GPT2Model, one layer, width 32, 8 tokens) in
both modes on small(32, 32) and small(64, 64), the median of --repeats compiles each (at
least COMPILE_REPEATS, --quick too: one compile's wall time on a shared machine is noise;
each a first compile, the kernel models' and the moves' route caches cleared,
`fabric.kernels.clear_model_caches`): a fixed model should compile in about the same time
on any fabric that holds it (pipelined tiles grow only while they get measurably faster,
`frontend.balance`); compiled with
`colors="report"` like the rows above (the graph's colors are assigned, and counted, in
either policy). Skipped without `transformers` (the hf extra).

    python benchmarks/models.py --json benchmarks/results/models.json [--quick] [--png P]
        [--dtypes fp32,float16,bfloat16,cbfloat16] [--samples 8]
    python benchmarks/models.py --json benchmarks/results/models.json --compile-only
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import median_time, warm_up, write_json  # noqa: E402

import frontend  # noqa: E402
from fabric import FabricConfig  # noqa: E402
from fabric.kernels import clear_model_caches  # noqa: E402
from frontend import architectures  # noqa: E402
from frontend.zoo import MLP, LeNet, TinyGPT  # noqa: E402

DTYPES = ("fp32", "float16", "bfloat16", "cbfloat16")
COMPILE_GRIDS = (32, 64)  # the compile-time section's fabrics: small(n, n)
COMPILE_REPEATS = 3  # compiles timed per fabric and mode, at least


def cases(quick: bool):
    torch.manual_seed(0)
    yield "mlp", MLP(), (torch.randn(4, 16),)
    yield "lenet", LeNet(), (torch.randn(2, 1, 8, 8),)
    yield "gpt-1layer" if quick else "gpt-2layer", TinyGPT(layers=1 if quick else 2), \
        (torch.randint(0, 32, (2, 4)),)


def measure(name, model, inputs, config, repeats, dtype="fp32") -> dict:
    model.eval()
    precision, half = ("fp32", None) if dtype == "fp32" else ("mixed", dtype)
    t0 = time.perf_counter()
    cm = frontend.compile(model, inputs, config=config, precision=precision, half=half,
                          mode="sequential")
    compile_s = time.perf_counter() - t0
    warm_s = warm_up(lambda: cm(*inputs))
    simulate_s, _ = median_time(lambda: cm(*inputs), repeats)
    rows = cm.validate(*inputs, raise_on_mismatch=False)
    with torch.no_grad():
        exact = model(*inputs)
    out = cm.outputs()
    sram = max(r.sram_bytes for r in cm.last.results)
    return {"model": name, "dtype": dtype, "cycles": cm.cycles,
            "host_io_cycles": cm.host_cycles,
            "utilization": cm.utilization, "pes_used": cm.placement.pes_used,
            "tiles": len(cm.prepared), "max_sram_bytes_per_pe": sram,
            "max_abs_error": max(r.max_abs for r in rows),
            "output_error_vs_fp32": float((out.float() - exact).abs().max()),
            "all_nodes_within_tolerance": all(r.ok for r in rows),
            "compile_s": compile_s, "warm_up_s": warm_s, "simulate_s": simulate_s,
            "repeats": repeats}


def mode_cases(quick: bool):
    """(name, model, a sample's inputs, config): the models of `cases` on the benchmark's
    fabric (config None), and the GPT block of the pipelined mode's targets."""
    for name, model, inputs in cases(quick):
        yield name, model, inputs, None
    if not quick:
        torch.manual_seed(0)
        yield "gpt-d64-t32", TinyGPT(vocab=64, d=64, heads=4, layers=1, block=32), \
            (torch.randint(0, 64, (1, 32)),), FabricConfig.small(32, 32)


def measure_mode(name, model, inputs, config, mode, samples) -> dict:
    """`samples` samples like `inputs` (the first one `inputs`) streamed in `mode`; every
    node of the last one validated against eager."""
    model.eval()
    t0 = time.perf_counter()
    # "report": a pipelined model short of colors is measured, its shortfall recorded
    cm = frontend.compile(model, inputs, config=config, mode=mode, colors="report")
    compile_s = time.perf_counter() - t0
    torch.manual_seed(1)
    stream = [inputs] + [tuple(_like(x) for x in inputs) for _ in range(samples - 1)]
    t0 = time.perf_counter()
    outputs = cm.stream(stream)
    simulate_s = time.perf_counter() - t0
    tl = cm.timeline
    figures = {"model": name, "mode": mode, "config": cm.config.name, "samples": samples,
               "latency_cycles": tl.latency, "cycles_per_sample": tl.period,
               "bottleneck": tl.bottleneck, "bottleneck_rate": tl.bound,
               "utilization": cm.utilization, "pes_used": cm.placement.pes_used,
               "fabric_pes": cm.config.num_pes, "tiles": len(cm.prepared),
               "weights_load_host_cycles": cm.load_cycles, **_colors(cm)}
    rows = cm.validate(*stream[-1], raise_on_mismatch=False)  # a call: figures of its own
    with torch.no_grad():
        worst = max(float((y - model(*x)).abs().max()) for x, y in zip(stream, outputs))
    return {**figures,
            "max_abs_error_last_sample": max(r.max_abs for r in rows),
            "output_error_stream": worst,
            "all_nodes_within_tolerance": all(r.ok for r in rows),
            "compile_s": compile_s, "simulate_s": simulate_s}


def _colors(cm) -> dict:
    """A pipelined model's colors over the whole graph (`cm.colors`); {} in sequential."""
    if cm.colors is None:
        return {}
    a = cm.colors.assignment
    return {"colors_needed": a.needed, "colors_lower_bound": a.lower_bound,
            "colors_busiest_pe": list(a.busiest_pe) if a.busiest_pe else None,
            "colors_available": a.available, "one_program": a.ok}


def compile_times(repeats: int) -> list[dict]:
    """The compile-time section (module docstring): one row per fabric and mode; none
    without transformers."""
    if importlib.util.find_spec("transformers") is None:
        return []
    model, inputs = architectures.build("gpt2")
    frontend.compile(model, inputs, config=FabricConfig.small(12, 12))  # imports, tracing
    rows = []
    for n in COMPILE_GRIDS:
        config = FabricConfig.small(n, n)
        for mode in ("sequential", "pipelined"):
            median, times, cpu, cm = _timed_compile(model, inputs, config, mode, repeats)
            placement = cm.placement
            rows.append({"model": "gpt2 (1 layer, width 32)", "config": config.name,
                         "mode": mode, "compile_s": median, "compile_s_all": times,
                         "compile_cpu_s": cpu,
                         "pes_used": placement.pes_used, "fabric_pes": config.num_pes,
                         "largest_tile_pes": max(r.rows * r.cols
                                                 for r in placement.rects.values()),
                         "predicted_bottleneck_cycles": max(placement.predicted.values()),
                         **_colors(cm)})
    return rows


def _timed_compile(model, inputs, config, mode, repeats):
    """(median wall seconds of `repeats` compiles, all of them, the median of their CPU
    seconds, the last CompiledModel). CPU seconds: this process's, less disturbed than the
    wall time by other processes on the cores."""
    made, cpu = [], []

    def fresh():
        """Untimed: the compile before dropped (its objects would weigh on the next) and
        the caches cleared (a first compile's work: no kernel model or route from before)."""
        made.clear()
        gc.collect()
        clear_model_caches()

    def once(_):
        start = time.process_time()
        made.append(frontend.compile(model, inputs, config=config, mode=mode,
                                     colors="report"))
        cpu.append(time.process_time() - start)

    median, times = median_time(once, repeats, setup=fresh)
    return median, times, statistics.median(cpu), made[-1]


def _like(x: torch.Tensor) -> torch.Tensor:
    """Another sample of the same kind: random tokens below the first's largest id + 1,
    or normal floats."""
    if x.dtype.is_floating_point:
        return torch.randn_like(x)
    return torch.randint(0, int(x.max()) + 1, tuple(x.shape), dtype=x.dtype)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--png", default=None)
    ap.add_argument("--quick", action="store_true", help="a one-layer GPT instead of two")
    ap.add_argument("--grid", type=int, default=12, help="fabric is small(grid, grid)")
    ap.add_argument("--repeats", type=int, default=None, help="timed calls (1 quick, else 3)")
    ap.add_argument("--samples", type=int, default=None,
                    help="samples streamed per model and mode (default 8; 3 with --quick)")
    ap.add_argument("--dtypes", default=None,
                    help=f"comma-separated, of {', '.join(DTYPES)} (default: all; with "
                    "--quick fp32,float16)")
    ap.add_argument("--compile-only", action="store_true",
                    help="measure the compile-time section alone; the other sections are "
                    "kept as --json has them")
    args = ap.parse_args(argv)
    config = FabricConfig.small(args.grid, args.grid)
    repeats = args.repeats or (1 if args.quick else 3)
    dtypes = (args.dtypes.split(",") if args.dtypes else
              ["fp32", "float16"] if args.quick else list(DTYPES))
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        ap.error(f"--dtypes: {bad} not among {list(DTYPES)}")
    kept = json.loads(Path(args.json).read_text()) if args.compile_only else None
    results = kept["results"] if kept else [
        measure(name, m, x, config, repeats, dtype) for name, m, x in cases(args.quick)
        for dtype in dtypes]
    columns = ["model", "dtype", "cycles", "util %", "PEs", "SRAM B/PE", "max abs err",
               "out err vs fp32", "sim s"]
    rows = [[r["model"], r["dtype"], r["cycles"], round(100 * r["utilization"], 3),
             r["pes_used"], r["max_sram_bytes_per_pe"], f"{r['max_abs_error']:.2e}",
             f"{r['output_error_vs_fp32']:.2e}", round(r["simulate_s"], 1)] for r in results]
    headline = [f"{r['model']} {r['dtype']}: {r['cycles']} cycles, "
                f"{100 * r['utilization']:.2f} % fma utilization, max error "
                f"{r['max_abs_error']:.1e}" for r in results]
    samples = args.samples or (3 if args.quick else 8)
    modes = kept["modes"] if kept else [
        measure_mode(name, m, x, cfg or config, mode, samples)
        for name, m, x, cfg in mode_cases(args.quick) for mode in ("sequential", "pipelined")]
    mode_columns = ["model", "mode", "fabric", "latency", "cycles/sample", "util %", "PEs",
                    "bottleneck", "colors (bound)", "max abs err", "sim s"]
    mode_rows = [[r["model"], r["mode"], r["config"], r["latency_cycles"],
                  round(r["cycles_per_sample"]), round(100 * r["utilization"], 3),
                  r["pes_used"], r["bottleneck"],
                  f"{r['colors_needed']} ({r['colors_lower_bound']}) of {r['colors_available']}"
                  if "colors_needed" in r else "-", f"{r['max_abs_error_last_sample']:.2e}",
                  round(r["simulate_s"], 1)] for r in modes]
    headline += [f"{r['model']} {r['mode']}: latency {r['latency_cycles']} cycles, "
                 f"{r['cycles_per_sample']:.0f} cycles per sample over {r['samples']} samples, "
                 f"{100 * r['utilization']:.2f} % fma utilization on {r['pes_used']} PEs"
                 for r in modes]
    compiles = compile_times(max(COMPILE_REPEATS, repeats))
    compile_columns = ["model", "fabric", "mode", "compile s", "CPU s", "PEs",
                       "largest tile", "predicted bottleneck"]
    compile_rows = [[r["model"], r["config"], r["mode"], round(r["compile_s"], 2),
                     round(r["compile_cpu_s"], 2), r["pes_used"], r["largest_tile_pes"],
                     r["predicted_bottleneck_cycles"]] for r in compiles]
    headline += [f"{r['model']} compiles in {r['compile_s']:.1f} s ({r['compile_cpu_s']:.1f} "
                 f"CPU s) on {r['config']} ({r['mode']}, {r['pes_used']} PEs)"
                 for r in compiles]
    png = Path(args.png) if args.png else Path(args.json).with_suffix(".png")
    _plot(results, png)
    write_json(args.json, {"benchmark": "models", "config": config.name, "results": results,
                           "headline": headline, "table": {"columns": columns, "rows": rows},
                           "modes": modes, "modes_table": {"columns": mode_columns,
                                                           "rows": mode_rows},
                           "compile": compiles,
                           "compile_table": {"columns": compile_columns,
                                             "rows": compile_rows},
                           "pngs": [str(png)]})
    for line in headline:
        print(line)
    ok = all(r["all_nodes_within_tolerance"] for r in results + modes)
    return 0 if ok else 1


def _plot(results, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    models = list(dict.fromkeys(r["model"] for r in results))
    dtypes = list(dict.fromkeys(r["dtype"] for r in results))
    width = 0.8 / len(dtypes)
    for j, dtype in enumerate(dtypes):
        mine = {r["model"]: r for r in results if r["dtype"] == dtype}
        xs = [i + j * width for i in range(len(models))]
        for ax, key, scale in ((axes[0], "cycles", 1), (axes[1], "utilization", 100),
                               (axes[2], "output_error_vs_fp32", 1)):
            ax.bar(xs, [scale * mine[m][key] if m in mine else 0 for m in models], width,
                   label=dtype)
    for ax, label in zip(axes, ("simulated cycles", "fma utilization (%)",
                                "output max abs error vs fp32")):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))], models)
        ax.set_ylabel(label)
    axes[2].set_yscale("symlog", linthresh=1e-8)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
