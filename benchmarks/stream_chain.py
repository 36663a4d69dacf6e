"""Stream chains against the same kernels run apart with moves between their tiles.

A chain of K elementwise ops (relu, x * 0.5, x - 1, relu, ...) on K tiles of P x Q PEs
stacked down a fabric of K P x Q PEs, x (m, n) in blocks of L elements:
- streamed: `fabric.kernels.streams.build_stream_chain`, one engine run, each tile's
  output streamed into the next as it is computed (kernel cycles, host I/O apart);
- apart: the standalone kernels (`build_map`) on the same tiles, each run alone, and
  between consecutive ones the move of z into the next tile's x
  (`plan_redistribution`, its rounds run): the sum of their cycles, what a chain of
  kernels started once their input is wholly in pays one after another.
Both give the same words (checked, bit for bit, against numpy). One row per shape:
tile, L, K, streamed cycles, its model, apart cycles (kernels, moves) and the ratio; and
the same chain with SAMPLES samples streamed through it one after another (every PE
re-arming itself, no host between them): cycles per sample after the first, against the
one-sample latency and the model's bound.

    python benchmarks/stream_chain.py --json benchmarks/results/stream_chain.json

writes the JSON and, next to it, a PNG (cycles against the number of stages).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import write_json  # noqa: E402

from fabric import FabricConfig, Rect  # noqa: E402
from fabric.kernels import build_map, plan_redistribution, probe_inputs, probe_output  # noqa: E402
from fabric.kernels.base import run_kernel  # noqa: E402
from fabric.kernels.stream_stages import map_stage  # noqa: E402
from fabric.kernels.streams import (  # noqa: E402
    build_stream_chain,
    stage_rect,
    stream_chain_reference,
)

OPS = [("relu", 0.0), ("mul", 0.5), ("add", -1.0), ("relu", 0.0)]
SHAPES = [(2, 4, 16), (4, 4, 16), (4, 4, 64)]  # tile rows, tile columns, block elements
SAMPLES = 4


def measure(rows: int, cols: int, block: int, stages: int) -> dict:
    config = FabricConfig.small(rows * len(OPS), cols)
    rect = Rect(0, 0, rows, cols)
    m, n = rows * block, cols
    ops = OPS[:stages]
    chain = [map_stage(op, s) for op, s in ops]
    x = np.random.default_rng(0).standard_normal((m, n)).astype(np.float32)
    kernel = build_stream_chain(config, rect, m, n, chain)
    streamed = run_kernel(kernel, {"x": x})
    reference = stream_chain_reference(x, chain, {})
    if not np.array_equal(streamed.output, reference):
        raise AssertionError(f"stream chain {rows}x{cols} L={block} K={stages}: words differ")
    kernel_cycles = move_cycles = 0
    words, previous = x, None
    for k, (op, s) in enumerate(ops):
        standalone = build_map(config, stage_rect(rect, k), m, n, op, s)
        if previous is not None:
            src = probe_output(previous)
            plan = plan_redistribution(config, src,
                                       probe_inputs(standalone, {"x": (m, n)})["x"])
            move_cycles += plan.run(src.to_words(words))[1]
        result = run_kernel(standalone, {"x": words})
        kernel_cycles += result.cycles
        words, previous = result.output, standalone
    if not np.array_equal(words, reference):
        raise AssertionError("standalone kernels: words differ")
    apart = kernel_cycles + move_cycles
    xs = np.random.default_rng(1).standard_normal((SAMPLES, m, n)).astype(np.float32)
    several = build_stream_chain(config, rect, m, n, chain, samples=SAMPLES)
    stream = run_kernel(several, {"x": xs})
    if not np.array_equal(stream.output, stream_chain_reference(xs, chain, {})):
        raise AssertionError(f"{SAMPLES} samples: words differ")
    per_sample = (stream.cycles - streamed.cycles) / (SAMPLES - 1)
    return {"tile": f"{rows}x{cols}", "block": block, "stages": stages,
            "streamed_cycles": streamed.cycles, "model_cycles": kernel.model_cycles,
            "apart_cycles": apart, "apart_kernel_cycles": kernel_cycles,
            "apart_move_cycles": move_cycles, "ratio": round(streamed.cycles / apart, 3),
            "samples": SAMPLES, "samples_cycles": stream.cycles,
            "samples_model_cycles": several.model_cycles,
            "cycles_per_sample": round(per_sample, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    args = ap.parse_args(argv)
    rows = [measure(r, c, b, k) for r, c, b in SHAPES for k in (2, 3, 4)]
    columns = ["tile", "block", "stages", "streamed", "model", "apart (kernels + moves)",
               "streamed / apart", f"{SAMPLES} samples (model)", "per sample after the first"]
    table = [[r["tile"], r["block"], r["stages"], r["streamed_cycles"], r["model_cycles"],
              f"{r['apart_cycles']} ({r['apart_kernel_cycles']} + {r['apart_move_cycles']})",
              r["ratio"], f"{r['samples_cycles']} ({r['samples_model_cycles']})",
              r["cycles_per_sample"]] for r in rows]
    four = [r for r in rows if r["stages"] == 4]
    headline = [f"{r['stages']} elementwise stages on {r['tile']} tiles, blocks of "
                f"{r['block']}: streamed {r['streamed_cycles']} cycles against "
                f"{r['apart_cycles']} apart ({r['ratio']}x)" for r in four]
    write_json(args.json, {"benchmark": "stream_chain", "results": rows,
                           "headline": headline, "table": {"columns": columns,
                                                           "rows": table}})
    _plot(rows, Path(args.json).with_suffix(".png"))
    for line in headline:
        print(line)
    return 0


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for shape in dict.fromkeys((r["tile"], r["block"]) for r in rows):
        mine = [r for r in rows if (r["tile"], r["block"]) == shape]
        k = [r["stages"] for r in mine]
        line, = ax.plot(k, [r["streamed_cycles"] for r in mine], "o-",
                        label=f"{shape[0]}, L={shape[1]}: streamed")
        ax.plot(k, [r["apart_cycles"] for r in mine], "s--", color=line.get_color(),
                label=f"{shape[0]}, L={shape[1]}: apart")
    ax.set_xticks(sorted({r["stages"] for r in rows}))
    ax.set_xlabel("stages")
    ax.set_ylabel("cycles")
    ax.set_title("elementwise chain: streamed vs kernels and moves apart")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
