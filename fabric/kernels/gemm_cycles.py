"""The cycle model of the GEMM tile (`gemm_common`), shared by `gemm_summa` and
`gemm_cannon`: what each task of the tile costs as the engine runs it (one cycle to start a
task, one per instruction, `docs/engine.md`), and how a step's tasks combine.

Every time here is a PE's clock: an int array over the rectangle's PEs (shape (R, Cc)),
the cycle at which that PE's comm task (or advance) can start next. A kernel's model runs
main, comm group 0, then per step its chains and comm group t + 1 (`step_end`), passing the
clocks of the PEs that exchange panels to `received`; the kernel ends at the latest PE's
last advance (`finish_cycles`).

A step as the engine runs it (from advance's start to the next advance's start):

    advance (ADVANCE_CYCLES) restarts the chains and activates comm, whose task id is above
    the chains': the CE starts comm only in a cycle no chain is ready. Two chains hand the
    fmas on back to back as long as an fma (ceil(Mb / w) datapath cycles) ends within the
    other chain's task, so for ceil(Mb / w) <= CHAIN_CYCLES the CE never idles during the
    step's fmas and comm group t + 1 starts after the chains' exits; it runs one op at a
    time, each dispatched by a comm run (`dispatched`: COMM_DISPATCH_CYCLES + the op's
    index) and waiting for its partner (`received`, `sent`), then closes
    (GROUP_CLOSE_CYCLES). The main thread's path:

        paced = ADVANCE_CYCLES + kb Nb CHAIN_CYCLES + kb WRAP_CYCLES + FIN_CYCLES
                + comm group t + 1 (dispatch, wavelets and waits of each op, close)

    (one chain, Nb = 1: kb CHAIN_CYCLES + SOLO_FIN_CYCLES). The datapath's path, its fmas
    and the group's wavelets (sent or received, one per cycle on the same datapath):

        datapath = ADVANCE_CYCLES + FIRST_FMA_CYCLES + kb Nb ceil(Mb / w) + wavelets
                   + LAST_FIN_CYCLES

    A step ends at the later of the two. With longer fmas (ceil(Mb / w) > CHAIN_CYCLES) the
    CE idles between chain tasks and comm issues the group's ops during the fmas, but a
    transfer then advances only while neither its sender's nor its receiver's datapath runs
    an fma (a receiver that finds no wavelet when its fma ends starts the next; a sender
    stalls once the path's buffers are full): about one `backlog` of a one-hop path per fma
    and receiver (a multicast waits for its slowest receiver). If the fmas let the group's
    wavelets through that way (`interleaves`), the datapath's path is the step's; if not,
    the group ends after the fmas and its later ops follow one by one, and the main thread's
    path (the group after the chains) stands for that. The switch between the two is what
    the model does not count exactly: a panel about as long as the step's fmas (Nb <= 2 with
    ceil(Mb / w) > CHAIN_CYCLES) ends up to 6 % after the model.

Synchronous fmas (`FabricConfig.async_memory_ops` False, the SDK's rule: an fma on memory
alone is not async): a chain's task holds the main thread through its fma, CHAIN_CYCLES +
ceil(Mb / w) cycles per fma (its conflicts added), and each chain leaves the other one
ready, so comm runs only once the step's fmas are done:

    step = comm group t + 1 after (ADVANCE_CYCLES + kb Nb (CHAIN_CYCLES + ceil(Mb / w))
           + conflicts + kb WRAP_CYCLES + FIN_CYCLES)

A receiver whose fmas end later (a taller block of uneven splits) then issues its receive
late, and a panel longer than its path's `backlog` holds the owner's send until it drains
(`sent`; in SUMMA's multicasts, the latest receiver of the owner's line).

Under the bank read-pair rule (`FabricConfig.bank_conflicts`) an fma's element groups whose
reads of A and C start in banks equal mod 4 take a second cycle each: `conflict_cycles`
counts them per PE and step from the tile's layout (`TileWords.address`), the datapath's
path adds them, and `interleaves` sees the fmas that much longer.
"""

from __future__ import annotations

import functools

import numpy as np

from fabric.config import FabricConfig
from fabric.kernels.gemm_common import CHAIN_CYCLES, Numerics, TileWords, copy_cycles

# ---- what the tile's tasks cost -------------------------------------------------------------
# main besides its movs: start, the 4 set_regs, the activate of comm, the implicit ret
MAIN_CYCLES = 7
# comm's run from its start to the issue of ops[0]: start, 3 loads, iadd, the branch past
# the closing record, the first mode branch; ops[i] takes i more mode branches
COMM_DISPATCH_CYCLES = 7
# comm's run that reads a group's closing record: start, 3 loads, iadd, branch, set_reg,
# activate of advance, ret
GROUP_CLOSE_CYCLES = 9
# an advance that finds the group open (start, 2 branches, ret) runs after the comm run
# that issued the group's first op (its ret): comm cannot restart before issue + 6
ADVANCE_WAIT_CYCLES = 4
ADVANCE_CYCLES = 17  # advance that starts a step: start, 15 instructions, ret
LAST_ADVANCE_CYCLES = 6  # past the last step: start, 2 branches, load, branch, ret
FIRST_FMA_CYCLES = 4  # chain_x's start, branch, iadd, load before its fma's issue
# the chain that issues the last fma of a row of B (every Nb fmas) resets cj and moves ak
WRAP_CYCLES = 2
# after a step's last fma, the chains' exits: chain_x's (start, branch, unblock, iadd,
# branch, ret: 6) and chain_y's (8 with its own branch on ny and the activate of advance;
# 7 when Nb = 1 and it skips its turn)
FIN_CYCLES = 14
SOLO_FIN_CYCLES = 13
# from the last fma's last element to advance: the exit of the chain it activates
LAST_FIN_CYCLES = 7
# after the last step, the to_half of an fp32 accumulator adds its set_reg
FINISH_SET_CYCLES = 1


def main_end(config: FabricConfig, numerics: Numerics, with_c0: bool, c_words: int,
             own_b) -> np.ndarray:
    """When main has started comm group 0: zeroing the accumulator (`c_words` elements, its
    whole symbol on every PE, at the mov width of its format; nothing with C0), a 16-bit
    tile's copy of its B block (`own_b` values per PE, `copy_cycles`) and MAIN_CYCLES."""
    zero = 0
    if not with_c0:
        fmt = "f16" if numerics.half and not numerics.wide_acc else "f32"
        zero = -(-c_words // config.simd_width("mov", fmt))
    copy = copy_cycles(own_b) if numerics.half else np.zeros_like(np.asarray(own_b))
    return MAIN_CYCLES + zero + np.asarray(copy, np.int64)


def dispatched(ready: np.ndarray, index) -> np.ndarray:
    """Issue cycle of comm op number `index` (its mode - 1) by a comm run starting at
    `ready`."""
    return ready + COMM_DISPATCH_CYCLES + index


def received(config: FabricConfig, issue: np.ndarray, wavelets, sent: np.ndarray,
             hops) -> np.ndarray:
    """When comm can run again after a receive issued at `issue` of `wavelets` that its
    partner began sending at `sent`, `hops` routers away: the receive ends at its own pace
    (one wavelet per cycle) or, if later, with the partner's last wavelet, consumed
    (hops + 1) hop latencies and a cycle after it was sent (`docs/engine.md`)."""
    latency = (np.asarray(hops) + 1) * config.hop_latency + 1
    return np.maximum(issue + wavelets, sent + wavelets + latency)


def sent(config: FabricConfig, issue: np.ndarray, wavelets, receiving: np.ndarray,
         hops) -> np.ndarray:
    """When comm can run again after a send issued at `issue` of `wavelets` to a partner
    `hops` routers away whose receive is issued at `receiving`: at its own pace, or held
    back by the receiver, which takes one wavelet per cycle from its issue; the stream's
    last wavelet leaves when the ones ahead of it fill the path (`backlog`); a shorter
    stream never waits."""
    held = np.where(wavelets > backlog(config, hops),
                    receiving + wavelets - backlog(config, hops), issue)
    return np.maximum(issue + wavelets, held)


def first_op_end(issue: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The first op of a group comm runs after the chains: their fin activated advance,
    which runs its wait after comm's ret."""
    return np.maximum(end, issue + 2 + ADVANCE_WAIT_CYCLES)


def fma_cycles(config: FabricConfig, mb, numerics: Numerics) -> np.ndarray:
    """Datapath cycles of one fma: ceil(Mb / w), w the width of the fma, fmachs or fmach."""
    return -(-np.asarray(mb) // numerics.fma_width(config))


def paced_end(start: np.ndarray, nb, kb) -> np.ndarray:
    """The chains' end on the main thread's path (module docstring): advance, kb Nb fmas at
    the chains' pace, a wrap per row of B, the exits."""
    nb, kb = np.asarray(nb), np.asarray(kb)
    fin = np.where(nb >= 2, FIN_CYCLES + kb * WRAP_CYCLES, SOLO_FIN_CYCLES)
    return start + ADVANCE_CYCLES + kb * nb * CHAIN_CYCLES + fin


def conflict_cycles(config: FabricConfig, words: TileWords, a_at, mb, nb, kb) -> np.ndarray:
    """Per PE: the cycles a step's kb x nb fmas C[:, j] += A[:, k] * b (A[:, k] at element
    a_at + k mb of abuf, C[:, j] at element j mb of the accumulator) lose to bank conflicts
    (`FabricConfig.bank_conflicts`; zero without the rule): one per element group whose two
    reads start in banks equal mod 4. Group g of an fma starts at element g w of both
    operands, so its classes are those of the first elements moved by g w half-words
    (16-bit) or 2 g w (fp32): constant apart for one format, alternating for fmachs (fp32
    accumulator, 16-bit A). a_at, mb, nb, kb: per-PE arrays (or scalars)."""
    shape = np.broadcast(np.asarray(a_at), np.asarray(mb), np.asarray(nb), np.asarray(kb)).shape
    if not (config.sram_banks and config.bank_conflicts):
        return np.zeros(shape, np.int64)
    num = words.numerics
    w = num.fma_width(config)
    acc_name, acc_half = ("acc", False) if num.wide_acc else ("c", num.half)
    a_unit, c_unit = (1 if num.half else 2), (1 if acc_half else 2)  # half-words per element

    # where A and C start, in half-words mod 4 (all a class depends on)
    a_base, c_base = (2 * words.address(name) % 4 for name in ("abuf", acc_name))

    # the distinct (a_at, mb, nb, kb) of the fabric (few), by one int64 key per PE
    fields = [np.broadcast_to(np.asarray(x, np.int64), shape).reshape(-1)
              for x in (a_at, mb, nb, kb)]
    key = np.zeros_like(fields[0])
    for x in fields:
        key = key * (int(x.max()) + 1) + x
    _, first, back = np.unique(key, return_index=True, return_inverse=True)
    counts = [step_conflicts(a_base, a_unit, c_base, c_unit, w, at, m, n, k)
              for at, m, n, k in zip(*(x[first].tolist() for x in fields))]
    return np.array(counts, np.int64)[back.reshape(-1)].reshape(shape)


@functools.lru_cache(maxsize=65536)
def step_conflicts(a_base: int, a_unit: int, c_base: int, c_unit: int, w: int, at: int,
                    m: int, n: int, k: int) -> int:
    """`conflict_cycles` of one PE: A's elements at + i m (i < k) from half-word a_base,
    C's at j m (j < n) from c_base, `a_unit` and `c_unit` half-words per element, fmas
    of width w. Cached: a GEMM's steps repeat a few panel offsets, and the placement
    weighs each GEMM on many tiles."""
    def classes(base: int, unit: int, first: int, stride: int, count: int) -> np.ndarray:
        """How many of the elements first + i stride (i < count) from half-word `base`
        start in each class."""
        starts = first + stride * np.arange(count, dtype=np.int64)
        return np.bincount((base + unit * starts) % 4, minlength=4)

    a_class = classes(a_base, a_unit, at, m, k)
    c_class = classes(c_base, c_unit, 0, m, n)
    groups = -(-m // w)
    step = w * (a_unit - c_unit)
    # conflicting groups of an fma whose first elements' classes differ by d
    per_d = [sum((d + g * step) % 4 == 0 for g in range(min(groups, 4))) * (groups // 4)
             + sum((d + g * step) % 4 == 0 for g in range(groups % 4)) for d in range(4)]
    pairs = [sum(a_class[(c + d) % 4] * c_class[c] for c in range(4)) for d in range(4)]
    return int(sum(p * q for p, q in zip(pairs, per_d)))


def datapath_end(config: FabricConfig, start: np.ndarray, mb, nb, kb, wavelets,
                 numerics: Numerics, conflicts=0) -> np.ndarray:
    """The step's end on the datapath's path: its fmas, the cycles they lose to bank
    conflicts (`conflicts`) and the group's wavelets."""
    fmas = np.asarray(kb) * np.asarray(nb)
    busy = fmas * fma_cycles(config, mb, numerics) + np.asarray(conflicts) + wavelets
    return start + ADVANCE_CYCLES + FIRST_FMA_CYCLES + busy + LAST_FIN_CYCLES


def backlog(config: FabricConfig, hops) -> np.ndarray:
    """Wavelets a backed-up stream holds on a path of `hops` routers: queue_depth - 1 in
    each of its hops + 2 buffers (the routers and the receiver's CE queue; a buffer takes a
    wavelet only if it had room at the start of the cycle)."""
    return (np.asarray(hops) + 2) * (config.queue_depth - 1)


def interleaves(config: FabricConfig, mb, nb, kb, reach, numerics: Numerics,
                conflicts=0) -> np.ndarray:
    """Whether comm group t + 1 runs during the step's fmas: the CE idles between chain
    tasks (an fma is longer than CHAIN_CYCLES) and the fmas let the group's streams through.
    A stream advances only while neither its sender nor a receiver runs an fma: the
    sender fills the path's buffers, stalls and runs its fma, each receiver drains them
    between its own fmas, so about one `backlog` of a one-hop path passes per fma and
    receiver. reach: the group's wavelets times the receivers each must reach; `conflicts`:
    the cycles the step's fmas lose to bank conflicts, spread over them."""
    fmas = np.asarray(kb) * np.asarray(nb)
    length = fma_cycles(config, mb, numerics) + np.asarray(conflicts) / np.maximum(fmas, 1)
    return (length > CHAIN_CYCLES) & (reach <= fmas * backlog(config, 1))


def step_end(config: FabricConfig, start: np.ndarray, mb, nb, kb, group, wavelets, reach,
             numerics: Numerics, conflicts=0) -> np.ndarray:
    """Next advance's start per PE, the step starting at `start` (module docstring): the
    datapath's path, and the main thread's unless the group interleaves with the fmas.
    group(ready) runs the next comm group from `ready` (serially, the clocks of all PEs)
    and returns its end; `wavelets`: its wavelets per PE; `reach`: as `interleaves`';
    `conflicts`: the cycles its fmas lose to bank conflicts (`conflict_cycles`)."""
    chains = paced_end(start, nb, kb)
    if not config.async_memory_ops:  # synchronous fmas: the chains hold the main thread
        fmas = np.asarray(kb) * np.asarray(nb)
        return group(chains + fmas * fma_cycles(config, mb, numerics) + np.asarray(conflicts))
    overlap = interleaves(config, mb, nb, kb, reach, numerics, conflicts)
    paced = chains if overlap.all() else np.where(overlap, chains, group(chains))
    return np.maximum(paced, datapath_end(config, start, mb, nb, kb, wavelets, numerics,
                                          conflicts))


def finish_cycles(config: FabricConfig, ends: np.ndarray, numerics: Numerics,
                  c_words: int) -> int:
    """The kernel's cycles: the latest PE's last advance (and the to_half of an fp32
    accumulator of `c_words` elements into 16-bit C)."""
    last = LAST_ADVANCE_CYCLES
    if numerics.wide_acc:
        last += -(-c_words // config.simd_width("cvt", "f16")) + FINISH_SET_CYCLES
    return int(np.max(ends)) + last
