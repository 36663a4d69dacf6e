"""The `Fragment`: the instructions, registers, routes' colors and cycle model of a collective
inside a task, and how fragments chain.

Example:
    >>> red = reduce(prog, rect, "y", n, [4, 5], along="row", name="rd")
    >>> both = red.then(broadcast(prog, rect, "y", n, 6, along="row", name="bc"))
    >>> tile.local_task("main", list(both.code_for(part)))
    >>> prog.place(tile, part, params=both.params_for(part))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from fabric.program import Rect


@dataclasses.dataclass(frozen=True)
class Fragment:
    """Instructions a collective adds to a task, for every PE of `domain`.

    code: instructions and labels, the same on every PE (each branches on its registers).
    params: register -> int32 array (domain.rows, domain.cols) of initial values.
    domain: the rectangle whose PEs run `code`.
    colors: the colors the collective routes on.
    exit_times: exit_times(entry) -> array (domain shape): given the cycle at which each PE
        executes the first instruction of `code`, the cycle at which it executes the one
        after it (the cycle model).
    owners: per item of `code`, None (any PE may run it) or the tag of the role whose PEs
        alone run it; roles: per PE of the domain, the frozenset of its role tags. A tile
        placed on part of the domain takes `code_for(part)`, which leaves out the sections
        of roles absent there (so that no tile names a color none of its PEs routes).
    """

    code: tuple
    params: Mapping[str, np.ndarray]
    domain: Rect
    colors: tuple
    exit_times: Callable[[np.ndarray], np.ndarray]
    owners: tuple = ()
    roles: np.ndarray | None = None

    def _slice(self, rect: Rect):
        d = self.domain
        if not (d.contains(rect.row, rect.col) and d.contains(rect.row_end - 1,
                                                              rect.col_end - 1)):
            raise ValueError(f"{rect} is not inside the fragment's domain {d}")
        r0, c0 = rect.row - d.row, rect.col - d.col
        return slice(r0, r0 + rect.rows), slice(c0, c0 + rect.cols)

    def params_for(self, rect: Rect) -> dict[str, np.ndarray]:
        """The params of the PEs of `rect` (a part of the domain), for `Program.place`."""
        rows, cols = self._slice(rect)
        return {k: v[rows, cols] for k, v in self.params.items()}

    def code_for(self, rect: Rect) -> tuple:
        """`code` without the sections no PE of `rect` (a part of the domain) runs."""
        if self.roles is None:
            return self.code
        rows, cols = self._slice(rect)
        present = frozenset().union(*self.roles[rows, cols].ravel())
        return tuple(item for item, owner in zip(self.code, self.owners)
                     if owner is None or owner in present)

    def then(self, *others: Fragment) -> Fragment:
        """This fragment followed by `others` (same domain, distinct registers)."""
        code, params, colors = list(self.code), dict(self.params), list(self.colors)
        owners, roles = list(_owners(self)), _roles(self)
        models = [self.exit_times]
        for other in others:
            if other.domain != self.domain:
                raise ValueError(f"fragments on different domains: {self.domain} and "
                                 f"{other.domain}")
            clash = set(params) & set(other.params)
            if clash:
                raise ValueError(f"fragments share registers {sorted(clash)}: give them "
                                 "different names")
            code += other.code
            owners += _owners(other)
            roles = np.vectorize(frozenset.union, otypes=[object])(roles, _roles(other))
            params.update(other.params)
            colors += [c for c in other.colors if c not in colors]
            models.append(other.exit_times)

        def exit_times(entry):
            for model in models:
                entry = model(entry)
            return entry

        return Fragment(tuple(code), params, self.domain, tuple(colors), exit_times,
                        tuple(owners), roles)


def _owners(frag: Fragment) -> tuple:
    return frag.owners or (None,) * len(frag.code)


def _roles(frag: Fragment) -> np.ndarray:
    if frag.roles is not None:
        return frag.roles
    out = np.empty((frag.domain.rows, frag.domain.cols), object)
    for idx in np.ndindex(out.shape):
        out[idx] = frozenset()
    return out
