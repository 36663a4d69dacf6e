"""Node-by-node comparison of the simulated fabric with eager PyTorch.

Golden values come from running the captured ATen graph with `torch.fx.Interpreter`; the
fabric's value of a node is read back from the words of the tiles holding its elements (a
layout-only node reads the same words through its index map). Tolerances are those of
`torch.testing.assert_close` for the dtype (fp32: rtol 1.3e-6, atol 1e-5).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.fx

from frontend.errors import ValidationError
from frontend.sources import source_line, target_name
from frontend.values import Ref

TOLERANCES = {torch.float32: (1.3e-6, 1e-5), torch.float16: (1e-3, 1e-5),
              torch.bfloat16: (1.6e-2, 1e-5)}


@dataclasses.dataclass
class NodeError:
    node: str
    op: str
    max_abs: float
    max_rel: float
    pearson: float
    ok: bool
    source: str


def golden_values(captured, inputs: dict[str, torch.Tensor]) -> dict[str, object]:
    """Every node's eager value: {node name: tensor or tuple}."""
    values: dict[str, object] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n.name] = out
            return out

    args = []
    for node in captured.graph.find_nodes(op="placeholder"):
        args.append(captured.constants[node.name] if node.name in captured.constants
                    else inputs[node.name])
    with torch.no_grad():
        Recorder(captured.graph_module).run(*args)
    return values


def compare(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float, float, bool]:
    got, want = got.to(torch.float64), want.to(torch.float64)
    rtol, atol = TOLERANCES[torch.float32]
    finite = torch.isfinite(want)
    diff = (got - want).abs()
    same_inf = (got == want) | (torch.isnan(got) & torch.isnan(want))
    diff = torch.where(same_inf, torch.zeros_like(diff), diff)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / want.abs().clamp_min(1e-30)
    max_rel = float(rel[finite].max()) if bool(finite.any()) else 0.0
    if got.numel() > 1 and float(got.std()) > 0 and float(want.std()) > 0:
        g, w = got[finite] - got[finite].mean(), want[finite] - want[finite].mean()
        pearson = float((g * w).sum() / (g.norm() * w.norm()))
    else:
        pearson = 1.0 if max_abs == 0 else float("nan")
    ok = bool(((diff <= atol + rtol * want.abs()) | same_inf).all())
    return max_abs, max_rel, pearson, ok


def validate(cm, args, raise_on_mismatch: bool = True) -> list[NodeError]:
    ex = cm.run(*args)
    golden = golden_values(cm.captured, ex.inputs)
    rows = []
    for node in cm.captured.graph.nodes:
        value = cm.lowered.env.get(node.name)
        want = golden.get(node.name)
        if not isinstance(value, Ref) or not isinstance(want, torch.Tensor):
            continue
        if not want.dtype.is_floating_point:
            continue
        got = ex.value(value.index)
        rows.append(NodeError(node.name, target_name(node), *compare(got, want),
                              source_line(node)))
    cm.last_errors = {r.node: r for r in rows}
    bad = [r for r in rows if not r.ok]
    if bad and raise_on_mismatch:
        raise ValidationError("simulated values differ from eager PyTorch beyond "
                              f"assert_close's fp32 tolerances:\n{table(bad)}")
    return rows


def table(rows: list[NodeError]) -> str:
    lines = [f"{'node':28} {'op':32} {'max abs':>10} {'max rel':>10} {'pearson':>9}  ok"]
    for r in rows:
        lines.append(f"{r.node:28} {r.op:32} {r.max_abs:10.3g} {r.max_rel:10.3g} "
                     f"{r.pearson:9.6f}  {'yes' if r.ok else 'NO'}")
    return "\n".join(lines)
