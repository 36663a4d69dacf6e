"""Model zoo as one fabric program: every architecture of frontend.architectures compiled
for one program (`colors="fit"`: tiles shrunk until every kernel's and move's routes fit
the fabric's colors at once; `lookups="onehot"`: embeddings looked up on the fabric;
`experts="dense"`: mixture-of-experts products as one GEMM each) and,
where its program builds, samples streamed through it in one engine run with kernels
started by their data (`cm.one_program_stream(..., start="data")`).

Per model: whether the one program builds (else what stops it: colors, registers, SRAM),
its parts and colors, the stream's latency and cycles per sample against the pipelined
timeline of the same parts run apart (host I/O included there, left apart in the one
program), whether every sample's words are those of the parts run apart, bit for bit
(`benchmarks/zoo.py` checks the parts run apart against eager PyTorch), and the wall
seconds of compile and stream. Each runs on its own fabric
(`frontend.architectures.fabric_config`).

    python benchmarks/zoo_one_program.py --json benchmarks/results/zoo_one_program.json
                                         [--samples 3] [--only gpt2 llama] [--quick]
                                         [--update]

`--update` measures the models named and keeps the other rows of the JSON file already
there (its headline and table made again over all of them): a few models rerun after a
change without the whole zoo's 74 minutes.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from harness import with_kept_rows, write_json  # noqa: E402

import frontend  # noqa: E402
from frontend.architectures import ARCHITECTURES, build, fabric_config  # noqa: E402

START = "data"
QUICK = ("distilbert", "gpt2", "vit", "mlp-mixer")  # encoder, decoder, vision, MLP


def measure(name: str, samples: int) -> dict:
    """One architecture: its one program built or what stops it, and the stream's figures
    against the parts run apart."""
    config = fabric_config(name)
    row = {"model": name, "family": ARCHITECTURES[name].family, "fabric": config.name}
    model, inputs = build(name)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's export internals
            cm = frontend.compile(model, inputs, config=config, mode="pipelined",
                                  colors="fit", lookups="onehot", experts="dense")
        cm.model_program(gated=True)
    except frontend.PlacementError as exc:
        return {**row, "status": "does not fit", "stopped_by": _reason(exc),
                "compile_s": time.perf_counter() - t0}
    compile_s = time.perf_counter() - t0
    stream = [tuple(_varied(x, s) for x in inputs) for s in range(samples)]
    apart = []
    for args in stream:
        cm(*args)
        apart.append({stage: dict(words) for stage, words in cm.last.words.items()})
    cm.stream(stream)
    t1 = time.perf_counter()
    run = cm.one_program_stream(stream, start=START)
    stream_s = time.perf_counter() - t1
    timeline = cm.timeline
    same = all(run.same_words(s, words) for s, words in enumerate(apart))
    return {**row, "status": "streams" if same else "differs",
            "parts": len(cm.model_program(gated=True).order),
            "colors_used": cm.colors.assignment.used, "samples": samples,
            "latency_cycles": run.latency, "cycles_per_sample": run.period,
            "timeline_latency_cycles": timeline.latency,
            "timeline_cycles_per_sample": timeline.period,
            "period_vs_timeline": run.period / timeline.period,
            "words_match_parts_apart": bool(same),
            "compile_s": compile_s, "stream_s": stream_s}


def _varied(x, sample: int):
    """Sample `sample` of a stream from the zoo's one input `x`: floats moved by noise,
    integers (token ids, masks) rolled, so every value stays one the model takes and a part
    that took another sample's words would show."""
    if not isinstance(x, torch.Tensor) or sample == 0:
        return x
    if x.is_floating_point():
        gen = torch.Generator().manual_seed(sample)
        return x + 0.1 * torch.randn(x.shape, generator=gen, dtype=x.dtype)
    return torch.roll(x, sample, dims=-1)


def _reason(exc: Exception) -> str:
    """What stops a one program, in a few words: the resource and the first line."""
    first = str(exc).splitlines()[0]
    for what in ("registers", "colors", "SRAM", "task ids"):
        if what in first:
            return f"{what}: {first[:160]}"
    return first[:200]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=list(ARCHITECTURES), metavar="NAME",
                    help="these architectures only")
    ap.add_argument("--quick", action="store_true",
                    help=f"four models of four families only: {', '.join(QUICK)}")
    ap.add_argument("--update", action="store_true",
                    help="keep the other models' rows of the --json file already there")
    args = ap.parse_args(argv)
    results = []
    for name in args.only or (QUICK if args.quick else list(ARCHITECTURES)):
        results.append(measure(name, args.samples))
        r = results[-1]
        print(f"{name:16} {r['status']:12} "
              + (f"{r['parts']} parts, {r['cycles_per_sample']:.0f} cycles per sample "
                 f"({r['period_vs_timeline']:.2f} x the timeline), latency "
                 f"{r['latency_cycles']}" if "parts" in r else r["stopped_by"]), flush=True)
    if args.update:
        results = with_kept_rows(args.json, results, ARCHITECTURES)
    streams = [r for r in results if r["status"] == "streams"]
    stops: dict[str, list[str]] = {}
    for r in results:
        if r["status"] == "does not fit":
            stops.setdefault(r["stopped_by"].split(":")[0], []).append(r["model"])
    columns = ["model", "family", "fabric", "status", "parts", "colors", "latency",
               "cycles/sample", "timeline latency", "timeline cycles/sample", "ratio",
               "compile s", "stream s"]
    table = [[r["model"], r["family"], r["fabric"],
              r["status"] if "parts" in r else f"{r['status']}: {r['stopped_by']}",
              r.get("parts", ""), r.get("colors_used", ""), r.get("latency_cycles", ""),
              round(r["cycles_per_sample"]) if "parts" in r else "",
              r.get("timeline_latency_cycles", ""),
              round(r["timeline_cycles_per_sample"]) if "parts" in r else "",
              round(r["period_vs_timeline"], 3) if "parts" in r else "",
              round(r["compile_s"], 1), round(r["stream_s"], 1) if "stream_s" in r else ""]
             for r in results]
    headline = [f"{len(streams)} of {len(results)} architectures run as one fabric program "
                f"(colors fit, one-hot lookups, dense expert products, started by their "
                f"data), every sample's words those of the parts run apart"]
    if streams:
        ratios = sorted(r["period_vs_timeline"] for r in streams)
        headline.append(f"cycles per sample against the timeline's: median "
                        f"{ratios[len(ratios) // 2]:.2f} x, from {ratios[0]:.2f} to "
                        f"{ratios[-1]:.2f}")
    headline += [f"does not fit ({what}): {', '.join(models)}" for what, models in
                 sorted(stops.items(), key=lambda kv: -len(kv[1]))]
    write_json(args.json, {"benchmark": "zoo_one_program", "start": START, "results": results,
                           "headline": headline, "table": {"columns": columns,
                                                           "rows": table}})
    for line in headline:
        print(line)
    return 0 if all(r["status"] != "differs" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
