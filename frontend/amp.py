"""Mixed precision: which 16-bit format "mixed" means, and which nodes run in it.

`set_half_dtype("float16" | "bfloat16" | "cbfloat16")` chooses the format (default float16)
that `frontend.compile(..., precision="mixed")` uses from then on. A node's format follows
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

import contextlib
import dataclasses

import torch
import torch.fx

from frontend.errors import FrontendError


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
PRECISIONS = ("fp32", "mixed")
_ALIASES = {torch.float16: "float16", torch.bfloat16: "bfloat16", "fp16": "float16",
            "f16": "float16", "half": "float16", "bf16": "bfloat16", "cb16": "cbfloat16"}

_current = HALF_DTYPES["float16"]


def half_dtype(name) -> HalfDtype:
    """The `HalfDtype` of a name ("float16", "bfloat16", "cbfloat16", or torch.float16 /
    torch.bfloat16, or the fabric's short names)."""
    key = _ALIASES.get(name, name)
    if key not in HALF_DTYPES:
        raise ValueError(f"half dtype {name!r} is not one of {sorted(HALF_DTYPES)}")
    return HALF_DTYPES[key]


def set_half_dtype(name="float16") -> HalfDtype:
    """Choose the 16-bit format of mixed precision for models compiled from now on."""
    global _current
    _current = half_dtype(name)
    return _current


def get_half_dtype() -> HalfDtype:
    return _current


@contextlib.contextmanager
def using_half_dtype(name):
    """`set_half_dtype(name)` for the duration of a `with` block, then the previous one
    again (name None: keep the current one)."""
    previous = _current
    try:
        yield set_half_dtype(name) if name is not None else previous
    finally:
        set_half_dtype(previous.name)


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


def autocast_values(captured, inputs: dict[str, torch.Tensor],
                    autocast_dtype: torch.dtype) -> dict[str, object]:
    """Every node's value when the captured graph runs under CPU autocast."""
    from frontend.validate import golden_values

    with torch.autocast("cpu", dtype=autocast_dtype):
        return golden_values(captured, inputs)

from frontend.amp_scaler import GradScaler, optimizer_step  # noqa: E402, F401  (re-export)
