"""Kernel quality on the simulated fabric: cycles against each kernel's analytic model and
against the fabric's peak, with the numeric error against numpy.

One row per kernel and size: name, grid (the kernel's rectangle), sizes, dtype and
acc_dtype, cycles (kernel cycles, host I/O apart), model_cycles, efficiency (useful fmas
over the rectangle's peak fma capacity for the same cycles: PEs * cycles * fma width of
the kernel's dtype, 1 for fp32 and 4 for fp16 on wse2; 0 for kernels without fmas),
max_abs_err (against the kernel's numpy reference; for GEMM against the float64 product of
the fp32 inputs, with `exact_order` telling whether the result equals the reference in the
kernel's summation order and rounding bit for bit). GEMV rows add efficiency_sram_bound:
the local product's SRAM-bandwidth bound over the cycles. The fp16 SUMMA rows
(gemm_f16_acc32: fp32 accumulation, the mixed-precision default; gemm_f16_acc16: fp16
accumulation) measure GEMM efficiency against the 4-wide fp16 fma peak.

Timing (benchmarks/harness.py): per kernel, a warm-up (engine compile, reported as
compile_s, plus one cycle) apart, then --repeats runs from a fresh load (default 3, 1 with
--quick) whose engine wall time's median is run_s; the runs must agree in cycles.

Every kernel runs on one 8 x 8 fabric (one engine compile per table bucket), on its
rectangle. Kernel modules that are missing, or whose builders fail, are listed under
"skipped" with the reason.

    python benchmarks/kernel_cycles.py --quick --json benchmarks/results/kernel_cycles.json

writes the JSON and, next to it, a PNG (cycles against model per kernel, and the GEMM
efficiencies). --quick keeps a few sizes per kernel, the 8 x 8 GEMMs at M = N = K = 128
(16 x 16 blocks); the full run adds 256 (32 x 32 blocks) and others.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import median_time, warm_up, write_json  # noqa: E402

from fabric import FabricConfig, Rect, Simulator  # noqa: E402
from fabric.kernels.base import KernelResult  # noqa: E402

FABRIC = FabricConfig.small(8, 8)


def _normal(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- cases: (name, module, sizes, make) where make(module) -> (kernel, inputs, reference) ------
def _gemm(builder, ref_name, rect, m, k, n, dtype="f32", acc_dtype="f32"):
    def make(mod):
        fmt = {"dtype": dtype, "acc_dtype": acc_dtype}
        kernel = getattr(mod, builder)(FABRIC, rect, m, k, n, **fmt)
        a, b = _normal(1, m, k), _normal(2, k, n)
        order_ref = getattr(mod, ref_name)

        def check(out):
            exact = a.astype(np.float64) @ b.astype(np.float64)
            args = (a, b) if builder == "build_gemm_summa" else (a, b, rect.rows)
            same = any(np.array_equal(out, order_ref(*args, fused=f, **fmt))
                       for f in (True, False))
            return float(np.abs(out - exact).max()), {"exact_order": bool(same)}

        return kernel, {"A": a, "B": b}, check
    return make


def _simple(builder, inputs, reference, **kw):
    """A kernel built as builder(FABRIC, rect, *sizes, **kw), checked against reference."""
    def make(mod, rect, sizes):
        kernel = getattr(mod, builder)(FABRIC, rect, *sizes, **kw)
        data = inputs(sizes)

        def check(out):
            ref = reference(mod, data)
            return float(np.abs(np.asarray(out, np.float64) - ref).max()), {}

        return kernel, data, check
    return make


def _gemv(mod, rect, sizes):
    m, n = sizes
    A, x, b = _normal(3, m, n), _normal(4, n), _normal(5, m)
    kernel = mod.build_gemv(FABRIC, rect, m, n)

    def check(out):
        ref = mod.gemv_reference(A, x, b, rect.rows, rect.cols, fused=True)
        extra = {}
        if kernel.info.get("bound_cycles"):
            extra["bound_cycles"] = int(kernel.info["bound_cycles"])
        return float(np.abs(out - ref.astype(np.float64)).max()), extra

    return kernel, {"A": A, "x": x, "b": b}, check


def cases(quick: bool) -> list:
    """(name, module, rect, sizes, make) rows to run."""
    full8, quad = Rect(0, 0, 8, 8), Rect(0, 0, 4, 4)
    out = []
    # quick keeps the 8 x 8 GEMM at 128^3 (16 x 16 blocks): 256^3 runs 280k cycles per
    # algorithm, most of the quick suite's time budget on a 2-core machine
    gemm_sizes = [(quad, 64, 64, 64), (Rect(0, 0, 3, 5), 50, 37, 45), (full8, 128, 128, 128)]
    if not quick:
        gemm_sizes += [(full8, 256, 256, 256), (full8, 192, 192, 192), (quad, 128, 96, 80)]
    for rect, m, k, n in gemm_sizes:
        for name, builder, ref in (("gemm_summa", "build_gemm_summa", "summa_reference"),
                                   ("gemm_cannon", "build_gemm_cannon", "cannon_reference")):
            if name == "gemm_cannon" and rect.rows != rect.cols:
                continue
            out.append((name, f"fabric.kernels.{name}", rect, {"m": m, "k": k, "n": n},
                        lambda mod, r, s, b=builder, f=ref: _gemm(b, f, r, s[0], s[1], s[2])(
                            mod)))
    # fp16 SUMMA against the fp16 fma peak: 16 x 16 blocks (quick), 32 x 32 (full)
    for m in [128] + ([] if quick else [256]):
        for name, acc in (("gemm_f16_acc32", "f32"), ("gemm_f16_acc16", "f16")):
            out.append((name, "fabric.kernels.gemm_summa", full8, {"m": m, "k": m, "n": m},
                        lambda mod, r, s, a=acc: _gemm("build_gemm_summa", "summa_reference",
                                                       r, *s, "f16", a)(mod)))
    gemv_sizes = [(quad, (64, 64)), (full8, (256, 256))]
    if not quick:
        gemv_sizes += [(full8, (128, 128)), (Rect(0, 0, 3, 5), (50, 45))]
    for rect, (m, n) in gemv_sizes:
        out.append(("gemv", "fabric.kernels.gemv", rect, {"m": m, "n": n}, _gemv))

    mn = [(full8, (256, 256))] + ([] if quick else [(quad, (64, 64))])
    for rect, sizes in mn:
        out.append(("elementwise_add", "fabric.kernels.elementwise", rect,
                    dict(zip("mn", sizes)),
                    _simple("build_elementwise",
                            lambda s: {"x": _normal(6, *s), "y": _normal(7, *s)},
                            lambda mod, d: mod.elementwise_reference(d["x"], d["y"], "add"),
                            op="add")))
        out.append(("affine_per_row", "fabric.kernels.elementwise_chains", rect,
                    dict(zip("mn", sizes)),
                    _simple("build_affine",
                            lambda s: {"x": _normal(14, *s), "s": _normal(15, s[0]),
                                       "t": _normal(16, s[0])},
                            lambda mod, d: mod.affine_reference(d["x"], d["s"], d["t"], "col"),
                            vector="col")))
        out.append(("clamp", "fabric.kernels.elementwise_chains", rect, dict(zip("mn", sizes)),
                    _simple("build_clamp", lambda s: {"x": _normal(17, *s)},
                            lambda mod, d: mod.clamp_reference(d["x"], 0.0, 6.0),
                            lo=0.0, hi=6.0)))
        out.append(("softmax", "fabric.kernels.rownorm", rect, dict(zip("mn", sizes)),
                    _simple("build_softmax", lambda s: {"x": _normal(8, *s)},
                            lambda mod, d: mod.softmax_reference(d["x"]))))
        out.append(("layernorm", "fabric.kernels.rownorm", rect, dict(zip("mn", sizes)),
                    _simple("build_layernorm",
                            lambda s: {"x": _normal(9, *s), "gamma": _normal(10, s[1]),
                                       "beta": _normal(11, s[1])},
                            lambda mod, d: mod.layernorm_reference(d["x"], d["gamma"],
                                                                   d["beta"]))))
        out.append(("gelu", "fabric.kernels.activations", rect, dict(zip("mn", sizes)),
                    _simple("build_gelu", lambda s: {"x": _normal(12, *s)},
                            lambda mod, d: mod.gelu_reference(d["x"]))))
    for n in [256] + ([] if quick else [64, 1024]):
        out.append(("allreduce_row", "fabric.kernels.collectives", full8, {"n": n},
                    _simple("build_allreduce", lambda s: {"x": _normal(13, 8, 8, s[0])},
                            lambda mod, d: mod.allreduce_reference(d["x"], "row"),
                            along="row")))
    for iters in [4] + ([] if quick else [16]):
        out.append(("stencil", "fabric.kernels.stencil", full8,
                    {"ny": 64, "nx": 64, "iters": iters},
                    _simple("build_stencil",
                            lambda s: {"u": _normal(14, s[0] + 2, s[1] + 2)},
                            lambda mod, d, t=iters: mod.stencil_reference(d["u"], t))))
    return out


def loaded(kernel, inputs) -> tuple[Simulator, int]:
    """A simulator with the kernel's inputs loaded and its entry tasks launched, and the
    cycle its kernel run starts at (host I/O cycles are counted apart)."""
    sim = Simulator(kernel.config, kernel.program)
    kernel.load(sim, inputs)
    kernel.launch(sim)
    return sim, int(sim.state.cycle)


def run_case(name, module, rect, sizes, make, repeats: int = 1) -> dict:
    """One kernel: a warm-up (engine compile + one cycle) apart, then `repeats` full runs
    from a fresh load, timed (engine only) and their median kept; every run must give the
    same cycle count."""
    mod = importlib.import_module(module)
    kernel, inputs, check = make(mod, rect, tuple(sizes.values()))
    warm, _ = loaded(kernel, inputs)
    warmup_s = warm_up(lambda: warm.run(max_cycles=1, raise_on_limit=False, progress=False))
    compile_s = warm.compile_s  # the XLA compile alone (0 when this bucket was compiled)
    runs = []

    def one_run(loaded_sim):
        sim, start = loaded_sim
        stats = sim.run(max_cycles=5_000_000, progress=False)
        runs.append((sim, stats, stats.cycles - start))

    t0 = time.perf_counter()
    run_s, run_s_all = median_time(one_run, repeats, setup=lambda: loaded(kernel, inputs))
    wall = time.perf_counter() - t0 + warmup_s
    if len({c for _, _, c in runs}) != 1:
        raise RuntimeError(f"{name}: runs differ in cycles {[c for _, _, c in runs]}")
    sim, stats, cycles = runs[-1]
    result = KernelResult(kernel.read(sim), stats, cycles)
    err, extra = check(result.output)
    row = {
        "name": name,
        "grid": [rect.rows, rect.cols],
        "fabric": [FABRIC.rows, FABRIC.cols],
        "sizes": sizes,
        "dtype": kernel.info.get("dtype", "f32"),
        "acc_dtype": kernel.info.get("acc_dtype", "f32"),
        "cycles": int(result.cycles),
        "model_cycles": int(kernel.model_cycles),
        "model_error": result.cycles / kernel.model_cycles - 1 if kernel.model_cycles else None,
        "efficiency": result.efficiency(kernel),
        "max_abs_err": err,
        "host_cycles": int(result.stats.host_cycles),
        "compile_s": round(compile_s, 2),
        "warmup_s": round(warmup_s, 2),
        "run_s": round(run_s, 3),
        "run_s_all": [round(t, 3) for t in run_s_all],
        "repeats": repeats,
        "wall_s": round(wall, 2),
    }
    bound = extra.pop("bound_cycles", None)
    if bound:
        row["efficiency_sram_bound"] = bound / result.cycles
    row.update(extra)
    return row


def print_table(rows: list) -> None:
    head = (f"{'kernel':<16}{'grid':<6}{'sizes':<16}{'cycles':>9}{'model':>9}{'dev':>8}"
            f"{'eff':>8}{'max err':>10}{'run s':>8}  note")
    print(head)
    print("-" * len(head))
    for r in rows:
        sizes = "x".join(str(v) for v in r["sizes"].values())
        dev = f"{100 * r['model_error']:+.1f}%" if r["model_error"] is not None else "-"
        eff = f"{100 * r['efficiency']:.1f}%" if r["efficiency"] else "-"
        note = _note(r)
        grid = f"{r['grid'][0]}x{r['grid'][1]}"
        print(f"{r['name']:<16}{grid:<6}{sizes:<16}{r['cycles']:>9}{r['model_cycles']:>9}"
              f"{dev:>8}{eff:>8}{r['max_abs_err']:>10.2g}{r['run_s']:>8.2f}  {note}")


def _note(r: dict) -> str:
    if "exact_order" in r:
        return "bit-exact in its k order" if r["exact_order"] else "not bit-exact"
    if "efficiency_sram_bound" in r:
        return f"{100 * r['efficiency_sram_bound']:.0f}% of the SRAM bound"
    return ""


def table(rows: list) -> dict:
    """The rows as the README's table: kernel, grid, sizes, cycles against the model."""
    return {"columns": ["kernel", "grid", "sizes", "cycles", "model", "dev", "fma eff",
                        "max abs err", "run s", "note"],
            "rows": [[r["name"], f"{r['grid'][0]}x{r['grid'][1]}",
                      "x".join(str(v) for v in r["sizes"].values()), r["cycles"],
                      r["model_cycles"],
                      f"{100 * r['model_error']:+.1f}%" if r["model_error"] is not None else "-",
                      f"{100 * r['efficiency']:.1f}%" if r["efficiency"] else "-",
                      f"{r['max_abs_err']:.2g}", f"{r['run_s']:.2f}", _note(r)] for r in rows]}


def headline(rows: list, skipped: list) -> list[str]:
    if not rows:
        return [f"no kernel ran; {len(skipped)} skipped"]
    devs = [abs(r["model_error"]) for r in rows if r["model_error"] is not None]
    out = [f"{len(rows)} kernel runs on {FABRIC.name}, {len(skipped)} skipped; cycles within "
           f"{100 * max(devs):.1f}% of each kernel's model"]
    for dtype in ("f32", "f16"):
        gemms = [r for r in rows if r["name"].startswith("gemm") and r["dtype"] == dtype]
        if gemms:
            best = max(gemms, key=lambda r: r["efficiency"])
            out.append(f"best {dtype} GEMM: {best['name']} {best['grid'][0]}x"
                       f"{best['grid'][1]} at {100 * best['efficiency']:.1f}% of the "
                       f"{dtype} fma peak")
    out.append(f"max abs error against numpy {max(r['max_abs_err'] for r in rows):.2g}")
    return out


def plot(rows: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, rx, bx) = plt.subplots(1, 3, figsize=(17, 5))
    names = sorted({r["name"] for r in rows})
    for i, name in enumerate(names):
        pts = [r for r in rows if r["name"] == name]
        color = plt.cm.tab10(i % 10)
        model = [r["model_cycles"] for r in pts]
        ax.scatter(model, [r["cycles"] for r in pts], label=name, color=color, s=30)
        rx.scatter(model, [r["cycles"] / r["model_cycles"] for r in pts], color=color, s=30)
    lo = min(min(r["cycles"], r["model_cycles"]) for r in rows)
    hi = max(max(r["cycles"], r["model_cycles"]) for r in rows)
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="cycles = model")
    ax.set(xscale="log", yscale="log", xlabel="model cycles", ylabel="simulated cycles",
           title=f"kernels on {FABRIC.name}: simulated vs model")
    ax.legend(fontsize=7)
    rx.axhspan(0.9, 1.1, color="0.9", label="within 10 %", zorder=0)
    rx.axhline(1.0, color="k", ls="--", lw=0.8)
    rx.set(xscale="log", xlabel="model cycles", ylabel="simulated / model",
           title="model deviation", ylim=(0.8, 1.2))
    rx.legend(fontsize=7)
    eff = [r for r in rows if r["efficiency"]]
    labels = [f"{r['name']}\n{r['grid'][0]}x{r['grid'][1]} "
              f"{'x'.join(str(v) for v in r['sizes'].values())}" for r in eff]
    bx.barh(range(len(eff)), [100 * r["efficiency"] for r in eff], color="tab:blue")
    bx.set_yticks(range(len(eff)), labels, fontsize=6)
    bx.axvline(80, color="k", ls="--", lw=0.8)
    bx.set(xlabel="% of the rectangle's fma peak (of the kernel's dtype)", xlim=(0, 100),
           title="fma efficiency")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few sizes per kernel")
    parser.add_argument("--json", default="benchmarks/results/kernel_cycles.json")
    parser.add_argument("--only", default="", help="comma-separated kernel names to run")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed runs per kernel, median kept (default 3; 1 with --quick)")
    args = parser.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if repeats < 1:
        parser.error(f"--repeats must be at least 1, got {repeats}")
    only = {s for s in args.only.split(",") if s}

    rows, skipped = [], []
    t0 = time.perf_counter()
    for name, module, rect, sizes, make in cases(args.quick):
        if only and name not in only:
            continue
        what = f"{name} {rect.rows}x{rect.cols} {sizes}"
        try:
            row = run_case(name, module, rect, sizes, make, repeats)
        except ModuleNotFoundError as err:
            skipped.append({"case": what, "reason": f"module missing: {err.name}"})
            print(f"skipped {what}: module {err.name} missing", flush=True)
            continue
        except Exception as err:  # a kernel under construction elsewhere: report, go on
            skipped.append({"case": what, "reason": f"{type(err).__name__}: {err}"})
            print(f"skipped {what}: {type(err).__name__}: {err}", flush=True)
            traceback.print_exc(limit=2)
            continue
        rows.append(row)
        print(f"{what}: {row['cycles']} cycles (model {row['model_cycles']}), "
              f"{row['wall_s']} s", flush=True)
    total = time.perf_counter() - t0
    print()
    print_table(rows)
    print(f"\ntotal {total:.0f} s; skipped {len(skipped)}")
    out = Path(args.json)
    pngs = [str(out.with_suffix(".png"))] if rows else []
    if rows:
        plot(rows, out.with_suffix(".png"))
    write_json(out, {"benchmark": "kernel_cycles", "fabric": FABRIC.name, "quick": args.quick,
                     "repeats": repeats, "total_wall_s": round(total, 1), "rows": rows,
                     "skipped": skipped, "headline": headline(rows, skipped),
                     "table": table(rows), "pngs": pngs})
    if rows:
        print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
