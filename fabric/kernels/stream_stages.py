"""The elementwise ops a stream chain (`fabric.kernels.streams`) applies, one per tile: each
a `StreamStage` built on the same per-block code as its standalone kernel
(`fabric.kernels.elementwise`, `fabric.kernels.elementwise_chains`, and
`unary.blockwise_code` for every `build_blockwise` kernel), so the two forms compute the
same words bit for bit.

    map_stage(op, scalar, acc_dtype)   z = op(x, scalar)        as build_map
    binary_stage(op)                   z = x op y               as build_elementwise
    broadcast_stage(op, vector)        z = x op v (row/col v)   as build_broadcast_op(mode="load")
    affine_stage(vector)               z = x * s + t            as build_affine
    clamp_stage(lo, hi)                z = min(max(x, lo), hi)  as build_clamp
    unary_stage(fn)                    z = fn(x): tanh, exp, ... as build_unary
    binary_math_stage(fn)              z = atan2 / hypot / pow(x, b) as build_binary_math
    modulo_stage(op, divisor)          z = fmod / remainder(x, d)   as build_modulo
    gelu_stage, elu_stage, pow_stage, extremum_stage   as build_gelu, build_elu, ...
    blockwise_stage(...)               any `build_blockwise` code   as build_blockwise

x is what streams in; the other operands (y, v, s, t) are the stage's own inputs, written
by the host into the stage's tile in x's blocks (or, for a row / column vector, each PE's
part of it), as the standalone kernel's load writes them.

Example:
    >>> stages = [map_stage("relu"), affine_stage("row"), clamp_stage(-1.0, 1.0)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from fabric import instructions as ins
from fabric.instructions import Mem
from fabric.kernels.activations import APPROXIMATIONS, gelu_cycles
from fabric.kernels.activations import CODE as GELU_CODE
from fabric.kernels.activations import SCRATCH as GELU_SCRATCH
from fabric.kernels.base import BlockClass, Blocks, check_dtypes, simd_key
from fabric.kernels.binary_math import FUNCTIONS as BINARY_MATH
from fabric.kernels.binary_math import binary_math_cycles
from fabric.kernels.compare import extremum_code, sequence_model
from fabric.kernels.elementwise import (
    SIMD,
    binary_code,
    broadcast_code,
    broadcast_op_reference,
    check_binary,
    check_broadcast,
    check_map,
    elementwise_reference,
    map_code,
    map_reference,
    map_widens,
    rounded,
)
from fabric.kernels.elementwise_chains import (
    affine_code,
    affine_reference,
    check_affine,
    clamp_code,
    clamp_reference,
)
from fabric.kernels.mathlib_numpy import emulate
from fabric.kernels.modulo import modulo_code
from fabric.kernels.unary import FUNCTIONS, blockwise_code, code_cycles
from fabric.kernels.unary_params import ELU_SCRATCH, elu_code, pow_code, pow_scratch
from fabric.program import Tile


@dataclasses.dataclass(frozen=True)
class StreamStage:
    """One elementwise op of a chain.

    name: for reports and errors, e.g. "relu", "affine".
    code: code(tile, cls, x, dtype) -> ops on one PE's block (the standalone kernel's
        code function): declares z and the stage's own inputs on `tile`; the first op
        reads x (a memory DSD or a `FabIn`), once, in order; the rest read memory only.
    inputs: the stage's own inputs the host writes ("y"; "s", "t"; "v").
    vector: "full" (the inputs are (m, n), in x's blocks), "row" ((n,): each PE holds its
        block's columns) or "col" ((m,): its block's rows).
    cycles: cycles(config, cls, dtype, streamed) -> the cycles of the ops on memory on a
        PE of `cls` (all of them; streamed: those after the first, which takes the block
        as it arrives), read-pair waits apart, for the model.
    reference: reference(x, inputs, dtype) -> z, numpy (the standalone kernel's).
    """

    name: str
    code: Callable[[Tile, BlockClass, object, str], list]
    inputs: tuple[str, ...]
    vector: str
    cycles: Callable[[object, BlockClass, str, bool], int]
    reference: Callable[[np.ndarray, Mapping[str, np.ndarray], str], np.ndarray]

    def input_shape(self, m: int, n: int) -> tuple[int, ...]:
        return {"full": (m, n), "row": (n,), "col": (m,)}[self.vector]

    def load(self, values: Mapping[str, np.ndarray], blocks: Blocks, write,
             where: str) -> None:
        """This stage's inputs (`values`, by input name) as per-PE words in block order,
        (P, Q, words), each handed to `write(name, words)` (the caller's host writes, in
        its PEs' order). A vector's words on a PE are its block's columns ("row") or rows
        ("col"). where: how the caller names the stage, for errors."""
        want = self.input_shape(blocks.m, blocks.n)
        for key in self.inputs:
            if key not in values:
                raise ValueError(f"{where} ({self.name}): input {key!r} is missing")
            v = np.asarray(values[key], np.float32)
            if v.shape != want:
                raise ValueError(f"{where} ({self.name}): input {key!r} has shape {v.shape}, "
                                 f"expected {want}")
            if self.vector == "full":
                write(key, blocks.scatter(v))
                continue
            parts = blocks.cols if self.vector == "row" else blocks.rows
            words = np.zeros((blocks.rect.rows, blocks.rect.cols, max(s for _, s in parts)),
                             np.float32)
            for i in range(blocks.rect.rows):
                for j in range(blocks.rect.cols):
                    start, size = parts[j if self.vector == "row" else i]
                    words[i, j, :size] = v[start:start + size]
            write(key, words)


def map_stage(op: str = "relu", scalar: float = 0.0, acc_dtype: str = "f32") -> StreamStage:
    """z = op(x, scalar): "relu", "add", "mul", "max", "min" (`build_map`)."""
    check_map(op)
    s = 0.0 if op == "relu" else float(scalar)

    def code(tile, cls, x, dtype):
        return map_code(tile, cls, x, op, s, dtype, acc_dtype)

    def keys(dtype):
        if map_widens(op, s, dtype, acc_dtype):  # to_f32, the fp32 op, to_half
            return (("cvt", "f16"), (SIMD[op], "f32"), ("cvt", "f16"))
        return ((SIMD[op], simd_key(dtype)),)

    return StreamStage(op, code, (), "full", _op_cycles(keys, "full"),
                       lambda x, _, dtype: map_reference(x, op, s, dtype, acc_dtype))


def binary_stage(op: str = "add") -> StreamStage:
    """z = x op y, op "add", "sub" or "mul" (`build_elementwise`)."""
    check_binary(op)
    return StreamStage(op, lambda tile, cls, x, dtype: binary_code(tile, cls, x, op, dtype),
                       ("y",), "full", _op_cycles(_one(op), "full"),
                       lambda x, v, dtype: elementwise_reference(x, v["y"], op, dtype))


def broadcast_stage(op: str = "add", vector: str = "row") -> StreamStage:
    """z = x op v[None, :] (vector "row") or x op v[:, None] ("col"), the host writing
    each PE's part of v (`build_broadcast_op` with mode "load")."""
    check_broadcast(op, vector)
    return StreamStage(
        f"{op}_{vector}", lambda tile, cls, x, dtype: broadcast_code(tile, cls, x, op, vector,
                                                                      dtype),
        ("v",), vector, _op_cycles(_one(op), vector),
        lambda x, v, dtype: broadcast_op_reference(x, v["v"], op, vector, dtype))


def affine_stage(vector: str = "full") -> StreamStage:
    """z = x * s + t, s and t of x's shape or one value per row / column (`build_affine`)."""
    check_affine(vector)
    return StreamStage("affine", lambda tile, cls, x, dtype: affine_code(tile, cls, x, vector,
                                                                          dtype),
                       ("s", "t"), vector, _op_cycles(_two("mul", "add"), vector),
                       lambda x, v, dtype: affine_reference(x, v["s"], v["t"], vector, dtype))


def clamp_stage(lo: float = -1.0, hi: float = 1.0) -> StreamStage:
    """z = min(max(x, lo), hi) (`build_clamp`)."""
    return StreamStage("clamp", lambda tile, cls, x, dtype: clamp_code(tile, cls, x, lo, hi,
                                                                        dtype),
                       (), "full", _op_cycles(_two("max", "min"), "full"),
                       lambda x, _, dtype: clamp_reference(x, lo, hi, dtype))


def unary_stage(fn: str = "tanh") -> StreamStage:
    """z = fn(x) for `build_unary`'s functions (tanh, exp, sigmoid, sqrt, ...)."""
    if fn not in FUNCTIONS:
        raise ValueError(f"unary: fn must be one of {sorted(FUNCTIONS)}, got {fn!r}")
    return blockwise_stage(fn, *FUNCTIONS[fn])


def binary_math_stage(fn: str = "atan2") -> StreamStage:
    """z = fn(x, b) for `build_binary_math`'s atan2, hypot and pow, b the stage's own
    input (x streams in as the first argument: atan2's ordinate, pow's base)."""
    if fn not in BINARY_MATH:
        raise ValueError(f"binary math: fn must be one of {sorted(BINARY_MATH)}, got {fn!r}")
    code_of, scratch = BINARY_MATH[fn]
    return blockwise_stage(fn, code_of, scratch,
                           lambda config, e: binary_math_cycles(config, fn, e), ("x", "b"))


def modulo_stage(op: str = "fmod", divisor: float | None = None) -> StreamStage:
    """z = op(x, divisor) for `build_modulo`'s fmod and remainder: a number, or None for a
    tensor divisor "d", the stage's own input."""
    code_of, scratch, cycles_of = modulo_code(op, divisor)
    return blockwise_stage(op, code_of, scratch, cycles_of,
                           ("x",) if divisor is not None else ("x", "d"))


def gelu_stage(approximate: str = "tanh") -> StreamStage:
    """z = gelu(x), the tanh form or the exact erf form ("none") (`build_gelu`)."""
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"gelu: approximate must be one of {APPROXIMATIONS}, "
                         f"got {approximate!r}")
    return blockwise_stage("gelu", GELU_CODE[approximate], GELU_SCRATCH[approximate],
                           lambda config, e: gelu_cycles(config, e, approximate))


def elu_stage(alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0
              ) -> StreamStage:
    """z = scale * elu(x * input_scale, alpha): ELU, SELU, CELU (`build_elu`)."""
    code = elu_code(alpha, scale, input_scale)
    return blockwise_stage("elu", code, ELU_SCRATCH, code_cycles(code, ELU_SCRATCH))


def pow_stage(exponent: float = 2.0) -> StreamStage:
    """z = x ** exponent for a number (`build_pow`)."""
    code, scratch = pow_code(exponent), pow_scratch(exponent)
    return blockwise_stage("pow", code, scratch, code_cycles(code, scratch))


def extremum_stage(op: str = "maximum", slope: float | None = None) -> StreamStage:
    """z = maximum / minimum(x, y) with "y" the stage's own input (`build_extremum`'s "z"),
    or leaky_relu(x, slope) (`build_extremum`)."""
    if op not in ("maximum", "minimum", "leaky_relu") or ((slope is None)
                                                           != (op != "leaky_relu")):
        raise ValueError(f"extremum: op must be 'maximum', 'minimum' or 'leaky_relu' (with a "
                         f"slope), got {op!r}, slope={slope}")
    inputs = ("x",) if op == "leaky_relu" else ("x", "y")
    scratch = 1 if op == "leaky_relu" else 0
    code = extremum_code(op, slope)
    return blockwise_stage(op, code, scratch, sequence_model(code, inputs, scratch), inputs)


def blockwise_stage(name: str, code_of, scratch: int, cycles_of,
                    inputs: tuple[str, ...] = ("x",)) -> StreamStage:
    """The stage of a `build_blockwise` kernel (its code_of(y, x, ..., scratch), scratch
    vectors and cycles_of(config, e)): x streams in, `inputs[1:]` are the stage's own
    inputs (x's shape). In fp32 the block is taken into memory as it arrives (the code may
    read x more than once), in 16-bit storage widened as it arrives; then the code runs on
    memory (`unary.blockwise_code`, as the standalone kernel runs it). The reference is
    the code's numpy mirror (`mathlib_numpy.emulate`, bit for bit): the functions' own
    numerics are checked against numpy by their kernels' tests."""
    own = tuple(inputs[1:])

    def code(tile, cls, x, dtype):
        check_dtypes(name, dtype, "f32", half_acc=False)
        received = []
        if isinstance(x, ins.FabIn) and dtype == "f32":
            memory = tile.symbol("x", dtype, cls.size).dsd()
            received, x = [ins.mov(memory, x)], memory
        others = [tile.symbol(key, dtype, cls.size).dsd() for key in own]
        return [*received, *blockwise_code(tile, cls.size, [x, *others], code_of, scratch,
                                           dtype, out="z")]

    def cycles(config, cls, dtype, streamed):
        convert = -(-cls.size // config.simd_width("cvt", "f16")) if dtype != "f32" else 0
        # the code, and in 16-bit storage the widenings and the rounding; a streamed
        # block's receive (or, 16-bit, its widening) is the first op
        return cycles_of(config, cls.size) + convert * (len(inputs) + 1 - int(streamed))

    def reference(x, values, dtype):
        work = [Mem(f"s{i}") for i in range(scratch)]
        words = {"x": rounded(x, dtype), **{k: rounded(values[k], dtype) for k in own}}
        code = code_of(Mem("out"), *(Mem(k) for k in ("x", *own)), work)
        y = emulate(code, {k: np.asarray(v, np.float32) for k, v in words.items()})["out"]
        return rounded(np.asarray(y, np.uint32).view(np.float32), dtype)

    return StreamStage(name, code, own, "full", cycles, reference)


def _op_cycles(keys, vector: str):
    """cycles(config, cls, dtype, streamed) of ops of one DSD op each over the block, at
    the widths `keys(dtype)` gives, capped at the block's row length for a row / column
    vector (its groups stay within a row)."""
    def cycles(config, cls, dtype, streamed):
        widths = [config.simd_width(op, key) for op, key in keys(dtype)]
        if vector != "full":
            widths = [min(w, cls.nb) for w in widths]
        counts = [-(-cls.size // w) for w in widths]
        return sum(counts[1:] if streamed else counts)

    return cycles


def _one(op: str):
    return lambda dtype: ((SIMD[op], simd_key(dtype)),)


def _two(first: str, second: str):
    return lambda dtype: ((SIMD.get(first, first), simd_key(dtype)),
                          (SIMD.get(second, second), simd_key(dtype)))
