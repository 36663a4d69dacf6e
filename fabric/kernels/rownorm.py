"""Row softmax and row layernorm of an (m, n) tensor whose rows span the PEs of a rectangle.

Layout (`base.Blocks`): row blocks over rect.rows, column blocks over rect.cols
(`split`); every PE holds its block padded to (mb, nb) = the largest block, row major with
row stride nb, so one tile with static DSDs serves every PE and each PE computes mb x nb
elements (the largest block's work, which sets the time anyway). A tensor row is spread over
the rect.cols PEs of a PE row: its max and sums are reduced across them and broadcast back
with a row allreduce from `fabric.kernels.collectives` (chain by default: the east end
streams the mb-word vector west, each PE combining its own into the stream, the west PE
multicasts the result back east). Both allreduces of a kernel share its colors (3 for a
chain).

Per PE (2D DSDs: `row(v)` repeats the mb-word vector v across each row, stride 0; `col(v)`
repeats an nb-word vector down the rows, row stride 0; accumulating into `row(v)` sums a
row into one word at one element per cycle):

    softmax                                   layernorm
    v = x[:, 0]; row(v) = max(row(v), x)      s = 0; row(s) += x
    allreduce max v                           allreduce add s;  s *= 1/n
    x -= row(v); x = exp(x)                   x -= row(s); x[:, nb-1] = 0 where padding
    s = 0; row(s) += x                        q = x * x; v = 0; row(v) += q
    allreduce add s                           allreduce add v;  v = v/n + eps; r = rsqrt(v)
                                              r += 0 v (NaN where v overflowed)
    r = 1 / s (refined); x *= row(r)          x *= row(r); x *= col(gamma); x += col(beta)

Padding: softmax pads with -FLT_MAX (exp gives 1.2e-38 there, nothing next to a row sum
>= 1); layernorm pads with 0 and zeroes the padding column of x - mean before the variance
(a length register makes that op empty on PEs without padding).

Cycle model (exact, chain and tree allreduce alike): with c(op) = ceil(e / w_op) over e = mb nb
elements and c_m(op) over mb, the local phases cost

    softmax:   A = c_m(mov) + e,  B = c(sub) + exp_cycles(e, no upper clamp) + c_m(mov) + e,
               C = reciprocal_cycles(mb, refined) + c(mul)                ~ 18.5 e on WSE-2
    layernorm: A = c_m(mov) + e,  B = c_m(mul) + c(sub) + z + c(mul) + c_m(mov) + e,
               C = 2 c_m(fma) + rsqrt_cycles(mb) + 2 c(mul) + c(add)         ~ 6 e on WSE-2
               (z = c_m(mov) on a PE with a padding column, else 1)

(softmax's first c_m(mov) and layernorm's z read or write a column of the block, stride nb,
at the width that stride allows: `FabricConfig.stride_width`)

and every PE's timeline is task start (1) + A + allreduce + B + allreduce + C + ret (1),
each phase plus its element groups that wait under the bank read-pair rule
(`fabric.banks.read_pair_stalls` with the tile's bank-aware layout; layernorm's x * x reads
one word twice and waits on every group),
the allreduces' entry-to-exit times given per PE by `Fragment.exit_times` (collectives:
chain reduce d + (2H + 1)(L - 1) + mb + 2, then the multicast hops H + H + 1 + mb).

Numerics (u = 2^-24): see `softmax_tolerance` and `layernorm_tolerance`; both follow the
rounding of each step, the mathlib ulp bounds and the depth of the fabric's summation
order (a term passes at most nb - 1 + rect.cols - 1 additions).

16-bit storage (dtype h = "f16", "bf16" or "cb16", acc_dtype "f32", as PyTorch computes fp16
and bf16 softmax / layer_norm: fp32 inside, the output rounded once): the symbols the host
loads and reads (x, and layernorm's gamma, beta) are h, holding in half-word slot i what the
fp32 symbols hold in word i. The kernel widens them exactly into fp32 work copies (to_f32),
runs the fp32 code above unchanged (same ops, order and collectives) and rounds the result
once into x (to_half); so the output is the fp32 kernel's output on the rounded inputs,
rounded to h: the fp32 error bounds above are far below half an ulp of h, so the result is
the correctly rounded one or its neighbour (1 ulp of h), except where the fp32 error is
absolute (layernorm outputs that cancel against beta; softmax outputs under exp's floor of
1.2e-38 / sum, which only bf16 resolves). Softmax pads with -max(h) (-FLT_MAX would round to
-inf, and a padding row would give -inf - -inf = NaN). SRAM per element: 3.5 words for
softmax, 2.5 for layernorm (fp32: 3 and 2). The model adds c_cvt(e) to A (layernorm also
2 c_cvt(nb) for gamma, beta) and c_cvt(e) to C, c_cvt at the ("cvt", "f16") width: about
18 e and 7 e on WSE-2. acc_dtype = h raises ValueError: sums of exponentials and variances
in 16 bits are not what frameworks compute.

Example:
    >>> k = build_softmax(FabricConfig.small(4, 4), Rect(0, 0, 3, 4), 10, 37)  # doctest: +SKIP
    >>> y = run_kernel(k, {"x": x}).output                                      # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.isa import SIMD_CONVERT, SIMD_NAME, Op
from fabric.kernels import collectives as coll
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Blocks, Kernel, check_dtypes, check_sram, pick_colors
from fabric.numerics import FORMATS, words_for
from fabric.program import Program, Rect, Tile

U = 2.0**-24
FLT_MAX = float(np.finfo(np.float32).max)
SOFTMAX_FILL = -FLT_MAX


def _c(config: FabricConfig, op: Op, e: int, stride: int = 1) -> int:
    return math.ceil(e / config.simd_width(*SIMD_NAME[op], strides=(stride,)))


def _cvt(config: FabricConfig, e: int) -> int:
    """Cycles of a to_f32 / to_half over e elements."""
    return math.ceil(e / config.simd_width(*SIMD_CONVERT))


def _row(sym: str, mb: int, nb: int) -> Mem:
    """mb-word vector `sym` repeated across each of mb rows of nb: element (i, j) -> sym[i]."""
    return Mem(sym, 0, mb * nb, stride=0, row_length=nb, row_stride=1)


def _col(sym: str, mb: int, nb: int) -> Mem:
    """nb-word vector `sym` repeated down mb rows: element (i, j) -> sym[j]."""
    return Mem(sym, 0, mb * nb, stride=1, row_length=nb, row_stride=0)


class _Plan:
    """Sizes, tile and program shared by the two kernels."""

    def __init__(self, what, config, rect, m, n, dtype, acc_dtype, colors, algo,
                 words_per_elem, extra_words, io_vectors=0):
        """words_per_elem fp32 work words per element, extra_words(mb, nb) more fp32
        words; 16-bit dtype: the x symbol and io_vectors nb-vectors in h on top."""
        check_dtypes(what, dtype, acc_dtype, half_acc=False)
        self.blocks = b = Blocks.of(rect, m, n)
        self.mb, self.nb, self.e = b.mb, b.nb, b.mb * b.nb
        self.dtype, self.half = dtype, dtype != "f32"
        # fp32 work copy of x: x itself in fp32, else a separate symbol
        self.w = "xf" if self.half else "x"
        words = words_per_elem * self.e + extra_words(b.mb, b.nb)
        if self.half:
            words += words_for(dtype, self.e) + io_vectors * words_for(dtype, b.nb)
        check_sram(config, what, words, f"a block of {b.mb} x {b.nb} (tensor {m} x {n} on "
                   f"{rect.rows} x {rect.cols} PEs, {dtype})")
        need = coll.colors_needed("allreduce", rect, "row", algo)
        self.colors = pick_colors(config, need, colors)
        self.config, self.rect, self.algo, self.what = config, rect, algo, what
        self.prog = Program(config)
        self.tile = Tile(what)

    def allreduce(self, buf: str, op: str, name: str):
        return coll.allreduce(self.prog, self.rect, buf, self.mb, self.colors, along="row",
                              algo=self.algo, op=op, name=name)

    def finish(self, phase_code, fragments, phases, params, load, read) -> Kernel:
        """Place the tile (phase_code[0], fragments[0], phase_code[1], ...); model: start,
        phases[0], fragments[0], phases[1], ..., ret, each phase plus its element groups
        that wait on a bank pair (`fabric.banks.read_pair_stalls`)."""
        code = [*phase_code[0]]
        for frag, local in zip(fragments, phase_code[1:]):
            code += [*frag.code, *local]
        self.tile.local_task("main", code)
        phases = [cost + read_pair_stalls(self.config, self.tile, local)
                  for cost, local in zip(phases, phase_code)]
        frag_params = {}
        for f in fragments:
            frag_params.update(f.params_for(self.rect))
        self.prog.place(self.tile, self.rect, params={**frag_params, **params})
        t = np.ones((self.rect.rows, self.rect.cols), np.int64) + phases[0]
        for frag, phase in zip(fragments, phases[1:]):
            t = frag.exit_times(t) + phase
        model = int(t.max()) + 1
        rect = self.rect
        return Kernel(self.what, self.config, rect, self.prog, load, read,
                      lambda sim: sim.launch("main", rect), model, 0,
                      {"m": self.blocks.m, "n": self.blocks.n, "block": (self.mb, self.nb),
                       "algo": self.algo, "colors": tuple(self.colors),
                       "dtype": self.dtype, "acc_dtype": "f32"})

    def widen(self) -> list:
        """16-bit dtype: x (h) -> its fp32 work copy; fp32: nothing."""
        if not self.half:
            return []
        return [ins.to_f32(Mem(self.w, 0, self.e), Mem("x", 0, self.e), self.dtype)]

    def narrow(self) -> list:
        """16-bit dtype: the fp32 result rounded once into x (h); fp32: nothing."""
        if not self.half:
            return []
        return [ins.to_half(Mem("x", 0, self.e), Mem(self.w, 0, self.e), self.dtype)]

    def convert_cycles(self, e: int) -> int:
        """Cycles of one widen or narrow over e elements (0 for fp32)."""
        return _cvt(self.config, e) if self.half else 0

    def read(self, sim) -> np.ndarray:
        """The (m, n) output as float32 (exact values of the 16-bit results)."""
        return self.blocks.gather(np.asarray(sim.memcpy_d2h("x", self.rect), np.float32),
                                  packed=False)


# ---- softmax ---------------------------------------------------------------------------------
def build_softmax(config: FabricConfig, rect: Rect, m: int, n: int, dtype: str = "f32",
                  colors: Sequence[int] | None = None, algo: str = "chain",
                  acc_dtype: str = "f32") -> Kernel:
    """Softmax of every row of an (m, n) tensor, rows spread over the PEs of each row of
    `rect`.

    Args:
        config, rect: the fabric and the rectangle of PEs.
        m, n: tensor sizes (m >= rect.rows, n >= rect.cols; uneven splits are fine).
        dtype: storage format of x (input and output): "f32", "f16", "bf16" or "cb16".
        colors: `collectives.colors_needed("allreduce", rect, "row", algo)` colors
            (default the lowest).
        algo: "chain" or "tree", the row allreduce's reduction.
        acc_dtype: "f32" only (16-bit x is widened, computed in fp32 and rounded once).

    Returns:
        a Kernel: inputs {"x": (m, n)}, output (m, n) float32; model in the module
        docstring.
    """
    p = _Plan("softmax", config, rect, m, n, dtype, acc_dtype, colors, algo, 3,
              lambda mb, nb: 4 * mb)
    mb, nb, e, t, w = p.mb, p.nb, p.e, p.tile, p.w
    for name, size in dict.fromkeys((("x", e), (w, e), ("s0", e), ("s1", e), ("mx", mb),
                                     ("sm", mb), ("r", mb), ("rs", mb))):
        t.symbol(name, dtype if name == "x" else "f32", size)
    x = Mem(w, 0, e)
    first_col = Mem(w, 0, mb, stride=nb)
    fmax, fsum = p.allreduce("mx", "max", "amax"), p.allreduce("sm", "add", "asum")
    phase_a = [*p.widen(),
               ins.mov(Mem("mx", 0, mb), first_col),
               ins.max_(_row("mx", mb, nb), _row("mx", mb, nb), x)]
    phase_b = [ins.sub(x, x, _row("mx", mb, nb)),
               *ml.exp(x, x, (Mem("s0", 0, e), Mem("s1", 0, e)), hi=None),  # x <= 0
               ins.mov(Mem("sm", 0, mb), 0.0),
               ins.add(_row("sm", mb, nb), _row("sm", mb, nb), x)]
    phase_c = [*ml.reciprocal(Mem("r", 0, mb), Mem("sm", 0, mb), (Mem("rs", 0, mb),),
                              refined=True),
               ins.mul(x, x, _row("r", mb, nb)),
               *p.narrow()]

    def c(op, k=e):
        return _c(config, op, k)

    # the first column of the block: mb elements at stride nb
    costs = [p.convert_cycles(e) + _c(config, Op.MOV, mb, stride=nb) + e,
             c(Op.SUB) + ml.exp_cycles(config, e, False) + c(Op.MOV, mb) + e,
             ml.reciprocal_cycles(config, mb, refined=True) + c(Op.MUL) + p.convert_cycles(e)]
    blocks = p.blocks
    # padding: exp(fill - max) vanishes next to a row sum >= 1; in 16 bits -FLT_MAX would
    # round to -inf and an all-padding row would compute -inf - -inf = NaN
    fill = -FORMATS[dtype].max if p.half else SOFTMAX_FILL

    def load(sim, inputs):
        sim.memcpy_h2d("x", blocks.scatter(inputs["x"], fill, packed=False), rect)

    return p.finish([phase_a, phase_b, phase_c], [fmax, fsum], costs, {}, load, p.read)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    """Row softmax in float64, rounded to fp32."""
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def sum_depth(blocks: Blocks) -> int:
    """Most roundings a term of a row sum passes: nb - 1 in its PE, rect.cols - 1 in the
    chain (the tree needs fewer)."""
    return blocks.nb - 1 + blocks.rect.cols - 1


def softmax_tolerance(x: np.ndarray, blocks: Blocks) -> np.ndarray:
    """Per-element bound on |fabric - softmax_reference| (u = 2^-24):

    eps_k = |x_k - max| u (rounding of x - max, amplified by exp) + 2 u EXP_ULPS
    |y_j| (eps_j + sum_k e_k eps_k / sum_k e_k + depth u + 2 u RECIPROCAL_REFINED_ULPS + 2 u)
    + 1.2e-38 (exp's floor) + u |y_j| (rounding the reference), with a 1 % margin for
    second-order terms.
    """
    x = np.asarray(x, np.float64)
    d = x - x.max(axis=1, keepdims=True)
    e = np.exp(d)
    y = e / e.sum(axis=1, keepdims=True)
    eps = -d * U + 2 * U * ml.EXP_ULPS
    eps_sum = (e * eps).sum(axis=1, keepdims=True) / e.sum(axis=1, keepdims=True)
    rel = eps + eps_sum + U * (sum_depth(blocks) + 2 * ml.RECIPROCAL_REFINED_ULPS + 3)
    return 1.01 * rel * y + 1.2e-38


# ---- layernorm -------------------------------------------------------------------------------
def build_layernorm(config: FabricConfig, rect: Rect, m: int, n: int, eps: float = 1e-5,
                    dtype: str = "f32", colors: Sequence[int] | None = None,
                    algo: str = "chain", acc_dtype: str = "f32") -> Kernel:
    """Layernorm of every row of an (m, n) tensor: (x - mean) rsqrt(var + eps) gamma
    + beta, with the population variance and gamma, beta of n values (per column).

    Args:
        config, rect, m, n, colors, algo: as `build_softmax`.
        eps: added to the variance.
        dtype: storage format of x, gamma, beta and the output ("f32", "f16", "bf16",
            "cb16").
        acc_dtype: "f32" only (16-bit data is widened, computed in fp32, rounded once).

    Returns:
        a Kernel: inputs {"x": (m, n), "gamma": (n,), "beta": (n,)}, output (m, n)
        float32; model in the module docstring.
    """
    p = _Plan("layernorm", config, rect, m, n, dtype, acc_dtype, colors, algo, 2,
              lambda mb, nb: 2 * nb + 4 * mb, io_vectors=2)
    mb, nb, e, t, w = p.mb, p.nb, p.e, p.tile, p.w
    # gamma, beta as loaded (dtype) and their fp32 work copies (the same symbols in fp32)
    g, bt = ("gammaf", "betaf") if p.half else ("gamma", "beta")
    io = {"x", "gamma", "beta"}  # symbols in dtype; the rest fp32 (the fp32 order first)
    for name, size in dict.fromkeys((("x", e), (w, e), ("q", e), ("gamma", nb), ("beta", nb),
                                     (g, nb), (bt, nb), ("sm", mb), ("vr", mb), ("rs", mb),
                                     ("tmp", mb))):
        t.symbol(name, dtype if name in io else "f32", size)
    x = Mem(w, 0, e)
    fmean, fvar = p.allreduce("sm", "add", "amean"), p.allreduce("vr", "add", "avar")
    inv_n = float(np.float32(1 / n))
    # the padding column of x - mean, on PEs whose block is one column narrower
    pad_rows = np.array([[mb if cs < nb else 0 for _, cs in p.blocks.cols]
                         for _ in p.blocks.rows], np.int32)
    widen_gb = [ins.to_f32(Mem(f, 0, nb), Mem(h, 0, nb), dtype)
                for f, h in ((g, "gamma"), (bt, "beta"))] if p.half else []
    phase_a = [*p.widen(), *widen_gb,
               ins.mov(Mem("sm", 0, mb), 0.0),
               ins.add(_row("sm", mb, nb), _row("sm", mb, nb), x)]
    phase_b = [ins.mul(Mem("sm", 0, mb), Mem("sm", 0, mb), inv_n),  # mean
               ins.sub(x, x, _row("sm", mb, nb)),
               ins.mov(Mem(w, nb - 1, stride=nb, length_reg="padrows"), 0.0),
               ins.mul(Mem("q", 0, e), x, x),
               ins.mov(Mem("vr", 0, mb), 0.0),
               ins.add(_row("vr", mb, nb), _row("vr", mb, nb), Mem("q", 0, e))]
    phase_c = [ins.fma(Mem("vr", 0, mb), float(np.float32(eps)), Mem("vr", 0, mb), inv_n),
               *ml.rsqrt(Mem("rs", 0, mb), Mem("vr", 0, mb), (Mem("tmp", 0, mb),)),
               # a variance that overflowed (or NaN) makes its row NaN, as torch's
               # layer_norm: r + 0 var is r for finite var, NaN for inf (whose rsqrt is
               # garbage without specials)
               ins.fma(Mem("rs", 0, mb), Mem("rs", 0, mb), Mem("vr", 0, mb), 0.0),
               ins.mul(x, x, _row("rs", mb, nb)),
               ins.mul(x, x, _col(g, mb, nb)),
               ins.add(x, x, _col(bt, mb, nb)),
               *p.narrow()]

    def c(op, k=e):
        return _c(config, op, k)

    zero_pad = np.where(pad_rows > 0, _c(config, Op.MOV, mb, stride=nb), 1)
    costs = [p.convert_cycles(e) + 2 * p.convert_cycles(nb) + c(Op.MOV, mb) + e,
             c(Op.MUL, mb) + c(Op.SUB) + zero_pad + c(Op.MUL) + c(Op.MOV, mb) + e,
             2 * c(Op.FMA, mb) + ml.rsqrt_cycles(config, mb) + 2 * c(Op.MUL) + c(Op.ADD)
             + p.convert_cycles(e)]
    blocks = p.blocks

    def load(sim, inputs):
        sim.memcpy_h2d("x", blocks.scatter(inputs["x"], 0.0, packed=False), rect)
        for name in ("gamma", "beta"):
            v = np.asarray(inputs[name], np.float32)
            if v.shape != (n,):
                raise ValueError(f"layernorm: {name} has shape {v.shape}, expected {(n,)}")
            per_pe = np.zeros((rect.rows, rect.cols, nb), np.float32)  # padding: 0
            for j, (c0, cs) in enumerate(blocks.cols):
                per_pe[:, j, :cs] = v[c0:c0 + cs]
            sim.memcpy_h2d(name, per_pe, rect)

    return p.finish([phase_a, phase_b, phase_c], [fmean, fvar], costs, {"padrows": pad_rows},
                    load, p.read)


def layernorm_reference(x, gamma, beta, eps: float = 1e-5) -> np.ndarray:
    """Row layernorm in float64 (population variance), rounded to fp32."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.float32(eps)) * np.asarray(gamma, np.float64)
    return (y + np.asarray(beta, np.float64)).astype(np.float32)


def layernorm_tolerance(x, gamma, beta, blocks: Blocks, eps: float = 1e-5) -> np.ndarray:
    """Per-element bound on |fabric - layernorm_reference| (u = 2^-24, D = sum_depth):

    mean: d_mu = u (D sum|x| / n + 2 |mean|)   (the row sum, then two roundings of * 1/n)
    var + eps: relative u (D + 5) (squares, their sum, * 1/n, + eps); the mean's error
        enters only at second order (the sum of x - mean vanishes)
    rstd: half of that + 2 u RSQRT_ULPS
    y_j: |rstd gamma_j| (u |x_j - mean| + d_mu) + |(x_j - mean) rstd gamma_j| (rstd's
        error + 2 u) + u |y_j| (add) + u |y_j| (rounding the reference), 1 % margin.
    """
    x = np.asarray(x, np.float64)
    g, b = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
    n = x.shape[1]
    D = sum_depth(blocks)
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    var = (d**2).mean(axis=1, keepdims=True) + np.float32(eps)
    rstd = 1 / np.sqrt(var)
    d_mu = U * (D * np.abs(x).sum(axis=1, keepdims=True) / n + 2 * np.abs(mean))
    rstd_rel = U * (D + 5) / 2 + 2 * U * ml.RSQRT_ULPS
    y = d * rstd * g + b
    tol = (np.abs(rstd * g) * (U * np.abs(d) + d_mu) + np.abs(d * rstd * g) * (rstd_rel + 2 * U)
           + 2 * U * np.abs(y))
    return 1.01 * tol
