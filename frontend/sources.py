"""Where an FX node came from: the user's source line, from the node's stack trace."""

from __future__ import annotations

import os
import re

import torch
import torch.fx

TORCH_DIR = os.path.dirname(torch.__file__)  # frames in here are torch's, not the user's


def source_line(node: torch.fx.Node) -> str:
    """Where the node comes from in the user's code: the innermost `File "...", line N, in
    f` frame of the node's stack trace outside torch, with its code line; when the op itself
    sits in torch (a library module such as nn.SiLU), that frame follows in parentheses.
    "<unknown source>" when the graph carries no trace."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    frames = []  # (frame line, code line or "")
    for i, line in enumerate(lines):
        if line.startswith("File "):
            code = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith(
                "File ") else ""
            frames.append((line, code))
    if not frames:
        return "<unknown source>"
    user = [f for f in frames if not _in_torch(f[0])]
    where = user[-1] if user else frames[-1]
    text = f"{where[0]}: {where[1]}" if where[1] else where[0]
    if where is not frames[-1]:
        inner = frames[-1]
        text += f" (in torch: {inner[0]}: {inner[1]})" if inner[1] else f" (in {inner[0]})"
    return text


def _in_torch(frame: str) -> bool:
    match = re.match(r'File "([^"]+)"', frame)
    return bool(match) and os.path.abspath(match.group(1)).startswith(TORCH_DIR + os.sep)


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
