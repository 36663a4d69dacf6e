"""Optimizer steps on weights resident in PE memory: torch.optim.SGD and torch.optim.AdamW.

Layout: the m x n weight w, its gradient g and the optimizer state sit in the 2D block layout
of `base.Blocks` (PE (p, q) holds its block row major, one tile per class of block shape:
`Blocks.classes`, as `elementwise`). w and the state stay in SRAM between steps: one
program serves every step. Per step the host writes g and the small per-PE fp32 symbol
"scalars" (`write_step_scalars`), launches "main" and runs; nothing is rebuilt. g is
consumed: after a step it holds intermediate values (the update works in place, as torch's
does on its copy).

Scalars (`kernel.info["scalars"]` names the words, in order):
    SGD    [-lr, first]  first = 1.0 on the momentum buffer's first step (torch sets b = g
                         then), else 0.0 (a branch picks the path)
    AdamW  [1 - lr wd, -lr / (1 - beta1^t), 1 / sqrt(1 - beta2^t)]
`step` (t) counts the steps taken, 1 for the first: a step the host skips (an overflow of
the loss scaler) is not launched and does not count, as in torch.
The host computes them in float64 as torch does from Python floats, then rounds to fp32
(torch rounds a Python scalar to the tensor's fp32 when it applies it). Constants (momentum,
dampening, weight decay, betas, eps) are immediates.

Per PE (L = mb nb elements; every op runs over the block, all operands in memory):
    SGD (torch's single-tensor order)         AdamW
    g = -g              (maximize: sign bit)  g = -g                     (maximize)
    g = g + w wd        (fma, wd != 0)        w = w (1 - lr wd)          (wd != 0)
    first: b = g; else b = b mom; b += g (1-d) m = m + (g - m)(1 - beta1)   (torch's lerp, fma)
    g = g + b mom       (nesterov)            v = v beta2; t = g (1 - beta2); v = v + g t
                                                (one rounding: an fma per element, t in a register)
    w = w + u (-lr)     (fma; u = g or b)     r = sqrt(v) = v rsqrt(v)   (mathlib; v = 0 gives 0)
                                              r = eps + r / sqrt(1 - beta2^t)   (fma)
                                              t = 1 / r                  (mathlib, refined)
                                              g = m (-step size); g = g t; w = w + g

Numerics: SGD reproduces torch.optim.SGD (foreach=False) bit for bit: torch's CPU kernels
compute `x.add(y, alpha=a)` as one fused multiply-add, as the fabric's fma (XLA:CPU rounds
it once), mul_ as one rounded product, and `clone` as a copy. AdamW: exp_avg and exp_avg_sq
are bit-exact too (torch's lerp is the fma m + (g - m) w for a weight w below 0.5, else
g + (g - m)(w - 1), and the kernel picks the same form; torch's addcmul is the fma
v + g (c g), which the kernel issues element by element since the fabric's fma multiplies
by a scalar). The update term step_size m / (sqrt(v_hat) + eps) carries the errors of rsqrt
(RSQRT_ULPS), the refined reciprocal (RECIPROCAL_REFINED_ULPS), the scalar 1 / sqrt(bc2) in
place of torch's division by it, and the roundings of both sides (about 17 u, u = 2^-24):
within ADAMW_UPDATE_RTOL = 24 u of torch's (measured: 5 u; the weights after three steps
within 2 ulps of torch's).

Cycle models (exact; c(op) = ceil(L / w_op) at the op's fp32 SIMD width, one cycle to
start the task, one per scalar instruction (register load, branch, jump) and one for the
implicit ret; plus the element groups that wait under the bank read-pair rule,
`fabric.banks.read_pair_stalls`; T is the slowest block's):
    SGD:   T = 2 + loads + c(iadd)[maximize] + c(fma)[wd] + c(fma)
               + momentum: 1 (branch) + first step: c(mov); later: c(mul) + c(add or fma) + 1
               + c(fma)[nesterov]
           loads = 1 without momentum, 2 with it. `model_cycles` is a later step's;
           `info["model_cycles_first"]` the first step's.
    AdamW: T = 2 + loads + c(iadd)[maximize] + c(mul)[wd] + c(sub) + c(fma) + 2 c(mul)
               + 1 + 4 L (the addcmul loop) + rsqrt_cycles(L) + c(mul) + c(fma)
               + reciprocal_cycles(L, refined) + 2 c(mul) + c(add);  loads = 2, or 3 with wd
           (35 L on WSE-2 for even L, 36 L with wd: rsqrt 14 L, reciprocal 9 L, the
           loop 4 L; SGD with momentum: 2.5 L)

Example:
    >>> k = build_sgd(FabricConfig.small(4, 4), Rect(0, 0, 4, 4), 32, 24,  # doctest: +SKIP
    ...               momentum=0.9)
    >>> sim = Simulator(k.config, k.program); k.load(sim, {"w": w})        # doctest: +SKIP
    >>> for t, g in enumerate(grads, 1):                                    # doctest: +SKIP
    ...     k.load(sim, {"g": g}); write_step_scalars(sim, k, lr=0.1, step=t)
    ...     k.launch(sim); sim.run()
    >>> k.read(sim)["w"]                                                    # doctest: +SKIP
"""

from __future__ import annotations

import math

import numpy as np

from fabric import instructions as ins
from fabric.banks import op_read_pair_stalls, read_pair_stalls
from fabric.config import FabricConfig
from fabric.host import Simulator
from fabric.instructions import Mem
from fabric.isa import SIMD_NAME, Op
from fabric.kernels import mathlib as ml
from fabric.kernels.base import Blocks, Kernel, check_sram
from fabric.program import Program, Rect, Tile

SIGN_BIT = -(2**31)  # adding it to an fp32 bit pattern (int32, wrapping) flips the sign
# relative bound of the update term against torch's (module docstring): rsqrt 4 u, reciprocal
# 2 u, sqrt = v rsqrt(v), 1 / sqrt(bc2), the fma and the two products 1 u each on the fabric;
# torch's sqrt, divisions, eps add, product and its rounding of sqrt(bc2) 6 u; 17 u in all
ADAMW_UPDATE_RTOL = 24 * 2.0**-24
SCALARS = {"sgd": ("neg_lr", "first"),
           "adamw": ("weight_decay_factor", "neg_step_size", "inv_sqrt_bias_correction2")}


def _f32(value: float) -> float:
    """`value` rounded to fp32 (as torch applies a Python scalar to an fp32 tensor)."""
    return float(np.float32(value))


def _c(config: FabricConfig, op: Op, length: int) -> int:
    return math.ceil(length / config.simd_width(*SIMD_NAME[op]))


def _check_args(what: str, m: int, n: int, **hyper: float) -> None:
    if m < 1 or n < 1:
        raise ValueError(f"{what}: the weight must be at least 1 x 1, got {m} x {n}")
    for name, value in hyper.items():
        if not (math.isfinite(value) and value >= 0.0):
            raise ValueError(f"{what}: {name} must be a finite value >= 0, got {value}")


def _kernel(name: str, config: FabricConfig, blocks: Blocks, prog: Program,
            tensors: dict[str, str], model: int, info: dict) -> Kernel:
    """tensors: input/output name -> symbol (e.g. "exp_avg" -> "m")."""
    rect, m, n = blocks.rect, blocks.m, blocks.n

    def load(sim: Simulator, values) -> None:
        unknown = sorted(set(values) - set(tensors))
        if unknown:
            raise ValueError(f"{name}: unknown inputs {unknown}; known: {sorted(tensors)}")
        for key, x in values.items():
            x = np.asarray(x, np.float32)
            if x.shape != (m, n):
                raise ValueError(f"{name}: input {key!r} has shape {x.shape}, expected "
                                 f"{(m, n)}")
            words = blocks.scatter(x)
            for cls in blocks.classes():
                sim.memcpy_h2d(tensors[key], words[cls.pes][..., :cls.size], cls.rect)

    def read(sim: Simulator) -> dict[str, np.ndarray]:
        out = {}
        for key, sym in tensors.items():
            if key == "g":
                continue
            words = np.zeros((rect.rows, rect.cols, blocks.mb * blocks.nb), np.float32)
            for cls in blocks.classes():
                words[cls.pes][..., :cls.size] = sim.memcpy_d2h(sym, cls.rect)
            out[key] = blocks.gather(words)
        return out

    return Kernel(name, config, rect, prog, load, read, lambda sim: sim.launch("main", rect),
                  model, 0, {"m": m, "n": n, "dtype": "f32", "scalars": SCALARS[name],
                             "block": (blocks.mb, blocks.nb), **info})


def build_sgd(config: FabricConfig, rect: Rect, m: int, n: int, momentum: float = 0.0,
              dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
              maximize: bool = False) -> Kernel:
    """torch.optim.SGD's step on an (m, n) fp32 weight in blocks on `rect`.

    Inputs (`load`, any subset): "w", "g" and "momentum_buffer", each (m, n). `read` returns
    {"w", "momentum_buffer"} (the buffer only with momentum). Per step: load "g",
    `write_step_scalars(sim, kernel, lr=..., step=...)`, launch, run.
    Model: the module docstring's T (exact).
    """
    _check_args("sgd", m, n, momentum=momentum, dampening=dampening,
                weight_decay=weight_decay)
    if nesterov and (momentum == 0.0 or dampening != 0.0):
        raise ValueError("sgd: nesterov needs a momentum > 0 and zero dampening (as torch)")
    blocks = Blocks.of(rect, m, n)
    size = blocks.mb * blocks.nb
    arrays = 3 if momentum else 2
    check_sram(config, "sgd", arrays * size + len(SCALARS["sgd"]),
               f"{arrays} blocks of {blocks.mb} x {blocks.nb} ({m} x {n} on "
               f"{rect.rows} x {rect.cols} PEs)")
    prog = Program(config)
    first = later = 0  # the slowest block's cycles, the first step and the later ones
    for i, cls in enumerate(blocks.classes()):
        tile = Tile(f"sgd{i}")
        L = cls.size
        w, g = (tile.symbol(s, "f32", L).dsd() for s in ("w", "g"))
        tile.symbol("scalars", "f32", len(SCALARS["sgd"]))
        code = [ins.load("nlr", Mem("scalars", 0))]
        if maximize:
            code.append(ins.iaddv(g, g, SIGN_BIT))  # -g exactly (also for zeros and NaN)
        if weight_decay:
            code.append(ins.fma(g, g, w, _f32(weight_decay)))  # grad.add(w, alpha=wd)
        update = g
        later_only = []  # ops of the later steps alone (the first step copies g into b)
        if momentum:
            b = tile.symbol("b", "f32", L).dsd()
            keep = _f32(1.0 - dampening)
            # add_(g, alpha=1 - dampening); alpha 1 makes the fma a plain (faster) add
            later_only = [ins.add(b, b, g) if keep == 1.0 else ins.fma(b, b, g, keep)]
            code += [
                ins.load("first", Mem("scalars", 1)),
                ins.branch_if_nonzero("first", "init"),
                ins.mul(b, b, _f32(momentum)),
                *later_only,
                ins.jump("update"),
                ins.label("init"),
                ins.mov(b, g),  # torch: buf = grad.clone() on the first step
                ins.label("update"),
            ]
            if nesterov:
                code.append(ins.fma(g, g, b, _f32(momentum)))
            else:
                update = b
        code.append(ins.fma(w, w, update, "nlr"))  # w.add_(u, alpha=-lr)
        tile.local_task("main", code)
        prog.place(tile, cls.rect)
        # the groups that wait on a bank pair: every op runs once a step but the later
        # steps' momentum update (the first step's mov has one source)
        waits = read_pair_stalls(config, tile, code)
        first_waits = waits - read_pair_stalls(config, tile, later_only)
        cycles = _sgd_cycles(config, L, momentum, dampening, weight_decay, nesterov, maximize)
        later = max(later, cycles[1] + waits)
        first = max(first, cycles[0] + first_waits)
    tensors = {"w": "w", "g": "g", **({"momentum_buffer": "b"} if momentum else {})}
    return _kernel("sgd", config, blocks, prog, tensors, later,
                   {"model_cycles_first": first, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize})


def _sgd_cycles(config, size, momentum, dampening, weight_decay, nesterov, maximize):
    """(first step, later steps) of a block of `size` elements, bank waits apart."""
    c = lambda op: _c(config, op, size)  # noqa: E731
    base = (2 + 1 + int(bool(momentum)) + (c(Op.IADDV) if maximize else 0)
            + (c(Op.FMA) if weight_decay else 0) + c(Op.FMA))
    later = first = base
    if momentum:
        later += 1 + c(Op.MUL) + (c(Op.ADD) if _f32(1.0 - dampening) == 1.0 else c(Op.FMA)) + 1
        first += 1 + c(Op.MOV)
        if nesterov:
            later += c(Op.FMA)
            first += c(Op.FMA)
    return first, later


def build_adamw(config: FabricConfig, rect: Rect, m: int, n: int,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                weight_decay: float = 1e-2, amsgrad: bool = False,
                maximize: bool = False) -> Kernel:
    """torch.optim.AdamW's step on an (m, n) fp32 weight in blocks on `rect`.

    Inputs (`load`, any subset): "w", "g", "exp_avg", "exp_avg_sq", each (m, n); the state
    starts at zero (as torch's) unless loaded. `read` returns {"w", "exp_avg", "exp_avg_sq"}.
    Per step: load "g", `write_step_scalars(sim, kernel, lr=..., step=t)` (t from 1),
    launch, run. Model: the module docstring's T (exact).
    """
    if amsgrad:
        raise ValueError("adamw: amsgrad=True is not supported (the max of the second "
                         "moments needs a fourth state tensor); use amsgrad=False")
    beta1, beta2 = (float(b) for b in betas)
    _check_args("adamw", m, n, eps=eps, weight_decay=weight_decay)
    if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
        raise ValueError(f"adamw: betas must lie in [0, 1), got {betas}")
    blocks = Blocks.of(rect, m, n)
    size = blocks.mb * blocks.nb
    check_sram(config, "adamw", 6 * size + len(SCALARS["adamw"]),
               f"6 blocks of {blocks.mb} x {blocks.nb} (w, g, exp_avg, exp_avg_sq "
               f"and two scratch; {m} x {n} on {rect.rows} x {rect.cols} PEs)")
    lerp_w = np.float32(1.0 - beta1)  # torch's lerp weight, in fp32
    prog = Program(config)
    model = 0  # the slowest block's cycles
    for i, cls in enumerate(blocks.classes()):
        tile = Tile(f"adamw{i}")
        L = cls.size
        w, g, mm, v, t, r = (tile.symbol(s, "f32", L).dsd()
                             for s in ("w", "g", "m", "v", "t", "r"))
        tile.symbol("scalars", "f32", len(SCALARS["adamw"]))
        code = [ins.load("nss", Mem("scalars", 1)), ins.load("ib2", Mem("scalars", 2))]
        if maximize:
            code.append(ins.iaddv(g, g, SIGN_BIT))
        if weight_decay:
            code += [ins.load("dec", Mem("scalars", 0)), ins.mul(w, w, "dec")]
        code.append(ins.sub(t, g, mm))  # g - m
        if abs(lerp_w) < 0.5:  # torch's lerp: m + w (g - m), or g - (1 - w)(g - m)
            code.append(ins.fma(mm, mm, t, float(lerp_w)))
        else:
            code.append(ins.fma(mm, g, t, float(lerp_w - np.float32(1.0))))
        code += [
            ins.mul(v, v, _f32(beta2)),
            ins.mul(t, g, _f32(1.0 - beta2)),
        ]
        before = len(code)
        code += [
            *_addcmul_loop(L),  # v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            *ml.rsqrt(r, v, (t,)),  # v = 0 gives a finite 4.5e19, so v r = 0 below
            ins.mul(r, v, r),  # sqrt(v)
            ins.fma(r, _f32(eps), r, "ib2"),  # denom = sqrt(v) / sqrt(bc2) + eps
            *ml.reciprocal(t, r, (g,), refined=True),  # g is free: v already has it
            ins.mul(g, mm, "nss"),
            ins.mul(g, g, t),
            ins.add(w, w, g),  # w.addcdiv_(m, denom, value=-step_size)
        ]
        tile.local_task("main", code)
        prog.place(tile, cls.rect)
        # the groups that wait on a bank pair: the straight ops once, the loop's fma of
        # one element once per element (its words at offset i)
        loop = code[before:before + len(_addcmul_loop(L))]
        fma = next(op for op in loop if isinstance(op, ins.Instr) and op.op == Op.FMA)
        waits = (read_pair_stalls(config, tile, code[:before] + code[before + len(loop):])
                 + sum(op_read_pair_stalls(config, tile, fma, registers={"i": i})
                       for i in range(L)))
        model = max(model, _adamw_cycles(config, L, weight_decay, maximize) + waits)
    tensors = {"w": "w", "g": "g", "exp_avg": "m", "exp_avg_sq": "v"}
    return _kernel("adamw", config, blocks, prog, tensors, model,
                   {"betas": (beta1, beta2), "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize})


def _adamw_cycles(config, size, weight_decay, maximize):
    """A block of `size` elements' step, bank waits apart (module docstring)."""
    c = lambda op: _c(config, op, size)  # noqa: E731
    return (2 + 2 + (c(Op.IADDV) if maximize else 0) + (1 + c(Op.MUL) if weight_decay else 0)
            + c(Op.SUB) + c(Op.FMA) + 2 * c(Op.MUL) + 1 + 4 * size
            + ml.rsqrt_cycles(config, size)
            + c(Op.MUL) + c(Op.FMA) + ml.reciprocal_cycles(config, size, refined=True)
            + 2 * c(Op.MUL) + c(Op.ADD))


def _addcmul_loop(L: int) -> list:
    """v[i] = v[i] + g[i] t[i], rounded once, for i < L: torch's addcmul is one fused
    multiply-add of two tensors, and the fabric's fma multiplies by a scalar only, so each
    t[i] goes through a register (4 cycles an element: load, fma, count, branch)."""
    at = lambda sym: Mem(sym, 0, 1, offset_reg="i")  # noqa: E731
    return [
        ins.set_reg("i", 0),
        ins.label("addcmul"),
        ins.load("ti", at("t")),
        ins.fma(at("v"), at("v"), at("g"), "ti"),
        ins.iadd("i", "i", 1),
        ins.branch_if_less("i", L, "addcmul"),
    ]


def step_scalars(kernel: Kernel, lr: float, step: int) -> np.ndarray:
    """The fp32 words of the "scalars" symbol for step `step` (1 for the first) at learning
    rate `lr`, in the order of `kernel.info["scalars"]`."""
    if kernel.name not in SCALARS:
        raise ValueError(f"step_scalars: kernel {kernel.name!r} is not an optimizer kernel "
                         f"({sorted(SCALARS)})")
    if int(step) != step or step < 1:
        raise ValueError(f"step_scalars: step counts from 1, got {step}")
    if not (math.isfinite(lr) and lr >= 0.0):
        raise ValueError(f"step_scalars: lr must be a finite value >= 0, got {lr}")
    lr = float(lr)
    if kernel.name == "sgd":
        first = 1.0 if step == 1 and kernel.info["momentum"] else 0.0
        return np.array([-lr, first], np.float32)
    beta1, beta2 = kernel.info["betas"]
    # as torch's _single_tensor_adam computes them, in Python floats
    step_size = lr / (1 - beta1**step)
    bias_correction2_sqrt = (1 - beta2**step) ** 0.5
    return np.array([1 - lr * kernel.info["weight_decay"], -step_size,
                     1 / bias_correction2_sqrt], np.float32)


def write_step_scalars(sim: Simulator, kernel: Kernel, lr: float, step: int) -> None:
    """Write `step_scalars(kernel, lr, step)` into every PE's "scalars" symbol."""
    sim.memcpy_h2d("scalars", step_scalars(kernel, lr, step), kernel.rect)
