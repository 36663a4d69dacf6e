"""The lowering driver: walks the ATen graph, folds constants, applies a rule per op and
collects the stages.

A rule is `rule(low: Lowering, node, *args, **kwargs) -> value` where FX-node arguments
arrive as values (`Const`, `Ref`, or what an earlier rule returned); it returns a value (or a
tuple of values for multi-output ops). Rules live in small files by op family and register
with `@rule(aten.op.overload, ...)`.

An op may have several rules: at most one general rule (`@rule(op)`) and any number of case
rules (`@rule(op, case=pred)`, `pred(low, node, *args, **kwargs) -> bool` with the rule's
arguments), each taking the nodes its predicate accepts (a runtime embedding table, an index
predicate, ...). A node goes to the case rule that accepts it, else to the general rule. The
cases of an op exclude each other (a node two cases accept is an error naming both), so the
order in which files register never matters; an op whose cases all decline and that has no
general rule raises the same UnsupportedOpError as an unknown op. A case that builds on the
general rule calls that function by name (`norms.layer_norm`).

Symbolic values that stand for a computable tensor (a comparison kept symbolic so that a
rule can fuse it) register how to compute it with `@materializer(Type)`; `Lowering.operand`
and the graph's outputs use that where a kernel input or a model output needs the tensor.

The table is assembled in one place, `families`, which imports every rule module (each
registers its rules as it runs); the package imports `families`, so the table is whole
before anything here can be called.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable

import numpy as np
import torch
import torch.fx

from frontend.capture import Captured
from frontend.errors import UnsupportedOpError
from frontend.integer_ranges import integer_nodes
from frontend.sources import describe, target_name
from frontend.stages import Limits, Operand, Stage
from frontend.values import Const, Gather, IndexRange, Ref, Symbolic, Tensor

# how an embedding by an integer input's indices (token ids) is looked up:
# "gather": the rows the indices pick move per call from a resident copy of the table
#     (routes the host plans per call: cheap, but no static program holds them);
# "onehot": on the fabric, as a one-hot product (tokens x vocab x (dim + 1) multiply-adds,
#     exact in fp32; `lowering.embedding`), static, so one fabric program holds it
LOOKUPS = ("gather", "onehot")
# SUMMA's fmas down C's columns ("rows", m / R elements each) or, where the model predicts
# fewer cycles on the tile, along its rows ("auto": C^T = B^T A^T; the same words)
GEMM_ORIENTATIONS = ("rows", "auto")


def _one_of(setting: str, value: str, choices: tuple[str, ...]) -> str:
    """`value` if it is one of `choices`; else a ValueError naming the `setting`."""
    if value not in choices:
        raise ValueError(f"{setting} must be one of {list(choices)}, got {value!r}")
    return value


def check_gemm_orientation(orientation: str) -> str:
    return _one_of("gemm_orientation", orientation, GEMM_ORIENTATIONS)


# how a product with expert weights picked per token by computed indices runs: each
# token's picked weights ("picked") or every expert's weights, a mask keeping each token's
# own ("dense": one GEMM, what one fabric program holds; `experts`)
EXPERTS = ("picked", "dense")


def check_experts(experts: str) -> str:
    return _one_of("experts", experts, EXPERTS)


def check_lookups(lookups: str) -> str:
    return _one_of("lookups", lookups, LOOKUPS)


@dataclasses.dataclass
class OpRules:
    """The rules of one ATen overload: `general` (or None) and the `cases`, pairs
    (predicate, rule) whose predicates exclude each other."""

    general: Callable | None = None
    cases: list[tuple[Callable, Callable]] = dataclasses.field(default_factory=list)

    def pick(self, low: Lowering, node: torch.fx.Node, args, kwargs) -> Callable | None:
        """The rule for `node`: the case whose predicate accepts it, else the general rule
        (None when there is none)."""
        taken = [fn for case, fn in self.cases if case(low, node, *args, **kwargs)]
        if len(taken) > 1:
            raise RuntimeError(f"{describe(node)}: rules {', '.join(map(_qualname, taken))} "
                               f"all accept this node; the cases of {target_name(node)} "
                               "must exclude each other")
        return taken[0] if taken else self.general


RULES: dict[object, OpRules] = {}


def rule(*targets, case: Callable | None = None):
    """Register `fn` as the general rule of ATen overloads `targets`, or with `case` as the
    rule of the nodes `case(low, node, *args, **kwargs)` accepts (module docstring)."""

    def wrap(fn):
        for t in targets:
            rules = RULES.setdefault(t, OpRules())
            if case is not None:
                rules.cases.append((case, fn))
            elif rules.general is not None and rules.general is not fn:
                raise ValueError(f"{_name(t)} has a general rule already "
                                 f"({_qualname(rules.general)}), so {_qualname(fn)} needs a "
                                 "case= predicate")
            else:
                rules.general = fn
        return fn

    return wrap


# Symbolic values with a runtime form: type -> fn(low, value) -> Ref (`materializer`)
MATERIALIZERS: dict[type, Callable] = {}


def materializer(*types):
    """Register fn(low, value) -> Ref as the computation on the fabric of the Symbolic
    values of `types` (a comparison's 0/1 mask), used where a kernel input or a model output
    needs one (`Lowering.operand`, the graph's outputs)."""

    def wrap(fn):
        for t in types:
            MATERIALIZERS[t] = fn
        return fn

    return wrap


# fn(low, ref) -> Ref: an integer input's int32 words as fp32 numbers (`Lowering.operand`)
INT_WORDS_AS_NUMBERS: list[Callable] = []


def int_words_converter(fn):
    """Register fn(low, ref) -> Ref, the stage that reads an integer input's int32 words as
    numbers (exact below 2^24), which `Lowering.operand` puts before every kernel input
    that would otherwise read those words as fp32 bit patterns."""
    INT_WORDS_AS_NUMBERS[:] = [fn]
    return fn


def supported_ops() -> list[str]:
    return sorted({_name(t) for t in RULES})


def _qualname(fn: Callable) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _name(target) -> str:
    if hasattr(target, "_schema"):
        return f"aten.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


class Unavailable:
    """A secondary output the lowering does not compute (layernorm's mean, pooling indices):
    using it is an error naming the node."""

    def __init__(self, what: str):
        self.what = what


@dataclasses.dataclass
class Lowered:
    captured: Captured
    stages: list[Stage]
    tensors: dict[str, Tensor]  # by name: user inputs and stage outputs
    env: dict[str, object]  # FX node name -> value
    outputs: list[object]  # the graph's output values, flattened
    # the integer inputs' indices lookups on the fabric read, checked before every call
    index_ranges: list[IndexRange] = dataclasses.field(default_factory=list)
    # assertions on integer inputs (`asserts.InputAssertion`), checked before every call
    input_assertions: list = dataclasses.field(default_factory=list)
    # the nodes the host evaluates from integer inputs before every call
    # (`frontend.integer_ranges`)
    integer_nodes: list = dataclasses.field(default_factory=list)


class Lowering:
    """State of one lowering: the global element space and the stages made so far."""

    def __init__(self, captured: Captured, formats: dict[str, str] | None = None,
                 gemm_parts: Callable[[int, int, int], int] | None = None,
                 lookups: str = "gather", gemm_orientation: str = "rows",
                 experts: str = "picked"):
        self.captured = captured
        self.lookups = check_lookups(lookups)
        self.experts = check_experts(experts)
        # which way SUMMA tiles run their fmas (`fabric.kernels.build_gemm_summa`)
        self.gemm_orientation = check_gemm_orientation(gemm_orientation)
        self.index_ranges: list[IndexRange] = []
        self.input_assertions: list = []  # `asserts.InputAssertion`
        self.formats = dict(formats or {})  # node name -> fabric format (absent: "f32")
        # (m, k, n) -> tiles a GEMM's output columns spread over (`frontend.gemm_split`);
        # None: one tile each
        self.gemm_parts = gemm_parts
        self.stages: list[Stage] = []
        self.tensors: dict[str, Tensor] = {}
        self.next_base = 0
        self.node: torch.fx.Node | None = None
        # values several nodes' rules compute alike, made once (a router's one-hot mask,
        # `experts`): a key naming what and of which elements -> the value
        self.shared: dict[tuple, object] = {}

    # ---- the global element space --------------------------------------------------------
    def new_tensor(self, name: str, shape, kind: str) -> Tensor:
        t = Tensor(name, self.next_base, tuple(int(s) for s in shape), kind)
        self.next_base += t.numel
        self.tensors[name] = t
        return t

    def owner(self, gid: int) -> Tensor:
        for t in self.tensors.values():
            if t.base <= gid < t.base + t.numel:
                return t
        raise KeyError(gid)

    # ---- stages ----------------------------------------------------------------------------
    @property
    def format(self) -> str:
        """The fabric format of the current node's kernels ("f32", or the half format of
        mixed precision): their inputs and output in it, computing in fp32."""
        return self.formats.get(self.node.name, "f32")

    def stage(self, kind: str, shape, build, operands: list[Operand], work: int,
              limits: Limits, fmas: int = 0, words_per_element: int = 3,
              suffix: str = "") -> Ref:
        """Add a stage producing a tensor of `shape` (its kernel's output shape); returns
        the Ref of that tensor. `build(cfg, rect, dtype=, acc_dtype=)` makes its kernel in
        the node's format."""
        node = self.node
        fmt = {} if self.format == "f32" else {"dtype": self.format, "acc_dtype": "f32"}
        name, i = f"{node.name}{suffix}", 1
        while name in self.tensors:  # a rule may add several stages of one kind
            name, i = f"{node.name}{suffix}_{i}", i + 1
        tensor = self.new_tensor(name, shape, "stage")
        self.stages.append(Stage(name, node, kind, tensor,
                                 lambda cfg, rect: build(cfg, rect, **fmt), operands,
                                 int(work), limits, int(fmas), words_per_element,
                                 self.format))
        return tensor.ref()

    def int_words(self, x: Ref) -> bool:
        """True when x's elements are int32 words: elements of a bool or integer user input
        (the host writes those as integers), whatever dtype a rule gave x; False for float
        inputs and computed values (fp32 words, integer-valued or not). A tensor mixing
        both is refused."""
        ids = x.index.reshape(-1)
        ids = ids[ids >= 0]
        if not ids.numel():
            return False
        first = self.owner(int(ids.min()))
        owners = ([first] if int(ids.max()) < first.base + first.numel
                  else [t for t in self.tensors.values()
                        if bool(t.owns(ids).any())])
        flags = {t.kind == "input" and not self._input_dtype(t.name).is_floating_point
                 for t in owners}
        if len(flags) > 1:
            raise self.unsupported("a tensor mixing an integer input with computed values")
        return flags == {True}

    def _input_dtype(self, name: str) -> torch.dtype:
        node = next(n for n in self.captured.graph.find_nodes(op="placeholder")
                    if n.name == name)
        return node.meta["val"].dtype

    def operand(self, name: str, value, shape, int_words: bool = False) -> Operand:
        """Kernel input `name` of `shape` from a value (its elements in C order).
        int_words: the kernel reads an integer input's int32 words as such (a comparison of
        integers, a select's condition, the conversion itself); otherwise such words are
        first converted to numbers (`int_words_converter`), as eager promotes an integer
        tensor in arithmetic with floats."""
        shape = tuple(int(s) for s in shape)
        if isinstance(value, Ref) and not int_words and self.int_words(value):
            value = INT_WORDS_AS_NUMBERS[0](self, value)
        if isinstance(value, Const):
            v = value.value.detach().to(torch.float32).reshape(shape)
            return Operand(name, shape, const=v.numpy().astype(np.float32))
        if isinstance(value, Gather):
            return Operand(name, shape, gather=value)
        if isinstance(value, Ref):
            return Operand(name, shape, index=value.index.reshape(shape))
        if type(value) in MATERIALIZERS:
            return self.operand(name, self.materialized(value), shape)
        if isinstance(value, (Unavailable, Symbolic)):  # not computed on the fabric
            raise self.unsupported(f"an input that is {value.what} (not computed on the "
                                   "fabric)")
        raise self.unsupported(f"an input of type {type(value).__name__}")

    def materialized(self, value):
        """`value` with a Symbolic one that has a runtime form (a comparison's 0/1 mask,
        `materializer`) computed as a Ref; any other value as it is."""
        if type(value) in MATERIALIZERS:
            return MATERIALIZERS[type(value)](self, value)
        return value

    def unsupported(self, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{describe(self.node)}: {what} is not supported")


def lower(captured: Captured, formats: dict[str, str] | None = None,
          gemm_parts: Callable[[int, int, int], int] | None = None,
          lookups: str = "gather", gemm_orientation: str = "rows",
          experts: str = "picked") -> Lowered:
    """Lower every node; `formats` gives the nodes that run in a 16-bit format (mixed
    precision, `frontend.amp.node_formats`); `gemm_parts` how many tiles each GEMM's
    output columns spread over (`frontend.gemm_split.column_parts`; None: one); `lookups`
    how an embedding by an integer input's indices is looked up (`LOOKUPS`); `experts` how
    a product with expert weights picked by computed indices runs (`EXPERTS`)."""
    low = Lowering(captured, formats, gemm_parts, lookups, gemm_orientation, experts)
    env: dict[str, object] = {}
    outputs: list[object] = []
    checked = integer_nodes(captured.graph, captured.user_inputs, captured.constants)
    host = host_only(checked)
    for node in captured.graph.nodes:
        low.node = node
        if node.name in host:
            env[node.name] = Unavailable("a value only the host's checks use")
        elif node.op == "placeholder":
            if node.name in captured.constants:
                env[node.name] = Const(captured.constants[node.name])
            elif node.name in captured.fixed_inputs:  # None or a number, fixed by export
                env[node.name] = captured.fixed_inputs[node.name]
            else:
                val = node.meta.get("val")
                env[node.name] = low.new_tensor(node.name, tuple(val.shape), "input").ref()
                env[node.name].dtype = val.dtype
        elif node.op == "call_function":
            env[node.name] = _call(low, node, env)
        elif node.op == "output":
            outputs = _flatten_outputs(low, node.args[0], env, node)
        else:
            raise UnsupportedOpError(f"{describe(node)}: FX op {node.op!r} is not supported")
    return Lowered(captured, low.stages, low.tensors, env, outputs, low.index_ranges,
                   low.input_assertions, checked)


def host_only(checked: list[torch.fx.Node]) -> set[str]:
    """Of the nodes the host evaluates before every call (`checked`, in graph order:
    `frontend.integer_ranges.integer_nodes`), those that only its checks use (a number
    read from an integer tensor, `.item()`, its comparisons and the assertions on them, and
    what feeds nothing else): they get no stage."""
    only: set[str] = set()
    for node in reversed(checked):  # users before the values they use
        if all(u.name in only for u in node.users) and (
                node.users or node.target is torch.ops.aten._assert_scalar.default):
            only.add(node.name)
    return only


def _flatten_outputs(low: Lowering, args, env, node) -> list:
    flat, _ = torch.utils._pytree.tree_flatten(args)
    out = []
    for a in flat:
        v = _value(a, env, node)
        if type(v) in MATERIALIZERS:  # a comparison's mask: computed as its node's
            low.node = a
            v = low.materialized(v)
        if isinstance(v, Symbolic):  # a value rules only consume (a mask, pooling indices)
            raise UnsupportedOpError(f"{describe(a)}: {type(v).__name__} is not computed on "
                                     "the fabric, so it cannot be a model output")
        out.append(v)
    return out


def _value(a, env, node):
    if isinstance(a, torch.fx.Node):
        v = env[a.name]
        if isinstance(v, Unavailable):
            raise UnsupportedOpError(f"{describe(a)}: {v.what} is not computed on the fabric "
                                     f"(used by {node.name!r})")
        return v
    if isinstance(a, (list, tuple)):
        return type(a)(_value(x, env, node) for x in a)
    return a


def _call(low: Lowering, node: torch.fx.Node, env):
    args = _value(node.args, env, node)
    kwargs = {k: _value(v, env, node) for k, v in node.kwargs.items()}
    if node.target is operator.getitem:
        seq, i = args
        if isinstance(seq, Const):
            return Const(seq.value[i])
        return seq[i]
    flat, _ = torch.utils._pytree.tree_flatten((args, kwargs))
    if not any(isinstance(a, (Ref, Gather, Symbolic)) for a in flat):
        if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
            # folded, one draw would stand for every call (dropout's mask in training mode)
            raise UnsupportedOpError(
                f"{describe(node)}: random op {target_name(node)} is not supported (a "
                "constant would repeat one draw on every call); for dropout, call "
                "model.eval() before compiling")
        return _fold(node, args, kwargs)
    # a rule by name: an op of a library that registers it once imported (transformers')
    rules = RULES.get(node.target) or RULES.get(str(node.target))
    fn = rules.pick(low, node, args, kwargs) if rules is not None else None
    if fn is None:
        hint = TRAINING_MODE_OPS.get(target_name(node))
        if hint is not None:
            raise UnsupportedOpError(f"{describe(node)}: {hint} in training mode: call "
                                     "model.eval() before compiling (training on the fabric: "
                                     "frontend.Trainer)")
        raise UnsupportedOpError(
            f"{describe(node)}: ATen op {target_name(node)} has no lowering to the fabric.\n"
            f"Supported ops: {', '.join(supported_ops())}")
    return fn(low, node, *args, **kwargs)


# ops that only a module left in training mode puts in an inference graph: {op: what}
TRAINING_MODE_OPS = {
    "aten.native_dropout.default": "dropout",
    "aten._native_batch_norm_legit_functional.default": "batch norm",
    "aten._native_batch_norm_legit.default": "batch norm",
    "aten.native_batch_norm.default": "batch norm",
}


def _fold(node, args, kwargs):
    """Evaluate an op whose inputs are all known at compile time (constant folding)."""

    def unwrap(a):
        if isinstance(a, Const):
            return a.value
        if isinstance(a, (list, tuple)):
            return type(a)(unwrap(x) for x in a)
        return a

    out = node.target(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()})
    if isinstance(out, (tuple, list)):
        return tuple(Const(o) if isinstance(o, torch.Tensor) else o for o in out)
    return Const(out) if isinstance(out, torch.Tensor) else out
