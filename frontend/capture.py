"""Capture: a torch.nn.Module (or a GraphModule from torch.compile) to a core-ATen FX graph
with its constants (parameters, buffers, lifted tensors) apart from the user's inputs.

`torch.export.export(...).run_decompositions()` gives the core ATen graph; its placeholders
are the parameters, buffers and constants first, then the user's inputs (in the graph
signature's order).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import sys
import warnings
from collections.abc import Sequence

import torch
import torch.fx

from frontend.errors import FrontendError, UnsupportedOpError
from frontend.sources import describe


@dataclasses.dataclass
class Captured:
    """graph_module: the ATen graph; constants: placeholder name -> tensor (parameters,
    buffers, lifted constants); user_inputs: placeholder names of the user's input tensors,
    in call order; out_spec: the pytree spec of the model's outputs (to rebuild the structure)."""

    graph_module: torch.fx.GraphModule
    constants: dict[str, torch.Tensor]
    user_inputs: list[str]
    out_spec: object
    # {buffer name: the output node of its new value}: buffers the model updates in place
    # (the graph returns them before its outputs), refused once the lowering has run
    # (`refuse_buffer_updates`; the lowering refuses the usual ones with a better message)
    buffer_updates: dict[str, str] = dataclasses.field(default_factory=dict)
    # {placeholder name: value}: inputs given as other than tensors (None for an optional
    # argument, a number), which export fixes in the graph; a call must pass the same
    fixed_inputs: dict[str, object] = dataclasses.field(default_factory=dict)
    # every input's placeholder name in call order, tensors and fixed ones (default: the
    # tensors, `user_inputs`)
    call_order: list[str] = dataclasses.field(default_factory=list)
    # the parameters among `buffer_updates`' names, and whether the model was captured in
    # training mode (what `refuse_buffer_updates` advises)
    updated_parameters: frozenset[str] = frozenset()
    training: bool = False

    def __post_init__(self):
        self.call_order = self.call_order or list(self.user_inputs)

    def refuse_buffer_updates(self) -> None:
        """Raises FrontendError naming every buffer the model updates in place."""
        if self.buffer_updates:
            nodes = {n.name: n for n in self.graph.nodes}
            listed = "; ".join(f"{name!r} by {describe(nodes[node])}"
                               for name, node in self.buffer_updates.items())
            params = [n for n in self.buffer_updates if n in self.updated_parameters]
            what = ("parameters" if len(params) == len(self.buffer_updates) else
                    "buffers and parameters" if params else "buffers")
            advice = ("put the model in eval mode if it updates them in training only, or "
                      "return the new value instead" if self.training else
                      "the model is in eval mode, so its forward makes the update on every "
                      "call or on the first (a rescale of its weights): make it before "
                      "compiling, or return the new value instead")
            raise FrontendError(f"the model updates its {what} in place ({listed}): a "
                                "compiled model computes outputs from fixed weights and "
                                f"buffers; {advice}")

    @property
    def graph(self) -> torch.fx.Graph:
        return self.graph_module.graph


class _DropRecords(logging.Filter):
    """Drops the records logged with one message template."""

    def __init__(self, template: str):
        super().__init__()
        self.template = template

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != self.template


@contextlib.contextmanager
def torch_internals_quiet():
    """Inside the block, silence what torch prints about its own code that a user of the
    frontend can do nothing about; a user's warnings (from their model's forward, say) and
    torch's other messages pass as before. Each is matched narrowly:

    - the FutureWarning "`isinstance(treespec, LeafSpec)` is deprecated" (torch 2.13),
      attributed to copyreg or torch: export's `run_decompositions` deep-copies pytree specs
      and each LeafSpec rebuilt warns, on every call;
    - the UserWarning "The tensor attributes self.rnn._flat_weights[...] were assigned
      during export" (attributed to contextlib): nn.LSTM and nn.GRU keep their weights in a
      list that export re-assigns; the user's module registers them as it should;
    - the ERROR log "failed while attempting to run meta for <op>" of
      torch._subclasses.fake_tensor, with the traceback of an exception that tracing then
      raises anyway (a model whose shapes do not match its inputs): the frontend's error
      carries its message, the log printed 150 lines before it.
    """
    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")
    meta_failed = _DropRecords("failed while attempting to run meta for %s")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is "
                                r"deprecated", category=FutureWarning,
                                module=r"(copyreg|torch\..*)$")
        warnings.filterwarnings("ignore", message=r"The tensor attributes .*_flat_weights\[",
                                category=UserWarning, module=r"(contextlib|torch\..*)$")
        fake_tensor_log.addFilter(meta_failed)
        try:
            yield
        finally:
            fake_tensor_log.removeFilter(meta_failed)


def capture_module(model: torch.nn.Module, example_inputs: Sequence) -> Captured:
    """Export `model` on `example_inputs` and decompose it to core ATen."""
    example_inputs = tuple(example_inputs)
    was_training = model.training
    with torch_internals_quiet():
        # export prints the graph it had traced to stderr when it fails (hundreds of lines
        # above its message): kept on the error instead, `partial_graph`
        printed = io.StringIO()
        try:
            with contextlib.redirect_stderr(printed):
                exported = torch.export.export(model, example_inputs)
        except Exception as exc:  # export's own message says what it could not trace
            partial = getattr(exc, "partial_fx_graph", None)
            error = FrontendError(
                f"torch.export could not capture {type(model).__name__}: "
                f"{type(exc).__name__}: {exc}" + (
                    "" if partial is None else
                    f"\n(the {len(str(partial).splitlines())} lines of the graph export had "
                    "traced: this error's `partial_graph`)"))
            error.partial_graph = partial
            raise error from exc
        else:
            sys.stderr.write(printed.getvalue())  # what a successful export printed
        finally:
            model.train(was_training)
        before = exported.graph
        traces = _user_traces(before)
        try:
            exported = exported.run_decompositions()
        except Exception as exc:  # a decomposition that needs data (take's indices, say)
            raise FrontendError(f"torch.export could not capture {type(model).__name__} in "
                                f"core ATen ops: {type(exc).__name__}: {exc}") from exc
        _restore_traces(exported.graph, before, traces)
    captured = from_exported(exported)
    captured.training = was_training
    return captured


def _user_traces(graph: torch.fx.Graph) -> dict[str, str]:
    """{node name: the stack trace in the user's code} of export's graph before its
    decompositions; a node of a context's subgraph (torch.no_grad(), autocast: a higher
    order op without a trace of its own) takes its first user's."""
    traces = {}
    for node in graph.nodes:
        trace = node.meta.get("stack_trace") or next(
            (u.meta["stack_trace"] for u in node.users if u.meta.get("stack_trace")), None)
        if trace:
            traces[node.name] = trace
    return traces


def _restore_traces(graph: torch.fx.Graph, graph_before: torch.fx.Graph,
                    traces: dict[str, str]) -> None:
    """Give the user's stack trace back to the decomposed nodes that carry only the
    generated code of a context's subgraph (`File "<eval_with_key>..."`), found through
    their provenance (`from_node`) in `graph_before`, the graph before the decompositions
    (`_user_traces`: its nodes' traces), so that errors name the user's line (a weight
    rescaled under torch.no_grad())."""
    for node in graph.nodes:
        trace = node.meta.get("stack_trace")
        if node.op != "call_function" or (trace and "<eval_with_key>" not in trace):
            continue
        sources = node.meta.get("from_node") or []
        while sources:
            found = next((traces[s.name] for s in sources if s.graph_id == id(graph_before)
                          and s.name in traces and "<eval_with_key>" not in traces[s.name]),
                         None)
            if found:
                node.meta["stack_trace"] = found
                break
            sources = [p for s in sources for p in (getattr(s, "from_node", None) or [])]


def from_exported(exported) -> Captured:
    sig = exported.graph_signature
    state = exported.state_dict
    lifted = dict(exported.constants)
    constants: dict[str, torch.Tensor] = {}
    nodes = {n.name: n for n in exported.graph_module.graph.nodes}
    users: list[str] = []
    fixed: dict[str, object] = {}
    order: list[str] = []
    placeholders: dict[str, str] = {}  # {parameter or buffer: its placeholder's name}
    for spec in sig.input_specs:
        name = spec.arg.name
        kind = spec.kind.name
        if kind == "USER_INPUT":
            order.append(name)
            if isinstance(spec.arg, torch.export.graph_signature.ConstantArgument):
                fixed[name] = spec.arg.value
            else:
                users.append(name)
        elif kind in ("PARAMETER", "BUFFER"):
            placeholders[spec.target] = name
            constants[name] = state[spec.target].detach() if spec.target in state \
                else lifted[spec.target].detach()
        elif kind in ("CONSTANT_TENSOR", "CUSTOM_OBJ"):
            value = lifted[spec.target]
            if not isinstance(value, torch.Tensor):  # a Generator made in forward, say
                user = next(iter(nodes[name].users), None)
                raise FrontendError(
                    f"the model's graph holds a {type(value).__name__} object as a constant "
                    f"(used by {describe(user) if user else name}): only tensors, numbers "
                    "and None can be constants of a compiled model")
            constants[name] = value.detach()
        elif kind == "TOKEN":  # an op with a side effect, ordered by export's tokens
            raise UnsupportedOpError(_effectful(nodes[name]))
        else:
            raise FrontendError(f"input {name!r} of kind {kind} is not supported")
    updates, parameters = {}, set()
    kept = []  # the positions of the graph's outputs that stay outputs
    for position, spec in enumerate(sig.output_specs):
        kind = spec.kind.name
        if kind == "USER_INPUT_MUTATION":
            raise FrontendError(
                f"the model changes its input {spec.target!r} in place "
                f"({describe(nodes[spec.arg.name])}): a compiled model returns its outputs "
                "and leaves its inputs as they were; use the out-of-place op or clone the "
                "input first")
        if kind in ("BUFFER_MUTATION", "PARAMETER_MUTATION"):
            if placeholders.get(spec.target) == spec.arg.name:
                # a buffer assigned its own value (CTRL's `self.pos_encoding =
                # self.pos_encoding.to(dtype)` of the dtype it has) is no update
                continue
            updates[spec.target] = spec.arg.name
            if kind == "PARAMETER_MUTATION":
                parameters.add(spec.target)
        kept.append(position)
    if len(kept) < len(sig.output_specs):  # those assignments leave the graph's outputs
        output = next(n for n in exported.graph_module.graph.nodes if n.op == "output")
        output.args = (tuple(output.args[0][k] for k in kept),)
    _empty_as_zeros(exported.graph_module.graph)
    exported.graph_module.recompile()
    return Captured(exported.graph_module, constants, users, exported.call_spec.out_spec,
                    updates, fixed, order, frozenset(parameters))


# core ATen's tensors of unspecified values, each op's size its first argument
EMPTY = (torch.ops.aten.empty.memory_format, torch.ops.aten.empty_permuted.default,
         torch.ops.aten.empty_strided.default)


def _empty_as_zeros(graph: torch.fx.Graph) -> None:
    """An empty tensor's values are whatever memory held, read only where the model wrote
    them first (DeepSeek-V3's query heads, `new_empty` then two slice assignments; a
    router's inverse order): zeros, one of the values it may hold, so that the golden
    values, the constants folded at compile time and the host's integer checks all see
    the same numbers in the places no write reaches."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target in EMPTY:
            kwargs = {k: v for k, v in node.kwargs.items() if k != "memory_format"}
            node.target = torch.ops.aten.zeros.default
            node.args = (node.args[0],)
            node.kwargs = kwargs


def from_graph_module(gm: torch.fx.GraphModule, example_inputs: Sequence) -> Captured:
    """The torch.compile path: dynamo hands a GraphModule whose placeholders are the user's
    inputs (parameters are attributes); it is exported and decomposed like a module."""
    return capture_module(gm, example_inputs)


def _effectful(token: torch.fx.Node) -> str:
    """The refusal of a graph whose ops have side effects (torch.export threads them on
    effect tokens, `with_effects(token, op, ...)`): the first such op and its node."""
    user = next((u for u in token.users if u.op == "call_function"), None)
    op = user.args[1] if user is not None and len(user.args) > 1 else None
    where = describe(user) if user is not None else f"input {token.name!r}"
    return (f"{where} runs {getattr(op, '__name__', op)!s}, an op with a side effect "
            "(ordered by torch.export's effect tokens: linalg's error checks of an inverse "
            "or a solve, a print); ops with side effects are not supported")
