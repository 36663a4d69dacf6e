"""Per-role code of a fragment: the branches that send every PE of its domain to the section
of its role, and the register values and tags that name the roles.

Example:
    >>> order, params = _roles_params(roles, ["src", "recv", "idle"], "bc.role")
    >>> code, owners, timing = _dispatch("bc.role", [(r, bodies[r]) for r in order], "bc")
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins


def _dispatch(reg: str, sections: Sequence[tuple[str, list]], label: str):
    """Code running `sections[v]` on the PEs whose `reg` is v (v = 0, 1, ...).

    Returns (code, owners, timing): owners tags each section's instructions with
    f"{label}:{role}"; timing[role] = (before, after): instructions a PE of that role
    executes before its first DSD op (the branches) and after its last one.
    """
    end = f"{label}.end"
    if len(sections) == 1:
        role, body = sections[0]
        return list(body), [f"{label}:{role}"] * len(body), {role: (0, 0)}
    count = len(sections)
    code = [ins.branch_if_less(reg, v + 1, f"{label}.{v}") for v in range(count - 1)]
    owners = [None] * len(code)
    last_role, last_body = sections[-1]
    code += [*last_body, ins.jump(end)]
    owners += [f"{label}:{last_role}"] * len(last_body) + [None]
    timing = {last_role: (count - 1, 1)}
    for v in range(count - 1):
        role, body = sections[v]
        code += [ins.label(f"{label}.{v}"), *body]
        owners += [None] + [f"{label}:{role}"] * len(body)
        tail = v < count - 2
        if tail:
            code.append(ins.jump(end))
            owners.append(None)
        timing[role] = (v + 1, int(tail))
    code.append(ins.label(end))
    owners.append(None)
    return code, owners, timing


def _tags(roles: np.ndarray, label: str) -> np.ndarray:
    """Per PE, the frozenset of its role tag f"{label}:{role}"."""
    out = np.empty(roles.shape, object)
    for idx, role in np.ndenumerate(roles):
        out[idx] = frozenset([f"{label}:{role}"])
    return out


def _roles_params(grid_roles: np.ndarray, order: Sequence[str], reg: str):
    """Keep the roles of `order` that occur; return (kept order, {reg: values})."""
    present = [r for r in order if (grid_roles == r).any()]
    values = np.zeros(grid_roles.shape, np.int32)
    for v, role in enumerate(present):
        values[grid_roles == role] = v
    return present, {reg: values}
