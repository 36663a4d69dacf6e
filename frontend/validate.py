"""Node-by-node comparison of the simulated fabric with eager PyTorch.

Golden values come from running the captured ATen graph with `torch.fx.Interpreter`; the
fabric's value of a node is read back from the words of the tiles holding its elements (a
layout-only node reads the same words through its index map).

fp32 models: tolerances are those of `torch.testing.assert_close` for fp32 (rtol 1.3e-6,
atol 1e-5), atol widened to FP32_SCALE_ULPS fp32 epsilons of the node's largest magnitude
where that is more (`fp32_tolerance`: a sum that cancels is off by roundings of its terms,
not of itself). Mixed precision: every node is compared with fp32 eager PyTorch and, for
float16 and bfloat16, with the same graph run under `torch.autocast("cpu", dtype)`; it
passes when it is within `MIXED_ULPS` units of the half format's epsilon of the autocast
value, relative to the node's largest magnitude (see `mixed_tolerance`); cbfloat16, which
torch cannot run, is held to the same bound against fp32 eager values.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.fx

from frontend.errors import FrontendError, ValidationError
from frontend.sources import describe, source_line, target_name
from frontend.values import Ref

TOLERANCES = {torch.float32: (1.3e-6, 1e-5), torch.float16: (1e-3, 1e-5),
              torch.bfloat16: (1.6e-2, 1e-5)}
# Half-format epsilon (2^-mantissa bits) and the bound of mixed precision in its units.
EPSILON = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "cb16": 2.0 ** -9}
MIXED_ULPS = 8
# fp32 nodes: a sum of K terms in another order than PyTorch's is off by up to about
# sqrt(K) roundings of its partial sums' magnitude (K up to 1,024 in the zoo's GEMMs: 32)
FP32_SCALE_ULPS = 32


@dataclasses.dataclass
class NodeError:
    """A node's errors: against the reference that decides `ok` (fp32 eager for fp32
    models; autocast eager for float16 / bfloat16 mixed models; fp32 eager for cbfloat16),
    and under mixed precision also against fp32 eager (`fp32_*`)."""

    node: str
    op: str
    max_abs: float
    max_rel: float
    pearson: float
    ok: bool
    source: str
    fmt: str = "f32"  # the node's fabric format
    fp32_max_abs: float | None = None
    fp32_max_rel: float | None = None


# Ops eager autocast runs in the half dtype through their composite entry points (conv1d,
# conv2d, conv3d, conv_transpose*): the captured graph holds only aten.convolution, which
# autocast's lists do not name, so a graph replayed under autocast would keep it in fp32
# where the user's eager code runs it in 16 bits. Their floating arguments are cast as
# autocast casts those of conv2d.
AUTOCAST_LOWERED = (torch.ops.aten.convolution.default,)


def golden_values(captured, inputs: dict[str, torch.Tensor],
                  autocast_dtype: torch.dtype | None = None) -> dict[str, object]:
    """Every node's eager value: {node name: tensor or tuple}; under CPU autocast with
    `autocast_dtype` when given (the ops of `AUTOCAST_LOWERED` as eager autocast runs them).

    Raises:
        FrontendError: eager PyTorch refuses a node on these inputs (its error, the node and
            the user's source line), e.g. integer ids fed to a float layer.
    """
    values: dict[str, object] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            try:
                out = (_lowered(self, n, autocast_dtype)
                       if autocast_dtype is not None and n.target in AUTOCAST_LOWERED
                       else super().run_node(n))
            except Exception as exc:  # eager's own message says what is wrong
                out = _view_by_reshape(self, n, exc)
            values[n.name] = out
            return out

    known = {**captured.constants, **captured.fixed_inputs}
    args = [known[node.name] if node.name in known else inputs[node.name]
            for node in captured.graph.find_nodes(op="placeholder")]
    with torch.no_grad():
        Recorder(captured.graph_module).run(*args)
    return values


def _view_by_reshape(interpreter: torch.fx.Interpreter, node: torch.fx.Node,
                     exc: Exception):
    """A view node's value where eager's view refuses the strides its input has when run
    (export traced them as viewable: PatchTST's q_proj input after a transpose): the same
    values by reshape, the graph being functional (no later write through the alias). Any
    other node's error: FrontendError with eager's message, the node and its line."""
    if node.target is not torch.ops.aten.view.default or "view size" not in str(exc):
        raise FrontendError(f"{describe(node)}: eager PyTorch refuses this node on the "
                            f"given inputs: {type(exc).__name__}: {exc}") from exc
    x, shape = interpreter.fetch_args_kwargs_from_env(node)[0]
    return torch.ops.aten.reshape.default(x, shape)


def _lowered(interpreter: torch.fx.Interpreter, node: torch.fx.Node, dtype: torch.dtype):
    """`node` run with its floating tensor arguments cast to `dtype` (autocast's
    lower-precision rule for conv2d and its kin)."""
    args, kwargs = interpreter.fetch_args_kwargs_from_env(node)

    def cast(a):
        return a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a

    args = tuple(cast(a) for a in args)
    kwargs = {k: cast(v) for k, v in kwargs.items()}
    return node.target(*args, **kwargs)


def autocast_values(captured, inputs: dict[str, torch.Tensor],
                    autocast_dtype: torch.dtype) -> dict[str, object]:
    """Every node's value when the captured graph runs under CPU autocast, as the user's
    eager code would compute it there."""
    with torch.autocast("cpu", dtype=autocast_dtype):
        return golden_values(captured, inputs, autocast_dtype)


def mixed_tolerance(want: torch.Tensor, fmt: str) -> tuple[float, float]:
    """(rtol, atol) of a mixed-precision node: MIXED_ULPS epsilons of its half format (fp32
    nodes of a mixed model too: their inputs carry half-format rounding) relative to each
    value and, as atol, to the node's largest finite magnitude: sums cancel, so an element's
    error scales with the terms that made it, not with its own size."""
    eps = EPSILON[fmt]
    return MIXED_ULPS * eps, MIXED_ULPS * eps * _largest_magnitude(want)


def fp32_tolerance(want: torch.Tensor) -> tuple[float, float]:
    """(rtol, atol) of an fp32 node: assert_close's, atol at least FP32_SCALE_ULPS fp32
    epsilons of the node's largest finite magnitude (a residual's 1e-5 is below one
    epsilon of a node whose values reach 100)."""
    rtol, atol = TOLERANCES[torch.float32]
    return rtol, max(atol, FP32_SCALE_ULPS * 2.0 ** -23 * _largest_magnitude(want))


def _largest_magnitude(want: torch.Tensor) -> float:
    """The largest finite |value| of a node (0 when none is finite): the scale its sums'
    roundings follow."""
    finite = want[torch.isfinite(want)]
    return float(finite.abs().max()) if finite.numel() else 0.0


def compare(got: torch.Tensor, want: torch.Tensor,
            tol: tuple[float, float] | None = None) -> tuple[float, float, float, bool]:
    got, want = got.to(torch.float64), want.to(torch.float64)
    rtol, atol = tol or TOLERANCES[torch.float32]
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
    # mixed precision: against eager autocast; a model of 16-bit tensors: against eager,
    # each node within its 16-bit format's epsilons as a mixed one
    half = cm.half_storage
    reference = golden
    if cm.half is not None and half.torch_dtype is not None:
        reference = autocast_values(cm.captured, ex.inputs, half.autocast_dtype)
    rows = []
    for node in cm.captured.graph.nodes:
        value = cm.lowered.env.get(node.name)
        want, want32 = reference.get(node.name), golden.get(node.name)
        if not isinstance(value, Ref) or not isinstance(want, torch.Tensor):
            continue
        if not want.dtype.is_floating_point:
            continue
        got = ex.value(value.index)
        if half is None:
            tol = fp32_tolerance(want.to(torch.float64))
            rows.append(NodeError(node.name, target_name(node), *compare(got, want, tol),
                                  source_line(node)))
            continue
        fmt = cm.formats.get(node.name, "f32")
        tol = mixed_tolerance(want.to(torch.float64), half.fabric)
        abs32, rel32, _, _ = compare(got, want32)
        rows.append(NodeError(node.name, target_name(node), *compare(got, want, tol),
                              source_line(node), fmt, abs32, rel32))
    cm.last_errors = {r.node: r for r in rows}
    bad = [r for r in rows if not r.ok]
    if bad and raise_on_mismatch:
        what = ("assert_close's fp32 tolerances (atol at least "
                f"{FP32_SCALE_ULPS} epsilons of the node's largest magnitude)" if half is None else
                f"{MIXED_ULPS} {half.name} epsilons of eager "
                f"{'' if cm.half is None else 'autocast ' if half.torch_dtype else 'fp32 '}"
                "PyTorch")
        raise ValidationError(f"simulated values differ from eager PyTorch beyond {what}:\n"
                              f"{table(bad)}")
    return rows


def table(rows: list[NodeError]) -> str:
    mixed = any(r.fp32_max_abs is not None for r in rows)
    head = f"{'node':28} {'op':32} {'max abs':>10} {'max rel':>10} {'pearson':>9}"
    lines = [head + (f" {'fmt':>4} {'abs fp32':>10} {'rel fp32':>10}" if mixed else "")
             + "  ok"]
    for r in rows:
        line = (f"{r.node:28} {r.op:32} {r.max_abs:10.3g} {r.max_rel:10.3g} "
                f"{r.pearson:9.6f}")
        if mixed:
            line += f" {r.fmt:>4} {r.fp32_max_abs:10.3g} {r.fp32_max_rel:10.3g}"
        lines.append(f"{line}  {'yes' if r.ok else 'NO'}")
    return "\n".join(lines)
