"""The ops and tiles of `fabric.kernels.redistribute`'s programs: which DSD op moves a run
between two slot formats (a copy within one format; to_half from fp32, to_f32 to fp32; one
16-bit format to another through an fp32 scratch on the same PE), and the symbols and
chain tasks of each PE's tile."""

from __future__ import annotations

import dataclasses

from fabric import instructions as ins
from fabric.kernels.redistribute_code import Run, chain_code, gate_code
from fabric.numerics import HALF_DTYPES
from fabric.program import Tile

SRC, DST = "s_", "d_"  # prefixes of the source and destination symbols in the programs
SCRATCH = "t_"  # fp32 scratch of a local h1 -> h2 move
CHAINS = ("recv", "recv2", "send", "local")  # task order = priority of an idle CE
# a PE receiving several flows in a round takes them on two chains, alternately in the
# global order, so that while one flow's sender is busy elsewhere it takes the next one
RECEIVES = ("recv", "recv2")
COUNTER = {"recv": "rk", "recv2": "rk2", "send": "sk", "local": "lk"}
# counters in memory (`COUNTERS`): a word per chain, and one scratch register for them all
COUNTER_WORD = {"recv": "k_recv", "recv2": "k_recv2", "send": "k_send", "local": "k_local"}
SHARED_COUNTER = "ck"
COUNTERS = ("registers", "memory")
DELIVERING = ("recv", "recv2", "local")  # the chains that write the destination's words
GATE = "g_wait"  # a gated PE's count of deliveries still to come (a view of the gate's word)


def through_f32(src_fmt: str, dst_fmt: str) -> bool:
    """A move between two different 16-bit formats: no single op converts it."""
    return src_fmt != dst_fmt and src_fmt in HALF_DTYPES and dst_fmt in HALF_DTYPES


def _convert(dst, dst_fmt: str, src, src_fmt: str, done, sync: bool = False):
    """The async op writing `src` (format src_fmt) into `dst` (dst_fmt): a copy within one
    format, else to_half (from fp32) or to_f32 (to fp32). sync (a copy on memory alone
    where `FabricConfig.async_memory_ops` is False): the op synchronous, then the
    activation its completion would have made; a list of instructions."""
    if sync:
        op = _convert(dst, dst_fmt, src, src_fmt, None)
        op = dataclasses.replace(op, is_async=False)
        return [op] + ([ins.activate(done.task)] if done is not None else [])
    if dst_fmt == src_fmt:
        return ins.mov(dst, src, dtype=dst_fmt, is_async=True, on_done=done)
    if src_fmt == "f32":
        return ins.to_half(dst, src, dst_fmt, is_async=True, on_done=done)
    if dst_fmt == "f32":
        return ins.to_f32(dst, src, src_fmt, is_async=True, on_done=done)
    raise AssertionError(f"no single op converts {src_fmt} to {dst_fmt}")


def send_op(m, run: Run, fmt: str):
    """The op sending `run` (format `fmt`) of move `m` in its wire format."""
    out = ins.FabOut(m.color, run.length, packed=m.packed)
    return lambda done: _convert(out, m.wire, _mem(SRC, run), fmt, done)


def recv_op(m, run: Run, fmt: str):
    """The op receiving `run` of move `m` into format `fmt`."""
    inp = ins.FabIn(m.color, run.length, packed=m.packed)
    return lambda done: _convert(_mem(DST, run), fmt, inp, m.wire, done)


def copy_op(to: Run, of: Run, fmt: str, sync: bool = False):
    """The op copying destination words `of` into destination words `to`, both of format
    `fmt` (an element the PE received once, into its other slots); sync: as `_convert`."""
    return lambda done: _convert(_mem(DST, to), fmt, _mem(DST, of), fmt, done, sync)


def local_ops(d: Run, d_fmt: str, s: Run, s_fmt: str, sync: bool = False) -> list:
    """The chain ops of one local run: one op, or h1 -> h2 through the fp32 scratch;
    sync: as `_convert`."""
    if not through_f32(s_fmt, d_fmt):
        return [lambda done: _convert(_mem(DST, d), d_fmt, _mem(SRC, s), s_fmt, done, sync)]
    tmp = ins.Mem(SCRATCH, 0, d.length)
    return [lambda done: _convert(tmp, "f32", _mem(SRC, s), s_fmt, done, sync),
            lambda done: _convert(_mem(DST, d), d_fmt, tmp, "f32", done, sync)]


def local_cycles(config, d: Run, d_fmt: str, s: Run, s_fmt: str) -> int:
    """Datapath cycles of a local run's ops at their SIMD widths (`Run.mov_cycles`), each
    capped by the strides of its memory operands (`FabricConfig.stride_width`; the fp32
    scratch is contiguous)."""
    if through_f32(s_fmt, d_fmt):
        return (s.mov_cycles(config.simd_width("cvt", "f16", strides=(s.stride,)))
                + d.mov_cycles(config.simd_width("cvt", "f16", strides=(d.stride,))))
    strides = (d.stride, s.stride)
    if d_fmt != s_fmt:
        return d.mov_cycles(config.simd_width("cvt", "f16", strides=strides))
    return d.mov_cycles(config.simd_width("mov", "f16" if d_fmt in HALF_DTYPES else "f32",
                                          strides=strides))


def _mem(prefix: str, run: Run) -> ins.Mem:
    return dataclasses.replace(run.mem(), symbol=prefix + run.symbol)


def tile_spec(src, dst, cell, chains, scratch: int = 0, gate: tuple[str, ...] = (),
              counters: str = "registers"):
    """What a PE holds and runs: its symbols [(name, dtype, slots)] and its chains' code.
    `gate`: tasks its delivering chains open when the last of them is done (`gate_code` on
    the word GATE, which the PE then declares). `counters`: where each chain counts its
    activations, "registers" (one per chain) or "memory" (a word per chain, COUNTER_WORD,
    and the one scratch register SHARED_COUNTER, which the PE's chains of every move may
    share in a merged program)."""
    symbols = []
    for prefix, m in ((SRC, src), (DST, dst)):
        if m.rect.contains(*cell):
            symbols += [(prefix + k, _symbol_dtype(m.dtypes[k]), a.shape[2])
                        for k, a in m.symbols.items()]
    if scratch:
        symbols.append((SCRATCH, "f32", scratch))
    gated = gate and any(k in chains for k in DELIVERING)
    if gated:
        symbols.append((GATE, "u32", 1))
    in_memory = counters == "memory"
    if in_memory:
        symbols += [(COUNTER_WORD[k], "u32", 1) for k in CHAINS if k in chains]

    def code(k: str) -> tuple:
        counter = SHARED_COUNTER if in_memory else COUNTER[k]
        then = gate_code(counter, GATE, gate) if gated and k in DELIVERING else ()
        return tuple(chain_code(k, counter, chains[k], then,
                                word=COUNTER_WORD[k] if in_memory else None))

    return tuple(symbols), tuple((k, code(k)) for k in CHAINS if k in chains)


def tile(name, spec) -> Tile:
    symbols, code = spec
    tile = Tile(name)
    for sym, dtype, slots in symbols:
        tile.symbol(sym, dtype, slots)
    for task, body in code:
        tile.local_task(task, body)
    return tile




def _symbol_dtype(fmt: str) -> str:
    """The program symbol dtype of a slot format: 32-bit slots are raw words ("u32": token
    ids and fp32 values move alike)."""
    return fmt if fmt in HALF_DTYPES else "u32"
