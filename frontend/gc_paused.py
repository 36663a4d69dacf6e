"""Compiling without the cyclic garbage collector's full passes.

A compile allocates hundreds of thousands of small objects that live as long as the
compiled model (the moves' routes, one per PE and flow; kernel tables; route trees). Each
full collection walks every tracked object of the process, torch's and JAX's included, and
a compile triggers several: about a fifth of the 1-layer GPT-2's compile on small(64, 64)
went there. Its garbage is freed by reference counts as it goes (it builds few cycles), so
the collector is paused for the compile and left as it was found afterwards.

    >>> with gc_paused():
    ...     compiled = CompiledModel(...)                    # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic cyclic collection off inside the block, back to its previous state (on or
    off) when it ends, normally or by an exception."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
