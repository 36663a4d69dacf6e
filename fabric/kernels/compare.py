"""Order-based elementwise kernels on (m, n) tensors in 2D blocks on a rectangle (layout of
`base.Blocks`, the code of `unary.build_blockwise`), each with a numpy reference and an
exact cycle model (2 + the op list's ceil(e_max / w_op) sum):

- `build_compare`: x op s (a scalar; "gt", "lt", "ge", "le", "eq", "ne") as a 0/1 mask
  from float max/min/mul/add (below), cheaper than `build_relation` where its flush of
  subnormal differences cannot matter: token ids (integers) compared with a padding id
  give the attention and position masks, pooling's backward multiplies by one;
- `build_relation`: x op z or x op s for op in RELATIONS, exact for every value (order
  keys read from the bits; float or int32 words);
- `build_select`: where(c, a, b), the chosen branch's bits moved unchanged;
- `build_extremum`: maximum / minimum of two tensors, leaky_relu.

`build_compare`:

The PE has no compare builtin; the mask comes from max/min/mul/add, exactly:

    d = x - s (gt, le) or s - x (lt, ge)      d > 0 exactly when x > s (x < s)
    step = min(max(d, 0) * 2^127, 1)          0 for d <= 0; for d >= 2^-126 (the smallest
                                              normal) max(d, 0) * 2^127 >= 2, so 1
    y = step (gt, lt) or 1 - step (le, ge)    (-step + 1: exact for step in {0, 1})
    ne, eq: d = |x - s| = max(x - s, -(x - s)) (one scratch vector), y = step (ne) or
    1 - step (eq)

int32 input (from_int32=True, dtype "f32" only): x holds int32 words (token ids as the host
writes them); one `itof` first makes them fp32, exact for |x| <= 2^24, the range in which
the fabric carries integer values as fp32 (larger ids are refused at run time by the
frontend's embedding checks, not here).

x - s is exact in sign: it is 0 only when x == s, except that the fabric's fp32 ops flush
subnormal results to zero, so |x - s| < 2^-126 reads as equality (with s = 0: a subnormal
x compares as 0). NaN inputs give an unspecified 0 or 1.

Cycle model (exact): T = 2 + sum over the ops of ceil(e_max / w_op) (task start and end,
one straight list of synchronous ops over the PE's e elements; `mathlib.sequence_cycles`):
3 ops plus the subtraction (none for s = 0 with gt/le), plus 2 for le/ge; eq/ne: the
subtraction (a copy for s = 0), a negation and a max before the 3, plus 2 for eq; plus the
itof of an int32 input.

Example:
    >>> k = build_compare(FabricConfig.small(4, 4), Rect(0, 0, 2, 2), 6, 5, "gt", 0.0)
    >>> y = run_kernel(k, {"x": x}).output                       # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from fabric import instructions as ins
from fabric.config import FabricConfig
from fabric.instructions import Mem
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Kernel
from fabric.kernels.unary import build_blockwise
from fabric.numerics.convert import round_to
from fabric.program import Rect

OPS = ("gt", "lt", "ge", "le", "eq", "ne")
_BIG = float(2.0 ** 127)  # any normal fp32 d > 0 times this is >= 2


def compare_code(op: str, scalar: float, from_int32: bool = False):
    """code_of(y, x, scratch) for `build_blockwise`: the straight op list above (eq and ne
    use scratch[0]; y may be x)."""
    s = float(np.float32(scalar))

    def code_of(y, x, scratch):
        code = []
        if from_int32:
            code.append(ins.itof(y, x))  # int32 words -> fp32, exact up to 2^24
            x = y
        if op in ("eq", "ne"):  # |x - s| into y
            code.append(ins.add(y, x, -s) if s != 0.0 else ins.mov(y, x))
            code += [ins.mul(scratch[0], y, -1.0), ins.max_(y, y, scratch[0])]
            src = y
        elif op in ("gt", "le"):
            src = x
            if s != 0.0:
                code.append(ins.add(y, x, -s))  # x + (-s) is x - s, rounded once
                src = y
        else:  # s - x = (-x) + s
            code += [ins.mul(y, x, -1.0), ins.add(y, y, s)]
            src = y
        code += [ins.max_(y, src, 0.0), ins.mul(y, y, _BIG), ins.min_(y, y, 1.0)]
        if op in ("le", "ge", "eq"):
            code += [ins.mul(y, y, -1.0), ins.add(y, y, 1.0)]
        return code

    return code_of


def build_compare(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "gt",
                  scalar: float = 0.0, dtype: str = "f32", from_int32: bool = False) -> Kernel:
    """y = 1.0 where x op scalar else 0.0, x and y (m, n); op "gt", "lt", "ge", "le", "eq",
    "ne". Inputs {"x"}; output (m, n). dtype: storage of x and y (a 16-bit x is widened
    exactly, the mask is exact in every format). from_int32: x holds int32 words (dtype
    "f32" only); the load writes x's words as given, so pass the ids' bits as float32
    (`ids.astype(np.int32).view(np.float32)`; the frontend writes an integer input's words
    so, and probes the layout with the plain load)."""
    if op not in OPS:
        raise ValueError(f"compare: op must be one of {OPS}, got {op!r}")
    if not np.isfinite(np.float32(scalar)):
        raise ValueError(f"compare: the scalar must be a finite fp32 value, got {scalar}")
    if from_int32 and dtype != "f32":
        raise ValueError(f"compare: an int32 input needs dtype 'f32', got {dtype!r}")
    code_of = compare_code(op, scalar, from_int32)
    scratch = 1 if op in ("eq", "ne") else 0

    def cycles_of(cfg, e):
        probe = ins.Mem("y", length=e)
        work = [ins.Mem("s0", length=e)] * scratch
        return ml.sequence_cycles(cfg, code_of(probe, ins.Mem("x", length=e), work), e)

    kernel = build_blockwise(config, rect, m, n, f"compare_{op}", code_of, scratch, cycles_of,
                             dtype)
    kernel.info.update(op=op, scalar=float(np.float32(scalar)), from_int32=from_int32)
    return kernel


def compare_reference(x: np.ndarray, op: str = "gt", scalar: float = 0.0) -> np.ndarray:
    """numpy's mask, with the fabric's flush of subnormal differences (see above)."""
    x = np.asarray(x, np.float32)
    s = np.float32(scalar)
    d = {"gt": x - s, "le": x - s, "eq": np.abs(x - s), "ne": np.abs(x - s)}.get(op, s - x)
    d = np.where(np.abs(d) < np.float32(2.0 ** -126), np.float32(0), d)
    step = (d > 0).astype(np.float32)
    return step if op in ("gt", "lt", "ne") else np.float32(1) - step


# ---- exact comparisons of two tensors (or a tensor and a scalar) -------------------------
RELATIONS = ("eq", "ne", "gt", "ge", "lt", "le")
_NAN_EDGE = 0x7F800000  # |bits| above this: a NaN
SCRATCH = 7  # scratch vectors of `relation_code`
_ORDER = {"eq": np.equal, "ne": np.not_equal, "gt": np.greater, "ge": np.greater_equal,
          "lt": np.less, "le": np.less_equal}


def _key_parts(h: Mem, lo: Mem, nan: Mem, g: Mem, x: Mem, kind: str) -> list:
    """The order key of x's bits as two exact floats, h 2^16 + lo = key, and (floats) the
    NaN flag 0/1 in `nan`. float: key = sign(x) |bits|, so that -0 and +0 are one key and
    the order of keys is the order of values (h: the top 15 bits of |bits|, lo: the low
    16, both times +-1.0 built from the sign bit in g); int (int32 bit patterns): key =
    bits + 2^31, h and lo its top and low 16 bits, never NaN (nan is 0)."""
    if kind == "int":
        return [ins.iaddv(g, x, -(1 << 31)), ins.shr(h, g, 16), ins.shl(lo, g, 16),
                ins.shr(lo, lo, 16), ins.itof(h, h), ins.itof(lo, lo), ins.mov(nan, 0.0)]
    return [
        ins.shl(h, x, 1),
        ins.shr(nan, h, 1),  # |bits|
        ins.isubv(nan, _NAN_EDGE, nan),
        ins.shr(nan, nan, 31),  # [|bits| > inf's]
        ins.itof(nan, nan),
        ins.shr(h, h, 17),
        ins.shl(lo, x, 16),
        ins.shr(lo, lo, 16),
        ins.itof(h, h),
        ins.itof(lo, lo),
        ins.shr(g, x, 31),
        ins.shl(g, g, 31),
        ins.iaddv(g, g, ml.ONE_BITS),  # +-1.0, the sign of x
        ins.mul(h, h, g),
        ins.mul(lo, lo, g),
    ]


def scalar_key(value: float, kind: str = "float") -> tuple[float, float, float]:
    """(h, lo, nan) of `_key_parts` for a scalar, computed on the host."""
    if kind == "int":
        u = (int(value) + (1 << 31)) & 0xFFFFFFFF
        return float(u >> 16), float(u & 0xFFFF), 0.0
    bits = int(np.array(value, np.float32).view(np.uint32))
    mag, sign = bits & 0x7FFFFFFF, -1.0 if bits >> 31 else 1.0
    return sign * (mag >> 16), sign * (mag & 0xFFFF), float(mag > _NAN_EDGE)


def _mask_of(y: Mem, v: Mem, nan: Mem, op: str) -> list:
    """y = [v op 0] for the integer-valued key difference v (|v| >= 1 unless 0), then
    forced to 0 (1 for ne) where nan (0, 1 or 2 NaN operands) is nonzero."""
    if op == "gt":
        code = [ins.min_(y, v, 1.0)]
    elif op == "lt":
        code = [ins.mul(y, v, -1.0), ins.min_(y, y, 1.0)]
    elif op == "ge":
        code = [ins.add(y, v, 1.0), ins.min_(y, y, 1.0)]
    elif op == "le":
        code = [ins.fma(y, 1.0, v, -1.0), ins.min_(y, y, 1.0)]  # 1 - v
    else:  # |v| clamped to 1: ne; eq is 1 - that
        code = [ins.shl(y, v, 1), ins.shr(y, y, 1), ins.min_(y, y, 1.0)]
        if op == "eq":
            code.append(ins.fma(y, 1.0, y, -1.0))
    if op == "ne":
        return [*code, ins.add(y, y, nan), ins.min_(y, y, 1.0)]
    return [*code, ins.max_(y, y, 0.0), ins.sub(y, y, nan), ins.max_(y, y, 0.0)]


def relation_code(op: str, scalar: float | None = None, kind: str = "float"):
    """code_of(y, x[, z], scratch) for `build_blockwise`: y = 1.0 where x op z (or x op
    scalar) else 0.0, exact (`build_relation`); SCRATCH vectors."""
    if op not in RELATIONS:
        raise ValueError(f"relation: op must be one of {RELATIONS}, got {op!r}")

    def code_of(y, x, *rest):
        *z, scratch = rest
        hx, lx, nx, hz, lz, nz, g = scratch[:SCRATCH]
        code = _key_parts(hx, lx, nx, g, x, kind)
        if scalar is None:
            code += _key_parts(hz, lz, nz, g, z[0], kind)
            code += [ins.sub(hx, hx, hz), ins.sub(lx, lx, lz), ins.add(nx, nx, nz)]
        else:
            h, lo, nan = scalar_key(scalar, kind)
            code += [ins.add(hx, hx, -h), ins.add(lx, lx, -lo)]
            if nan:
                code.append(ins.add(nx, nx, 1.0))
        code.append(ins.fma(hx, lx, hx, 65536.0))  # v = dh 2^16 + dl: the sign exact
        return code + _mask_of(y, hx, nx, op)

    return code_of


def build_relation(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "eq",
                   scalar: float | None = None, kind: str = "float",
                   dtype: str = "f32") -> Kernel:
    """y = 1.0 where x op z (scalar None: inputs {"x", "z"}) or x op scalar (inputs {"x"})
    else 0.0, op one of RELATIONS, all (m, n) in `base.Blocks`' layout; exact as IEEE
    comparisons for every value: -0 == +0, NaN compares unequal to everything (ne: 1),
    +-inf and subnormals compare by value (the keys are read from the bits; no float
    subtraction flushes or overflows).

    Method: each operand's bits give an order key split in two exact floats (`_key_parts`:
    sign times the top 15 and the low 16 bits of |bits|), the key difference
    v = (hx - hz) 2^16 + (lx - lz) is one fma whose rounding keeps its sign and its zero,
    and min/max turn v into the 0/1 mask (`_mask_of`); NaN flags from the bits force the
    unordered result. kind "int": x (and z) hold int32 bit patterns (an integer input),
    compared as integers (scalar: an integer).

    dtype: storage of x, z and y ("f32" or 16-bit: widened exactly, the mask is exact).
    Cycle model (exact): T = 2 + sum over the op list of ceil(e_max / w_op)
    (+ the conversions of 16-bit storage, `build_blockwise`)."""
    if kind not in ("float", "int") or (kind == "int" and dtype != "f32"):
        raise ValueError(f"relation: kind must be 'float' or 'int' (int: dtype 'f32'), got "
                         f"{kind!r} with dtype {dtype!r}")
    code_of = relation_code(op, scalar, kind)
    inputs = ("x",) if scalar is not None else ("x", "z")
    kernel = build_blockwise(config, rect, m, n, f"relation_{op}", code_of, SCRATCH,
                             sequence_model(code_of, inputs, SCRATCH), dtype, inputs)
    kernel.info.update(op=op, scalar=scalar, kind=kind)
    return kernel


def relation_reference(x, z, op: str = "eq") -> np.ndarray:
    """numpy's comparison (IEEE: NaN unordered, -0 == +0) as a 0/1 float32 mask."""
    return _ORDER[op](np.asarray(x), np.asarray(z)).astype(np.float32)


# ---- selection and order-based maps ------------------------------------------------------
def select_code(a: float | None = None, b: float | None = None):
    """code_of(y, c, [a], [b], scratch) for `build_blockwise`: y = a where c's bits are
    nonzero (a mask's 1.0, an integer input's 1) else b, moved bit for bit (NaN, inf and
    -0 included); a or b given: that branch is the immediate scalar. 2 scratch vectors.

    Method (integer ops on the bits, no float arithmetic): t = [c != 0] (0/1), the branch
    not taken is shifted left twice by 32 (the shifter saturates at 31, so twice clears
    every bit) and the two are added as integers, one of them being 0."""

    def code_of(y, c, *rest):
        *branches, scratch = rest
        it = iter(branches)
        va = a if a is not None else next(it)
        vb = b if b is not None else next(it)
        t, k = scratch[:2]
        return [
            ins.shl(t, c, 1),
            ins.shr(t, t, 1),
            ins.iaddv(t, t, 0x7FFFFFFF),
            ins.shr(t, t, 31),  # [c != 0], -0 counts as 0
            ins.isubv(k, 1, t),
            ins.shl(k, k, 5),  # 32 where b is taken
            ins.shl(y, va, k),
            ins.shl(y, y, k),  # a or 0
            ins.shl(k, t, 5),  # 32 where a is taken
            ins.shl(t, vb, k),
            ins.shl(t, t, k),  # b or 0
            ins.iaddv(y, y, t),
        ]

    return code_of


def sequence_model(code_of, inputs, scratch):
    """cycles_of(config, e) of a straight code_of(y, *inputs, scratch) over e elements."""
    def cycles_of(cfg, e):
        mems = [ins.Mem(name, length=e) for name in ("y", *inputs)]
        return ml.sequence_cycles(cfg, code_of(*mems, [ins.Mem(f"s{i}", length=e)
                                                        for i in range(scratch)]), e)
    return cycles_of


def build_select(config: FabricConfig, rect: Rect, m: int, n: int, a: float | None = None,
                 b: float | None = None, dtype: str = "f32") -> Kernel:
    """y = where(c, a, b) for a 0/1 mask c (m, n) (nonzero bits: true) and branches a, b
    that are (m, n) inputs or, given here, scalars (rounded to dtype). Inputs {"c"} and
    "a", "b" unless given; output (m, n); exact (`select_code`).

    dtype: storage of every input and y (16-bit: widened exactly, selected, rounded back
    exactly). Cycle model (exact): T = 2 + sum of ceil(e_max / w_op) over the 12 integer
    ops (+ the conversions of 16-bit storage)."""
    if dtype != "f32":
        a, b = (None if v is None else float(round_to(np.float32(v), dtype)) for v in (a, b))
    inputs = ("c", *(name for name, v in (("a", a), ("b", b)) if v is None))
    code_of = select_code(a, b)
    kernel = build_blockwise(config, rect, m, n, "select", code_of, 2,
                             sequence_model(code_of, inputs, 2), dtype, inputs)
    kernel.info.update(a=a, b=b)
    return kernel


def select_reference(c, a, b) -> np.ndarray:
    return np.where(np.asarray(c) != 0, np.float32(a), np.float32(b)).astype(np.float32)


def extremum_code(op: str, slope: float | None = None):
    """code_of for `build_blockwise`: "maximum" / "minimum" of x and z (NaN wins, -0 < +0),
    or leaky_relu(x) with `slope`: max(x, slope x) for slope <= 1, min for slope > 1
    (x where x > 0, slope x elsewhere; slope x rounded once, as torch)."""
    if op == "leaky_relu":
        pick = ins.max_ if slope <= 1 else ins.min_

        def leaky(y, x, scratch):
            return [ins.mul(scratch[0], x, float(slope)), pick(y, x, scratch[0])]
        return leaky
    pick = {"maximum": ins.max_, "minimum": ins.min_}[op]
    return lambda y, x, z, scratch: [pick(y, x, z)]


def build_extremum(config: FabricConfig, rect: Rect, m: int, n: int, op: str = "maximum",
                   slope: float | None = None, dtype: str = "f32") -> Kernel:
    """y = maximum(x, z) / minimum(x, z) (inputs {"x", "z"}) or leaky_relu(x, slope)
    (op "leaky_relu", inputs {"x"}), all (m, n); exact (one rounding of slope x).
    Cycle model (exact): T = 2 + c(max) (+ c(mul) for leaky_relu) (+ 16-bit conversions)."""
    if op not in ("maximum", "minimum", "leaky_relu") or ((slope is None) != (op != "leaky_relu")):
        raise ValueError(f"extremum: op must be 'maximum', 'minimum' or 'leaky_relu' (with a "
                         f"slope), got {op!r}, slope={slope}")
    inputs = ("x",) if op == "leaky_relu" else ("x", "z")
    scratch = 1 if op == "leaky_relu" else 0
    code_of = extremum_code(op, slope)
    kernel = build_blockwise(config, rect, m, n, op, code_of, scratch,
                             sequence_model(code_of, inputs, scratch), dtype, inputs)
    kernel.info.update(op=op, slope=slope)
    return kernel


def extremum_reference(x, z=None, op: str = "maximum", slope: float | None = None):
    x = np.asarray(x, np.float32)
    if op == "leaky_relu":
        with np.errstate(over="ignore", invalid="ignore"):
            return np.where(x > 0, x, x * np.float32(slope)).astype(np.float32)
    return (np.maximum if op == "maximum" else np.minimum)(x, np.asarray(z, np.float32))
