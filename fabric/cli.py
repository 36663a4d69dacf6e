"""The `wafer` command line: machine figures, the main demo and the benchmark scripts.

    wafer info [--preset wse2|wse3|small] [--grid RxC] [--json]
    wafer run [--grid RxC] [--n N] [--out DIR] [--quiet]
    wafer bench [--quick] [--only NAME ...]

Bad arguments print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import time
from pathlib import Path

from fabric.config import FabricConfig

PRESETS = ("wse2", "wse3", "small")

# Figures that public documents do not confirm, as fabric/config.py marks them.
UNVERIFIED_SIMD = frozenset(
    {("fma", "f32"), ("mul", "f32"), ("cvt", "f32"), ("add", "i32"), ("shift", "i32")}
)
UNVERIFIED_FIELDS = {"wse3": frozenset({"usable", "clock"})}

# Benchmark scripts and the arguments that keep each one short under --quick.
BENCHMARKS = {
    "engine_speed": ["--grid", "32", "--cycles", "200"],
    "kernels": ["--quick"],
    "fabric_fidelity": [],  # one fixed size: nothing to shorten
}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors take one line, naming the command's --help."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def parse_grid(text: str) -> tuple[int, int]:
    """'RxC' -> (R, C), both >= 1."""
    try:
        rows, cols = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"grid must be ROWSxCOLS, like 8x8; got {text!r}") from None
    if rows < 1 or cols < 1:
        raise argparse.ArgumentTypeError(f"grid sides must be >= 1, got {text!r}")
    return rows, cols


# ---- info ------------------------------------------------------------------------------
def preset_config(name: str, grid: tuple[int, int]) -> FabricConfig:
    if name == "small":
        return FabricConfig.small(*grid)
    return getattr(FabricConfig, name)()


def describe(config: FabricConfig, preset: str) -> dict:
    """The figures of one preset, JSON-ready, with the unverified ones listed."""
    return {
        "preset": preset,
        "name": config.name,
        "generation": config.generation,
        "rows": config.rows,
        "cols": config.cols,
        "pes": config.num_pes,
        "usable_rows": config.usable_rows,
        "usable_cols": config.usable_cols,
        "sram_bytes": config.sram_bytes,
        "num_colors": config.num_colors,
        "queue_depth": config.queue_depth,
        "hop_latency": config.hop_latency,
        "clock_hz": config.clock_hz,
        "simd": [
            {"op": op, "dtype": dtype, "width": width,
             "verified": (op, dtype) not in UNVERIFIED_SIMD}
            for (op, dtype), width in config.simd
        ],
        "unverified": sorted(UNVERIFIED_FIELDS.get(preset, ())),
    }


def info_table(figures: list[dict]) -> str:
    """Figures as rows, presets as columns; '*' marks an unverified figure."""

    def mark(value, unverified: bool) -> str:
        return f"{value}*" if unverified else str(value)

    lines = [["", *(f["name"] for f in figures)]]

    def row(label, cell):
        lines.append([label, *(cell(f) for f in figures)])

    row("generation", lambda f: f["generation"])
    row("fabric size", lambda f: f"{f['rows']} x {f['cols']} ({f['pes']:,} PEs)")
    row("usable area", lambda f: mark(f"{f['usable_rows']} x {f['usable_cols']}",
                                      "usable" in f["unverified"]))
    row("SRAM per PE", lambda f: f"{f['sram_bytes'] // 1024} KiB")
    row("colors", lambda f: f["num_colors"])
    row("queue depth", lambda f: f"{f['queue_depth']} wavelets")
    row("hop latency", lambda f: f"{f['hop_latency']} cycle per hop")
    row("clock", lambda f: mark(f"{f['clock_hz'] / 1e6:g} MHz", "clock" in f["unverified"]))
    for i, entry in enumerate(figures[0]["simd"]):
        row(f"SIMD {entry['op']}/{entry['dtype']}",
            lambda f, i=i: mark(f"{f['simd'][i]['width']}/cycle", not f["simd"][i]["verified"]))
    widths = [max(len(str(line[k])) for line in lines) for k in range(len(lines[0]))]
    text = ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip()
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    text.append("* unverified in public documents")
    return "\n".join(text)


def cmd_info(args, parser) -> int:
    if args.grid is not None and args.preset not in (None, "small"):
        parser.error("--grid applies to the small preset only")
    names = [args.preset] if args.preset else list(PRESETS)
    figures = [describe(preset_config(n, args.grid or (8, 8)), n) for n in names]
    print(json.dumps({"presets": figures}, indent=2) if args.json else info_table(figures))
    return 0


# ---- run -------------------------------------------------------------------------------
def cmd_run(args, parser) -> int:
    rows, cols = args.grid
    if cols < 2:
        parser.error(f"the demo needs at least 2 columns, got --grid {rows}x{cols}")
    if args.n < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    from fabric import demo

    argv = ["--rows", str(rows), "--cols", str(cols), "--n", str(args.n), "--out", args.out]
    if not args.quiet:
        return demo.main(argv)
    # under --quiet the summary shows only when the check fails, where it explains why
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = demo.main(argv)
    if code != 0:
        sys.stdout.write(captured.getvalue())
    return code


# ---- bench -----------------------------------------------------------------------------
def benchmarks_dir() -> Path:
    """benchmarks/ of the repository this package lives in (absent in a plain install)."""
    return Path(__file__).resolve().parent.parent / "benchmarks"


def cmd_bench(args, parser) -> int:
    bench = benchmarks_dir()
    if not bench.is_dir():
        print(f"wafer bench: no benchmarks/ folder at {bench}; the benchmarks run from a "
              "checkout of the repository", file=sys.stderr)
        return 2
    # quick figures go apart so they never overwrite the full results the docs quote
    results = bench / "results" / ("quick" if args.quick else "")
    results.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in args.only or list(BENCHMARKS):
        cmd = [sys.executable, str(bench / f"{name}.py"), "--json", str(results / f"{name}.json")]
        if args.quick:
            cmd += BENCHMARKS[name]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=bench.parent, capture_output=True, text=True)
        wall = time.perf_counter() - start
        status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
        print(f"{name:16s} {status:18s} {wall:7.1f} s", flush=True)
        if proc.returncode != 0:
            failed += 1
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
            print("\n".join("    " + line for line in tail))
    print(f"results in {results}")
    return 1 if failed else 0


# ---- parser ----------------------------------------------------------------------------
def build_parser() -> Parser:
    parser = Parser(prog="wafer", description="Simulate a wafer-scale dataflow fabric in JAX.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser(
        "info", help="machine presets and their figures",
        description="Print the figures of the machine presets (grid, SRAM, colors, router, "
                    "clock, SIMD widths); '*' marks figures public documents do not confirm.")
    info.add_argument("--preset", choices=PRESETS, help="one preset only (default: all)")
    info.add_argument("--grid", type=parse_grid, metavar="RxC",
                      help="size of the small preset (default 8x8)")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=cmd_info, parser=info)

    run = commands.add_parser(
        "run", help="run the main demo",
        description="Run the main demo on a small fabric: a row broadcast, a multiply and a "
                    "chain reduction, checked against numpy; prints a summary and saves a "
                    "PNG of busy cycles per PE. Exits 1 if the result does not match.")
    run.add_argument("--grid", type=parse_grid, default=(8, 8), metavar="RxC",
                     help="fabric size, at least 2 columns (default 8x8)")
    run.add_argument("--n", type=int, default=64, help="fp32 values per PE (default 64)")
    run.add_argument("--out", default="out", help="folder for the PNG (default out)")
    run.add_argument("--quiet", action="store_true", help="print nothing unless the check fails")
    run.set_defaults(handler=cmd_run, parser=run)

    bench = commands.add_parser(
        "bench", help="run the benchmark scripts",
        description="Run the scripts of benchmarks/ one after another, writing JSON (and "
                    "PNG) to benchmarks/results/ (benchmarks/results/quick/ with --quick), "
                    "and print each one's status and wall time. Exits 1 if any fails.")
    bench.add_argument("--quick", action="store_true",
                       help="small settings (engine_speed: 32x32 grid, 200 cycles)")
    bench.add_argument("--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME",
                       help=f"run these only: {', '.join(BENCHMARKS)}")
    bench.set_defaults(handler=cmd_bench, parser=bench)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.handler(args, args.parser)


if __name__ == "__main__":
    raise SystemExit(main())
