"""Training on the simulated fabric: per model and dtype, the simulated cycles of one
training step (forward + backward graphs with the weights' moves from where they live,
the gradients' moves back there, optimizer kernels, loss-scaler kernels; host I/O apart),
the fma utilization of the step's graphs (useful multiply-adds over the whole fabric's fma
peak: fp32's, or the 16-bit one in mixed precision, as
`CompiledModel.utilization`), the wall time per step; and the loss curves of `Trainer` on
the fabric against the same loop in eager PyTorch (`device="cpu"`), step by step: fabric
loss, eager loss, their relative difference, the loss scale, skipped steps.

Models and tasks (fixed seeds, `frontend.training.tasks`):
    mlp         zoo MLP, mse on tasks.regression (batch 8), SGD lr 0.1 momentum 0.9
    lenet       zoo LeNet (eval: batch norm uses its running statistics), mse on a fixed
                regression of 8 x 8 images (batch 4), SGD lr 0.1 momentum 0.9
    gpt-1layer  zoo TinyGPT(layers=1), tasks.tokens, AdamW lr 0.03; --gpt-loss
                cross_entropy (integer targets) or mse (one-hot targets)

Mixed precision runs the Trainer's default dynamic loss scaling; the eager run uses CPU
autocast in the same 16-bit dtype, and eager fp32 for cbfloat16 (PyTorch has none).

    python benchmarks/training.py --json benchmarks/results/training.json [--png P]
        [--quick] [--dtypes fp32,float16,bfloat16,cbfloat16] [--mlp-steps 50]
        [--gpt-steps 20] [--lenet-steps 3] [--gpt-loss cross_entropy|mse]
        [--execution pipelined|sequential]

--quick: mlp 8 steps and gpt 2 steps, dtypes fp32,bfloat16, no lenet.
Exit status 1 when an fp32 fabric curve leaves eager PyTorch's by more than FP32_RTOL.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import write_json  # noqa: E402

import frontend  # noqa: E402
from fabric import FabricConfig  # noqa: E402
from frontend.schedule import DEFAULT_MODE, MODES  # noqa: E402
from frontend.training import tasks  # noqa: E402
from frontend.training.curves import CURVE_RTOL  # noqa: E402

DTYPES = ("fp32", "float16", "bfloat16", "cbfloat16")
MODELS = ("mlp", "lenet", "gpt-1layer")
SGD = {"type": "sgd", "lr": 0.1, "momentum": 0.9}
ADAMW = {"type": "adamw", "lr": 0.03}
# Relative loss difference, fabric against eager, allowed at every step: the loss-curve
# tests' (frontend.training.curves says why). fp32 is enforced (exit 1); mixed precision is
# reported (within_tolerance), since a step one side skips for overflow and the other takes
# moves the curves apart by more than rounding.
FP32_RTOL = CURVE_RTOL["fp32"]  # the tolerances of the loss-curve tests
MIXED_RTOL = {dtype: CURVE_RTOL["mixed"] for dtype in ("float16", "bfloat16", "cbfloat16")}


def lenet_task(batches: int, batch: int = 4, seed: int = 0):
    """Fixed batches (x (batch, 1, 8, 8), y (batch, 5)), y = tanh(x.flatten(1) @ W / 8)
    with a fixed teacher W (64, 5): a regression LeNet can learn."""
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(64, 5, generator=g) / 8.0
    out = []
    for _ in range(batches):
        x = torch.randn(batch, 1, 8, 8, generator=g)
        out.append((x, torch.tanh(x.flatten(1) @ teacher)))
    return out


def setup(name: str, steps: int, gpt_loss: str):
    """(model factory, optimizer spec, loss name, train batches) of a benchmark model."""
    if name == "mlp":
        train, _ = tasks.regression(batch=8, batches=steps, seed=0)
        return (lambda: frontend.zoo.MLP()), SGD, "mse", train
    if name == "lenet":
        return (lambda: frontend.zoo.LeNet().eval()), SGD, "mse", lenet_task(steps)
    if name == "gpt-1layer":
        target = "ids" if gpt_loss == "cross_entropy" else "onehot"
        train, _ = tasks.tokens(batch=2, batches=steps, seed=0, target=target)
        return (lambda: frontend.zoo.TinyGPT(layers=1)), ADAMW, gpt_loss, train
    raise ValueError(f"unknown model {name!r}; choose one of {list(MODELS)}")


def fresh(factory, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)  # the same initial weights for the fabric and the eager run
    return factory()


def run(name: str, dtype: str, steps: int, config: FabricConfig, gpt_loss: str,
        execution: str) -> dict:
    """One model in one dtype: the fabric run (both graphs of a step in `execution`) and
    the eager run over the same batches."""
    factory, optimizer, loss, train = setup(name, steps, gpt_loss)
    fabric = frontend.Trainer(backend=frontend.backend("fabric", config=config,
                                                       execution=execution),
                              model=fresh(factory), optimizer=dict(optimizer), loss=loss,
                              precision=dtype, loop={"max_steps": steps})
    fabric.fit(train)
    eager_dtype = "fp32" if dtype == "cbfloat16" else dtype
    eager = frontend.Trainer(device="cpu", model=fresh(factory), optimizer=dict(optimizer),
                             loss=loss, precision=eager_dtype, loop={"max_steps": steps})
    eager.fit(train)
    curve = []
    for f, e in zip(fabric.history, eager.history):
        rel = abs(f["loss"] - e["loss"]) / max(abs(e["loss"]), 1e-30)
        curve.append({"step": f["step"], "fabric_loss": f["loss"], "eager_loss": e["loss"],
                      "rel_diff": rel, "scale": f["scale"], "eager_scale": e["scale"],
                      "taken": f["taken"], "eager_taken": e["taken"]})
    return {"model": name, "dtype": dtype, "execution": execution,
            "eager_dtype": eager_dtype, "loss": loss,
            "optimizer": optimizer["type"], "steps": steps, "curve": curve,
            **step_figures(fabric.history, config, dtype),
            "eager_wall_s_per_step": statistics.median(h["wall_s"] for h in eager.history),
            **agreement(curve, dtype)}


def step_figures(history: list[dict], config: FabricConfig, dtype: str) -> dict:
    """Cycles and utilization of one step (a step that was taken, so the optimizer ran;
    cycles of the graphs are the same every step of one shape) and wall time per step
    (the first step, which compiles, apart; the median of the others)."""
    taken = [h for h in history if h["taken"]] or history
    last = taken[-1]
    graph_cycles = {h["cycles"] for h in history}
    total = last["cycles"] + last["optimizer_cycles"] + last["scaler_cycles"]
    # the graphs' multiply-adds, back from their utilization (fmas / (peak * cycles)), give
    # the utilization over the whole step (the optimizer's and the scaler's elementwise
    # work is not counted as the model's multiply-adds)
    peak = config.simd_width("fma", "f32" if dtype == "fp32" else "f16") * config.num_pes
    fmas = last["utilization"] * peak * last["cycles"]
    later = [h["wall_s"] for h in history[1:]]
    # "cycles": forward + backward (the weights' moves included) + the gradients' moves
    return {"graph_cycles": last["cycles"], "graph_cycles_range": [min(graph_cycles),
                                                                    max(graph_cycles)],
            "grad_move_cycles": last["grad_move_cycles"],
            "optimizer_cycles": last["optimizer_cycles"],
            "scaler_cycles": last["scaler_cycles"], "step_cycles": total,
            "host_io_cycles": last["host_cycles"], "utilization": last["utilization"],
            "step_utilization": fmas / (peak * total), "fma_peak_per_cycle": peak,
            "first_step_wall_s": history[0]["wall_s"],
            "wall_s_per_step": statistics.median(later) if later else history[0]["wall_s"],
            "skipped_steps": sum(not h["taken"] for h in history)}


def skips(curve: list[dict]) -> str:
    """Skipped steps, fabric/eager (loss scaling)."""
    return (f"{sum(not c['taken'] for c in curve)}/"
            f"{sum(not c['eager_taken'] for c in curve)}")


def agreement(curve: list[dict], dtype: str) -> dict:
    rtol = FP32_RTOL if dtype == "fp32" else MIXED_RTOL[dtype]
    worst = max(c["rel_diff"] for c in curve)
    return {"max_rel_diff": worst, "rtol": rtol,
            "within_tolerance": bool(math.isfinite(worst) and worst <= rtol),
            "same_skips": all(c["taken"] == c["eager_taken"] for c in curve)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--png", default=None, help="default: the JSON's path with .png")
    ap.add_argument("--quick", action="store_true",
                    help="mlp 8 steps, gpt 2 steps, fp32 and bfloat16, no lenet")
    ap.add_argument("--grid", type=int, default=12, help="fabric is small(grid, grid)")
    ap.add_argument("--dtypes", default=None,
                    help=f"comma-separated, of {', '.join(DTYPES)} (default: all; with "
                    "--quick fp32,bfloat16)")
    ap.add_argument("--models", default=None,
                    help=f"comma-separated, of {', '.join(MODELS)} (default: all; with "
                    "--quick mlp,gpt-1layer)")
    ap.add_argument("--mlp-steps", type=int, default=None, help="default 50 (quick 8)")
    ap.add_argument("--gpt-steps", type=int, default=None, help="default 20 (quick 2)")
    ap.add_argument("--lenet-steps", type=int, default=3)
    ap.add_argument("--gpt-loss", choices=("cross_entropy", "mse"), default="cross_entropy",
                    help="cross_entropy on token ids, or mse on one-hot targets")
    ap.add_argument("--execution", choices=list(MODES), default=DEFAULT_MODE,
                    help=f"each graph's execution mode on the fabric (default {DEFAULT_MODE})")
    args = ap.parse_args(argv)
    dtypes = (args.dtypes.split(",") if args.dtypes else
              ["fp32", "bfloat16"] if args.quick else list(DTYPES))
    models = (args.models.split(",") if args.models else
              ["mlp", "gpt-1layer"] if args.quick else list(MODELS))
    for flag, given, allowed in (("--dtypes", dtypes, DTYPES), ("--models", models, MODELS)):
        bad = [d for d in given if d not in allowed]
        if bad:
            ap.error(f"{flag}: {bad} not among {list(allowed)}")
    steps = {"mlp": (8 if args.quick else 50) if args.mlp_steps is None else args.mlp_steps,
             "gpt-1layer": ((2 if args.quick else 20) if args.gpt_steps is None
                            else args.gpt_steps),
             "lenet": args.lenet_steps}
    for name, n in steps.items():
        if n < 1:
            ap.error(f"steps of {name} must be >= 1, got {n}")
    config = FabricConfig.small(args.grid, args.grid)
    results = []
    for name in models:
        for dtype in dtypes:
            r = run(name, dtype, steps[name], config, args.gpt_loss, args.execution)
            print(f"{name} {dtype}: {r['step_cycles']} cycles/step, "
                  f"max rel diff {r['max_rel_diff']:.2e}", flush=True)
            results.append(r)
    columns = ["model", "dtype", "steps", "fwd+bwd cycles", "grad moves", "optimizer", "scaler",
               "step cycles", "host I/O", "util %", "wall s/step", "skipped f/e",
               "final loss", "eager", "max rel diff", "rtol"]
    rows = [[r["model"], r["dtype"], r["steps"], r["graph_cycles"] - r["grad_move_cycles"],
             r["grad_move_cycles"], r["optimizer_cycles"],
             r["scaler_cycles"], r["step_cycles"], r["host_io_cycles"],
             round(100 * r["utilization"], 3), round(r["wall_s_per_step"], 1),
             skips(r["curve"]), f"{r['curve'][-1]['fabric_loss']:.4g}",
             f"{r['curve'][-1]['eager_loss']:.4g}", f"{r['max_rel_diff']:.1e}",
             f"{r['rtol']:.0e}"] for r in results]
    headline = [f"{r['model']} {r['dtype']} ({r['execution']}): {r['step_cycles']} cycles/step "
                f"({r['graph_cycles'] - r['grad_move_cycles']} fwd+bwd, "
                f"{r['grad_move_cycles']} gradient moves), {100 * r['utilization']:.2f} % fma "
                f"utilization; loss within {r['max_rel_diff']:.1e} of eager "
                f"{r['eager_dtype']} over {r['steps']} steps"
                + ("" if r["same_skips"] else f"; skipped steps differ (fabric/eager "
                   f"{skips(r['curve'])})") for r in results]
    png = Path(args.png) if args.png else Path(args.json).with_suffix(".png")
    plot(results, png)
    write_json(args.json, {"benchmark": "training", "config": config.name,
                           "args": vars(args), "gpt_loss": args.gpt_loss,
                           "fp32_rtol": FP32_RTOL, "mixed_rtol": MIXED_RTOL,
                           "results": results, "headline": headline,
                           "table": {"columns": columns, "rows": rows}, "pngs": [str(png)]})
    print_table(columns, rows)
    failed = [f"{r['model']} {r['dtype']}" for r in results
              if r["dtype"] == "fp32" and not r["within_tolerance"]]
    if failed:
        print(f"fp32 loss curves off eager PyTorch by more than {FP32_RTOL}: {failed}")
    return 1 if failed else 0


def print_table(columns: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in row] for row in [columns, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for k, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def plot(results: list[dict], path: Path) -> None:
    """One panel of loss curves per model (fabric solid, eager dashed, a colour per dtype)
    and one of the loss scale over steps (mixed precision runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    models = list(dict.fromkeys(r["model"] for r in results))
    dtypes = list(dict.fromkeys(r["dtype"] for r in results))
    colour = {d: f"C{i}" for i, d in enumerate(dtypes)}
    fig, axes = plt.subplots(1, len(models) + 1, figsize=(4.5 * (len(models) + 1), 3.8))
    for ax, model in zip(axes, models):
        for r in (r for r in results if r["model"] == model):
            steps = [c["step"] for c in r["curve"]]
            ax.plot(steps, [c["fabric_loss"] for c in r["curve"]], color=colour[r["dtype"]],
                    marker=".", label=f"{r['dtype']} fabric")
            ax.plot(steps, [c["eager_loss"] for c in r["curve"]], color=colour[r["dtype"]],
                    ls="--", label=f"{r['dtype']} eager {r['eager_dtype']}")
        ax.set_title(f"{model}: loss, fabric vs eager")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend(fontsize=7)
    ax = axes[-1]
    for r in results:
        if r["dtype"] == "fp32":
            continue
        steps = [c["step"] for c in r["curve"]]
        ax.plot(steps, [c["scale"] for c in r["curve"]], color=colour[r["dtype"]],
                ls="-" if r["model"] == models[0] else ":", marker=".",
                label=f"{r['model']} {r['dtype']}")
        skipped = [c for c in r["curve"] if not c["taken"]]
        ax.scatter([c["step"] for c in skipped], [c["scale"] for c in skipped], marker="x",
                   color="k", zorder=3)
    ax.set_yscale("log", base=2)
    ax.set_title("loss scale (x: skipped step)")
    ax.set_xlabel("step")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
