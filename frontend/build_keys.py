"""What a stage's kernel is built from, as a key: stages of equal keys build equal kernels
on equal tiles, so a compile weighs (`kernel_fit`) and probes (`frontend.runtime`) each
distinct kernel once. A model repeats its kernels: the 1-layer GPT-2's 67 pipelined stages
(a GEMM's column blocks, the elementwise ops over each) build 19 distinct ones.

A stage's `build` is a closure of the lowering (`frontend.lowering`); its key is its code
with the values it closes over and its defaults, nested closures followed. Values are
keyed by content where that is plain data (numbers, strings, None, tuples, frozensets and
dicts of them) and by identity where they are functions without closures of their own
(a numpy ufunc, a module's function: the same object builds the same). Anything else
(an array, a tensor, an object of the lowering) makes the key None: that stage shares
nothing, and is weighed and probed alone as before.

    >>> def stage(n, op=np.add):
    ...     return lambda cfg, rect: build_map(cfg, rect, n, op)
    >>> build_key(stage(4)) == build_key(stage(4)), build_key(stage(4)) == build_key(stage(8))
    (True, False)
    >>> build_key(stage(np.ones(4))) is None  # an array: no key
    True
"""

from __future__ import annotations

import collections
import types
from collections.abc import Hashable

import numpy as np

MAX_DEPTH = 8  # nested closures followed at most
_PLAIN = (bool, int, float, complex, str, bytes, type(None))


class _Unkeyable(Exception):
    """A value the key cannot stand for."""


def build_key(build) -> Hashable | None:
    """The key of `build` (module docstring); None where it has none."""
    try:
        return _key(build, 0)
    except _Unkeyable:
        return None


def _key(value, depth: int) -> Hashable:
    if depth > MAX_DEPTH:
        raise _Unkeyable
    if isinstance(value, _PLAIN):
        return type(value), value  # 1 and 1.0 and True apart
    if isinstance(value, tuple):
        return "tuple", tuple(_key(v, depth + 1) for v in value)
    if isinstance(value, frozenset):
        return "frozenset", frozenset(_key(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return "dict", tuple((_key(k, depth + 1), _key(v, depth + 1))
                             for k, v in value.items())
    if isinstance(value, types.FunctionType):
        cells = tuple(_key(c.cell_contents, depth + 1) for c in value.__closure__ or ())
        defaults = _key(value.__defaults__, depth + 1) if value.__defaults__ else None
        kw = _key(value.__kwdefaults__, depth + 1) if value.__kwdefaults__ else None
        return "code", value.__code__, cells, defaults, kw
    if isinstance(value, (types.BuiltinFunctionType, np.ufunc)):
        return "same", value
    raise _Unkeyable


_SHARED: list[Shared] = []


def clear_shared() -> None:
    """Forget what every `Shared` map holds: a timing of a compile then sees a first
    compile's work."""
    for shared in _SHARED:
        shared.clear()


class Shared:
    """A bounded map of what stages of equal keys share (least recently used dropped):
    compiles in one process reuse it, `clear_shared` forgets it."""

    def __init__(self, size: int):
        self.size = size
        self._items: collections.OrderedDict = collections.OrderedDict()
        _SHARED.append(self)

    def get(self, key: Hashable):
        """The value kept for `key`, or None."""
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: Hashable, value) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()
