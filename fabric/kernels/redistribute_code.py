"""DSD runs and chain code for `fabric.kernels.redistribute`.

A PE moves its words with as few DSD ops as it can: a sequence of word addresses is cut
into runs of constant stride (one 1D memory DSD each), and consecutive runs of equal length
and stride whose starts step by a constant are merged into one 2D DSD (rows). A local move
needs its source and destination to follow the same run structure, so both address
sequences are cut together.

A chain is a local task that issues its ops one at a time: each op's completion activates
the task again, which picks the next op with a binary search on a counter register
(start, ceil(log2 e) branches, the op, a jump, the counter increment, the return: about
5 + log2(e) main-thread cycles per op).

Example:
    >>> split_runs([(("x", a),) for a in (0, 3, 6, 1, 4, 7)])  # a 3 x 2 block, transposed
    [(Run(symbol='x', offset=0, length=6, stride=3, row_length=3, row_stride=1),)]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from fabric import instructions as ins


@dataclasses.dataclass(frozen=True)
class Run:
    """`length` words of `symbol`: element k at offset + (k % row_length) * stride +
    (k // row_length) * row_stride (1D when row_length is None)."""

    symbol: str
    offset: int
    length: int
    stride: int = 1
    row_length: int | None = None
    row_stride: int | None = None

    def mem(self) -> ins.Mem:
        return ins.Mem(self.symbol, self.offset, self.length, self.stride, self.row_length,
                       self.row_stride)

    def addresses(self) -> list[int]:
        rl = self.row_length or self.length
        rs = self.row_stride or 0
        return [self.offset + (k % rl) * self.stride + (k // rl) * rs for k in range(self.length)]

    def mov_cycles(self, simd: int) -> int:
        """Cycles of a memory-to-memory op over this run at SIMD width `simd` (groups never
        span a row end)."""
        rl = self.row_length or self.length
        w = min(simd, rl)
        if self.row_length is None:
            return math.ceil(self.length / w)
        return (self.length // rl) * math.ceil(rl / w)


Item = tuple  # per side: (symbol, address)


def split_runs(items: Sequence[Item]) -> list[tuple[Run, ...]]:
    """Cut a sequence of words (per element, one (symbol, address) per side) into runs that
    every side can move with one DSD of the same length and row structure. Strides are
    positive.

    Returns one tuple of Runs (one per side) per op, in sequence order."""
    if not items:
        return []
    sides = len(items[0])
    flat = _runs_1d(items, sides)
    merged = _merge_2d(items, flat, sides)
    out = []
    for start, n, strides, rows, row_strides in merged:
        first = items[start]
        two_d = rows > 1
        out.append(tuple(
            Run(first[s][0], first[s][1], n, strides[s], n // rows if two_d else None,
                row_strides[s] if two_d else None)
            for s in range(sides)))
    return out


def _runs_1d(items, sides):
    """Greedy maximal runs of one symbol and constant strides on every side, positive or 0:
    [(start index, length, strides)]."""
    runs, i, n = [], 0, len(items)
    while i < n:
        j, strides = i + 1, None
        while j < n:
            if any(items[j][s][0] != items[i][s][0] for s in range(sides)):
                break
            d = tuple(items[j][s][1] - items[j - 1][s][1] for s in range(sides))
            # a side of stride 0 reads one word again (a broadcast's source); a
            # destination's words differ, so it never repeats one
            if min(d) < 0 or (strides is not None and d != strides):
                break
            strides, j = d, j + 1
        runs.append((i, j - i, strides or (1,) * sides))
        i = j
    return runs


def _merge_2d(items, runs, sides):
    """Consecutive 1D runs of equal length (>= 2) and strides, one symbol per side, starts
    stepping by a constant row stride, positive or 0 (a side that repeats its rows): one 2D
    run.
    [(start index, elements, strides, rows, row strides)]."""
    out, i = [], 0
    while i < len(runs):
        start, n, strides = runs[i]
        rows, row_strides = 1, None
        j = i + 1
        while n >= 2 and j < len(runs):
            s2, n2, st2 = runs[j]
            if n2 != n or st2 != strides:
                break
            a, b = items[runs[j - 1][0]], items[s2]
            if any(a[s][0] != b[s][0] for s in range(sides)):
                break
            d = tuple(b[s][1] - a[s][1] for s in range(sides))
            if min(d) < 0 or (row_strides is not None and d != row_strides):
                break
            row_strides, rows, j = d, rows + 1, j + 1
        out.append((start, n * rows, strides, rows, row_strides))
        i = j
    return out


def chain_code(task: str, counter: str, ops: Sequence[Callable[[object], object]],
               then: Sequence = (), word: str | None = None) -> list:
    """The code of a chain task issuing ops[0], ops[1], ... one per activation. ops[i]
    (on_done) returns the async instruction (or a list: a synchronous op and the
    activation); all but the last reactivate `task`. With
    `then` (scalar instructions and labels), the last op reactivates it too, and that
    last activation runs `then` (e.g. `gate_code`: the chain says it has delivered).
    The register `counter` holds the activations so far; with `word` (a u32 symbol) they
    live in that word instead and `counter` is scratch, loaded at the start of each
    activation and stored at its end (two cycles more), so that every chain of a PE may
    share one register (tasks run one at a time on a CE: `fabric.merge.Part.shared`)."""
    # an op is one async instruction, or a list (a synchronous copy and its activation)
    steps = [lambda done, op=op: _listed(op(done)) for op in ops]
    if then:
        steps.append(lambda done: list(then))
    e = len(steps)
    if e == 1:
        return steps[0](None)
    again = ins.Activate(task)
    code: list = [ins.load(counter, ins.Mem(word, 0, 1))] if word else []

    def emit(lo, hi):
        if hi - lo == 1:
            code.extend([*steps[lo](again if lo < e - 1 else None), ins.jump("next")])
            return
        mid = (lo + hi) // 2
        code.append(ins.branch_if_less(counter, mid, f"b{lo}_{mid}"))
        emit(mid, hi)
        code.append(ins.label(f"b{lo}_{mid}"))
        emit(lo, mid)

    emit(0, e)
    code[-1] = ins.label("next")
    code.append(ins.iadd(counter, counter, 1))
    return code + ([ins.store(ins.Mem(word, 0, 1), ins.Reg(counter))] if word else [])


def _listed(code) -> list:
    return list(code) if isinstance(code, list) else [code]


def gate_code(register: str, wait: str, tasks: Sequence[str]) -> list:
    """Scalar code that counts one delivery into a PE's gate: the word `wait` (u32, the
    deliveries the PE still waits for) less one; the delivery that brings it to zero
    activates `tasks` (the consumer's entry tasks on that PE) before it writes the zero,
    so whoever reads a zero there knows they are activated. `register` is scratch (a
    chain's counter after its last op). Tasks run one at a time on a CE, so the read,
    decrement and write of `wait` are never interleaved with another chain's."""
    word = ins.Mem(wait, 0, 1)
    return [ins.load(register, word), ins.isub(register, register, 1),
            ins.branch_if_nonzero(register, "gate_shut"), *(ins.activate(t) for t in tasks),
            ins.label("gate_shut"), ins.store(word, ins.Reg(register))]


def chain_cycles(e: int, word: bool = False) -> int:
    """Main-thread cycles of one activation of a chain of e ops (see `chain_code`): start,
    the branches, the op, the jump, the increment and the return; with the counter in a
    word (`word`), its load and store too."""
    return 1 if e == 1 else 5 + math.ceil(math.log2(e)) + (2 if word else 0)
