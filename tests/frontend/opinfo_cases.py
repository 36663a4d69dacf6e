"""PyTorch's OpInfo database as test cases for the lowering: which OpInfos the rule table
claims, how one OpInfo sample becomes a model for `frontend.compile`, and how a sample is
judged.

A sample `op(input, *args, **kwargs)` becomes `OpModule`: its first floating-point tensor
(in pytree order over input, args, kwargs) is the model's runtime input, every other tensor
a buffer (a constant of the model). It passes when the fabric's output equals eager
PyTorch's under assert_close's fp32 tolerances (rtol 1.3e-6, about 11 ulps, atol 1e-5) with
NaN equal to NaN; the bounds of the fabric's transcendentals (mathlib: 1 to 8 ulps, gelu's
tanh form up to about 10 ulps where exp amplifies z's error) lie within that rtol. The eager
reference runs with `torch.set_flush_denormal(True)`, the fabric's handling of subnormals
(docs/engine.md, Numbers: subnormal inputs read as zero, subnormal results flush to zero).
Eager PyTorch's default (subnormals kept) is accepted too: kernels that read an input's
bits (log's exponent and mantissa split) see a subnormal as the number it is, as eager does.
A sample may instead raise `frontend.UnsupportedOpError` (a case outside the rule) or
`frontend.PlacementError` (too big for the test fabric); anything else fails.

`CLAIMED` lists the OpInfos (by `name` or `name.variant`); adding one is a one-line change.
`claimable_opinfos` derives the list from the rule table (an OpInfo one of whose first
samples captures to ATen ops that all have a rule); it exports a few samples of each of
op_db's 677 fp32 OpInfos, about 13 minutes on 2 cores, so it runs from the command line
(`claimable`), not in the tests, and DERIVED holds its output.

Run `python -m tests.frontend.opinfo_cases [sample|reference|edge]` for the per-op table.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import math
import operator
import sys

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import SampleInput, UnaryUfuncInfo
from torch.utils import _pytree as pytree

import frontend
from frontend.capture import capture_module
from frontend.lowering.core import RULES
from tests.frontend.models import CONFIG

# OpInfo keys ("name" or "name.variant_test_name"). DERIVED: every fp32 OpInfo one of whose
# first three fitting samples captures to ATen ops that all have a rule
# (`claimable_opinfos()`, as `python -m tests.frontend.opinfo_cases claimable` prints it;
# 213 of op_db's 677 fp32 OpInfos with torch 2.13)
DERIVED = (
    "add", "mul", "sub", "addmm", "addmm.decomposed", "baddbmm", "dot", "vdot", "bmm", "mv",
    "addr", "addcmul", "addcdiv", "broadcast_to", "broadcast_tensors", "cartesian_prod",
    "chunk", "unsafe_chunk", "clone", "contiguous", "sum_to_size", "positive", "conj",
    "conj_physical", "resolve_conj", "resolve_neg", "deg2rad", "diff", "div.no_rounding_mode",
    "true_divide", "exp", "expand", "expand_as", "expand_copy", "alias_copy", "gradient",
    "logical_not", "masked_fill", "matmul", "meshgrid.variadic_tensors",
    "meshgrid.list_of_tensors", "logical_and", "softmax", "softmax.with_dtype",
    "_softmax_backward_data", "nn.functional.softmin", "nn.functional.softmin.with_dtype",
    "nn.functional.cross_entropy", "native_layer_norm", "native_batch_norm",
    "nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.adaptive_max_pool1d", "nn.functional.adaptive_max_pool2d",
    "nn.functional.avg_pool1d", "nn.functional.relu", "nn.functional.conv_transpose1d",
    "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d", "nn.functional.conv1d",
    "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.layer_norm",
    "nn.functional.rms_norm", "nn.functional.local_response_norm", "constant_pad_nd",
    "nn.functional.pad.constant", "nn.functional.hardswish",
    "nn.functional.interpolate.bilinear", "nn.functional.interpolate.area",
    "nn.functional.upsample_bilinear", "nn.functional.margin_ranking_loss",
    "nn.functional.avg_pool2d", "nn.functional.max_pool1d", "nn.functional.max_pool2d",
    "max_pool2d_with_indices_backward", "nn.functional.linear", "nn.functional.glu",
    "nn.functional.prelu", "torch.ops.aten._safe_softmax.default", "nn.functional.silu",
    "nn.functional.hardsigmoid", "nn.functional.tanhshrink", "nn.functional.batch_norm",
    "nn.functional.hardtanh", "nn.functional.gelu", "nn.functional.relu6", "mm", "narrow",
    "neg", "outer", "permute", "rad2deg", "real", "split", "split.list_args", "unsafe_split",
    "split_with_sizes", "split_with_sizes_copy", "__radd__", "__rmul__", "__rmatmul__",
    "__rsub__", "rsub", "select", "slice", "tanh", "hsplit", "vsplit", "dsplit", "rsqrt",
    "sqrt", "square", "isposinf", "isneginf", "isreal", "einsum", "ravel", "reshape",
    "reshape_as", "view", "view_as", "atleast_1d", "atleast_2d", "atleast_3d", "flatten",
    "unflatten", "column_stack", "gather", "index_fill", "index_copy", "index_add",
    "__getitem__", "index_put", "scatter_add", "take", "bfloat16", "bool", "byte", "char",
    "double", "float",
    "half", "int", "long", "short", "cdouble", "cfloat", "chalf", "zeros_like", "ones_like",
    "full_like", "stack", "_chunk_cat", "hstack", "cat", "unbind", "vstack", "dstack",
    "movedim", "squeeze", "squeeze.multiple", "squeeze_copy", "fill", "trapz", "trapezoid",
    "unsqueeze", "unsqueeze_copy", "zero_", "transpose", "transpose_copy", "T", "H", "mT",
    "mH", "kron", "inner", "tensordot", "sigmoid", "log_softmax", "log_softmax.with_dtype",
    "where", "t", "t_copy", "nn.functional.dropout", "native_dropout_backward",
    "nn.functional.dropout2d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.without_train", "nn.functional.embedding",
    "nn.functional.mse_loss", "all", "any", "amax", "count_nonzero", "mean", "sum",
    "nn.functional.poisson_nll_loss", "repeat_interleave", "nn.functional.pixel_shuffle",
    "nn.functional.pixel_unshuffle", "nn.functional.channel_shuffle", "nn.functional.kl_div",
    "linalg.vecdot", "linalg.matrix_power", "linalg.multi_dot", "masked.sum", "masked.prod",
    "masked.amax", "masked.mean", "masked.softmax", "masked.log_softmax", "masked.softmin",
    "bmm.triton_optimized"
)
# claimed by hand: a rule covers some samples after the first three (scalar clamp bounds:
# EDGE_ARGS), an op without a rule folds (nearest upsampling's aten.arange, on constants) or
# the rule refuses the variant (div's rounding modes: by a runtime divisor).
# Not claimed, every sample refused: nll_loss (aten.scalar_tensor), float_power (a cast
# to float64: fp32 only)
BY_HAND = ("div.trunc_rounding", "div.floor_rounding", "clamp",
           "nn.functional.interpolate.nearest", "nn.functional.upsample_nearest")
# rules added after DERIVED was taken (each checked with this harness's samples)
ADDED = (
    "abs", "maximum", "minimum", "clamp_min", "clamp_max", "log", "log1p",
    "nn.functional.leaky_relu", "nn.functional.logsigmoid", "nn.functional.softplus",
    "eq", "ne", "gt", "ge", "lt", "le", "logical_or", "logical_xor", "isnan", "isinf",
    "isfinite", "sign", "signbit", "cumsum", "nn.functional.group_norm", "var", "var_mean",
    "argmax", "max.reduction_with_dim", "index_select", "as_strided",
    "trunc", "floor", "topk", "sort", "argsort", "msort", "histc",
    "flip", "fliplr", "flipud", "rot90", "repeat", "tile",
    "nn.functional.elu", "nn.functional.selu", "nn.functional.celu", "expm1", "erf",
    "sin", "cos", "linalg.vector_norm", "linalg.norm", "norm", "nn.functional.normalize",
    "nn.functional.cosine_similarity", "nn.functional.pairwise_distance",
    "nn.functional.instance_norm",
    "ceil", "amin", "min.reduction_with_dim", "diagonal", "reciprocal", "log2", "log10",
    "prod", "cumprod", "tan", "atan", "asin", "acos", "sinh", "cosh", "exp2", "round",
    "round.decimals_0", "round.decimals_3", "round.decimals_neg_3", "heaviside", "atan2",
    "hypot", "cdist", "bucketize", "fmod", "remainder", "nn.functional.max_pool3d",
    "nn.functional.avg_pool3d", "nn.functional.adaptive_max_pool3d", "max.reduction_no_dim",
    "min.reduction_no_dim", "pow", "__rpow__", "scatter_reduce.sum", "scatter_reduce.mean",
    "scatter_reduce.amax", "scatter_reduce.amin", "nn.functional.grid_sample",
    "nn.functional.rrelu", "nn.functional.unfold", "nn.functional.bilinear",
    "searchsorted", "median", "nanmedian", "kthvalue", "cummax", "cummin", "logcumsumexp",
)
CLAIMED = DERIVED + BY_HAND + ADDED
# one OpInfo or more for every op family with a rule: the default test run
CORE = (
    # elementwise arithmetic (div's rounding modes: OpInfo's divisors are tensors, refused)
    "add", "sub", "mul", "div.no_rounding_mode", "div.trunc_rounding", "neg", "clamp",
    "nn.functional.hardtanh", "nn.functional.relu", "pow",
    # transcendentals
    "exp", "sigmoid", "tanh", "rsqrt", "sqrt", "nn.functional.gelu", "nn.functional.silu",
    "log", "log1p", "abs", "maximum", "nn.functional.leaky_relu", "expm1", "nn.functional.elu",
    "erf",
    # masks
    "eq", "gt", "logical_or", "isnan",
    # rows
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.batch_norm",
    # matmul
    "mm", "addmm", "bmm", "matmul", "nn.functional.linear",
    # reductions
    "mean", "sum", "amax", "var", "argmax", "cumsum", "nn.functional.group_norm",
    "linalg.vector_norm", "median", "logcumsumexp",
    # pooling, convolution, resampling, embedding
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_max_pool2d",
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv_transpose2d",
    "nn.functional.interpolate.bilinear", "nn.functional.upsample_nearest",
    "nn.functional.embedding",
    # views and layout
    "permute", "transpose", "reshape", "view", "expand", "squeeze", "unsqueeze", "narrow",
    "select", "split", "cat", "nn.functional.pad.constant", "where", "index_select", "flip",
    "repeat",
    # losses
    "nn.functional.cross_entropy",
)

# a sample with a larger tensor is skipped (the test fabric has 12 x 12 PEs), and one with an
# empty tensor (the frontend refuses those at its entry, with a FrontendError naming it)
MAX_ELEMENTS = 500
# the first floating-point tensor is the runtime input unless listed: {key: leaf index}
RUNTIME_LEAF: dict[str, int] = {"searchsorted": 1}  # its values (the sequence a constant)

# special values for every elementwise op: inf, nan, zeros of both signs, the ends of the
# exp / sigmoid / tanh ranges, huge and tiny normals and subnormals
F32 = torch.finfo(torch.float32)
EDGE_VALUES = torch.tensor(
    [math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 3.0, -3.0, 9.5, -9.5,
     20.0, -20.0, 88.7, 88.8, 100.0, -87.3, -87.4, -104.0, -200.0, 1e30, -1e30, F32.max,
     -F32.max, F32.tiny, -F32.tiny, 1e-30, -1e-30, 1e-40, -1e-40], dtype=torch.float32)
# rows of specials for the row-wise ops (softmax, layer norm, reductions): (6, 4)
EDGE_ROWS = torch.tensor(
    [[math.inf, 1.0, 2.0, 3.0], [-math.inf, 1.0, 2.0, 3.0], [math.nan, 1.0, 2.0, 3.0],
     [-math.inf] * 4, [1e30, -1e30, 1e20, 0.0], [F32.max, F32.max, 1.0, 0.0]],
    dtype=torch.float32)
# elementwise OpInfos that are not UnaryUfuncInfos, and arguments for EDGE_VALUES where the
# first sample's are not the ones to test: {key: [(args, kwargs), ...]}
ELEMENTWISE = ("nn.functional.gelu", "nn.functional.silu", "nn.functional.relu6",
               "nn.functional.hardtanh", "nn.functional.tanhshrink", "clamp", "pow")
# pow's exponents for EDGE_VALUES: a (16, 1) tensor, so that the (16, 32) output holds every
# pair (C99's special values: zeros, ones, infinities, NaN, odd, even and fractional powers)
EDGE_EXPONENTS = torch.tensor(
    [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5,
     -2.5, 1e-30], dtype=torch.float32)[:, None]
EDGE_ARGS = {"clamp": [((-2.0, 3.0), {})], "pow": [((3,), {}), ((EDGE_EXPONENTS,), {})],
             "nn.functional.gelu": [((), {"approximate": "none"}),
                                    ((), {"approximate": "tanh"})]}
ROW_OPS = ("softmax", "log_softmax", "nn.functional.layer_norm", "mean", "sum", "amax")
PASS, PASS_F64, REFUSED, NOT_EXPORTED = "pass", "pass_f64", "refused", "not_exported"


def key_of(info) -> str:
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


OPINFOS = {key_of(o): o for o in op_db}


class OpModule(torch.nn.Module):
    """`op(input, *args, **kwargs)` with tensor leaf `runtime` (pytree order) as the model's
    input and the other tensor leaves as buffers."""

    def __init__(self, op, sample: SampleInput, runtime: int):
        super().__init__()
        leaves, self.spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        self.op, self.runtime = op, runtime
        self.plain = [None if isinstance(v, torch.Tensor) else v for v in leaves]
        self.tensors = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        for i in self.tensors:
            if i != runtime:
                self.register_buffer(f"c{i}", leaves[i].detach().clone())

    def forward(self, x):
        leaves = list(self.plain)
        for i in self.tensors:
            leaves[i] = x if i == self.runtime else getattr(self, f"c{i}")
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(inp, *args, **kwargs)


def runtime_leaf(key: str, sample: SampleInput) -> int | None:
    """The pytree index of the sample's runtime input (None: no floating-point tensor)."""
    if key in RUNTIME_LEAF:
        return RUNTIME_LEAF[key]
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    return next((i for i, v in enumerate(leaves)
                 if isinstance(v, torch.Tensor) and v.is_floating_point()), None)


def fits(sample: SampleInput) -> bool:
    tensors = [v for v in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
               if isinstance(v, torch.Tensor)]
    return bool(tensors) and all(0 < t.numel() <= MAX_ELEMENTS for t in tensors)


def samples(key: str, kind: str = "sample", cap: int | None = None):
    """The first `cap` samples of OpInfo `key` that fit: kind "sample" (sample_inputs),
    "reference" (reference_inputs beyond the sample_inputs they repeat) or "edge"
    (EDGE_VALUES / EDGE_ROWS as the input, the first sample's other arguments)."""
    info = OPINFOS[key]
    torch.manual_seed(0)
    if kind == "sample":
        source = info.sample_inputs("cpu", torch.float32)
    elif kind == "reference":
        if info.reference_inputs_func is None:
            return
        repeated = sum(1 for _ in info.sample_inputs("cpu", torch.float32))
        source = (s for i, s in enumerate(info.reference_inputs("cpu", torch.float32))
                  if i >= repeated)
    elif kind == "edge":
        source = _edge_samples(key, info)
    else:
        raise ValueError(f"kind must be sample, reference or edge, got {kind!r}")
    # the chosen samples are taken before any is compiled: a generator left open would be
    # closed (its no_grad context exited) inside torch.export's tracing
    chosen = []
    try:
        for s in source:
            if cap is not None and len(chosen) >= cap:
                break
            if fits(s) and runtime_leaf(key, s) is not None:
                chosen.append(s)
    finally:
        if hasattr(source, "close"):
            source.close()
    yield from chosen


def _edge_samples(key: str, info):
    """EDGE_ROWS for ROW_OPS (with the arguments of the first sample on a 2D input and no
    other tensor), EDGE_VALUES for the elementwise ops (EDGE_ARGS, or the arguments of the
    first sample with no other tensor); nothing for the other ops."""
    alone = [s for s in info.sample_inputs("cpu", torch.float32)
             if not any(isinstance(v, torch.Tensor)
                        for v in pytree.tree_leaves((s.args, s.kwargs)))]
    if key in ROW_OPS:
        two_d = [s for s in alone if s.input.dim() == 2]
        if two_d:
            yield SampleInput(EDGE_ROWS.clone(), args=_fit_args(key, two_d[0].args),
                              kwargs=two_d[0].kwargs)
        elif key == "nn.functional.layer_norm":
            yield SampleInput(EDGE_ROWS.clone(), args=((EDGE_ROWS.shape[-1],),), kwargs={})
        return
    if not (isinstance(info, UnaryUfuncInfo) or key in ELEMENTWISE):
        return
    if key in EDGE_ARGS:
        for args, kwargs in EDGE_ARGS[key]:
            yield SampleInput(EDGE_VALUES.clone(), args=args, kwargs=kwargs)
    elif alone:
        yield SampleInput(EDGE_VALUES.clone(), args=alone[0].args, kwargs=alone[0].kwargs)


def _fit_args(key, args):
    """A row-op sample's args for an input of EDGE_ROWS' shape (a normalized shape)."""
    if key == "nn.functional.layer_norm":
        return ((EDGE_ROWS.shape[-1],), *args[1:])
    return args


@contextlib.contextmanager
def flush_denormal():
    """Eager PyTorch with subnormal results flushed, as the fabric computes."""
    if not torch.set_flush_denormal(True):
        raise RuntimeError("this CPU cannot flush subnormals (torch.set_flush_denormal)")
    try:
        yield
    finally:
        torch.set_flush_denormal(False)  # torch's default


def _flushed(t):
    """A floating-point tensor with its subnormals read as zeros of their sign (some eager
    kernels, sqrt among them, ignore the CPU's flush of subnormal inputs)."""
    if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
        return t
    return torch.where(t.abs() < torch.finfo(t.dtype).tiny, t * 0, t)


def eager(model: OpModule, x: torch.Tensor, dtype=None, like=None):
    """The eager reference: `model` on x with subnormal inputs and results flushed, computed
    in the sample's dtypes or `dtype` (float64: every floating tensor widened), its outputs
    cast to the dtypes of `like` (an earlier result) when given."""
    with flush_denormal(), torch.no_grad():
        m = _cast(model, dtype)
        x = _flushed(x)
        out = m(x.to(dtype) if dtype is not None and x.is_floating_point() else x)
    if like is not None:
        out = pytree.tree_map(lambda t, ref: t.to(ref.dtype) if isinstance(t, torch.Tensor)
                              else t, out, like)
    return pytree.tree_map(_flushed, out)


def _cast(model: OpModule, dtype):
    """A copy of `model` with its floating-point buffers flushed (and cast to `dtype`)."""
    m = copy.deepcopy(model)
    for name, b in list(m.named_buffers()):
        if b.is_floating_point():
            setattr(m, name, _flushed(b) if dtype is None else _flushed(b).to(dtype))
    return m


def run_sample(key: str, sample: SampleInput) -> str:
    """Compile `sample` of OpInfo `key`, run it and compare with eager: PASS (as eager in
    fp32), PASS_F64 (as eager in float64 rounded to fp32, where eager fp32 differs), REFUSED
    (UnsupportedOpError, PlacementError) or NOT_EXPORTED (torch.export cannot capture the
    sample's program); raises AssertionError on a wrong value."""
    info = OPINFOS[key]
    runtime = runtime_leaf(key, sample)
    model = OpModule(info.op, sample, runtime)
    x = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))[runtime]
    try:
        cm = frontend.compile(model, (x,), config=CONFIG)
        got = cm(x)
    except (frontend.UnsupportedOpError, frontend.PlacementError):
        return REFUSED
    except frontend.FrontendError as exc:
        # the frontend's refusal of a program that changes its input in place
        # (embedding's max_norm renormalizes the weight rows it reads)
        if str(exc).startswith("the model changes its input"):
            return REFUSED
        # torch.export refuses the program (a tensor argument used as a size: narrow's
        # start, say); the frontend's error names export's reason
        if not str(exc).startswith("torch.export could not capture"):
            raise
        return NOT_EXPORTED
    want = eager(model, x)
    try:
        torch.testing.assert_close(got, want, equal_nan=True)
        return PASS
    except AssertionError:
        pass
    with torch.no_grad():  # PyTorch's default, subnormals kept (the log kernel reads bits)
        plain = model(x)
    try:
        torch.testing.assert_close(got, plain, equal_nan=True)
        return PASS
    except AssertionError:
        pass
    want64 = eager(model, x, torch.float64, like=want)
    torch.testing.assert_close(
        got, want64, equal_nan=True,
        msg=lambda m: f"OpInfo {key}, {sample.summary()}: as neither eager fp32 nor float64 "
                      f"(float64 shown):\n{m}")
    return PASS_F64


def sweep(keys, kind: str, cap: int | None, out=None) -> dict[str, collections.Counter]:
    """Run the first `cap` samples of `kind` of every OpInfo in `keys`: {key: Counter of
    PASS, REFUSED and "failed" (the failure printed to `out`)}."""
    counts: dict[str, collections.Counter] = {}
    for key in keys:
        counts[key] = collections.Counter()
        for s in samples(key, kind, cap):
            try:
                counts[key][run_sample(key, s)] += 1
            except Exception as exc:  # a wrong value or an unexpected error: reported
                counts[key]["failed"] += 1
                if out is not None:
                    print(f"FAILED {key}: {type(exc).__name__}: {str(exc)[:800]}", file=out)
    return counts


def claimable_opinfos(probe: int = 3) -> list[str]:
    """OpInfo keys (fp32 on CPU) one of whose first `probe` fitting samples captures to ATen
    ops that all have a lowering rule."""
    keys = []
    for key, info in OPINFOS.items():
        if torch.float32 not in info.supported_dtypes("cpu"):
            continue
        for s in samples(key, "sample", probe):
            runtime = runtime_leaf(key, s)
            x = pytree.tree_leaves((s.input, s.args, s.kwargs))[runtime]
            try:
                graph = capture_module(OpModule(info.op, s, runtime), (x,)).graph
            except frontend.FrontendError:
                continue
            if all(n.target in RULES or n.target is operator.getitem
                   for n in graph.nodes if n.op == "call_function"):
                keys.append(key)
                break
    return keys


def main(argv: list[str]) -> None:
    """`claimable`: print `claimable_opinfos()`; else `KIND [CAP [core|all|KEY,KEY...]]`:
    sweep those OpInfos (default: all of CLAIMED) and print the per-op table and totals."""
    if argv[:1] == ["claimable"]:
        print(claimable_opinfos())
        return
    kind = argv[0] if argv else "sample"
    cap = int(argv[1]) if len(argv) > 1 else None
    which = argv[2] if len(argv) > 2 else "all"
    keys = {"all": CLAIMED, "core": CORE}.get(which) or which.split(",")
    table = sweep(keys, kind, cap, out=sys.stdout)
    for key, c in table.items():
        print(f"{key:40s} ran {sum(c.values()):3d} pass {c[PASS]:3d} f64 {c[PASS_F64]:3d} "
              f"refused {c[REFUSED]:3d} not exported {c[NOT_EXPORTED]:2d} "
              f"failed {c['failed']:3d}")
    total = sum(table.values(), collections.Counter())
    ops = sum(1 for c in table.values() if sum(c.values()))
    print(f"total: {sum(total.values())} samples of {ops} OpInfos, {total[PASS]} pass "
          f"(+{total[PASS_F64]} as float64), {total[REFUSED]} refused, "
          f"{total[NOT_EXPORTED]} not exported, {total['failed']} failed")


if __name__ == "__main__":
    main(sys.argv[1:])
