"""What a stage's kernel is built from, as a key: stages of equal keys build equal kernels
on equal tiles, so a compile weighs (`kernel_fit`) and probes (`frontend.runtime`) each
distinct kernel once (within `shared_builds`: one compile). A model repeats its kernels:
the 1-layer GPT-2's 67 pipelined stages (a GEMM's column blocks, the elementwise ops over
each) build 19 distinct ones.

A stage's `build` is a closure of the lowering (`frontend.lowering`); its key is its code
with the values it closes over and its defaults, nested closures followed. Values are
keyed by content where that is plain data (numbers, strings, None, tuples, frozensets and
dicts of them), functions by their own code and closure, builtins and numpy ufuncs by
identity. Anything else (an array, a tensor, a list, an object of the lowering) makes the
key None: that stage shares nothing, and is weighed and probed alone. What the code reads
from its module (a builder, a setting such as `tile_shapes.SUMMA_BANK_AWARE`) is not in the
key: it holds within one compile, which is as long as anything is shared.

    >>> def stage(n, scale=0.5):
    ...     return lambda cfg, rect: build_map(cfg, rect, n, n, "mul", scale)
    >>> build_key(stage(4)) == build_key(stage(4)), build_key(stage(4)) == build_key(stage(8))
    (True, False)
    >>> build_key(stage(4, np.ones(4))) is None  # an array: no key
    True
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from collections.abc import Callable, Hashable, Iterator
from typing import TypeVar

import numpy as np

T = TypeVar("T")
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


_SCOPE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("shared_builds",
                                                                   default=None)


@contextlib.contextmanager
def shared_builds() -> Iterator[None]:
    """Inside the block (one compile, `frontend.compiled.compiling`), stages of equal keys
    share what `shared` maps hold; they are forgotten when it ends, so a setting changed
    between two compiles (a module's constant a build reads) is never met stale. Per
    thread and task (a context variable)."""
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def shared(kind: str) -> dict | None:
    """The current `shared_builds` block's map for `kind` ("fits", "probes": key -> what
    stages of that key share); None outside a block, where nothing is shared."""
    scope = _SCOPE.get()
    return None if scope is None else scope.setdefault(kind, {})


def alike(kind: str, build_key: Hashable | None, rest: tuple, make: Callable[[], T]) -> T:
    """`make()` once for every stage of `build_key` asking with `rest` (the tile, the
    grid ...) in the current `shared_builds` block, its result kept under `kind`; made
    afresh outside a block or for a stage without a key."""
    found = shared(kind)
    if found is None or build_key is None:
        return make()
    key = (build_key, *rest)
    if key not in found:
        found[key] = make()
    return found[key]
