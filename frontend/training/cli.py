"""`wafer train CONFIG.yaml` (arguments parsed in frontend.cli): a training run from a YAML
file (`config_file`), with a printed summary, the history as JSON and the loss curve as a
PNG; `--compare` runs the same loop in eager PyTorch too and checks the fabric's loss curve
against it.

    wafer train examples/train_mlp.yaml [--steps N] [--device fabric|cpu]
                [--execution sequential|pipelined] [--compare] [--out DIR] [--quiet]

Exit codes: 0 done (and, with --compare, every step's loss within the tolerance of
`frontend.training.curves`); 1 a loss outside it; 2 a bad config or flags, or an error of
the run (one line naming it: --compare with the cpu device has nothing to compare with).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping
from pathlib import Path

from frontend.training.config_file import load_config, make_data, make_trainer
from frontend.training.curves import compare_curves, plot_curves


def train(args, parser) -> int:
    """`wafer train` (arguments parsed by frontend.cli). A bad config raises ValueError
    (naming the key), a data or model factory's exception UserCodeError; `frontend.cli`
    reports them in one line."""
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    cfg = load_config(args.config)
    train, val = make_data(cfg)
    if args.steps is not None:
        cfg["loop"] = {**(cfg.get("loop") or {}), "max_steps": args.steps}
    overrides = {"device": args.device} if args.device else {}
    if args.execution:
        overrides = {"backend": with_execution(cfg, args.device, args.execution)}
    if args.quiet:
        cfg["callbacks"] = []
    trainer = make_trainer(cfg, **overrides)
    if args.compare and trainer.device != "fabric":
        parser.error(f"--compare compares a fabric run with eager PyTorch; this run is on "
                     f"device {trainer.device!r} already (drop --compare or the cpu device)")
    eager = None  # the same loop in eager PyTorch (--compare on the fabric)
    if args.compare:
        eager_cfg = dict(cfg, callbacks=[])
        if trainer.runner.half == "cbfloat16":  # torch has no cbfloat16: compare with fp32
            eager_cfg["precision"] = {"dtype": "fp32"}
        eager = make_trainer(eager_cfg, device="cpu")
    quiet = contextlib.redirect_stdout(io.StringIO()) if args.quiet \
        else contextlib.nullcontext()
    for run in (trainer, eager):
        if run is not None:
            with quiet:
                run.fit(train, val)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    label = trainer.runner.half or "fp32"
    result = {"config": str(args.config), "device": trainer.device,
              "execution": trainer.backend.execution, "precision": trainer.precision.mode,
              "half": trainer.runner.half, "history": trainer.history,
              "val_history": trainer.val_history}
    code = 0
    if eager is not None:
        check = compare_curves(trainer.losses, eager.losses, trainer.precision.mode)
        result["eager"] = {"history": eager.history, **check}
        code = 0 if check["ok"] else 1
    (out / "train_history.json").write_text(json.dumps(result, indent=1))
    png = plot_curves({label: trainer.history},
                      {label: eager.history} if eager is not None else {},
                      out / "train_loss.png", title=Path(args.config).name)
    print(summary(trainer, result), end="")
    print(f"wrote {out / 'train_history.json'} and {png}")
    return code


def with_execution(cfg: Mapping, device: str | None, execution: str) -> dict:
    """The backend of `cfg` (its `backend` mapping, or its `device`; a `device` given on
    the command line replaces both, as --device does) with `execution` in place of its
    own: what --execution runs."""
    if device is not None:
        return {"name": device, "execution": execution}
    spec = cfg.get("backend")
    if spec is None:
        return {"name": cfg.get("device") or "fabric", "execution": execution}
    if not isinstance(spec, Mapping):
        raise ValueError(f"backend must be a mapping, got {type(spec).__name__} {spec!r}")
    return {**spec, "execution": execution}


def summary(trainer, result: dict) -> str:
    """A few lines: steps, losses, skipped steps, cycles and the comparison with eager."""
    h = trainer.history
    lines = [f"{trainer.device} training, {trainer.precision.mode}"
             f"{' (' + trainer.runner.half + ')' if trainer.runner.half else ''}: "
             f"{len(h)} steps"]
    if h:
        lines.append(f"  loss {h[0]['loss']:.6g} -> {h[-1]['loss']:.6g}"
                     f" (skipped steps: {sum(not x['taken'] for x in h)})")
    if h and "cycles" in h[0]:
        cycles = sum(x["cycles"] for x in h) / len(h)
        util = sum(x["utilization"] for x in h) / len(h)
        opt = sum(x["optimizer_cycles"] for x in h) / len(h)
        lines.append(f"  simulated cycles per step ({trainer.backend.execution}): "
                     f"{cycles:,.0f} forward + backward ({util:.2%} fma utilization), "
                     f"{opt:,.0f} optimizer")
    if trainer.val_history:
        lines.append(f"  val_loss {trainer.val_history[-1]['val_loss']:.6g}")
    if "eager" in result:
        e = result["eager"]
        verdict = "within" if e["ok"] else "OUTSIDE"
        lines.append(f"  against eager PyTorch: largest relative loss difference "
                     f"{e['max_rel']:.2e} at step {e['worst_step']} ({verdict} {e['rtol']:g})")
    return "\n".join(lines) + "\n"

