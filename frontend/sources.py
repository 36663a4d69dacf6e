"""Where an FX node came from: the user's source line, from the node's stack trace."""

from __future__ import annotations

import torch.fx


def source_line(node: torch.fx.Node) -> str:
    """The innermost `File "...", line N, in f` frame of the node's stack trace and its code
    line, or "<unknown source>" when the graph carries no trace."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            code = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith(
                "File ") else ""
            return f"{lines[i]}: {code}" if code else lines[i]
    return "<unknown source>"


def describe(node: torch.fx.Node) -> str:
    """`node <name> (<aten op>) at <source line>`."""
    return f"FX node {node.name!r} ({target_name(node)}) at {source_line(node)}"


def target_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None) or str(target)
    if hasattr(target, "_schema"):
        name = f"aten.{target._schema.name.split('::')[-1]}"
        overload = getattr(target, "_overloadname", "default")
        name = f"{name}.{overload}"
    return name
