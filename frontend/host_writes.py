"""What the host writes for a user input: each element once per PE, then copies on the PE.

A kernel's operand layout can hold one element in several slots of a PE (a convolution's
windows laid out as GEMM rows: an element of a 3 x 3 window's input in up to 9 slots) and
leave slots empty (the zero padding, a buffer wider than the operand). A host transfer
writes a run of words per PE (the SDK's memcpy: so many words into a symbol), so writing
the operand's layout as it is sends every duplicate and every gap over the host link.

Instead the host writes the packed map (`packed_map`): per PE and slot format, the
distinct elements its slots hold, in increasing order, one run; the PE's copies (a local
redistribution, `unpack_plan`: memory-to-memory ops, no route) then put each element into
its slots. ResNet's first convolution in the zoo: 2,400 words per PE written before
(the widest), 319 packed. Where packing saves no word the host writes the layout as is.

    packed symbols: PACKED + slot format ("packed_f32", "packed_bf16", ...), each
                    (rect.rows, rect.cols, most distinct elements on a PE)
"""

from __future__ import annotations

import numpy as np

from fabric import FabricConfig
from fabric.kernels import Redistribution, WordMap, plan_redistribution

PACKED = "packed_"  # prefix of a packed map's symbols, one per slot format


def packed_map(dst: WordMap) -> WordMap:
    """`dst`'s elements packed: on each PE, per slot format, the distinct elements its
    slots of that format hold, in increasing order from slot 0 (-1 past them)."""
    rows, cols = dst.rect.rows, dst.rect.cols
    symbols, dtypes = {}, {}
    for fmt in sorted(set(dst.dtypes.values())):
        slots = [a for k, a in dst.symbols.items() if dst.dtypes[k] == fmt]
        held = [[np.unique(np.concatenate([a[r, c] for a in slots]))
                 for c in range(cols)] for r in range(rows)]
        held = [[e[e >= 0] for e in row] for row in held]
        width = max(1, max(e.size for row in held for e in row))
        packed = np.full((rows, cols, width), -1, np.int64)
        for r in range(rows):
            for c in range(cols):
                packed[r, c, :held[r][c].size] = held[r][c]
        symbols[PACKED + fmt] = packed
        dtypes[PACKED + fmt] = fmt
    return WordMap(dst.shape, dst.rect, symbols, dtypes)


def unpack_plan(config: FabricConfig, dst: WordMap) -> Redistribution | None:
    """The local redistribution from `packed_map(dst)` into `dst`, when the packed map
    takes fewer words per PE than `dst`'s widest symbol (what a host write of `dst` as it
    is sends to every PE); None when it takes as many."""
    packed = packed_map(dst)
    if packed.widest_sram_words >= dst.widest_sram_words:
        return None
    plan = plan_redistribution(config, packed, dst)
    if plan.remote_words:
        raise AssertionError(f"unpacking {dst.shape} on {dst.rect} moves "
                             f"{plan.remote_words} words between PEs")
    return plan
