"""The machine model against public WSE-2 / WSE-3 facts and one measured result.

Two parts:
1. Calibration: fp32 GEMM with 44 x 44 blocks per PE (Cannon, `fabric.kernels.gemm_cannon`)
   simulated on growing P x P grids, its cycle model checked against each run and then
   evaluated on 750 x 750 PEs (m = k = n = 33,000), next to the published measurement of
   the same problem on a CS-2: 349.0 TFLOP/s (Miyajima et al., SC24 workshops), i.e. about
   0.365 fma per PE per cycle at 850 MHz. The ratio model / measured says how much faster
   the simulated machine runs this GEMM than the real one; nothing is fitted to it.
   The presets apply two documented rules of the core: the SDK's rule that an async DSD op
   needs a fabric operand (`FabricConfig.async_memory_ops=False`: the kernel's fmas, on
   memory alone, synchronous) and the bank read-pair rule (`FabricConfig.bank_conflicts`;
   with the kernel's symbol layout as it is, its accumulator and A panel start at words of
   equal parity, so every fma group's two reads meet in one bank pair, and the cycle model
   counts those conflicts from the layout, `gemm_cycles.conflict_cycles`). Each grid runs
   again with the read-pair rule alone (async fmas, "pairs_"), without either rule (the
   machine before them, "norule_"), and under both with the layout the SDK advises
   (`bank_aware=True`: the accumulator one word further, in other bank pairs than A,
   "aware_").
2. Facts: every figure of docs/engine.md "Public facts and their sources", the preset's
   value beside the public one, computed from the presets (not copied).

    python benchmarks/fidelity_real.py [--grids 2,4,8]
        [--json benchmarks/results/fidelity_real.json]

writes the JSON and, next to it, a PNG (fma per PE per cycle: simulated, model, measured).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import write_json  # noqa: E402

from fabric import FabricConfig, Rect, host_io_cycles  # noqa: E402
from fabric.host_io import host_streams  # noqa: E402
from fabric.kernels.base import run_kernel  # noqa: E402
from fabric.kernels.gemm_cannon import build_gemm_cannon, cannon_model  # noqa: E402

BLOCK = 44  # rows and columns of each PE's blocks of A, B and C
MEASURED_TFLOPS = 349.0  # fp32 GEMM 33,000^3 on 750 x 750 PEs of a CS-2 (SC24 workshops)
MEASURED_P = 750
WSE2 = FabricConfig.wse2()


def fma_rate(p: int, cycles: int, block: int = BLOCK) -> float:
    """fmas per PE per cycle of a (p block)^3 GEMM on p x p PEs in `cycles`."""
    return (p * block) ** 3 / (p * p * cycles)


def simulate(p: int) -> dict:
    """The 44 x 44-block Cannon GEMM on a p x p fabric under the machine in force (the
    fmas synchronous, the read-pair rule, the kernel's layout): cycles, model, fma rate;
    the same run with the read-pair rule alone ("pairs_"), without either rule
    ("norule_") and with the bank-aware layout ("aware_")."""
    size = p * BLOCK
    rng = np.random.default_rng(p)
    a, b = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
    out = {"p": p}
    for prefix, conflicts, aware, overlapped in (("", True, False, False),
                                                 ("pairs_", True, False, True),
                                                 ("norule_", False, False, True),
                                                 ("aware_", True, True, False)):
        config = FabricConfig.small(p, p, bank_conflicts=conflicts,
                                    async_memory_ops=overlapped)
        kernel = build_gemm_cannon(config, Rect(0, 0, p, p), size, size, size,
                                   bank_aware=aware)
        result = run_kernel(kernel, {"A": a, "B": b}, max_cycles=20_000_000)
        err = float(np.abs(result.output - a.astype(np.float64) @ b).max())
        out.update({f"{prefix}cycles": result.cycles,
                    f"{prefix}model_cycles": kernel.model_cycles,
                    f"{prefix}model_error": kernel.model_cycles / result.cycles - 1,
                    f"{prefix}fma_per_pe_cycle": fma_rate(p, result.cycles),
                    f"{prefix}bank_stall_share":
                        float(result.stats.bank_stall.mean()) / result.cycles,
                    f"{prefix}max_abs_err": err})
    return out


def full_wafer_model() -> dict:
    """The Cannon model on 750 x 750 PEs of the wse2 preset (the fmas synchronous, the
    read-pair rule, the kernel's layout) against the measurement; with the read-pair rule
    alone ("pairs_"), without either rule ("norule_") and with the bank-aware layout
    ("aware_")."""
    size = MEASURED_P * BLOCK
    rect = Rect(0, 0, MEASURED_P, MEASURED_P)
    measured_rate = MEASURED_TFLOPS * 1e12 / 2 / MEASURED_P**2 / WSE2.clock_hz
    out = {"p": MEASURED_P, "m=k=n": size, "measured_tflops": MEASURED_TFLOPS,
           "measured_fma_per_pe_cycle": measured_rate}
    overlapped = WSE2.replace(async_memory_ops=True)
    for prefix, config, aware in (("", WSE2, False),
                                  ("pairs_", overlapped, False),
                                  ("norule_", overlapped.replace(bank_conflicts=False), False),
                                  ("aware_", WSE2, True)):
        cycles = cannon_model(config, rect, size, size, size, bank_aware=aware)
        tflops = 2 * size**3 / config.cycles_to_seconds(cycles) / 1e12
        out.update({f"{prefix}model_cycles": cycles,
                    f"{prefix}model_fma_per_pe_cycle": fma_rate(MEASURED_P, cycles),
                    f"{prefix}model_tflops": tflops,
                    f"{prefix}model_over_measured": tflops / MEASURED_TFLOPS})
    return out


def facts() -> list[dict]:
    """Each public fact beside the presets' value (docs/engine.md, "Public facts")."""
    w2, w3 = FabricConfig.wse2(), FabricConfig.wse3()
    col = Rect(0, 0, w2.usable_rows, 1)
    old_column = 100 + 1  # one wavelet per cycle per row channel: words + col_end
    rows = [
        ("WSE-2 fabric (width x height)", "757 x 996", f"{w2.cols} x {w2.rows}"),
        ("WSE-2 program area", "750 x 994", f"{w2.usable_cols} x {w2.usable_rows}"),
        ("WSE-3 fabric (width x height)", "762 x 1172", f"{w3.cols} x {w3.rows}"),
        ("WSE-3 program area", "755 x 1170 (unverified)", f"{w3.usable_cols} x {w3.usable_rows}"),
        ("clock WSE-2 / WSE-3", "850 MHz / 1.1 GHz (unverified)",
         f"{w2.clock_hz / 1e6:g} MHz / {w3.clock_hz / 1e9:g} GHz"),
    ]
    for label, key in (("fadds", ("add", "f32")), ("fmovs", ("mov", "f32")),
                       ("fmaxs", ("max", "f32")), ("fmaxh", ("max", "f16")),
                       ("fh2s / fs2h", ("cvt", "f16")), ("fmach", ("fma", "f16")),
                       ("fmachs", ("mul_acc32", "f16")), ("fmacs", ("fma", "f32")),
                       ("fmuls", ("mul", "f32")), ("32-bit int add", ("add", "i32")),
                       ("32-bit shift", ("shift", "i32"))):
        public = {"fadds": "2 / 4", "fmovs": "2 / 4", "fmaxs": "1 / 4", "fmaxh": "1 / 8",
                  "fh2s / fs2h": "1 / 4", "fmach": "4 / 8", "fmachs": "2 / 4",
                  "fmacs": "1 / 1 (not in the table)", "fmuls": "1 / 1 (not in the table)",
                  "32-bit int add": "1 / 1 (no SIMD mode)",
                  "32-bit shift": "1 / 1 (no SIMD mode)"}[label]
        rows.append((f"SIMD {label}, WSE-2 / WSE-3", public,
                     f"{w2.simd_width(*key)} / {w3.simd_width(*key)}"))
    rows += [
        ("routable colors", "24", str(w2.num_colors)),
        ("colors the memcpy takes", "3 (21..23 in the SDK's examples)",
         f"{len(w2.reserved_colors)} {w2.reserved_colors}"),
        ("I/O channels per edge, WSE-2 / WSE-3", "60 / 62, east and west edges, ~16 rows apart",
         f"{w2.host_channels_per_edge} / {w3.host_channels_per_edge}, every "
         f"{w2.host_channel_spacing} rows"),
        ("channels SdkRuntime streams on", "up to 16", str(host_streams(w2))),
        ("host link", "~1.2 Tb/s (unverified)", f"{w2.host_link_bps / 1e12:g} Tb/s"),
        ("memcpy support columns, west / east", "3 / 2, beside the program",
         "{} / {}, their hops in every transfer".format(*w2.memcpy_columns)),
        ("host I/O, 994-row column x 100 words, cycles", f"channel-bound: "
         f"{math.ceil(994 * 100 / 16)} + hops", f"{host_io_cycles(w2, col, 100)} "
         f"(one-channel-per-row model: {old_column})"),
        ("data task binding WSE-2 / WSE-3", "color / input queue 0..7",
         f"{w2.task_binding} / {w3.task_binding} 0..{w3.num_input_queues - 1}"),
        ("async microthreads WSE-2 / WSE-3", "queue ids 0..7 in the examples / 8",
         f"{w2.num_async_slots} / {w3.num_async_slots}"),
        ("async DSD op without a fabric operand", "refused (SDK release notes: \"must have "
         "at least one fabric DSD operand\")",
         ("allowed in the presets" if w2.async_memory_ops else "refused in the presets")
         + " (the GEMMs' and GEMV's fmas, the moves' local copies synchronous); "
           "async_memory_ops=True allows it"),
        ("SRAM banks", "8 of 6 KB, successive 16-bit half-words in successive banks",
         f"{w2.sram_banks} ({w2.sram_bytes // max(w2.sram_banks, 1) // 1024} KiB each)"),
        ("two 32-bit reads per cycle", "from banks differing mod 4",
         "a same-class pair takes a second cycle (`bank_conflicts`, on in the presets)"),
        ("SIMD width cap of a strided DSD, stride 8 / 9 / 4 / 3",
         "1 / 2 / 4 ('two operations per cycle, or a SIMD width of 4') / full",
         " / ".join(str(w2.stride_width(s) or "full") for s in (8, 9, 4, 3))),
    ]
    return [{"fact": f, "public": p, "project": v} for f, p, v in rows]


def plot(runs: list[dict], wafer: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    ps = [r["p"] for r in runs]
    ax.plot(ps, [r["fma_per_pe_cycle"] for r in runs], "o-",
            label="simulated (Cannon, 44x44, synchronous fmas, read-pair rule)")
    ax.plot(ps, [fma_rate(r["p"], r["model_cycles"]) for r in runs], "x--", label="its model")
    ax.plot(ps, [r["pairs_fma_per_pe_cycle"] for r in runs], "v-",
            label="simulated, async fmas, read-pair rule")
    ax.plot(ps, [r["norule_fma_per_pe_cycle"] for r in runs], "^-",
            label="simulated without either rule")
    ax.plot([MEASURED_P], [wafer["model_fma_per_pe_cycle"]], "s", label="model, 750 x 750")
    ax.plot([MEASURED_P], [wafer["pairs_model_fma_per_pe_cycle"]], "P",
            label="model, async fmas, 750 x 750")
    ax.plot([MEASURED_P], [wafer["norule_model_fma_per_pe_cycle"]], "D",
            label="model without either rule, 750 x 750")
    ax.axhline(wafer["measured_fma_per_pe_cycle"], color="k", ls=":",
               label=f"measured on a CS-2: {MEASURED_TFLOPS} TFLOP/s")
    ax.set_xscale("log")
    ax.set_xlabel("P (P x P PEs)")
    ax.set_ylabel("fp32 fma per PE per cycle")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"fp32 GEMM, 44x44 blocks per PE: model / measured = "
                 f"{wafer['model_over_measured']:.2f}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", default="2,4,8", help="P of the simulated P x P grids")
    parser.add_argument("--json", default="benchmarks/results/fidelity_real.json")
    args = parser.parse_args(argv)
    runs = []
    for p in (int(x) for x in args.grids.split(",")):
        runs.append(simulate(p))
        r = runs[-1]
        print(f"P={p}: {r['cycles']} cycles, model {r['model_cycles']} "
              f"({r['model_error']:+.2%}), {r['fma_per_pe_cycle']:.3f} fma/PE/cycle; "
              f"async fmas: {r['pairs_cycles']} cycles, model {r['pairs_model_cycles']} "
              f"({r['pairs_model_error']:+.2%}), {r['pairs_fma_per_pe_cycle']:.3f}; "
              f"without either rule: {r['norule_cycles']} cycles, "
              f"{r['norule_fma_per_pe_cycle']:.3f}; bank-aware layout: "
              f"{r['aware_cycles']} cycles, {r['aware_fma_per_pe_cycle']:.3f} fma/PE/cycle")
    wafer = full_wafer_model()
    print(f"750x750 model: {wafer['model_fma_per_pe_cycle']:.3f} fma/PE/cycle, "
          f"{wafer['model_tflops']:.1f} TFLOP/s vs measured {MEASURED_TFLOPS} "
          f"({wafer['model_over_measured']:.2f}x); async fmas "
          f"{wafer['pairs_model_tflops']:.1f} TFLOP/s "
          f"({wafer['pairs_model_over_measured']:.2f}x); without either rule "
          f"{wafer['norule_model_tflops']:.1f} TFLOP/s "
          f"({wafer['norule_model_over_measured']:.2f}x); bank-aware layout "
          f"{wafer['aware_model_tflops']:.1f} TFLOP/s ({wafer['aware_model_over_measured']:.2f}x)")
    table = facts()
    for row in table:
        print(f"  {row['fact']}: public {row['public']}; project {row['project']}")
    path = Path(args.json)
    png = path.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    plot(runs, wafer, png)
    write_json(path, {
        "benchmark": "fidelity_real",
        "headline": [
            f"fp32 GEMM 44x44 blocks, 750x750 PEs: model {wafer['model_tflops']:.0f} TFLOP/s "
            f"vs {MEASURED_TFLOPS} measured on a CS-2 ({wafer['model_over_measured']:.2f}x; "
            f"the machine in force: synchronous fmas, the read-pair rule, the kernel's "
            f"layout)",
            f"simulated on {runs[-1]['p']}x{runs[-1]['p']}: "
            f"{runs[-1]['fma_per_pe_cycle']:.3f} fma/PE/cycle (measured on the wafer: "
            f"{wafer['measured_fma_per_pe_cycle']:.3f})",
            f"with async fmas (async_memory_ops=True), the read-pair rule alone: model "
            f"{wafer['pairs_model_tflops']:.0f} TFLOP/s "
            f"({wafer['pairs_model_over_measured']:.2f}x); simulated on "
            f"{runs[-1]['p']}x{runs[-1]['p']}: {runs[-1]['pairs_fma_per_pe_cycle']:.3f} "
            f"fma/PE/cycle",
            f"without either rule: model {wafer['norule_model_tflops']:.0f} TFLOP/s "
            f"({wafer['norule_model_over_measured']:.2f}x); simulated on "
            f"{runs[-1]['p']}x{runs[-1]['p']}: {runs[-1]['norule_fma_per_pe_cycle']:.3f} "
            f"fma/PE/cycle",
            f"with the bank-aware layout: model {wafer['aware_model_tflops']:.0f} TFLOP/s "
            f"({wafer['aware_model_over_measured']:.2f}x)",
        ],
        "runs": runs, "wafer": wafer, "facts": table,
        "table": {"columns": ["fact", "public", "project"],
                  "rows": [[r["fact"], r["public"], r["project"]] for r in table]},
        "pngs": [str(png)],
    })
    print(f"wrote {path} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
