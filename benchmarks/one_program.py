"""Pipelined models as one fabric program: samples streamed through it in one engine run
(`cm.one_program_stream`), against the pipelined timeline that schedules the same parts
run apart (`cm.stream`).

Per model (the zoo's MLP on small(12, 12), LeNet on the largest small fabric whose 21
program colors hold all its kernels and moves at once, the demo's GPT block on tiles
shrunk until its colors fit, and a whole TinyGPT, token ids in, its embeddings looked up
on the fabric; residuals with holds, `frontend.skip_holds`) and start policy ("part": a part
on all its PEs once the parts it reads are done; "pe": on each PE once they are done there;
"data": as "pe", but a kernel's PEs started in the fabric by the last delivery of their
data, the program with gates; see `frontend.program_run`), the host's transfers apart, and
"data" once more with the host link's writes and reads in the stream (`host_io=True`): the
latency (the first sample's last part's end, or its last output read) and the steady-state
cycles per sample of --samples samples, the timeline's latency and period (host I/O
included), whether every sample's words are those of the parts run apart on it, bit for
bit, and the wall seconds of the stream.

    python benchmarks/one_program.py --json benchmarks/results/one_program.json [--samples 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from harness import write_json  # noqa: E402

import frontend  # noqa: E402
from fabric import FabricConfig  # noqa: E402
from frontend.demo import DemoBlock  # noqa: E402
from frontend.zoo import MLP, LeNet, TinyGPT  # noqa: E402

# (start policy, host I/O): the host's transfers apart, then, started by their data, with
# the host link's writes and reads in the stream (`frontend.program_run`, "Host I/O")
RUNS = (("part", False), ("pe", False), ("data", False), ("data", True))


def cases():
    """(name, model, a sample maker, fabric, color policy, lookups): the MLP on the
    frontend tests' small(12, 12) (10 colors there: its relu and residual ride below its
    GEMMs, `frontend.companions`), LeNet on the largest small(n, n) where its greedy color
    assignment fits 21 colors (22 on small(8, 8)), the demo's GPT-2-style block (layer
    norms, causal attention, gelu MLP, residuals) on small(12, 12) placed on tiles small
    enough for its colors to fit (`colors="fit"`, where its balanced tiles need 47), and
    TinyGPT (vocab 64, d 32, 2 heads, 1 layer, 8 tokens: its token and position
    embeddings, the block, the final norm and the logits) likewise, its token ids looked
    up on the fabric (`lookups="onehot"`; gathered per call, one program cannot hold it)."""
    small12 = FabricConfig.small(12, 12)
    yield "mlp", MLP(), lambda: torch.randn(4, 16), small12, "report", "gather"
    yield ("lenet", LeNet(), lambda: torch.randn(2, 1, 8, 8), FabricConfig.small(6, 6),
           "report", "gather")
    yield "gpt-block", DemoBlock(), lambda: torch.randn(1, 4, 16), small12, "fit", "gather"
    yield ("tinygpt", TinyGPT(vocab=64, d=32, heads=2, layers=1, block=8),
           lambda: torch.randint(0, 64, (1, 8)), small12, "fit", "onehot")


def measure(name, model, sample, config, colors: str, lookups: str, samples: int
            ) -> list[dict]:
    torch.manual_seed(0)
    xs = [sample() for _ in range(samples)]
    cm = frontend.compile(model.eval(), (xs[0],), config=config, mode="pipelined",
                          colors=colors, lookups=lookups)
    cm.stream([(x,) for x in xs])
    tl = cm.timeline
    apart = []  # every sample's stage words, the parts run apart
    for x in xs:
        cm(x)
        apart.append({stage: dict(words) for stage, words in cm.last.words.items()})
    rows = []
    for start, host_io in RUNS:
        t0 = time.perf_counter()
        run = cm.one_program_stream([(x,) for x in xs], start=start, host_io=host_io)
        wall = time.perf_counter() - t0
        same = all(run.same_words(s, words) for s, words in enumerate(apart))
        rows.append({"model": name, "fabric": config.name, "colors": colors,
                     "lookups": lookups, "start": start, "host_io": host_io,
                     "samples": samples,
                     "parts": len(cm.model_program().order),
                     "colors_used": cm.colors.assignment.used,
                     "latency_cycles": run.latency, "cycles_per_sample": run.period,
                     "timeline_latency_cycles": tl.latency,
                     "timeline_cycles_per_sample": tl.period,
                     "period_vs_timeline": run.period / tl.period,
                     "words_match_parts_apart": bool(same), "wall_s": wall})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--png", default=None)
    ap.add_argument("--samples", type=int, default=8)
    args = ap.parse_args(argv)
    rows = [r for name, model, sample, config, colors, lookups in cases()
            for r in measure(name, model, sample, config, colors, lookups, args.samples)]
    columns = ["model", "fabric", "start", "host I/O", "parts", "latency", "cycles/sample",
               "timeline latency", "timeline cycles/sample", "ratio", "words match",
               "wall s"]
    table = [[r["model"], r["fabric"], r["start"], _host(r), r["parts"], r["latency_cycles"],
              round(r["cycles_per_sample"]), r["timeline_latency_cycles"],
              round(r["timeline_cycles_per_sample"]), round(r["period_vs_timeline"], 3),
              r["words_match_parts_apart"], round(r["wall_s"], 1)] for r in rows]
    headline = [f"{r['model']} one program ({r['start']}, host I/O {_host(r)}): "
                f"{r['cycles_per_sample']:.0f} cycles "
                f"per sample over {r['samples']} samples, {r['period_vs_timeline']:.3f} x the "
                f"timeline's {r['timeline_cycles_per_sample']:.0f}; latency "
                f"{r['latency_cycles']}" for r in rows]
    png = Path(args.png) if args.png else Path(args.json).with_suffix(".png")
    _plot(rows, png)
    write_json(args.json, {"benchmark": "one_program", "results": rows, "headline": headline,
                           "table": {"columns": columns, "rows": table},
                           "pngs": [str(png)]})
    for line in headline:
        print(line)
    return 0 if all(r["words_match_parts_apart"] for r in rows) else 1


def _host(row) -> str:
    return "in the stream" if row["host_io"] else "apart"


def _plot(rows, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    width = 0.8 / (len(RUNS) + 1)
    timeline = {r["model"]: r["timeline_cycles_per_sample"] for r in rows}
    ax.bar([i for i in range(len(models))], [timeline[m] for m in models], width,
           label="timeline (parts apart)")
    for j, (start, host_io) in enumerate(RUNS, 1):
        mine = {r["model"]: r["cycles_per_sample"] for r in rows
                if (r["start"], r["host_io"]) == (start, host_io)}
        ax.bar([i + j * width for i in range(len(models))], [mine[m] for m in models], width,
               label=f"one program, start {start}" + (", host I/O" if host_io else ""))
    ax.set_xticks([i + width * len(RUNS) / 2 for i in range(len(models))], models)
    ax.set_ylabel("cycles per sample (steady state)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
