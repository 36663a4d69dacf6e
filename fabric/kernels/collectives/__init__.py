"""Collectives over a rectangle of PEs: broadcast, reduce, allreduce, gather and scatter.

Building blocks
---------------
A collective is a `Fragment`: the instructions it adds to a task (one list for every PE of
its *domain* rectangle; each PE finds its part by branching on registers the fragment owns),
the initial values of those registers (per PE, for `Program.place(..., params=...)`), and
the routes, which the fragment function adds to the program when called. A kernel that
needs a row reduction inside its own program writes

    red = reduce(prog, rect, "y", n, colors=[4, 5], along="row", algo="chain")
    tile.local_task("main", [*my_code, *red.code, *more_code])
    prog.place(tile, rect, params={**my_params, **red.params})

and may chain fragments (`a.then(b)`) as long as their register and label names differ
(`name=` prefixes them). The vector is `n` fp32 words of symbol `buf` (at `offset`); `n`
is an int, or `(register, values)` when the length differs per PE: the register (the
caller's, values an int array of the domain's shape) is the length of every DSD. A
fragment covering only part of a tile's rectangle leaves the other PEs of `domain` idle.
`Fragment.exit_times(entry)` is the fragment's cycle model: given the cycle at which every
PE executes the fragment's first instruction, the cycle at which it executes the next one.

    broadcast(prog, rect, buf, n, color, along="row"|"col"|"rect", src=...)
        multicast from one PE of every row (src = column offset), of every column (src = row
        offset) or of the rectangle (src = (row, col) offsets: along the source row, then
        down and up every column). One color.
    reduce(prog, rect, buf, n, colors, along="row"|"col"|"rect", algo="chain"|"tree",
           op="add"|"max"|"min", root=..., then_root=...)
        every row (column) reduced into its root end (west/east, north/south); "rect":
        rows first, then the root column. The root's buf gets the result; other PEs keep
        their input (chain) or a partial result (tree).
    allreduce(...)   reduce, then a broadcast of the result from the root(s): every buf
        gets the result. One more color.
    gather(prog, rect, src, dst, n, colors) / scatter(...)   along rows (columns): the
        line's vectors (n each) collected into dst (L x n) of the root end, or sent out
        from it. Two colors.
    colors_needed(kind, rect, along, algo)   how many colors a collective routes on.

Algorithms and their cycle models (H = hop latency, L = line length, K = ceil(log2 L),
w_mov = 2 fp32 per cycle; an op with a fabric operand streams one element per cycle, and a
wavelet sent in cycle t is consumed h hops away in cycle t + (h + 1) H + 1). The formulas
are the standalone kernels' cycle counts (task start and end included, every PE starting
together); `Fragment.exit_times` computes the same from the code for any start times.

    chain (pipelined): the leaf sends its vector toward the root; every PE on the way adds
        its own to the stream and sends the sum on (one fused `op(FabOut, FabIn, buf)`, so
        a PE adds 2H + 1 cycles of latency and no bandwidth); colors alternate by parity
        (a router takes a color from one port only).
            T_chain = (2H + 1)(L - 1) + n + 4                                  (L >= 4)
    tree (doubling distances): the PEs still holding a partial result pair up from the far
        end; in round k the second of each pair sends it, through routers only, to the
        first, which adds it to its own (for L = 2^K: PE i = 2^k mod 2^(k+1) sends to
        i - 2^k, 2^k hops away); one color per round.
            T_tree = sum_k [(2^k + 1) H + n + 2] + 3 = (2^K - 1 + K) H + K (n + 2) + 3
    The chain pays 2H + 1 per PE and n once; the tree pays H per hop but n (plus 2) K
    times. For L = 2^K the tree is faster exactly when
            (L - 1 + K) H + (K - 1) n + 2K - 1 < (2H + 1)(L - 1):
    small n (latency bound) favours the tree, e.g. n <= 2 on 8 PEs (n = 1: 22 vs 26
    cycles); large n (bandwidth bound) the chain, whose time grows with n once (n = 16:
    41 vs 67 cycles).
    broadcast (one multicast stream): T = (h_max + 1) H + n + 5, h_max the farthest PE's
        hops from its source.
    allreduce = reduce + broadcast from the root (the rectangle: row reduction, column
        reduction, then a rectangle broadcast from the corner).
    gather: one stream of (L - 1) n words into the root, then its own copy:
        T = (L - 1) n + (2H + 1) + ceil(n / w_mov) + 5 when n is large; for small n the
        latency of the farthest PE's words, (2H + 1) per PE, bounds it instead.
    scatter: the root streams the farthest vector first, then copies its own:
        T = max((L - 1) n + max(ceil(n / w_mov), 2H + 1), n + (2H + 1)(L - 1)) + 4.

Numerics: reductions run in a fixed order that `reduce_reference` reproduces in float32, so
results are bit-exact (chain: s = x[L-1]; s = op(x[i], s) for i = L-2..0; tree: the
pairs of `tree_schedule`, round by round).

Modules: `fragment` (the Fragment and its chaining), `dispatch` (per-role code),
`operands` (DSD operands), `geometry` (lines, argument checks, color counts), `multicast`
(broadcast), `lines` (reduce, allreduce), `edge` (gather, scatter), `references` (numpy
references), `builders` (the standalone `build_*` kernels).

Example:
    >>> k = build_allreduce(FabricConfig.small(4, 8), Rect(0, 0, 4, 8), 16, along="row")
    >>> out = run_kernel(k, {"x": x}).output     # (4, 8, 16), every PE has its row's sum
"""

from fabric.kernels.collectives.builders import (
    build_allreduce,
    build_broadcast,
    build_gather,
    build_reduce,
    build_scatter,
)
from fabric.kernels.collectives.edge import gather, scatter
from fabric.kernels.collectives.fragment import Fragment
from fabric.kernels.collectives.geometry import (
    ALGOS,
    IDLE,
    ROOTS,
    Lines,
    colors_needed,
    line_colors,
)
from fabric.kernels.collectives.lines import OPS, allreduce, reduce, tree_schedule
from fabric.kernels.collectives.multicast import broadcast
from fabric.kernels.collectives.references import (
    NP_OPS,
    allreduce_reference,
    line_reduce_reference,
    reduce_reference,
)

__all__ = ["ALGOS", "IDLE", "NP_OPS", "OPS", "ROOTS", "Fragment", "Lines", "allreduce",
           "allreduce_reference", "broadcast", "build_allreduce", "build_broadcast", "build_gather",
           "build_reduce", "build_scatter", "colors_needed", "gather", "line_colors",
           "line_reduce_reference", "reduce", "reduce_reference", "scatter", "tree_schedule"]
