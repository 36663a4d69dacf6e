"""The `wafer` command line: machine figures, the main demo, the benchmark scripts,
timelines of the fabric-level demo (traces) and training runs.

    wafer info [--preset wse2|wse3|small] [--grid RxC] [--json]
    wafer run [MODULE:FACTORY | --model mlp|gpt] [--preset P] [--grid RxC] [--dtype D]
              [--mode pipelined|sequential] [--colors report|fit|refuse]
              [--simulate parts|program]
              [--lookups gather|onehot] [--gemm-orientation rows|auto]
              [--experts picked|dense] [--out DIR] [--quiet]
                                             (--fabric-demo [--n N]: the fabric-level demo)
    wafer bench [--quick] [--only NAME ...]
    wafer trace [--grid RxC] [--n N] [--rect R,C,H,W] [--links] [--out FILE]
    wafer train CONFIG.yaml [--steps N] [--device fabric|cpu] [--execution MODE] [--compare]
                [--out DIR]

Bad arguments print one line on stderr and exit with code 2. So do the errors a run meets
that are the user's to fix (the project's own: `fabric.FabricError`, `frontend.FrontendError`;
a bad config value, `ValueError`; an exception from the user's model or data factory): the
first line of the message and a hint; `--traceback` (anywhere on the line) shows the full
trace instead.
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

from fabric import edge_channels, host_streams
from fabric.config import FabricConfig
from fabric.errors import FabricError
from frontend.errors import FrontendError, user_code_error
from frontend.graph_colors import COLOR_POLICIES, DEFAULT_COLOR_POLICY
from frontend.lowering import EXPERTS, GEMM_ORIENTATIONS, LOOKUPS
from frontend.program_calls import DEFAULT_SIMULATION, SIMULATIONS
from frontend.schedule import DEFAULT_MODE, MODES

PRESETS = ("wse2", "wse3", "small")
DEFAULT_RUN_GRID = (12, 12)

# Figures that public documents do not confirm, as fabric/config.py marks them (the
# SDK's SIMD table lists no f32 <-> i32 conversion, nor says that it has no SIMD mode).
UNVERIFIED_SIMD = frozenset({("cvt", "f32")})
UNVERIFIED_FIELDS = {"wse3": frozenset({"usable", "clock"})}

# Benchmark scripts and the arguments that keep each one short under --quick.
BENCHMARKS = {
    "engine_speed": ["--grid", "32", "--cycles", "200"],
    "kernel_cycles": ["--quick"],
    "fabric_fidelity": [],  # one fixed size: nothing to shorten
    "models": ["--quick"],
    "training": ["--quick"],
    "zoo": [],  # every model is tiny: nothing to shorten
    "fidelity_real": ["--grids", "2,4"],  # the 8 x 8 GEMM is most of its time
}


# The errors `main` reports in one line: the user's to fix, not the program's.
USER_ERRORS = (FabricError, FrontendError, ValueError)
TRACEBACK_HINT = "run with --traceback for the full trace"


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
        "sram_banks": config.sram_banks,
        "bank_conflicts": config.bank_conflicts,
        "num_colors": config.num_colors,
        "reserved_colors": list(config.reserved_colors),
        "host_channels_per_edge": edge_channels(config),
        "host_streams": host_streams(config),
        "task_binding": config.task_binding,
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
    # width x height (columns x rows), as the SDK's --fabric-dims states a fabric
    row("fabric (w x h)", lambda f: f"{f['cols']} x {f['rows']} ({f['pes']:,} PEs)")
    row("usable area", lambda f: mark(f"{f['usable_cols']} x {f['usable_rows']}",
                                      "usable" in f["unverified"]))
    row("SRAM per PE", lambda f: f"{f['sram_bytes'] // 1024} KiB")
    row("SRAM banks", lambda f: f"{f['sram_banks']}, read-pair rule "
                                f"{'on' if f['bank_conflicts'] else 'off'}")
    row("colors", lambda f: f"{f['num_colors']} ({len(f['reserved_colors'])} for memcpy)")
    row("host I/O channels", lambda f: f"{f['host_streams']} streams, "
                                       f"{f['host_channels_per_edge']} per E/W edge")
    row("data tasks bound to", lambda f: f["task_binding"])
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
def load_factory(spec: str, parser):
    """'package.module:factory' -> (model, example_inputs) from calling factory().

    Raises:
        UserCodeError: importing the module or calling the factory raised (the user's
            exception is the cause; the message names where in their file).
    """
    import importlib

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        parser.error(f"model must be MODULE:FACTORY, like mypkg.models:make; got {spec!r}")
    sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        parser.error(f"cannot load {spec!r}: {exc}")
    except Exception as exc:  # the module's own code failed as it ran
        raise user_code_error(f"importing {module_name}", exc) from exc
    factory = getattr(module, attr, None)
    if factory is None:
        parser.error(f"cannot load {spec!r}: module {module_name!r} has no attribute {attr!r}")
    try:
        made = factory()
    except Exception as exc:
        raise user_code_error(spec, exc) from exc
    if not (isinstance(made, tuple) and len(made) == 2):
        parser.error(f"{spec} must return (model, example_inputs), got {type(made).__name__}")
    model, inputs = made
    if not callable(getattr(model, "eval", None)):
        parser.error(f"{spec} must return (model, example_inputs) with a torch.nn.Module "
                     f"model, got a {type(model).__name__}")
    return model, tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)


def _run_quietly(fn, quiet: bool) -> int:
    if not quiet:
        return fn()
    # under --quiet the output shows only when the check fails, where it explains why
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = fn()
    if code != 0:
        sys.stdout.write(captured.getvalue())
    return code


def cmd_run(args, parser) -> int:
    rows, cols = args.grid
    if args.fabric_demo:
        if cols < 2:
            parser.error(f"the fabric demo needs at least 2 columns, got --grid {rows}x{cols}")
        if args.n < 1:
            parser.error(f"--n must be >= 1, got {args.n}")
        from fabric import row_demo

        argv = ["--rows", str(rows), "--cols", str(cols), "--n", str(args.n), "--out",
                args.out]
        return _run_quietly(lambda: row_demo.main(argv), args.quiet)
    if args.preset != "small" and args.grid != DEFAULT_RUN_GRID:
        parser.error("--grid applies to the small preset only")
    from frontend import demo as model_demo

    if args.model_spec:
        model, inputs = load_factory(args.model_spec, parser)
        model.eval()
    else:
        model, inputs = model_demo.demo_model(args.model)
    config = preset_config(args.preset, args.grid)
    return _run_quietly(lambda: model_demo.run_model(model, inputs, config, args.out,
                                                     args.dtype, args.mode, args.colors,
                                                     args.lookups, args.gemm_orientation,
                                                     args.experts, args.simulate),
                        args.quiet)


# ---- trace -----------------------------------------------------------------------------
def parse_rect(text: str) -> tuple[int, int, int, int]:
    """'R,C,H,W' -> (row, col, rows, cols): corner >= 0, sides >= 1."""
    try:
        row, col, rows, cols = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"rect must be ROW,COL,ROWS,COLS, like 0,0,2,4; got {text!r}") from None
    if row < 0 or col < 0 or rows < 1 or cols < 1:
        raise argparse.ArgumentTypeError(
            f"rect needs ROW, COL >= 0 and ROWS, COLS >= 1; got {text!r}")
    return row, col, rows, cols


def cmd_trace(args, parser) -> int:
    rows, cols = args.grid
    if cols < 2:
        parser.error(f"the demo needs at least 2 columns, got --grid {rows}x{cols}")
    if args.n < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    if args.max_cycles < 1:
        parser.error(f"--max-cycles must be >= 1, got {args.max_cycles}")
    row, col, h, w = args.rect or (0, 0, rows, cols)
    if row + h > rows or col + w > cols:
        parser.error(f"--rect {row},{col},{h},{w} reaches outside the {rows}x{cols} grid")
    import numpy as np

    from fabric import Rect, Simulator, row_demo

    # the program and data of `wafer run`, recorded instead of run
    config = FabricConfig.small(rows, cols)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, cols, args.n), dtype=np.float32)
    v = rng.standard_normal((rows, args.n), dtype=np.float32)
    sim = Simulator(config, row_demo.row_reduce_program(config, args.n))
    for c in range(cols):
        sim.memcpy_h2d("a", a[:, c:c + 1], rect=Rect(0, c, rows, 1))
    sim.memcpy_h2d("v", v[:, None, :], rect=Rect(0, 0, rows, 1))
    sim.launch("main")
    try:
        trace = sim.record(rect=Rect(row, col, h, w), links=args.links,
                           max_cycles=args.max_cycles)
    except FabricError as err:
        # the timeline up to the failure is saved: it is what explains the failure; `main`
        # reports the error itself
        path = err.trace.save(args.out)
        print(f"trace up to cycle {err.trace.end_cycle} written to {path.resolve()}")
        raise
    y = sim.memcpy_d2h("w", rect=Rect(0, 0, rows, 1))[:, 0]
    # same operation order: equal to the last bit
    ok = np.array_equal(y, row_demo.reference(a, v))
    path = trace.save(args.out)
    timed = sum(1 for e in trace.events if e["ph"] == "X")
    print(f"recorded {trace.rect} of {config.name}, cycles {trace.start_cycle}.."
          f"{trace.end_cycle}: {timed} events{' (links included)' if args.links else ''}")
    print(f"check vs numpy    {'exact match' if ok else 'MISMATCH'}")
    print(f"trace written to  {path.resolve()} ({path.stat().st_size / 1024:.0f} KiB)")
    print("open it at https://ui.perfetto.dev ('Open trace file') or in chrome://tracing; "
          "1 us on the timeline = 1 simulated cycle")
    return 0 if ok else 1


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
    parser.add_argument("--traceback", action="store_true",
                        help="on an error, show the full Python trace, not one line")
    # also after the command (where one adds it to the line that failed); SUPPRESS keeps
    # a command without it from resetting the one given before the command
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                       help="on an error, show the full Python trace, not one line")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser(
        "info", parents=[after], help="machine presets and their figures",
        description="Print the figures of the machine presets (grid, SRAM, colors, router, "
                    "clock, SIMD widths); '*' marks figures public documents do not confirm.")
    info.add_argument("--preset", choices=PRESETS, help="one preset only (default: all)")
    info.add_argument("--grid", type=parse_grid, metavar="RxC",
                      help="size of the small preset (default 8x8)")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=cmd_info, parser=info)

    run = commands.add_parser(
        "run", parents=[after], help="compile a PyTorch model to the fabric, run and check it",
        description="Compile a PyTorch model (the main demo's MLP or GPT block, or your "
                    "MODULE:FACTORY returning (model, example_inputs)) to a simulated "
                    "fabric, run it, compare every node with eager PyTorch, print the "
                    "report and save the placement PNG. Exits 1 if a node differs. "
                    "--fabric-demo runs the fabric-level demo instead (a row broadcast, "
                    "multiply and chain reduction checked against numpy).")
    run.add_argument("model_spec", nargs="?", metavar="MODULE:FACTORY",
                     help="a function returning (model, example_inputs)")
    run.add_argument("--model", choices=["mlp", "gpt"], default="mlp",
                     help="built-in demo model when no MODULE:FACTORY (default mlp)")
    run.add_argument("--preset", choices=PRESETS, default="small",
                     help="machine preset (default small)")
    run.add_argument("--grid", type=parse_grid, default=DEFAULT_RUN_GRID, metavar="RxC",
                     help="size of the small preset (default 12x12)")
    run.add_argument("--dtype", choices=["fp32", "fp16", "bf16", "cb16"], default="fp32",
                     help="fp32 (default), or mixed precision (autocast's rules) with this "
                     "16-bit format")
    run.add_argument("--mode", choices=list(MODES), default=DEFAULT_MODE,
                     help=f"execution mode (default {DEFAULT_MODE}: every stage resident, "
                     "parts started as their data arrives; sequential: one stage at a time)")
    run.add_argument("--colors", choices=list(COLOR_POLICIES), default=DEFAULT_COLOR_POLICY,
                     help="a pipelined model whose routes need more colors than the fabric "
                     f"has (default {DEFAULT_COLOR_POLICY}: compiled with the shortfall in its "
                     "report; fit: placed on smaller tiles that fit; refuse: an error)")
    run.add_argument("--lookups", choices=list(LOOKUPS), default="gather",
                     help="embeddings by token ids: the rows gathered per call (default) or "
                     "a one-hot product on the fabric (a static model, which one fabric "
                     "program holds)")
    run.add_argument("--gemm-orientation", choices=list(GEMM_ORIENTATIONS), default="rows",
                     help="which way SUMMA tiles run their fmas: down C's columns "
                     "(default) or, where their model predicts it faster, transposed "
                     "(the same words)")
    run.add_argument("--experts", choices=list(EXPERTS), default="picked",
                     help="mixture-of-experts products: each token's picked weights "
                     "(default) or every expert's in one GEMM, a mask keeping its own "
                     "(which one fabric program holds)")
    run.add_argument("--simulate", choices=list(SIMULATIONS), default=DEFAULT_SIMULATION,
                     help="a pipelined call: each part simulated on its own, their overlap "
                     "scheduled (default), or the model's one fabric program in one engine "
                     "run (compile's simulate)")
    run.add_argument("--fabric-demo", action="store_true",
                     help="run the fabric-level demo instead of a model")
    run.add_argument("--n", type=int, default=64,
                     help="fp32 values per PE of the fabric demo (default 64)")
    run.add_argument("--out", default="out", help="folder for the PNG (default out)")
    run.add_argument("--quiet", action="store_true", help="print nothing unless the check fails")
    run.set_defaults(handler=cmd_run, parser=run)

    bench = commands.add_parser(
        "bench", parents=[after], help="run the benchmark scripts",
        description="Run the scripts of benchmarks/ one after another, writing JSON (and "
                    "PNG) to benchmarks/results/ (benchmarks/results/quick/ with --quick), "
                    "and print each one's status and wall time. Exits 1 if any fails.")
    bench.add_argument("--quick", action="store_true",
                       help="small settings (engine_speed: 32x32 grid, 200 cycles)")
    bench.add_argument("--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME",
                       help=f"run these only: {', '.join(BENCHMARKS)}")
    bench.set_defaults(handler=cmd_bench, parser=bench)

    trace = commands.add_parser(
        "trace", parents=[after],
        help="record a timeline of the fabric demo (Perfetto / chrome://tracing)",
        description="Run the fabric-level demo (as 'wafer run --fabric-demo' does) while "
                    "recording what every PE of a rectangle does each cycle: tasks, DSD ops, "
                    "busy and stall cycles and, with --links, every wavelet on their links. "
                    "Writes Chrome trace-event JSON for ui.perfetto.dev or chrome://tracing. "
                    "Exits 1 if the result does not match numpy.")
    trace.add_argument("--grid", type=parse_grid, default=(8, 8), metavar="RxC",
                       help="fabric size, at least 2 columns (default 8x8)")
    trace.add_argument("--n", type=int, default=64, help="fp32 values per PE (default 64)")
    trace.add_argument("--rect", type=parse_rect, metavar="R,C,H,W",
                       help="PEs to record: top-left row and column, rows, cols "
                            "(default: the whole grid)")
    trace.add_argument("--links", action="store_true",
                       help="also record every wavelet sent through the rect's links")
    trace.add_argument("--out", default="trace.json", help="JSON file (default trace.json)")
    trace.add_argument("--max-cycles", type=int, default=100_000,
                       help="cycle limit of the run (default 100000)")
    trace.set_defaults(handler=cmd_trace, parser=trace)

    train = commands.add_parser(
        "train", parents=[after], help="train a model on the fabric from a YAML config",
        description="Run the training loop a YAML file describes (keys: device or backend, "
                    "model, optimizer, loss, precision, loop, checkpoint, callbacks, data; "
                    "see examples/train_mlp.yaml), print a summary, write the history "
                    "(JSON) and the loss curve (PNG). --compare also runs the loop in eager "
                    "PyTorch and exits 1 if a step's loss differs beyond the tolerance.")
    train.add_argument("config", help="the YAML file")
    train.add_argument("--steps", type=int, help="stop after this many steps (overrides "
                       "loop.max_steps)")
    train.add_argument("--device", choices=["fabric", "cpu"],
                       help="run on this device instead of the config's")
    train.add_argument("--execution", choices=list(MODES),
                       help="run each graph of a step in this execution mode instead of the "
                            "config's backend execution (fabric only)")
    train.add_argument("--compare", action="store_true",
                       help="also run the loop in eager PyTorch and compare the loss curves")
    train.add_argument("--out", default="out",
                       help="folder for train_history.json and train_loss.png (default out)")
    train.add_argument("--quiet", action="store_true", help="print the summary only")
    train.set_defaults(handler=cmd_train, parser=train)
    return parser


def cmd_train(args, parser) -> int:
    from frontend.training.cli import train  # torch and the frontend: only when training

    return train(args, parser)


def main(argv=None) -> int:
    """Run the command `argv` (default: sys.argv[1:]); returns the exit code. An error of
    USER_ERRORS prints its first line and TRACEBACK_HINT on stderr and returns 2, or with
    --traceback propagates whole."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args, args.parser)
    except USER_ERRORS as err:
        if args.traceback:
            raise
        lines = str(err).strip().splitlines()
        message = lines[0] if lines else type(err).__name__
        print(f"{args.parser.prog}: error: {message} ({TRACEBACK_HINT})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
