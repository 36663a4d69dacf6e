"""Integers a model computes from its integer inputs, kept within what fp32 words carry
exactly: checked by the host before every call.

An integer input reaches the fabric as int32 words, and every kernel that computes with
integers (CANINE's hashes ((id + 1) * prime) % buckets, RoBERTa's position ids, BART's
shifted tokens) holds them as fp32 numbers, exact while their magnitude stays within
2^24. The inputs themselves are checked (`check_integer_input`); what the model
computes from them is checked here: the graph's nodes that depend only on integer inputs
and constants, with integer or bool values (`integer_nodes`), are evaluated on the host in
int64 (index-sized tensors, a few torch ops per call), and a value beyond 2^24 raises
IntegerRangeError naming the FX node, its source line and the value, where the fabric would
otherwise carry on with a rounded number. Nodes fed by a float value (an argmax) are left
out: the host does not compute floats.

The same evaluation holds a model's checks of its integer inputs: a number read from such
a tensor (`.item()`, `_local_scalar_dense`), comparisons and arithmetic of those numbers,
and the assertion export writes for them (`_assert_scalar`: XLM's `assert
lengths.max().item() <= slen`, the lengths counted from its token ids) are evaluated before
every call, and a call that breaks one raises RuntimeError naming the FX node and the
user's line, as the exported program does; the fabric never sees them
(`lowering.core.host_only`)."""

from __future__ import annotations

import torch

from frontend.errors import IntegerRangeError
from frontend.sources import describe

INTEGER_LIMIT = 2 ** 24  # fp32 words hold every integer of magnitude up to this exactly


def _integral(value) -> bool:
    return isinstance(value, torch.Tensor) and not value.dtype.is_floating_point \
        and not value.dtype.is_complex


def _host_scalar(node: torch.fx.Node) -> bool:
    """A number or truth value the host computes (an `.item()` of an integer tensor, a
    comparison or sum of such numbers) or an assertion on one."""
    if node.target is torch.ops.aten._assert_scalar.default:
        return True
    return isinstance(node.meta.get("val"), (int, bool, torch.SymInt, torch.SymBool))


def integer_nodes(graph: torch.fx.Graph, inputs: list[str],
                  constants: dict[str, torch.Tensor]) -> list[torch.fx.Node]:
    """The call_function nodes, in graph order, whose tensor arguments are integer or bool
    user inputs (`inputs`: placeholder names), constants or such nodes, and whose value is
    an integer or bool tensor, or a number read from one (module docstring)."""
    known = {n for n in graph.find_nodes(op="placeholder")
             if (n.target in inputs and _integral(n.meta.get("val")))
             or n.target in constants}
    picked = []
    for node in graph.nodes:
        if node.op != "call_function" or not (_integral(node.meta.get("val"))
                                               or _host_scalar(node)):
            continue
        if all(arg in known for arg in node.all_input_nodes):
            known.add(node)
            picked.append(node)
    return picked


def check_integer_nodes(nodes: list[torch.fx.Node], inputs: dict[str, torch.Tensor],
                        constants: dict[str, torch.Tensor]) -> None:
    """Evaluates `nodes` (`integer_nodes`) on a call's inputs; raises IntegerRangeError at
    the first integer value beyond 2^24 in magnitude, RuntimeError at the first assertion
    that fails."""
    env: dict[torch.fx.Node, object] = {}

    def value(arg):
        if arg in env:
            return env[arg]
        return inputs[arg.target] if arg.target in inputs else constants[arg.target]

    for node in nodes:
        args = torch.fx.node.map_arg(node.args, value)
        kwargs = torch.fx.node.map_arg(node.kwargs, value)
        if node.target is torch.ops.aten._assert_scalar.default:
            if not args[0]:
                raise RuntimeError(f"{describe(node)}: {args[1]} (this call's inputs break "
                                   "the model's assertion)")
            continue
        out = env[node] = node.target(*args, **kwargs)
        if not _integral(out) or out.dtype == torch.bool or not out.numel():
            continue
        big = out.to(torch.int64).abs() > INTEGER_LIMIT
        if bool(big.any()):
            at = tuple(int(i) for i in big.nonzero()[0])
            raise IntegerRangeError(
                f"{describe(node)}: computes {int(out[at])} at {at} from this call's inputs; "
                f"the fabric carries integers as fp32 numbers, exact within +-2^24 "
                f"({INTEGER_LIMIT}), so it would go on with a rounded value")


def check_integer_input(name: str, value: torch.Tensor) -> None:
    """An integer input is written as int32 words and read as fp32 numbers by any kernel
    that computes with it: refuse values those cannot hold exactly, rather than round them."""
    if value.dtype.is_floating_point or value.dtype == torch.bool or not value.numel():
        return
    # in int64: a uint8 or int16 tensor compared with 2^24 would wrap the bound to 0
    big = value.to(torch.int64).abs() > INTEGER_LIMIT
    if bool(big.any()):
        at = tuple(int(i) for i in big.nonzero()[0])
        raise IntegerRangeError(f"input {name!r} holds {int(value[at])} at {at}: integer "
                                f"inputs must lie within +-2^24 ({INTEGER_LIMIT}), which the "
                                "fabric carries exactly")
