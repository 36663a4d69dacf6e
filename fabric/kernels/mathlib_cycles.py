"""The cycle formulas of `mathlib`'s sequences: for each routine, the cycles of its
synchronous DSD ops over n elements with memory operands, sum of ceil(n / w_op) at each op's
SIMD width (`FabricConfig.simd_width`); `mathlib` re-exports them beside the routines."""

from __future__ import annotations

import math
from collections.abc import Sequence

from fabric.isa import SIMD_NAME, Op


def _width(config, op: Op) -> int:
    return config.simd_width(*SIMD_NAME[op])


def sequence_cycles(config, code: Sequence, n: int) -> int:
    """Cycles of a straight list of synchronous DSD ops over n elements with memory operands:
    sum of ceil(n / w) at each op's SIMD width."""
    return sum(math.ceil(n / _width(config, item.op)) for item in code)


def _cost(config, n: int, counts: dict) -> int:
    return sum(k * math.ceil(n / _width(config, op)) for op, k in counts.items())


def exp_cycles(config, n: int, upper_clamp: bool = True) -> int:
    """c(max) + c(min) + c(sub) + 4 c(fma) + 6 c(mul) + 5 c(add) + c(shl), with
    c(op) = ceil(n / w_op): 16 n on WSE-2 for even n. upper_clamp=False: the hi=None
    sequence, c(max) + c(sub) + 4 c(fma) + 5 c(mul) + 5 c(add) + c(shl) + c(iaddv): 15 n."""
    if not upper_clamp:
        return _cost(config, n, {Op.MAX: 1, Op.SUB: 1, Op.FMA: 4, Op.MUL: 5, Op.ADD: 5,
                                 Op.SHL: 1, Op.IADDV: 1})
    return _cost(config, n, {Op.MAX: 1, Op.MIN: 1, Op.SUB: 1, Op.FMA: 4, Op.MUL: 6,
                             Op.ADD: 5, Op.SHL: 1})


def sigmoid_cycles(config, n: int) -> int:
    """2 c(shl) + c(shr) + 2 c(isubv) + c(iaddv) + c(min) + c(max) + 4 c(fma) + 4 c(sub)
    + 13 c(mul) + 7 c(add) (the refined reciprocal included), c(op) = ceil(n / w_op):
    30.5 n on WSE-2 for even n."""
    return _cost(config, n, {Op.SHL: 2, Op.SHR: 1, Op.ISUBV: 2, Op.IADDV: 1, Op.MIN: 1,
                             Op.MAX: 1, Op.FMA: 4, Op.SUB: 4, Op.MUL: 13, Op.ADD: 7})


def gauss_tail_cycles(config, n: int, times_b: bool = False) -> int:
    """c(shr) + 2 c(shl) + c(isubv) + 5 c(sub) + 18 c(add) + 6 c(fma) + 24 c(mul)
    (+ c(mul) with times_b), c(op) = ceil(n / w_op): 45.5 n on WSE-2 for even n (46.5 n)."""
    return _cost(config, n, {Op.SHR: 1, Op.SHL: 2, Op.ISUBV: 1, Op.SUB: 5, Op.ADD: 18,
                             Op.FMA: 6, Op.MUL: 24 + int(times_b)})


def reciprocal_cycles(config, n: int, refined: bool = False, specials: bool = False) -> int:
    """c(isubv) + 6 c(mul) + 3 c(sub) (+ c(add) refined), c(op) = ceil(n / w_op); 8.5 n on
    WSE-2 for even n (9 n refined). specials: + 4 c(shl) + 5 c(shr) + 2 c(isubv)
    + 2 c(iaddv) + c(min) + c(max) + c(mul) + c(fma): 17 n more on WSE-2 (26 n)."""
    counts = {Op.ISUBV: 1 + 2 * specials, Op.MUL: 6 + specials, Op.SUB: 3,
              Op.ADD: int(refined)}
    if specials:
        counts.update({Op.SHL: 4, Op.SHR: 5, Op.IADDV: 2, Op.MIN: 1, Op.MAX: 1, Op.FMA: 1})
    return _cost(config, n, counts)


def rsqrt_cycles(config, n: int, specials: bool = False) -> int:
    """c(shr) + c(isubv) + 9 c(mul) + 3 c(fma), c(op) = ceil(n / w_op): 14 n on WSE-2 for
    even n. With specials, 2 c(shl) + 5 c(shr) + 2 c(isubv) + 2 c(iaddv) + 2 c(max)
    + 9 c(mul) + 3 c(fma): 25 n."""
    if not specials:
        return _cost(config, n, {Op.SHR: 1, Op.ISUBV: 1, Op.MUL: 9, Op.FMA: 3})
    return _cost(config, n, {Op.SHL: 2, Op.SHR: 5, Op.ISUBV: 2, Op.IADDV: 2, Op.MAX: 2,
                             Op.MUL: 9, Op.FMA: 3})


def sqrt_cycles(config, n: int) -> int:
    """2 c(shr) + c(iaddv) + c(isubv) + c(min) + c(max) + 10 c(mul) + 3 c(fma),
    c(op) = ceil(n / w_op): 19 n on WSE-2 for even n."""
    return _cost(config, n, {Op.SHR: 2, Op.IADDV: 1, Op.ISUBV: 1, Op.MIN: 1, Op.MAX: 1,
                             Op.MUL: 10, Op.FMA: 3})


def log_cycles(config, n: int) -> int:
    """15 c(shl/shr) + 12 c(iaddv/isubv) + 2 c(itof) + 2 c(sub) + 3 c(fma) + 9 c(mul)
    + 10 c(add) + c(min), c(op) = ceil(n / w_op); 48 n on WSE-2 for even n."""
    return _cost(config, n, {Op.SHL: 6, Op.SHR: 9, Op.IADDV: 8, Op.ISUBV: 4, Op.ITOF: 2,
                             Op.SUB: 2, Op.FMA: 3, Op.MUL: 9, Op.ADD: 10, Op.MIN: 1})


def log1p_cycles(config, n: int) -> int:
    """log_cycles + refined reciprocal_cycles + 2 c(min) + c(max) + 3 c(add) + 2 c(sub)
    + c(mul), c(op) = ceil(n / w_op); 47.5 n on WSE-2 for even n."""
    return (log_cycles(config, n) + reciprocal_cycles(config, n, refined=True)
            + _cost(config, n, {Op.MIN: 2, Op.MAX: 1, Op.ADD: 3, Op.SUB: 2, Op.MUL: 1}))


def tanh_cycles(config, n: int) -> int:
    """3 c(shl) + 2 c(shr) + c(min) + 4 c(fma) + 13 c(mul) + 6 c(sub) + 6 c(add)
    + 2 c(iaddv) + c(isubv) (reciprocal included), c(op) = ceil(n / w_op); 32 n on WSE-2
    for even n."""
    return _cost(config, n, {Op.SHL: 3, Op.SHR: 2, Op.MIN: 1, Op.FMA: 4, Op.MUL: 13,
                             Op.SUB: 6, Op.ADD: 6, Op.IADDV: 2, Op.ISUBV: 1})
