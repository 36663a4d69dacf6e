"""Engine speed: simulated PE-cycles per wall second on a workload where every PE is busy
every cycle.

West-edge PEs stream wavelets east on one color; every other PE takes each wavelet with an
fma into its SRAM (y += 0.5 * x) and its router forwards it on (multicast RAMP + EAST).
The stream is a block of BLOCK words sent again and again by a register loop, so any cycle
count fits in SRAM.

    python benchmarks/engine_speed.py --grid 128 --cycles 2000 --json OUT.json
    python benchmarks/engine_speed.py --sweep --json OUT.json   # 8x8 .. 256x256 + PNG

The last line printed is `pe_cycles_per_s=<value>`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _host_devices_from_argv(argv) -> int:
    """--devices N needs N host devices, which JAX fixes when it starts: read it first."""
    for i, arg in enumerate(argv):
        if arg == "--devices" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--devices="):
            return int(arg.split("=", 1)[1])
    return 1


if _host_devices_from_argv(sys.argv) > 1 and "XLA_FLAGS" not in os.environ:
    os.environ["XLA_FLAGS"] = (
        f"--xla_force_host_platform_device_count={_host_devices_from_argv(sys.argv)}")

import jax  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import median_time, warm_up, write_json  # noqa: E402

from fabric import FabricConfig, Port, Program, Rect, Simulator, Tile  # noqa: E402
from fabric import instructions as ins  # noqa: E402

BLOCK = 1024
COLOR = 0


def stream_program(config: FabricConfig, repeats: int) -> Program:
    R, C = config.rows, config.cols
    source = Tile("source")
    x = source.symbol("x", "f32", BLOCK)
    source.local_task("main", [
        ins.set_reg("n", repeats),
        ins.label("again"),
        ins.mov(ins.FabOut(COLOR, BLOCK), x.dsd()),
        ins.isub("n", ins.Reg("n"), 1),
        ins.branch_if_nonzero(ins.Reg("n"), "again"),
    ])
    worker = Tile("worker")
    y = worker.symbol("y", "f32", BLOCK)
    worker.local_task("main", [
        ins.set_reg("n", repeats),
        ins.label("again"),
        ins.fma(y.dsd(), y.dsd(), ins.FabIn(COLOR, BLOCK), 0.5),
        ins.isub("n", ins.Reg("n"), 1),
        ins.branch_if_nonzero(ins.Reg("n"), "again"),
    ])
    prog = Program(config)
    prog.place(source, Rect(0, 0, R, 1))
    prog.place(worker, Rect(0, 1, R, C - 1))
    prog.route(Rect(0, 0, R, 1), COLOR, rx=Port.RAMP, tx=Port.EAST)
    if C > 2:
        prog.route(Rect(0, 1, R, C - 2), COLOR, rx=Port.WEST, tx=[Port.RAMP, Port.EAST])
    prog.route(Rect(0, C - 1, R, 1), COLOR, rx=Port.WEST, tx=Port.RAMP)
    return prog


def loaded_simulator(config, repeats, devices=1):
    sim = Simulator(config, stream_program(config, repeats), devices=devices)
    sim.memcpy_h2d("x", np.linspace(-1, 1, BLOCK, dtype=np.float32))
    sim.launch("main")
    return sim


def measure(grid: int, cycles: int, repeats: int = 3, devices: int = 1) -> dict:
    config = FabricConfig.small(grid, grid)
    blocks = max(1, -(-cycles // BLOCK)) + 1  # enough work to stay busy for `cycles`
    # warm-up apart: compiles the engine for this config and bucket and runs it once
    warm = loaded_simulator(config, blocks, devices)
    warmup_s = warm_up(lambda: warm.run(max_cycles=4, raise_on_limit=False, progress=False))
    compile_s = warm.compile_s  # the XLA compile alone (0 if this process had it already)
    state_bytes_per_pe = warm.state_bytes_per_pe
    warm = None  # free its state (GBs on large grids) before the timed runs

    def setup():
        sim = loaded_simulator(config, blocks, devices)
        jax.block_until_ready(sim.state)
        return sim

    ran = []

    def one_run(sim):
        sim.run(max_cycles=cycles, raise_on_limit=False, progress=False)
        ran.append((sim.last_run_cycles, sim.stats()))

    wall, walls = median_time(one_run, repeats, setup=setup)
    if len({c for c, _ in ran}) != 1:
        raise RuntimeError(f"runs of one program differ in cycles: {[c for c, _ in ran]}")
    cycles_ran, stats = ran[-1]
    return {
        "grid": [grid, grid],
        "devices": devices,
        "cycles": cycles_ran,
        "repeats": repeats,
        "wall_s": wall,
        "wall_s_all": walls,
        "compile_s": compile_s,
        "warmup_s": warmup_s,
        "pe_cycles_per_s": cycles_ran * grid * grid / wall,
        "cycles_per_s": cycles_ran / wall,
        "loop_iterations_per_s": cycles_ran / wall,  # one loop iteration per cycle here
        "utilization": float(stats.busy.sum() / (stats.cycles * grid * grid)),
        "state_bytes_per_pe": state_bytes_per_pe,
    }


def table(rows: list) -> dict:
    return {"columns": ["grid", "devices", "cycles", "PE-cycles/s", "compile s", "run s (median)",
                        "state B/PE"],
            "rows": [[f"{r['grid'][0]}x{r['grid'][1]}", r["devices"], r["cycles"],
                      f"{r['pe_cycles_per_s']:.3g}", f"{r['compile_s']:.1f}",
                      f"{r['wall_s']:.3f}", f"{r['state_bytes_per_pe']:.0f}"] for r in rows]}


def headline(row: dict) -> str:
    return (f"{row['grid'][0]}x{row['grid'][1]}: {row['pe_cycles_per_s']:.3g} PE-cycles/s "
            f"(median of {row['repeats']}, compile {row['compile_s']:.1f} s apart)")


def plot_sweep(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grids = [r["grid"][0] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(grids, [r["pe_cycles_per_s"] for r in rows], "o-", label="wafer-fabric (this CPU)")
    ax.axhspan(0.8e6, 1.4e6, color="grey", alpha=0.3, label="MuchiSim, 2 threads (reported)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("grid side (PEs)")
    ax.set_ylabel("PE-cycles per second")
    ax.set_title("Engine speed, every PE busy every cycle")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=128, help="grid side (square fabric)")
    parser.add_argument("--cycles", type=int, default=2000, help="cycles per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (median reported)")
    parser.add_argument("--sweep", action="store_true", help="8x8 .. 256x256 and a PNG")
    parser.add_argument("--devices", type=int, default=1,
                        help="split the rows over this many (host) devices")
    parser.add_argument("--json", default="benchmarks/results/engine_speed.json")
    args = parser.parse_args(argv)
    if args.grid < 2:
        parser.error("--grid must be at least 2")
    if args.repeats < 1 or args.cycles < 1:
        parser.error("--repeats and --cycles must be at least 1")
    if args.sweep:
        rows = []
        for grid in (8, 16, 32, 64, 128, 256):
            row = measure(grid, args.cycles, args.repeats, args.devices)
            print(f"grid {grid:4d}: {row['pe_cycles_per_s']:.3e} PE-cycles/s, "
                  f"compile {row['compile_s']:.1f} s", flush=True)
            rows.append(row)
        png = str(Path(args.json).with_suffix(".png"))
        plot_sweep(rows, png)
        write_json(args.json, {"benchmark": "engine_speed", "sweep": rows, "png": png,
                               "pngs": [png], "table": table(rows),
                               "headline": [headline(rows[0]), headline(rows[-1])]})
        best = rows[-1]
    else:
        best = measure(args.grid, args.cycles, args.repeats, args.devices)
        write_json(args.json, {"benchmark": "engine_speed", **best, "table": table([best]),
                               "headline": [headline(best)]})
        print(f"grid {args.grid}x{args.grid}, {best['cycles']} cycles in {best['wall_s']:.3f} s "
              f"(compile {best['compile_s']:.1f} s), utilization {best['utilization']:.3f}, "
              f"state {best['state_bytes_per_pe']:.0f} B/PE")
    print(f"pe_cycles_per_s={best['pe_cycles_per_s']:.6g}")


if __name__ == "__main__":
    main()
