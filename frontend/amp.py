"""Mixed precision: which 16-bit format "mixed" means, and which nodes run in it.

The format is an argument (`frontend.compile(..., precision="mixed", half="bfloat16")`, the
training step's and the GradScaler's `half=`); `set_half_dtype("float16" | "bfloat16" |
"cbfloat16")` sets the default (float16 at first) that the public entry points read once,
when called, where no `half` is given (`resolve_half`). A node's format follows
PyTorch's CPU autocast exactly: the captured ATen graph is run once on the example inputs
under `torch.autocast("cpu", dtype)` and every node takes the dtype its output had there
(matmuls, bmm and convolutions in the half dtype; ops on fp32 inputs, and the ops autocast
keeps in fp32, in fp32; the rest in the promoted dtype of their inputs). cbfloat16 has no
torch dtype: it follows float16's rules (the same autocast lists) with its own rounding.

Kernels of a half-format node store their inputs and output in 16 bits and compute in fp32
(products exact, sums in fp32, one rounding to the node's format at the end), as PyTorch's
CPU kernels do for fp16 and bf16 (fp32 "opmath").
"""

from __future__ import annotations

import dataclasses

import torch
import torch.fx

from frontend.errors import FrontendError
from frontend.validate import autocast_values


@dataclasses.dataclass(frozen=True)
class HalfDtype:
    name: str  # "float16", "bfloat16", "cbfloat16"
    fabric: str  # the fabric's format name: "f16", "bf16", "cb16"
    torch_dtype: torch.dtype | None  # None: no torch dtype (cbfloat16)
    autocast_dtype: torch.dtype  # the dtype whose autocast rules the format follows


HALF_DTYPES = {
    "float16": HalfDtype("float16", "f16", torch.float16, torch.float16),
    "bfloat16": HalfDtype("bfloat16", "bf16", torch.bfloat16, torch.bfloat16),
    "cbfloat16": HalfDtype("cbfloat16", "cb16", None, torch.float16),
}
# the fabric format that stores each float dtype a model's tensors may have
FABRIC_FORMATS = {torch.float32: "f32", **{h.torch_dtype: h.fabric for h in HALF_DTYPES.values()
                                            if h.torch_dtype is not None}}
PRECISIONS = ("fp32", "mixed")
_ALIASES = {torch.float16: "float16", torch.bfloat16: "bfloat16", "fp16": "float16",
            "f16": "float16", "half": "float16", "bf16": "bfloat16", "cb16": "cbfloat16"}

_default = HALF_DTYPES["float16"]  # the user's default, read by `resolve_half` alone


def half_dtype(name) -> HalfDtype:
    """The `HalfDtype` of a name ("float16", "bfloat16", "cbfloat16", or torch.float16 /
    torch.bfloat16, or the fabric's short names); a `HalfDtype` is returned as is."""
    if isinstance(name, HalfDtype):
        return name
    key = _ALIASES.get(name, name)
    if key not in HALF_DTYPES:
        raise ValueError(f"half dtype {name!r} is not one of {sorted(HALF_DTYPES)}")
    return HALF_DTYPES[key]


def set_half_dtype(name="float16") -> HalfDtype:
    """Choose the default 16-bit format of mixed precision: what `frontend.compile`, the
    training step and the GradScaler use from now on where no `half=` is given."""
    global _default
    _default = half_dtype(name)
    return _default


def get_half_dtype() -> HalfDtype:
    """The default 16-bit format (`set_half_dtype`)."""
    return _default


def resolve_half(precision: str, half=None) -> HalfDtype | None:
    """The 16-bit format a run in `precision` uses: None in fp32; under "mixed" `half`
    (a name or torch dtype, see `half_dtype`), or the default of `set_half_dtype` when
    `half` is None. The public entry points call this once and pass the result down.

    Raises:
        FrontendError: an unknown precision, or a `half` given with precision "fp32".
    """
    check_precision(precision)
    if precision == "fp32":
        if half is not None:
            raise FrontendError(f"half={half!r} is for precision='mixed'; this run is fp32")
        return None
    return half_dtype(half) if half is not None else _default


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise FrontendError(f"precision {precision!r} is not one of {list(PRECISIONS)}")
    return precision


def node_formats(captured, inputs: dict[str, torch.Tensor], half: HalfDtype) -> dict[str, str]:
    """{node name: fabric format} of every node that produces a floating tensor, from one run
    of the graph under CPU autocast with `half`'s rules (nodes in fp32 map to "f32")."""
    dtypes = node_dtypes(captured, inputs, half.autocast_dtype)
    formats = {name: half.fabric if dt == half.autocast_dtype else "f32"
               for name, dt in dtypes.items() if dt.is_floating_point}
    # autocast's lists name forward ops only: in eager, a backward op runs in its forward's
    # dtype. mm and bmm of a backward graph are on the lists themselves; a convolution's
    # backward is not, but its convolution always runs in the half dtype, so it does too
    # (its gradients overflow where eager autocast's do)
    for node in captured.graph.find_nodes(op="call_function",
                                          target=torch.ops.aten.convolution_backward.default):
        formats[node.name] = half.fabric
    return formats


def node_dtypes(captured, inputs: dict[str, torch.Tensor],
                autocast_dtype: torch.dtype) -> dict[str, torch.dtype]:
    """{node name: dtype of its (first) output} under `torch.autocast("cpu", autocast_dtype)`."""
    values = autocast_values(captured, inputs, autocast_dtype)
    out = {}
    for name, v in values.items():
        first = v[0] if isinstance(v, (tuple, list)) and v else v
        if isinstance(first, torch.Tensor):
            out[name] = first.dtype
    return out


def traced_formats(captured) -> tuple[dict[str, str], HalfDtype | None]:
    """A model whose own tensors are 16-bit (`model.to(torch.bfloat16)`), compiled in
    precision "fp32" (no autocast): ({node name: fabric format of its traced dtype}, the
    16-bit format), each node stored in the dtype the model gives it and computing in fp32,
    as PyTorch's CPU kernels do; ({}, None) for a model of fp32 tensors.

    Raises FrontendError for a model mixing float16 and bfloat16 tensors (one 16-bit
    format per compiled model), naming a node of each."""
    formats, seen = {}, {}
    for node in captured.graph.nodes:
        val = node.meta.get("val")
        first = val[0] if isinstance(val, (tuple, list)) and val else val
        if not isinstance(first, torch.Tensor) or first.dtype not in FABRIC_FORMATS:
            continue
        formats[node.name] = FABRIC_FORMATS[first.dtype]
        if first.dtype != torch.float32:
            seen.setdefault(first.dtype, node.name)
    if len(seen) > 1:
        raise FrontendError("the model holds both float16 and bfloat16 tensors (nodes "
                            f"{seen[torch.float16]!r} and {seen[torch.bfloat16]!r}): a "
                            "compiled model stores one 16-bit format")
    if not seen:
        return {}, None
    return formats, half_dtype(next(iter(seen)))
