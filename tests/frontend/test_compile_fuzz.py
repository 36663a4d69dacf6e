"""Fuzzing `frontend.compile` with random small graphs (hypothesis).

A graph is an nn.Module built from a menu, on one or two inputs of tiny shapes (1-D to 3-D,
dims of at most 5): Linear (with or without bias), relu, tanh, sigmoid, gelu (both forms),
neg, abs, log1p (of |x|), expm1, a scalar times / plus / minus / divided, a square; add,
sub, mul and div (x / (y * y + 1)) of two branches of one shape; layer_norm (with or
without affine) and softmax over the last dim; sum, mean and amax over the last dim
(keepdim or not); transpose of the last two dims, view (of a contiguous value) and reshape;
matmul of two activations (2-D or batched 3-D, a value times another or another's
transpose); cat and slices along the last dim. Each op takes any earlier value as input, so
graphs branch and join; the model returns every value no op reads (sometimes an earlier one
too). Now and then an op the lowering does not support (lgamma, digamma) is mixed in.

Properties, for every graph, compiled on `tests.frontend.models.CONFIG` (one compiled
engine for every frontend test):
- `frontend.compile` and the first call either raise `frontend.UnsupportedOpError` (counted
  in the hypothesis statistics) or succeed: any other exception fails the test;
- a graph with an unsupported op that reaches an output always raises UnsupportedOpError;
- `cm.validate(*inputs)` passes (every node within fp32 tolerances of eager PyTorch), and
  the outputs equal eager PyTorch's under `torch.testing.assert_close`'s fp32 tolerances.

30 graphs run by default (20 to 45 s on a shared 2-core CPU), 150 under `-m long`;
`--hypothesis-show-statistics` shows the ops covered and how many were unsupported.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import frontend
from tests.frontend.models import CONFIG

MAX_DIM = 5
UNARY = ("relu", "tanh", "gelu", "neg", "square", "sigmoid", "gelu_erf", "abs", "log1p",
         "expm1")
SCALAR = ("scale", "shift", "rsub", "div")
BINARY = ("add", "sub", "mul", "div_by")
REDUCE = ("sum", "mean", "amax")
UNSUPPORTED = ("lgamma", "digamma")


@dataclasses.dataclass(frozen=True)
class Node:
    """op applied to earlier values `args` (indices: the inputs first, then the nodes)."""

    op: str
    args: tuple
    param: object = None


@dataclasses.dataclass
class Graph:
    inputs: list  # shapes
    nodes: list
    outputs: tuple  # value indices
    seed: int

    def live(self) -> list:
        """The nodes some output depends on."""
        need = set(self.outputs)
        first = len(self.inputs)
        for i in range(len(self.nodes) - 1, -1, -1):
            if first + i in need:
                need.update(self.nodes[i].args)
        return [n for i, n in enumerate(self.nodes) if first + i in need]

    def describe(self) -> str:
        names = [f"x{i}" for i in range(len(self.inputs))]
        lines = [f"inputs {self.inputs}"]
        for i, n in enumerate(self.nodes):
            names.append(f"v{i}")
            args = ", ".join(names[a] for a in n.args)
            lines.append(f"v{i} = {n.op}({args}{'' if n.param is None else f', {n.param}'})")
        lines.append("return " + ", ".join(names[o] for o in self.outputs))
        return "\n".join(lines)


# ---- the module ---------------------------------------------------------------------------
class GraphModel(torch.nn.Module):
    """Runs a `Graph`: Linear and LayerNorm nodes own submodules."""

    def __init__(self, graph: Graph, shapes: list):
        super().__init__()
        self.graph = graph
        torch.manual_seed(graph.seed)
        mods = {}
        for i, n in enumerate(graph.nodes):
            if n.op == "linear":
                out, bias = n.param
                mods[f"n{i}"] = torch.nn.Linear(shapes[n.args[0]][-1], out, bias=bias)
            elif n.op == "layer_norm":
                ln = torch.nn.LayerNorm(shapes[n.args[0]][-1], elementwise_affine=n.param)
                if n.param:
                    with torch.no_grad():
                        ln.weight.uniform_(0.5, 1.5)
                        ln.bias.uniform_(-0.5, 0.5)
                mods[f"n{i}"] = ln
        self.mods = torch.nn.ModuleDict(mods)

    def forward(self, *inputs):
        vals = list(inputs)
        for i, n in enumerate(self.graph.nodes):
            vals.append(self._apply(i, n, [vals[a] for a in n.args]))
        outs = tuple(vals[o] for o in self.graph.outputs)
        return outs[0] if len(outs) == 1 else outs

    def _apply(self, i, n: Node, a):
        op, p = n.op, n.param
        if op in ("linear", "layer_norm"):
            return self.mods[f"n{i}"](a[0])
        unary = {"relu": torch.relu, "tanh": torch.tanh, "neg": torch.neg,
                 "gelu": lambda v: F.gelu(v, approximate="tanh"), "square": lambda v: v ** 2,
                 "softmax": lambda v: torch.softmax(v, -1),
                 "transpose": lambda v: v.transpose(-1, -2),
                 "sigmoid": torch.sigmoid, "abs": torch.abs, "gelu_erf": F.gelu,
                 "log1p": lambda v: torch.log1p(v.abs()), "expm1": torch.expm1,
                 "lgamma": torch.lgamma, "digamma": torch.digamma}
        if op in unary:
            return unary[op](a[0])
        if op in SCALAR:
            return {"scale": lambda v: v * p, "shift": lambda v: v + p,
                    "rsub": lambda v: p - v, "div": lambda v: v / p}[op](a[0])
        if op in BINARY:
            if op == "div_by":  # by a runtime tensor kept away from zero
                return a[0] / (a[1] * a[1] + 1)
            return {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op](a[0], a[1])
        if op in REDUCE:
            fn = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax}[op]
            return fn(a[0], -1, keepdim=p)
        if op == "view":
            return a[0].view(p)
        if op == "reshape":
            return a[0].reshape(p)
        if op == "matmul":
            return a[0] @ (a[1].transpose(-1, -2) if p else a[1])
        if op == "cat":
            return torch.cat(a, -1)
        if op == "slice":
            return a[0][..., p[0]:p[1]]
        raise ValueError(op)


# ---- the strategy -------------------------------------------------------------------------
shapes_st = st.lists(st.integers(1, MAX_DIM), min_size=1, max_size=3).map(tuple)


def _reshapes(shape) -> list:
    """Other shapes of the same elements: merged or split dims, a leading 1 added/dropped."""
    n = math.prod(shape)
    out = set()
    if len(shape) >= 2:
        out.add((*shape[:-2], shape[-2] * shape[-1]))
        out.add((shape[0] * shape[1], *shape[2:]))
    if len(shape) < 3:
        out.add((1, *shape))
        for d in range(2, shape[-1]):
            if shape[-1] % d == 0:
                out.add((*shape[:-1], d, shape[-1] // d))
    if len(shape) >= 2 and shape[0] == 1:
        out.add(shape[1:])
    out.add((n,))
    out.discard(tuple(shape))
    return sorted(s for s in out if all(0 < d <= 4 * MAX_DIM for d in s))


def _pick(draw, candidates: list) -> int:
    """An index among candidates, the later (more recent) ones more likely."""
    k = draw(st.integers(0, len(candidates) - 1))
    j = draw(st.integers(0, len(candidates) - 1))
    return candidates[max(k, j)]


@st.composite
def graphs(draw):
    inputs = draw(st.lists(shapes_st, min_size=1, max_size=2))
    shapes = list(inputs)
    contiguous = [True] * len(inputs)
    nodes = []
    # 1 to 6 nodes, drawn from a list led by 4: hypothesis favours a range's lowest value
    for _ in range(draw(st.sampled_from((4, 3, 5, 2, 6, 1)))):
        x = _pick(draw, list(range(len(shapes))))
        s = shapes[x]
        same = [j for j in range(len(shapes)) if shapes[j] == s and j != x]
        cat_with = [j for j in range(len(shapes)) if shapes[j][:-1] == s[:-1]]
        groups = {  # the ops that apply to x by family: a family is drawn first, then an op
            "products": ["linear"] + (["matmul"] if len(s) >= 2 else []),
            "rows": ["softmax"] + (["layer_norm"] if s[-1] >= 2 else []),
            "binary": list(BINARY),
            "unary": list(UNARY),
            "scalar": list(SCALAR),
            "reduce": list(REDUCE),
            "layout": (["reshape"] + (["view"] if contiguous[x] else [])
                       + (["transpose"] if len(s) >= 2 else [])
                       + (["slice"] if s[-1] >= 2 else [])
                       + (["cat"] if s[-1] + min(shapes[j][-1] for j in cat_with)
                          <= 2 * MAX_DIM else [])),
        }
        ops = groups[draw(st.sampled_from(sorted(groups)))]
        if draw(st.integers(0, 19)) == 7:  # not an end value: hypothesis favours those
            ops = list(UNSUPPORTED)
        op = draw(st.sampled_from(ops))
        args, param, contig = (x,), None, True
        if op == "linear":
            param = (draw(st.integers(1, 6)), draw(st.booleans()))
            out = (*s[:-1], param[0])
        elif op in UNARY or op in UNSUPPORTED or op == "softmax":
            out = s
        elif op in SCALAR:
            param = draw(st.sampled_from((0.5, -1.5, 2.0, 3.0, -0.25)))
            out = s
        elif op == "layer_norm":
            param = draw(st.booleans())
            out = s
        elif op in BINARY:
            y = _pick(draw, same) if same and draw(st.integers(0, 3)) else x
            args, out = (x, y), s
        elif op in REDUCE:
            keep = draw(st.booleans()) if len(s) >= 2 else True
            param, out = keep, (*s[:-1], 1) if keep else s[:-1]
        elif op == "transpose":
            out, contig = (*s[:-2], s[-1], s[-2]), False
        elif op in ("view", "reshape"):
            options = _reshapes(s)
            if not options:
                op, options = "reshape", [s]
            out = draw(st.sampled_from(options))
            param = out
        elif op == "matmul":
            # x (.., m, k) @ y (.., k, n), or x @ y^T with y (.., n, k)
            partners = [(j, False) for j in range(len(shapes))
                        if len(shapes[j]) == len(s) and shapes[j][:-2] == s[:-2]
                        and shapes[j][-2] == s[-1]]
            partners += [(j, True) for j in range(len(shapes))
                         if len(shapes[j]) == len(s) and shapes[j][:-2] == s[:-2]
                         and shapes[j][-1] == s[-1]]
            y, transposed = draw(st.sampled_from(partners))
            ys = shapes[y]
            args, param = (x, y), transposed
            out = (*s[:-1], ys[-2] if transposed else ys[-1])
        elif op == "cat":
            y = draw(st.sampled_from(cat_with))
            args, out = (x, y), (*s[:-1], s[-1] + shapes[y][-1])
        elif op == "slice":
            lo = draw(st.integers(0, s[-1] - 1))
            hi = draw(st.integers(lo + 1, s[-1]))
            param, out = (lo, hi), (*s[:-1], hi - lo)
            contig = contiguous[x] and (len(s) == 1 or hi - lo == s[-1])
        nodes.append(Node(op, args, param))
        shapes.append(tuple(out))
        contiguous.append(contig)
    # every node no other node reads is an output, so no node is dead code; a graph whose
    # last node is its only leaf sometimes returns an earlier value too
    read = {a for n in nodes for a in n.args}
    outputs = tuple(j for j in range(len(inputs), len(shapes)) if j not in read)
    earlier = [j for j in range(len(inputs), len(shapes)) if j not in outputs]
    if earlier and len(outputs) == 1 and draw(st.integers(0, 3)) == 0:
        outputs = (draw(st.sampled_from(earlier)), *outputs)
    graph = Graph(inputs, nodes, outputs, draw(st.integers(0, 2**31 - 1)))
    note(graph.describe())
    return graph, shapes


# ---- the property ---------------------------------------------------------------------------
def check_graph(graph: Graph, shapes: list) -> str:
    """Compile, run and compare one graph; returns "ran" or "unsupported"."""
    model = GraphModel(graph, shapes).eval()
    gen = torch.Generator().manual_seed(graph.seed)
    inputs = tuple(torch.randn(s, generator=gen) for s in graph.inputs)
    with torch.no_grad():
        want = model(*inputs)
    live = graph.live()  # torch.export drops the others
    has_unsupported = any(n.op in UNSUPPORTED for n in live)
    try:
        cm = frontend.compile(model, inputs, config=CONFIG)
        rows = cm.validate(*inputs)  # runs it; raises ValidationError on a node off
    except frontend.UnsupportedOpError as err:
        event("unsupported: " + ("menu op" if has_unsupported else "supported-menu graph"))
        note(f"UnsupportedOpError: {err}")
        return "unsupported"
    assert not has_unsupported, "an unsupported op compiled and ran"
    assert rows and all(r.ok for r in rows)
    torch.testing.assert_close(cm.outputs(), want)
    for n in live:
        event(f"op {n.op}")
    return "ran"


SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=30, **SETTINGS)
@given(graphs())
def test_random_graphs_compile_and_match_eager(case):
    event(check_graph(*case))


@pytest.mark.long
@settings(max_examples=150, **SETTINGS)
@given(graphs())
def test_random_graphs_compile_and_match_eager_long(case):
    event(check_graph(*case))
