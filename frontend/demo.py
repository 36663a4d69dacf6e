"""The main job: a small PyTorch model compiled to a simulated fabric, run, checked node by
node against eager PyTorch, with a printed report and the placement picture.

    python -m frontend.demo --out out [--model mlp|gpt] [--grid 12x12]
                            [--dtype fp32|fp16|bf16|cb16] [--mode pipelined|sequential]
                            [--colors report|fit|refuse] [--lookups gather|onehot]
                            [--gemm-orientation rows|auto] [--experts picked|dense]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import frontend
from fabric import FabricConfig
from frontend.errors import PlacementError
from frontend.graph_colors import COLOR_POLICIES, DEFAULT_COLOR_POLICY
from frontend.lowering import EXPERTS, GEMM_ORIENTATIONS, LOOKUPS
from frontend.program_calls import DEFAULT_SIMULATION, SIMULATIONS
from frontend.schedule import DEFAULT_MODE, MODES
from frontend.validate import MIXED_ULPS, table

DTYPES = ("fp32", "fp16", "bf16", "cb16")  # fp32, or mixed precision in a 16-bit format


class DemoMLP(nn.Module):
    """Two linear layers with a relu and a residual."""

    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class DemoBlock(nn.Module):
    """A GPT-2-style block: layer norm, causal self-attention, gelu MLP, residuals."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.heads = heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def _grid(text: str) -> tuple[int, int]:
    try:
        r, c = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--grid must look like 12x12, got {text!r}") from None
    return r, c


def demo_model(name: str):
    """(model, example inputs) of a built-in demo model: "mlp" or "gpt"."""
    torch.manual_seed(0)
    if name == "mlp":
        return DemoMLP().eval(), (torch.randn(4, 16),)
    return DemoBlock().eval(), (torch.randn(1, 4, 16),)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["mlp", "gpt"], default="mlp")
    ap.add_argument("--grid", type=_grid, default=(12, 12), help="fabric rows x cols")
    ap.add_argument("--out", default="out", help="directory for the placement PNG")
    ap.add_argument("--dtype", choices=DTYPES, default="fp32",
                    help="fp32, or mixed precision with this 16-bit format")
    ap.add_argument("--mode", choices=list(MODES), default=DEFAULT_MODE,
                    help="execution mode (frontend.compile's mode)")
    ap.add_argument("--colors", choices=list(COLOR_POLICIES), default=DEFAULT_COLOR_POLICY,
                    help="a pipelined model whose routes need more colors than the fabric "
                    "has: report it (default), fit it on smaller tiles, or refuse it "
                    "(frontend.compile's colors)")
    ap.add_argument("--lookups", choices=list(LOOKUPS), default="gather",
                    help="embeddings by token ids: rows gathered per call (default) or a "
                    "one-hot product on the fabric, which one fabric program holds "
                    "(frontend.compile's lookups)")
    ap.add_argument("--gemm-orientation", choices=list(GEMM_ORIENTATIONS), default="rows",
                    help="which way SUMMA tiles run their fmas: down C's columns (default) "
                    "or, where faster, transposed (frontend.compile's gemm_orientation)")
    ap.add_argument("--experts", choices=list(EXPERTS), default="picked",
                    help="mixture-of-experts products: each token's picked weights "
                    "(default) or every expert's in one GEMM, which one fabric program "
                    "holds (frontend.compile's experts)")
    ap.add_argument("--simulate", choices=list(SIMULATIONS), default=DEFAULT_SIMULATION,
                    help="a pipelined call: each part simulated on its own, their overlap "
                    "scheduled (default), or the model's one fabric program in one engine "
                    "run (frontend.compile's simulate)")
    args = ap.parse_args(argv)
    model, inputs = demo_model(args.model)
    return run_model(model, inputs, FabricConfig.small(*args.grid), args.out, args.dtype,
                     args.mode, args.colors, args.lookups, args.gemm_orientation, args.experts,
                     args.simulate)


def run_model(model, inputs, config: FabricConfig, out_dir, dtype: str = "fp32",
              mode: str = DEFAULT_MODE, colors: str = DEFAULT_COLOR_POLICY,
              lookups: str = "gather", gemm_orientation: str = "rows",
              experts: str = "picked", simulate: str = DEFAULT_SIMULATION) -> int:
    """Compile, run and validate `model` on `config` in fp32, or in mixed precision with
    the 16-bit `dtype` (a `frontend.amp` name: float16/fp16, bfloat16/bf16,
    cbfloat16/cb16), in execution `mode` (`frontend.schedule.MODES`) with the color policy
    `colors`, the embeddings' `lookups`, the SUMMA tiles' `gemm_orientation`, the
    mixture-of-experts products' `experts` and how a call is simulated, `simulate`
    (`frontend.compile`'s); print the report and
    the numerics table, save the placement PNG in `out_dir`. 0 when every node is within
    tolerance."""
    precision, half = ("fp32", None) if dtype == "fp32" else ("mixed", dtype)
    t0 = time.perf_counter()
    cm = frontend.compile(model, inputs, config=config, precision=precision, half=half,
                          mode=mode, colors=colors, lookups=lookups,
                          gemm_orientation=gemm_orientation, experts=experts,
                          simulate=simulate)
    t1 = time.perf_counter()
    rows = cm.validate(*inputs, raise_on_mismatch=False)
    t2 = time.perf_counter()
    print(f"{type(model).__name__} on {config.name}: compiled in {t1 - t0:.1f} s, "
          f"simulated in {t2 - t1:.1f} s\n")
    print(cm.report())
    if cm.half is None:
        print("\nnumerics against eager PyTorch (torch.fx.Interpreter, fp32 tolerances of "
              "assert_close):")
    else:
        ref = "eager autocast" if cm.half.torch_dtype is not None else "eager fp32"
        print(f"\nnumerics in mixed precision ({cm.half.name}): max abs / rel error against "
              f"{ref} (ok: within {MIXED_ULPS} epsilons of the node's scale), then against "
              "eager fp32:")
    print(table(rows))
    # a call simulated as one program has run as one already (the report says so)
    same = one_program_check(cm, inputs) if cm.simulate == "parts" and \
        cm.mode == "pipelined" else True
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / "placement.png"
    cm.plot_placement(png)
    print(f"\nplacement picture: {png}")
    bad = [r for r in rows if not r.ok]
    print("RESULT:", "all nodes within tolerance" if not bad else f"{len(bad)} nodes differ")
    return 0 if not bad and same else 1


def one_program_check(cm, inputs) -> bool:
    """Run the call again as one fabric program when the model's colors fit (every kernel
    and move at once, each kernel started on a PE by the last delivery of its data there)
    and print its cycles and whether every stage's words are those of the parts run apart;
    else say why it is not one program. False only when the words differ."""
    colors = cm.colors.assignment
    if not colors.ok:
        print(f"\nnot run as one fabric program: its kernels and moves need {colors.needed} "
              f"colors at once and the fabric has {colors.available} (the colors line above; "
              "--colors fit places it on smaller tiles that fit)")
        return True
    try:
        run = cm.one_program_stream([inputs], start="data")
        linked = cm.one_program_stream([inputs], start="data", host_io=True)
    except PlacementError as exc:  # per-call gathers, or a PE's SRAM, registers, tasks
        print(f"\nnot run as one fabric program: {exc}")
        return True
    same = run.same_words(0, cm.last.words) and linked.same_words(0, cm.last.words)
    print(f"\nas one fabric program ({colors.used} colors; every kernel and "
          "move at once, each kernel started by its data): "
          f"{linked.latency} cycles with the host link's writes and reads ({run.latency} "
          "with host I/O apart); every stage's words "
          + ("those of the parts run apart, bit for bit" if same else
             "DIFFER from the parts run apart"))
    return same


if __name__ == "__main__":
    sys.exit(main())
