"""The tile program shared by the GEMM kernels (`gemm_summa`, `gemm_cannon`), its per-PE
schedule table, the SRAM check and the fp32 references; its cycle model is `gemm_cycles`.

Every PE of a GEMM rectangle runs the same tile. It owns one block C_blk (Mb x Nb, column
major: column j at word j*Mb of symbol `c`) and computes, step after step,

    C_blk += A_pan (Mb x kb, column major, in symbol `abuf`) @ B_pan (kb x Nb, row major, in
    symbol `bbuf`)

as kb * Nb async fmas `C[:, j] += A[:, k] * B[k, j]` (k outer, j inner), the scalar B[k, j]
taken into a register with `load` (synchronous fmas where `FabricConfig.async_memory_ops`
is False, the SDK's rule: an op on memory alone is not async; `gemm_cycles` models both).
While step t computes, the panels of step t + 1 travel (received into the other half of a
double buffer) by async fabric movs. What moves where
is data: a small int32 table `sched` per PE, written by the host with the operands.

`sched` layout (words):
    [3 t .. 3 t + 2]      compute record of step t: A panel address, B panel address,
                          number of fmas (kb_t * Nb); after the last step a record with -1 fmas
    [comm_base ..]        comm records (mode, length, address), grouped by step: group 0
                          runs before step 0, group t + 1 while step t computes, each group
                          closed by a record of mode 0; mode i + 1 runs `ops[i]` (a send or
                          receive of `length` words at `address` of its buffer).

Tasks (local; lower ids win an idle CE):
    chain_x, chain_y  two fma issuers taking turns (block/unblock pass the turn): each
                      issues one fma whose completion activates the same chain again, so
                      F_n+2 is issued only once F_n is complete and F_n+1 is issued. The
                      datapath always has the next fma queued while the main thread (about
                      CHAIN_CYCLES per fma) prepares the one after, and only F_n+1 and F_n+2
                      may run out of order (when an op ends, the datapath goes to the
                      lowest-numbered ready slot, not the oldest op), and they touch
                      different C columns when Nb >= 2; so every C element sums its k terms
                      in order. A PE with Nb = 1 runs chain_x alone (ny = 0).
    comm              runs the comm records of one group one op at a time (async, one slot),
                      then marks the group done.
    advance           starts step t + 1 once both chains found step t finished (all its
                      fmas complete) and the comm group of step t + 1 is done: loads the
                      compute record, restarts the chains and the next comm group.
    main              zeroes C (unless the kernel takes C0, see below), starts comm
                      group 0.

Initial accumulator (`with_c0`): the kernel takes a third input C0 (m x n) and computes
C = C0 + A @ B. The host writes C0's blocks where the sums run, in C's layout (the fp32
`acc` of a 16-bit tile with an fp32 accumulator, else `c`), so `main` skips the zeroing
and every C element starts its k terms from its C0 word: C0 is held in the accumulator's
format (fp32 words as they are; a 16-bit accumulator rounds them to nearest even, as the
load does A and B). A bias row broadcast over m rows is the caller's index map, not the
kernel's concern.

Registers: mb, cend (= Nb * Mb), ny (1 when Nb >= 2) per PE; tp, cp (table pointers),
cdone (chains finished), mdone (comm group done), rem (fmas left), ak, bo, cj (A column,
B element, C column addresses), s (the B scalar; the comm address), x, y (comm mode,
length).

Example (the builders do this):
    >>> ops = [CommOp(0, "abuf", send=True), CommOp(0, "abuf", send=False)]
    >>> tile = gemm_tile("gemm", TileWords(a=96, b=96, c=32, sched=40), ops, comm_base=12)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.instructions import FabIn, FabOut, Mem
from fabric.isa import Port
from fabric.kernels.base import Kernel
from fabric.numerics import HALF_DTYPES, round_to, words_for
from fabric.program import Program, Rect, Tile

COMPUTE_FIELDS = 3  # (A panel address, B panel address, fmas) per step
COMM_FIELDS = 3  # (mode, length, address) per comm op
CHAIN_CYCLES = 12  # main-thread cycles per fma: task start + 10 instructions + ret


@dataclasses.dataclass(frozen=True)
class CommOp:
    """One fabric transfer the tile can run: send (`FabOut`) or receive (`FabIn`) `length`
    words of `symbol` ("abuf" or "bbuf") from a runtime address, on `color`."""

    color: int
    symbol: str
    send: bool


@dataclasses.dataclass(frozen=True)
class Numerics:
    """Formats of a GEMM or GEMV: `dtype` stores the inputs and the output, `acc_dtype`
    accumulates ("f32", or `dtype` itself)."""

    dtype: str = "f32"
    acc_dtype: str = "f32"

    @property
    def half(self) -> bool:
        return self.dtype != "f32"

    @property
    def wide_acc(self) -> bool:
        """16-bit storage, fp32 sums: fmachs into an fp32 accumulator, one final to_half."""
        return self.half and self.acc_dtype == "f32"

    def fma_width(self, config: FabricConfig) -> int:
        """Elements per cycle of the multiply-accumulate the kernel issues."""
        if not self.half:
            return config.simd_width("fma", "f32")
        return config.simd_width("mul_acc32" if self.wide_acc else "fma", "f16")


FP32 = Numerics()  # the fp32 kernels


def check_numerics(kernel: str, dtype: str, acc_dtype: str) -> Numerics:
    """The kernel's Numerics; ValueError naming the kernel and the parameter otherwise."""
    allowed = ["f32", *HALF_DTYPES]
    if dtype not in allowed:
        raise ValueError(f"{kernel}: dtype must be one of {allowed}, got {dtype!r}")
    if acc_dtype not in ("f32", dtype):
        raise ValueError(f"{kernel}: acc_dtype must be 'f32' or the dtype {dtype!r}, got "
                         f"{acc_dtype!r}")
    return Numerics(dtype, acc_dtype)


@dataclasses.dataclass(frozen=True)
class TileWords:
    """Elements per PE of the tile's symbols: a (abuf), b (bbuf), c in the tile's dtype;
    bs (16-bit tiles: the B scalars, one per 32-bit word) and sched (int32) in words; pad:
    words (0 or 1) before the accumulator, to start it at an odd word (`tile_words`)."""

    a: int
    b: int
    c: int
    sched: int
    bs: int = 0
    numerics: Numerics = FP32
    pad: int = 0

    def layout(self) -> list[tuple[str, str, int]]:
        """(name, dtype, elements) of each symbol, in the order of their addresses: abuf,
        bbuf, bs (16-bit tiles), c, acc (an fp32 accumulator), sched; "pad" before the
        accumulator (c, or acc)."""
        h, num = self.numerics.dtype, self.numerics
        out = [("abuf", h, self.a), ("bbuf", h, self.b)]
        if num.half:
            out.append(("bs", "u32", self.bs))
        pad = [("pad", "u32", self.pad)] if self.pad else []
        out += ([("c", h, self.c), *pad, ("acc", "f32", self.c)] if num.wide_acc
                else [*pad, ("c", h, self.c)])
        return out + [("sched", "i32", self.sched)]

    def symbols(self) -> dict[str, int]:
        """32-bit words of each symbol of the tile, in the order of their addresses."""
        return {name: words_for(dtype, n) for name, dtype, n in self.layout()}

    def address(self, name: str) -> int:
        """The word address of symbol `name` on every PE of the tile."""
        sizes = self.symbols()
        return sum(sizes[s] for s in list(sizes)[:list(sizes).index(name)])

    @property
    def total(self) -> int:
        return sum(self.symbols().values())


def tile_words(numerics: Numerics, panels: tuple[int, int], own_b: int, c: int,
               sched: int = 0, bank_aware: bool = False) -> TileWords:
    """The tile's symbol sizes: panels = elements of abuf and of the B panels (bbuf of fp32
    tiles, bs of 16-bit ones), own_b = elements of the host-written B block (bbuf of 16-bit
    tiles), c = the accumulator's elements, sched = the schedule's words (the last symbol:
    the models leave it 0).

    bank_aware: start the accumulator at an odd word (a one-word pad before it where it
    would start at an even one), as the SDK advises for operands read together: abuf starts
    at word 0, so the first elements of A and C lie in bank pairs 2 apart
    (`FabricConfig.bank_class`), and no fma of the tile meets the read-pair rule while
    column lengths keep the classes (Mb even in fp32, a multiple of 4 in 16 bits; fmachs'
    classes alternate group by group whatever the pad)."""
    half = numerics.half
    words = TileWords(a=panels[0], b=own_b if half else panels[1], c=c, sched=sched,
                      bs=panels[1] if half else 0, numerics=numerics)
    acc = "acc" if numerics.wide_acc else "c"
    if bank_aware and words.address(acc) % 2 == 0:
        words = dataclasses.replace(words, pad=1)
    return words


def check_fits(config: FabricConfig, words: TileWords, what: str) -> None:
    """ValueError naming the sizes when the symbols of one PE exceed its SRAM."""
    if words.total > config.sram_words:
        parts = " + ".join(f"{name} {4 * n} B" for name, n in words.symbols().items())
        raise ValueError(
            f"{what}: the blocks do not fit the PE SRAM: {parts} = {4 * words.total} B per "
            f"PE, more than the {config.sram_bytes // 1024} KiB ({config.sram_bytes} B) of a "
            "PE; use a larger rectangle or smaller matrices")


# ---- the tile program ------------------------------------------------------------------------
def _mul_acc(numerics: Numerics, c: Mem, a: Mem, name: str, sync: bool) -> list:
    """C[:, j] += A[:, k] * s: fp32 fma, fmachs (16-bit a and s, fp32 c) or fmach, async
    activating chain `name` when done, or (`sync`) synchronous and then the activate."""
    fma = ins.fmachs if numerics.wide_acc else ins.fma
    if sync:
        return [fma(c, c, a, "s", dtype=numerics.dtype), ins.activate(name)]
    return [fma(c, c, a, "s", dtype=numerics.dtype, is_async=True, on_done=ins.Activate(name))]


def _chain(name: str, other: str, c: Mem, a: Mem, b_scalar: Mem, first: bool,
           numerics: Numerics, sync: bool = False) -> list:
    """One of the two fma issuers (see the module docstring). They take turns through
    block/unblock: a chain issues F_n+2 only after its own F_n completed and the other chain
    issued F_n+1. With ny = 0 chain_y only hands over and chain_x issues alone. `sync`: the
    fma holds the main thread until it is done (an fma on memory alone cannot be async
    where `FabricConfig.async_memory_ops` is False), then the chain activates itself."""
    turn = [ins.block(name), ins.unblock(other)]
    if first:
        head = []
        turn = [ins.branch_if_zero("ny", "solo"), *turn, ins.label("solo")]
    else:
        head = [ins.branch_if_zero("ny", "fin")]
    return head + [
        ins.branch_if_zero("rem", "fin"),
        ins.iadd("rem", "rem", -1),
        ins.load("s", b_scalar),
        *_mul_acc(numerics, c, a, name, sync),
        *turn,
        ins.iadd("bo", "bo", 1),
        ins.iadd("cj", "cj", "mb"),
        ins.branch_if_less("cj", "cend", "out"),
        ins.set_reg("cj", 0),  # next k: back to column 0 of C, next column of A
        ins.iadd("ak", "ak", "mb"),
        ins.label("out"),
        ins.ret(),
        ins.label("fin"),  # this chain's fmas of the step are complete
        ins.unblock(other),
        ins.iadd("cdone", "cdone", 1),
        ins.branch_if_less("cdone", 2, "end"),
        ins.activate("advance"),
        ins.label("end"),
    ]


def _comm_op(op: CommOp, numerics: Numerics):
    """The op's async mov; 16-bit A panels go packed, two values per wavelet."""
    mem = Mem(op.symbol, offset_reg="s", length_reg="y")
    done = ins.Activate("comm")
    packed = numerics.half and op.symbol == "abuf"  # B panels (bs) are 32-bit words
    dtype = numerics.dtype if packed else "f32"
    if op.send:
        return ins.mov(FabOut(op.color, 1, length_reg="y", packed=packed), mem, dtype=dtype,
                       is_async=True, on_done=done)
    return ins.mov(mem, FabIn(op.color, 1, length_reg="y", packed=packed), dtype=dtype,
                   is_async=True, on_done=done)


def gemm_tile(name: str, words: TileWords, ops: Sequence[CommOp], comm_base: int,
              loop_color: int | None = None, with_c0: bool = False,
              sync_fmas: bool = False) -> Tile:
    """The GEMM tile: symbols abuf, bbuf, c (and bs, acc of 16-bit tiles, see the module
    docstring) and sched (i32) of `words`, the comm ops `ops` (mode i + 1 of a comm record
    runs ops[i]), comm records from word `comm_base` of sched. Registers mb, cend, ny (and
    y) are per-PE params of the placement; 16-bit tiles copy bbuf into bs on `loop_color`
    (routed from RAMP back to RAMP on every PE). with_c0: the accumulator holds the
    host-written C0 when `main` starts, so it is not zeroed. sync_fmas: the chains' fmas
    synchronous (`_chain`)."""
    num = words.numerics
    h = num.dtype
    if num.half and loop_color is None:
        raise ValueError(f"{name}: a 16-bit tile needs loop_color, the color of its B copy")
    tile = Tile(name, bank_aware=False)  # the layout of `words`, pads included
    symbols = {name: tile.symbol(name, dtype, n) for name, dtype, n in words.layout()}
    c, sched = symbols["c"], symbols["sched"]
    acc = symbols["acc"] if num.wide_acc else c  # where the sums run
    tile.register("mb", "cend", "ny", "tp", "cp", "cdone", "mdone", "rem", "ak", "bo", "cj",
                  "s", "x", "y")

    c_col = Mem(acc.name, offset_reg="cj", length_reg="mb")  # C[:, j]: Mb elements
    a_col = Mem("abuf", offset_reg="ak", length_reg="mb")  # A[:, k]: Mb elements
    b_elem = Mem("bs" if num.half else "bbuf", offset_reg="bo")  # B[k, j]
    tile.local_task("chain_x", _chain("chain_x", "chain_y", c_col, a_col, b_elem, True, num,
                                      sync_fmas))
    tile.local_task("chain_y", _chain("chain_y", "chain_x", c_col, a_col, b_elem, False, num,
                                      sync_fmas))

    comm = [
        ins.load("x", sched.dsd(0, offset_reg="cp")),
        ins.load("y", sched.dsd(1, offset_reg="cp")),
        ins.load("s", sched.dsd(2, offset_reg="cp")),
        ins.iadd("cp", "cp", COMM_FIELDS),
        ins.branch_if_less("x", 1, "group_done"),
    ]
    # mode x selects ops[x - 1]: the first i with x < i + 2
    comm += [ins.branch_if_less("x", i + 2, f"op{i}") for i in range(len(ops))]
    comm += [ins.label("group_done"), ins.set_reg("mdone", 1), ins.activate("advance"),
             ins.ret()]
    for i, op in enumerate(ops):
        comm += [ins.label(f"op{i}"), _comm_op(op, num), ins.ret()]
    tile.local_task("comm", comm)

    finish = []
    if num.wide_acc:  # after the last step: C rounded once to 16 bits; a later run waits
        finish = [ins.label("finish"), ins.to_half(c.dsd(), acc.dsd(), h),
                  ins.set_reg("mdone", 0)]
    tile.local_task("advance", [
        ins.branch_if_less("cdone", 2, "wait"),
        ins.branch_if_zero("mdone", "wait"),
        ins.load("rem", sched.dsd(2, offset_reg="tp")),
        ins.branch_if_less("rem", 0, "finish" if finish else "wait"),  # past the last step
        ins.load("ak", sched.dsd(0, offset_reg="tp")),
        ins.load("bo", sched.dsd(1, offset_reg="tp")),
        ins.iadd("tp", "tp", COMPUTE_FIELDS),
        ins.set_reg("cj", 0),
        ins.set_reg("cdone", 0),
        ins.set_reg("mdone", 0),
        ins.unblock("chain_x"),  # chain_x issues first
        ins.block("chain_y"),
        ins.activate("chain_x"),
        ins.activate("chain_y"),
        ins.activate("comm"),  # the transfers of the next step (an empty group after the last)
        ins.label("wait"),
        *([ins.ret(), *finish] if finish else []),
    ])

    main = [] if with_c0 else [ins.mov(acc.dsd(), 0.0, dtype=h if acc is c else "f32")]
    if num.half:  # bs = the host-written B block, one 16-bit pattern per word
        main += [
            ins.branch_if_zero("y", "copied"),
            ins.mov(FabOut(loop_color, 1, length_reg="y"), Mem("bbuf", length_reg="y"),
                    dtype=h, is_async=True),
            ins.mov(Mem("bs", length_reg="y"), FabIn(loop_color, 1, length_reg="y")),
            ins.label("copied"),
        ]
    tile.local_task("main", main + [
        ins.set_reg("tp", 0),
        ins.set_reg("cp", comm_base),
        ins.set_reg("cdone", 2),
        ins.set_reg("mdone", 0),
        ins.activate("comm"),
    ])
    return tile


def loop_route(prog: Program, rect: Rect, color: int) -> None:
    """`color` from each PE's RAMP back to its own RAMP: the B copy of 16-bit tiles."""
    prog.route(rect, color, rx=Port.RAMP, tx=Port.RAMP)


def comm_ops(colors: Sequence[tuple[str, Sequence[int]]]) -> tuple[list[CommOp], dict]:
    """A receive and a send per (symbol, color) of `colors`, in that order: the tile's ops
    and index[(symbol, color, send)], the position of each op among them."""
    ops: list[CommOp] = []
    index = {}
    for symbol, cols in colors:
        for color in cols:
            for send in (False, True):
                index[(symbol, color, send)] = len(ops)
                ops.append(CommOp(color, symbol, send))
    return ops, index


# ---- the schedule table ----------------------------------------------------------------------
@dataclasses.dataclass
class PeSchedule:
    """What one PE does: compute records (A address, B address, fmas) per step and comm
    groups (lists of (op index, length, address)); groups[0] runs before step 0,
    groups[t + 1] while step t computes."""

    compute: list = dataclasses.field(default_factory=list)
    groups: list = dataclasses.field(default_factory=list)

    def words(self) -> list[int]:
        comm = []
        for group in self.groups:
            for op, length, address in group:
                comm += [op + 1, length, address]
            comm += [0, 0, 0]
        return comm


def pack_schedule(pes: Sequence[Sequence[PeSchedule]]) -> tuple[np.ndarray, int]:
    """The `sched` table of every PE, shape (rows, cols, words), and comm_base."""
    steps = {len(p.compute) for row in pes for p in row}
    if len(steps) != 1:
        raise ValueError(f"every PE must run the same number of steps, got {sorted(steps)}")
    comm_base = COMPUTE_FIELDS * (steps.pop() + 1)
    comm = [[p.words() for p in row] for row in pes]
    width = comm_base + max(len(w) for row in comm for w in row)
    table = np.zeros((len(pes), len(pes[0]), width), np.int32)
    for r, row in enumerate(pes):
        for c, p in enumerate(row):
            compute = [v for rec in p.compute for v in rec] + [0, 0, -1]
            table[r, c, :comm_base] = compute
            table[r, c, comm_base:comm_base + len(comm[r][c])] = comm[r][c]
    return table, comm_base


def chain_params(mb: np.ndarray, nb: np.ndarray) -> dict:
    """Per-PE registers of the tile from the block sizes (arrays of shape (rows, cols))."""
    mb, nb = np.asarray(mb, np.int64), np.asarray(nb, np.int64)
    return {"mb": mb, "cend": mb * nb, "ny": (nb >= 2).astype(np.int64)}


# ---- blocks in PE memory ---------------------------------------------------------------------
def col_major(block: np.ndarray, words: int) -> np.ndarray:
    """block (r x c) as column-major fp32 words, zero-padded to `words`."""
    out = np.zeros(words, np.float32)
    flat = np.asarray(block, np.float32).T.ravel()
    out[:flat.size] = flat
    return out


def row_major(block: np.ndarray, words: int) -> np.ndarray:
    out = np.zeros(words, np.float32)
    flat = np.asarray(block, np.float32).ravel()
    out[:flat.size] = flat
    return out


# ---- the kernel -----------------------------------------------------------------------------
def gemm_kernel(config: FabricConfig, rect: Rect, name: str, shape: tuple[int, int, int],
                ops: Sequence[CommOp], pes: Sequence[Sequence[PeSchedule]],
                blocks: Sequence[Sequence[tuple]], panels: tuple[int, int], own_b: int,
                fit: str, routes: Callable[[Program], None], model_cycles: int, info: dict,
                numerics: Numerics = FP32, loop_color: int | None = None,
                with_c0: bool = False, bank_aware: bool = False) -> Kernel:
    """The GEMM C (m x n) = A (m x k) @ B (k x n), shape (m, k, n), on `rect`: the tile
    placed with the schedules `pes` of its PEs ([row][col] of `rect`) and comm ops `ops`.

    blocks[row][col] = (C rows, C cols, K range of the A block, K range of the B block) of
    that PE, each (start, size): what the host writes into abuf and bbuf and reads from c.
    panels: elements of abuf and of the B panels per PE (bbuf of fp32 tiles, bs of 16-bit
    ones); own_b: elements of the host-written B block (bbuf of 16-bit tiles); fit: the
    kernel as check_fits names it; routes(program) lays the comm colors; info gets m, k, n
    first, then the formats, then the SRAM use. 16-bit tiles need `loop_color`. with_c0:
    C = C0 + A @ B with a third input "C0" (m x n), written into the accumulator's blocks
    (module docstring). bank_aware: the accumulator's layout of `tile_words`.
    """
    m, k, n = shape
    table, comm_base = pack_schedule(pes)
    mb = np.array([[blk[0][1] for blk in row] for row in blocks])
    nb = np.array([[blk[1][1] for blk in row] for row in blocks])
    half = numerics.half
    words = tile_words(numerics, panels, own_b, int(mb.max() * nb.max()), table.shape[-1],
                       bank_aware)
    check_fits(config, words, fit)
    prog = Program(config)
    params = chain_params(mb, nb)
    if half:  # the length of each PE's B copy into bs
        kbs = np.array([[blk[3][1] for blk in row] for row in blocks])
        params["y"] = (kbs * nb).astype(np.int64)
    prog.place(gemm_tile(name, words, ops, comm_base, loop_color, with_c0,
                         sync_fmas=not config.async_memory_ops), rect, params=params)
    acc_symbol = "acc" if numerics.wide_acc else "c"  # where C0 goes
    routes(prog)
    if half:
        loop_route(prog, rect, loop_color)

    def load(sim, inputs):
        a = np.asarray(inputs["A"], np.float32)
        b = np.asarray(inputs["B"], np.float32)
        if a.shape != (m, k) or b.shape != (k, n):
            raise ValueError(f"{name} expects A {(m, k)} and B {(k, n)}, got "
                             f"{a.shape} and {b.shape}")
        abuf = np.zeros((rect.rows, rect.cols, words.a), np.float32)
        bbuf = np.zeros((rect.rows, rect.cols, words.b), np.float32)
        for r, row in enumerate(blocks):
            for c, ((r0, mr), (c0, nc), (ka0, kas), (kb0, kbs)) in enumerate(row):
                abuf[r, c] = col_major(a[r0:r0 + mr, ka0:ka0 + kas], words.a)
                bbuf[r, c] = row_major(b[kb0:kb0 + kbs, c0:c0 + nc], words.b)
        sim.memcpy_h2d("abuf", abuf, rect)  # 16-bit symbols: rounded to nearest even
        sim.memcpy_h2d("bbuf", bbuf, rect)
        sim.memcpy_h2d("sched", table, rect)
        if with_c0:
            init = np.asarray(inputs["C0"], np.float32)
            if init.shape != (m, n):
                raise ValueError(f"{name} expects C0 {(m, n)}, got {init.shape}")
            # each PE's block column major with its own Mb (the chains' C[:, j] at j Mb)
            acc = np.zeros((rect.rows, rect.cols, words.c), np.float32)
            for r, row in enumerate(blocks):
                for c, ((r0, mr), (c0, nc), _, _) in enumerate(row):
                    acc[r, c] = col_major(init[r0:r0 + mr, c0:c0 + nc], words.c)
            sim.memcpy_h2d(acc_symbol, acc, rect)

    def read(sim):
        c_blocks = np.asarray(sim.memcpy_d2h("c", rect), np.float32)
        out = np.zeros((m, n), np.float32)
        for r, row in enumerate(blocks):
            for c, ((r0, mr), (c0, nc), _, _) in enumerate(row):
                out[r0:r0 + mr, c0:c0 + nc] = c_blocks[r, c, :mr * nc].reshape(nc, mr).T
        return out

    def launch(sim):
        sim.launch("main", rect)

    return Kernel(
        name=name, config=config, rect=rect, program=prog, load=load, read=read,
        launch=launch, model_cycles=model_cycles, fmas=m * n * k,
        info={"m": m, "k": k, "n": n, **info, "with_c0": with_c0, "dtype": numerics.dtype,
              "acc_dtype": numerics.acc_dtype, "sram_bytes_per_pe": 4 * words.total})


# ---- references and model pieces -------------------------------------------------------------
def sequential_matmul(a: np.ndarray, b: np.ndarray, order: Sequence[int],
                      fused: bool = False, numerics: Numerics = FP32,
                      c0: np.ndarray | None = None) -> np.ndarray:
    """c0 + a[:, order] @ b[order, :] in fp32, summed one k at a time in `order`, starting
    from c0 (default 0), as the fabric's fma chain does: each step rounds acc + a*b once
    (`fused`) or rounds the product first (two roundings).

    16-bit `numerics`: a and b rounded to the dtype first (the host's load); their products
    are exact in fp32 (at most 2 x 11 significand bits), so each step rounds acc + a*b to
    fp32 once, then (acc_dtype = dtype, fmach) to 16 bits; an fp32 accumulator is rounded to
    16 bits once at the end. c0 starts the accumulator in its format: fp32 as given, or
    rounded to the 16-bit dtype when that is the accumulator's."""
    shape = (np.shape(a)[0], np.shape(b)[1])
    acc = np.zeros(shape, np.float32) if c0 is None else \
        np.broadcast_to(np.asarray(c0, np.float32), shape).copy()
    if numerics.half:
        h = numerics.dtype
        a, b = round_to(np.asarray(a, np.float32), h), round_to(np.asarray(b, np.float32), h)
        if not numerics.wide_acc:
            acc = round_to(acc, h)
        for k in order:
            acc = acc + np.outer(a[:, k], b[k])
            if not numerics.wide_acc:
                acc = round_to(acc, h)
        return round_to(acc, h)
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    for k in order:
        if fused:
            wide = acc.astype(np.float64) + np.outer(a[:, k].astype(np.float64), b[k])
            acc = wide.astype(np.float32)
        else:
            acc = acc + np.outer(a[:, k], b[k])
    return acc


def copy_cycles(n) -> np.ndarray:
    """Cycles of a PE's copy of n 16-bit values into one-per-word form through its own
    router, with the branch that skips it when n = 0: the send and the receive share the
    datapath (two cycles per value, 2 n + 1 with the branch), and the first value is back
    no earlier than three cycles after the send's issue (4 for n = 1)."""
    n = np.asarray(n, np.int64)
    return np.where(n > 0, np.maximum(2 * n + 1, 4), 1)


def a_wavelets(numerics: Numerics, elems: int) -> int:
    """Wavelets (= datapath cycles) of an A panel of `elems` values: packed in pairs when
    16-bit."""
    return -(-elems // 2) if numerics.half else elems
