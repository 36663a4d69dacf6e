"""The per-node report of a compiled model and its placement picture."""

from __future__ import annotations

from collections import defaultdict

from frontend.placement import planned
from frontend.program_calls import active_cycles, longest_part
from frontend.sources import target_name


def node_rows(cm) -> list[dict]:
    """One row per FX node that has stages: op, kernels, tiles, PEs, SRAM, cycles, error."""
    figures = cm.last.stage_figures() if cm.last else {}
    errors = getattr(cm, "last_errors", {})
    by_node = defaultdict(list)
    for p in cm.prepared:
        by_node[p.stage.node.name].append(p)
    rows = []
    for node in cm.captured.graph.nodes:
        preps = by_node.get(node.name)
        if not preps:
            continue
        res = [figures.get(p.stage.name) for p in preps]
        err = errors.get(node.name)
        rows.append({
            "node": node.name, "op": target_name(node),
            "kernels": sorted({p.stage.kind for p in preps}),
            "tiles": [_rect(p.rect) for p in preps],
            "pes": sum(p.rect.rows * p.rect.cols for p in preps),
            "sram_bytes": max((r[2] for r in res if r), default=0),
            "kernel_cycles": sum(r[0] for r in res if r),
            "move_cycles": sum(r[1] for r in res if r),
            "format": cm.formats.get(node.name, "f32"),
            "max_abs_error": err.max_abs if err else None,
            "fp32_error": err.fp32_max_abs if err else None,
        })
    return rows


def _rect(rect) -> str:
    return f"{rect.row},{rect.col} {rect.rows}x{rect.cols}"


def _err(v) -> str:
    return "-" if v is None else f"{v:.2e}"


def report(cm) -> str:
    """One line per node: op, kernels, tile, PEs, SRAM, cycles, data movement, max error
    (against eager fp32; under mixed precision the node's format and its error against
    eager autocast, or fp32 for cbfloat16, then against fp32; for a model of 16-bit
    tensors the format and its error against eager); pipelined: one line per
    stage and the colors over the whole graph (`cm.colors`)."""
    rows = node_rows(cm)
    half = cm.half_storage  # mixed precision, or a model of 16-bit tensors
    ref = ("" if half is None else "eager" if cm.half is None
           else "autocast" if half.torch_dtype is not None else "fp32")
    head = (f"{'node':24} {'op':30} {'kernel':16} {'tile':18} {'PEs':>4} "
            f"{'SRAM B':>7} {'cycles':>7} {'moves':>6}")
    lines = [head + (f" {'max err':>9}" if half is None else
                     f" {'fmt':>4} {'err ' + ref:>12} {'err fp32':>9}")]
    for r in rows:
        tile = r["tiles"][0] if len(r["tiles"]) == 1 else f"{len(r['tiles'])} tiles"
        line = (f"{r['node'][:24]:24} {r['op'][:30]:30} {','.join(r['kernels'])[:16]:16} "
                f"{tile[:18]:18} {r['pes']:4d} {r['sram_bytes']:7d} "
                f"{r['kernel_cycles']:7d} {r['move_cycles']:6d}")
        if half is None:
            line += f" {_err(r['max_abs_error']):>9}"
        else:
            line += (f" {r['format']:>4} {_err(r['max_abs_error']):>12} "
                     f"{_err(r['fp32_error']):>9}")
        lines.append(line)
    cfg = cm.config
    lines.append("")
    if cm.half is not None:
        lines.append(f"precision: mixed, {half.name} (nodes in fp32 where CPU autocast keeps "
                     "them; products accumulate in fp32)")
    elif half is not None:
        lines.append(f"precision: the model's, {half.name} (each node in the dtype the model "
                     "gives it; products accumulate in fp32)")
    if cm.last is not None and cm.simulate == "program":
        lines += ["", *program_stage_lines(cm), "", _program_summary(cm)]
    elif cm.last is not None and cm.mode == "pipelined":
        lines += ["", *stage_lines(cm), "", _pipelined_summary(cm)]
    elif cm.last is not None:
        lines.append(f"fabric {cfg.name} {cfg.rows}x{cfg.cols}: {cm.placement.pes_used} of "
                     f"{cfg.rows * cfg.cols} PEs in {len(cm.prepared)} tiles; "
                     f"{cm.cycles} cycles ({cm.cycles / cfg.clock_hz * 1e6:.2f} us at "
                     f"{cfg.clock_hz / 1e6:.0f} MHz), host I/O {cm.host_cycles} cycles; "
                     f"fma utilization {100 * cm.utilization:.2f} %")
    if cm.colors is not None:  # pipelined: the colors of every part over the whole graph
        lines.append(cm.colors.summary())
    return "\n".join(lines)


def stage_rows(cm) -> list[dict]:
    """One row per stage of the last call: tile, PEs, the kernel model's predicted cycles
    and the simulated ones, its rate in the pipeline (`frontend.schedule`) and its kernel's
    busy fraction of the period."""
    results = {r.name: r for r in cm.last.results}
    tl = cm.timeline
    rows = []
    for p in cm.prepared:
        r = results[p.stage.name]
        rows.append({
            "stage": p.stage.name, "kernel": p.stage.kind, "tile": _rect(p.rect),
            "pes": p.rect.rows * p.rect.cols, "predicted": p.kernel.model_cycles,
            "simulated": r.kernel_cycles, "rate": tl.rates[p.stage.name],
            "busy": r.kernel_cycles / tl.period if tl.period else 0.0,
        })
    return rows


# a stage line's columns before its rate: stage, kernel, tile, PEs, predicted, simulated
_STAGE_HEAD = (f"{'stage':24} {'kernel':14} {'tile':14} {'PEs':>4} {'predicted':>9} "
               f"{'simulated':>9}")


def _stage_cells(r: dict) -> str:
    return (f"{r['stage'][:24]:24} {r['kernel'][:14]:14} {r['tile'][:14]:14} "
            f"{r['pes']:4d} {r['predicted']:9d} {r['simulated']:9d}")


def stage_lines(cm) -> list[str]:
    lines = [f"{_STAGE_HEAD} {'rate':>7} {'busy':>6}"]
    for r in stage_rows(cm):
        mark = "  <- bottleneck" if r["stage"] == cm.timeline.bottleneck else ""
        if r["stage"] in cm.placement.riders:
            mark += f"  (below {cm.placement.riders[r['stage']]}, on its tile shape)"
        lines.append(f"{_stage_cells(r)} {r['rate']:7d} {100 * r['busy']:5.1f}%{mark}")
    return lines


def _pipelined_summary(cm) -> str:
    cfg, tl = cm.config, cm.timeline
    us = tl.latency / cfg.clock_hz * 1e6
    return (f"fabric {cfg.name} {cfg.rows}x{cfg.cols}, pipelined: {cm.placement.pes_used} of "
            f"{cfg.num_pes} PEs in {len(cm.prepared)} tiles; {tl.samples} sample(s): "
            f"latency {tl.latency} cycles ({us:.2f} us at {cfg.clock_hz / 1e6:.0f} MHz), "
            f"{tl.period:.0f} cycles per sample in steady state (bottleneck {tl.bottleneck}, "
            f"rate {tl.bound}); weights loaded once in {cm.load_cycles} host cycles; fma "
            f"utilization over the steady state {100 * cm.utilization:.2f} %"
            + _stall(tl) + _plan(cm))


def program_stage_rows(cm) -> list[dict]:
    """One row per stage of the last call simulated as one program: tile, PEs, the
    kernel model's predicted cycles, its kernel's cycles in the program on the first
    sample, and per sample over the stream (from its start on a sample to its end) with
    that share of the period (its busy fraction)."""
    stream, program = cm.program_stream, cm.call_program
    period = cm.period
    rows = []
    for p in cm.prepared:
        part = program.stages[p.stage.name]
        spans = [active_cycles(program, stream, part, s) for s in range(len(stream.words))]
        mean = sum(spans) / len(spans)
        rows.append({
            "stage": p.stage.name, "kernel": p.stage.kind, "tile": _rect(p.rect),
            "pes": p.rect.rows * p.rect.cols, "predicted": p.kernel.model_cycles,
            "simulated": spans[0], "per_sample": mean,
            "busy": mean / period if period else 0.0,
        })
    return rows


def program_stage_lines(cm) -> list[str]:
    lines = [f"{_STAGE_HEAD} {'/sample':>8} {'busy':>6}"]
    for r in program_stage_rows(cm):
        lines.append(f"{_stage_cells(r)} {r['per_sample']:8.0f} {100 * r['busy']:5.1f}%")
    return lines


def _program_summary(cm) -> str:
    cfg, stream = cm.config, cm.program_stream
    samples = len(stream.words)
    what, cycles = longest_part(cm.call_program, stream)
    us = stream.latency / cfg.clock_hz * 1e6
    rate = (f"{cm.period:.0f} cycles per sample in steady state" if samples > 1 else
            f"its longest part {cm.period:.0f} cycles (the rate a stream approaches at best)")
    return (f"fabric {cfg.name} {cfg.rows}x{cfg.cols}, pipelined as one fabric program (one "
            f"engine run, kernels started by their data): {cm.placement.pes_used} of "
            f"{cfg.num_pes} PEs in {len(cm.prepared)} tiles, {len(cm.call_program.order)} "
            f"parts; {samples} sample(s): latency {stream.latency} cycles ({us:.2f} us at "
            f"{cfg.clock_hz / 1e6:.0f} MHz), {rate}; longest part per sample: {what}, "
            f"{cycles:.0f} cycles; weights loaded once in {cm.load_cycles} host cycles; fma "
            f"utilization over the steady state {100 * cm.utilization:.2f} %" + _plan(cm))


def _plan(cm) -> str:
    """What the placement planned against, from its kernels' models and its moves' bounds
    (`frontend.placement.planned`)."""
    way, path, rate = planned([p.stage for p in cm.prepared], cm.placement)
    if not path:
        return ""
    return (f"\nplanned (kernel models and move bounds, host I/O apart): latency at least "
            f"{way} cycles, through {path[0]} ... {path[-1]} ({len(path)} stages), "
            f"{rate} cycles per sample")


def _stall(tl) -> str:
    """Why the period exceeds the slowest rate, when a skip connection's buffers hold it."""
    stall = tl.buffer_stall
    if tl.samples < 2 or tl.period <= 1.1 * tl.bound or stall is None:
        return ""
    consumer, tensor, depth = stall
    return (f"; above the slowest rate: {tensor}'s output waits for {consumer} to free one of "
            f"its {depth} buffer(s) of it (a skip connection whose path is longer than its "
            "buffers cover; more PEs on that tile give them more SRAM)")


def plot_placement(cm, path=None):
    """The stages' tiles and an arrow per edge; in pipelined mode each arrow in the hue of
    its moves' colors over the whole graph (`cm.colors`), labelled with them, and the
    arrows of one sample's planned way through the tiles (`planned`) thicker."""
    from fabric.viz import placement_map

    regions = [(p.stage.name, p.rect) for p in cm.prepared]
    if cm.colors is None:
        return placement_map(cm.config, regions, cm.edges, title="placement", path=path)
    colors = [cm.colors.edge_colors(a, b) for a, b in cm.edges]
    _, way, _ = planned([p.stage for p in cm.prepared], cm.placement)
    return placement_map(cm.config, regions, cm.edges, title="placement and move colors",
                         path=path, edge_colors=colors,
                         emphasized=list(zip(way, way[1:])))
