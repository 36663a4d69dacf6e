"""Runs of a merged program (`fabric.merge_programs`) that stop when what a host watching
its parts would see changes.

A host that starts parts as others finish (a model program's stream) looks at the fabric
every `poll` cycles: where each part has work (`fabric.PartMap.work`) and a few words of
memory (a gated kernel's gates, counted down by its deliveries). Most looks find what the
last one found, a kernel still running where it ran, and change nothing. `run_watched`
runs the engine in steps of `poll` cycles and, after each, computes on the device what a
look would read; it goes on while that is what the run started with, and stops at the
first step where it differs, at `max_cycles`, or where `fabric.engine.run` would stop
(quiet, an error, a deadlock). A host that calls it instead of looking after every `poll`
cycles sees the same states at the same cycles where anything changed, so it takes the
same decisions at the same cycles; it skips only the looks that would have found nothing
new (a host whose decisions depend on the cycle itself, as a transfer on the host link
ending, passes that cycle as `max_cycles`).

What a look reads (`Watch`, `work_bits`): per PE, the parts with work on its CE (a task
of theirs running or activated, an asynchronous op on one of their colors or issued by one
of their tasks), the parts with work anywhere (those, or wavelets of one of their colors
held in a router buffer or CE queue) and the watched words; the rules of
`fabric.part_report`, in jax.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int32, UInt32

from fabric import queues
from fabric.engine import pending, should_continue, step
from fabric.state import CLS_FABIN, CLS_FABOUT, O_CLS, O_COLOR, S_A, S_B, S_DST, S_TASK

MIN_PARTS = 32  # part and word counts are padded to powers of two from these:
MIN_WORDS = 64  # fewer compiles


class Watch(NamedTuple):
    """What `run_watched` compares after each step, as device arrays.

    task_parts: the index of the part of each task id at each PE (-1: none).
    owners: the index of the part whose color k is at each PE (-1: none).
    defined: the task ids each PE's program defines (bits).
    word_rows, word_cols, word_addresses: the watched words (padded entries masked).
    """

    task_parts: Int32[Array, "R C T"]
    owners: Int32[Array, "R C K"]
    defined: UInt32[Array, "R C"]
    word_rows: Int32[Array, " W"]
    word_cols: Int32[Array, " W"]
    word_addresses: Int32[Array, " W"]
    word_valid: Bool[Array, " W"]


def make_watch(task_parts: np.ndarray, owners: np.ndarray, defined: np.ndarray,
               words: list[tuple[int, int, int]]) -> tuple[Watch, int]:
    """(the Watch of numpy maps and watched words (row, col, address), its padded part
    count): word lists are padded to a power of two, so programs of similar sizes share a
    compiled run."""
    parts = max(MIN_PARTS, 1 << int(max(int(task_parts.max(initial=-1)),
                                        int(owners.max(initial=-1)), 0)).bit_length())
    size = max(MIN_WORDS, 1 << max(len(words) - 1, 0).bit_length())
    padded = list(words) + [(0, 0, 0)] * (size - len(words))
    rows, cols, addresses = (np.asarray([w[i] for w in padded], np.int32) for i in range(3))
    valid = np.arange(size) < len(words)
    return Watch(jnp.asarray(task_parts, jnp.int32), jnp.asarray(owners, jnp.int32),
                 jnp.asarray(defined, jnp.uint32), jnp.asarray(rows), jnp.asarray(cols),
                 jnp.asarray(addresses), jnp.asarray(valid)), parts


def _bitmap(index, parts: int):
    """bool [N, parts] of part indices [N, F] (-1: none): which parts each row names."""
    n = index.shape[0]
    column = jnp.where(index < 0, parts, index)
    rows = jnp.broadcast_to(jnp.arange(n)[:, None], column.shape)
    return jnp.zeros((n, parts + 1), bool).at[rows, column].set(True)[:, :parts]


def _bits(word, n: int):
    """bool [R, C, n]: bits 0 .. n - 1 of a uint32 [R, C] word."""
    return (jnp.right_shift(word[..., None], jnp.arange(n, dtype=jnp.uint32)[None, None])
            & 1) != 0


def work_bits(watch: Watch, state, parts: int):
    """(bool [R * C, parts]: the parts with work on each PE's CE, bool [parts]: the parts
    with work anywhere) of `state` (module docstring)."""
    R, C = state.pc.shape
    task_parts, owners = watch.task_parts, watch.owners
    T, K = task_parts.shape[2], owners.shape[2]

    def pick(table, index):  # table[r, c, index[r, c, ...]]
        return jnp.take_along_axis(table, index.astype(jnp.int32), axis=2)

    found = [jnp.where(state.pc >= 0, pick(task_parts, jnp.maximum(state.task, 0)[..., None])
                       [..., 0], -1)[..., None]]
    found.append(jnp.where(_bits(state.activated & watch.defined, T), task_parts, -1))
    active = state.slot_active != 0
    fabric = jnp.zeros(active.shape, bool)
    for start in (S_DST, S_A, S_B):
        cls = state.slots[..., start + O_CLS]
        uses = active & ((cls == CLS_FABIN) | (cls == CLS_FABOUT))
        fabric = fabric | uses
        color = jnp.clip(state.slots[..., start + O_COLOR], 0, K - 1)
        found.append(jnp.where(uses, pick(owners, color), -1))
    issuer = jnp.clip(state.slots[..., S_TASK], 0, T - 1)
    found.append(jnp.where(active & ~fabric, pick(task_parts, issuer), -1))
    on_ce = _bitmap(jnp.concatenate(found, axis=2).reshape(R * C, -1), parts)
    held = _bits(queues.nonempty(state.rq_ctl) | queues.nonempty(state.iq_ctl), K)
    waiting = _bitmap(jnp.where(held, owners, -1).reshape(1, -1), parts)[0]
    return on_ce, on_ce.any(axis=0) | waiting


def watched_words(watch: Watch, state):
    """uint32 [W]: the watched words of `state`'s SRAM (PE-minor: rows, words, cols); 0
    where padded."""
    words = state.sram[watch.word_rows, watch.word_addresses, watch.word_cols]
    return jnp.where(watch.word_valid, words, jnp.uint32(0))


def look(watch: Watch, state, parts: int):
    """(on CE, anywhere, words): what a host's look reads (module docstring)."""
    return (*work_bits(watch, state, parts), watched_words(watch, state))


look_now = jax.jit(look, static_argnums=2)


@functools.partial(jax.jit, static_argnums=(0, 5, 6, 7), donate_argnums=2)
def run_watched(config, tables, state, max_cycles, watch: Watch, poll: int, parts: int,
                half_ops: bool = True):
    """Step in runs of `poll` cycles until a look (`look`) differs from the state's at the
    call, `max_cycles` (absolute) is reached, or `fabric.engine.run` would stop; returns
    (state, its look, its status as `fabric.host` reads it: a PE in error, work left,
    idle cycles, the cycle). The first step is taken whatever the look: a host calls after
    changing something (a launch) that the look at the call may not show."""
    first = look(watch, state, parts)

    def run_to(st, end):
        return jax.lax.while_loop(lambda s: should_continue(config, tables, s, end),
                                  lambda s: step(config, tables, s, half_ops), st)

    def body(carry):
        st, _, _ = carry
        st = run_to(st, jnp.minimum(st.cycle + poll, max_cycles))
        seen = look(watch, st, parts)
        same = jnp.all(jnp.stack([jnp.array_equal(a, b) for a, b in zip(seen, first)]))
        return st, ~same, seen

    def go_on(carry):
        st, changed, _ = carry
        return ~changed & should_continue(config, tables, st, max_cycles)

    state, _, seen = jax.lax.while_loop(go_on, body, (state, jnp.bool_(False), first))
    status = (jnp.any(state.error != 0), pending(tables, state), state.idle_cycles,
              state.cycle)
    return state, seen, status
