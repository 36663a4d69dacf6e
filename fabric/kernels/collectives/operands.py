"""The DSD operands of a collective's vector: memory and fabric operands whose length is an
int on every PE or a register holding each PE's own length.

Example:
    >>> length, reg, lengths = _length(16, domain)     # 16, None, array of 16s
    >>> op = ins.mov(_fout(color, length, reg), _mem("x", length, reg))
"""

from __future__ import annotations

import numpy as np

from fabric import instructions as ins
from fabric.program import Rect


def _length(n, domain: Rect):
    """(static length or None, register or None, per-PE lengths over domain)."""
    if isinstance(n, tuple):
        reg, values = n
        values = np.asarray(values, np.int64)
        if values.shape != (domain.rows, domain.cols):
            raise ValueError(f"lengths of register {reg!r} have shape {values.shape}, "
                             f"expected {(domain.rows, domain.cols)}")
        return None, reg, values
    n = int(n)
    if n < 1:
        raise ValueError(f"vector length must be >= 1, got {n}")
    return n, None, np.full((domain.rows, domain.cols), n, np.int64)


def _mem(buf: str, length, reg, offset: int = 0):
    return ins.Mem(buf, offset, length=length, length_reg=reg)


def _fin(color: int, length, reg):
    return ins.FabIn(color, length or 0, length_reg=reg)


def _fout(color: int, length, reg):
    return ins.FabOut(color, length or 0, length_reg=reg)
