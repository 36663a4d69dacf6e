"""Model-level figures: each test model compiled to a simulated fabric and run; simulated
cycles, fma utilization (useful multiply-adds over the whole fabric's fp32 peak), PEs and
SRAM used, the largest error of any graph node against eager PyTorch, and the wall time of
the simulation: `frontend.compile` apart, a warm-up call (the engine compile) apart, then
the median of --repeats calls.

    python benchmarks/models.py --json benchmarks/results/models.json [--quick] [--png P]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "frontend"))

from harness import median_time, warm_up, write_json  # noqa: E402
from models import MLP, LeNet, TinyGPT  # noqa: E402  (the test models)

import frontend  # noqa: E402
from fabric import FabricConfig  # noqa: E402


def cases(quick: bool):
    torch.manual_seed(0)
    yield "mlp", MLP(), (torch.randn(4, 16),)
    yield "lenet", LeNet(), (torch.randn(2, 1, 8, 8),)
    yield "gpt-1layer" if quick else "gpt-2layer", TinyGPT(layers=1 if quick else 2), \
        (torch.randint(0, 32, (2, 4)),)


def measure(name, model, inputs, config, repeats) -> dict:
    model.eval()
    t0 = time.perf_counter()
    cm = frontend.compile(model, inputs, config=config)
    compile_s = time.perf_counter() - t0
    warm_s = warm_up(lambda: cm(*inputs))
    simulate_s, _ = median_time(lambda: cm(*inputs), repeats)
    rows = cm.validate(*inputs, raise_on_mismatch=False)
    sram = max(r.sram_bytes for r in cm.last.results)
    return {"model": name, "cycles": cm.cycles, "host_io_cycles": cm.host_cycles,
            "utilization": cm.utilization, "pes_used": cm.placement.pes_used,
            "tiles": len(cm.prepared), "max_sram_bytes_per_pe": sram,
            "max_abs_error": max(r.max_abs for r in rows),
            "all_nodes_within_tolerance": all(r.ok for r in rows),
            "compile_s": compile_s, "warm_up_s": warm_s, "simulate_s": simulate_s,
            "repeats": repeats}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--png", default=None)
    ap.add_argument("--quick", action="store_true", help="a one-layer GPT instead of two")
    ap.add_argument("--grid", type=int, default=12, help="fabric is small(grid, grid)")
    ap.add_argument("--repeats", type=int, default=None, help="timed calls (1 quick, else 3)")
    args = ap.parse_args(argv)
    config = FabricConfig.small(args.grid, args.grid)
    repeats = args.repeats or (1 if args.quick else 3)
    results = [measure(name, m, x, config, repeats) for name, m, x in cases(args.quick)]
    columns = ["model", "cycles", "util %", "PEs", "SRAM B/PE", "max abs err", "sim s"]
    rows = [[r["model"], r["cycles"], round(100 * r["utilization"], 3), r["pes_used"],
             r["max_sram_bytes_per_pe"], f"{r['max_abs_error']:.2e}", round(r["simulate_s"], 1)]
            for r in results]
    headline = [f"{r['model']}: {r['cycles']} cycles, {100 * r['utilization']:.2f} % fma "
                f"utilization, max error {r['max_abs_error']:.1e}" for r in results]
    png = Path(args.png) if args.png else Path(args.json).with_suffix(".png")
    _plot(results, png)
    write_json(args.json, {"benchmark": "models", "config": config.name, "results": results,
                           "headline": headline, "table": {"columns": columns, "rows": rows},
                           "pngs": [str(png)]})
    for line in headline:
        print(line)
    return 0 if all(r["all_nodes_within_tolerance"] for r in results) else 1


def _plot(results, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    names = [r["model"] for r in results]
    axes[0].bar(names, [r["cycles"] for r in results])
    axes[0].set_ylabel("simulated cycles")
    axes[1].bar(names, [100 * r["utilization"] for r in results])
    axes[1].set_ylabel("fma utilization (%)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
