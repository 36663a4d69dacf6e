"""The kernel library: reusable fabric programs, each with a numpy reference and an analytic
cycle model. See `fabric.kernels.base` for the common shape of a kernel."""

from fabric.kernels import mathlib
from fabric.kernels.activations import build_gelu, gelu_reference
from fabric.kernels.base import Kernel, KernelResult, pick_colors, run_kernel, split
from fabric.kernels.collectives import (
    Fragment,
    build_allreduce,
    build_broadcast,
    build_gather,
    build_reduce,
    build_scatter,
)
from fabric.kernels.elementwise import build_broadcast_op, build_elementwise, build_map
from fabric.kernels.gemm_cannon import build_gemm_cannon, cannon_reference
from fabric.kernels.gemm_summa import build_gemm_summa, summa_reference
from fabric.kernels.gemv import build_gemv, gemv_reference
from fabric.kernels.gradnorm import build_sumsq, sumsq_reference
from fabric.kernels.optimizers import build_adamw, build_sgd, write_step_scalars
from fabric.kernels.rownorm import (
    build_layernorm,
    build_softmax,
    layernorm_reference,
    softmax_reference,
)
from fabric.kernels.stencil import build_stencil, stencil_reference
from fabric.kernels.traffic import (
    Flow,
    build_multicast,
    build_neighbour_exchange,
    build_shared_link,
    build_shift,
    build_streams,
    build_traffic,
    build_transpose,
    traffic_inputs,
    traffic_reference,
)

__all__ = ["Kernel", "KernelResult", "pick_colors", "run_kernel", "split"]
__all__ += ["mathlib", "build_gelu", "gelu_reference", "build_softmax", "softmax_reference",
            "build_layernorm", "layernorm_reference"]
__all__ += ["Fragment", "build_allreduce", "build_broadcast", "build_gather", "build_reduce",
            "build_scatter", "build_broadcast_op", "build_elementwise", "build_map",
            "build_gemv", "gemv_reference"]
__all__ += ["build_gemm_summa", "summa_reference", "build_gemm_cannon", "cannon_reference"]
__all__ += ["build_sgd", "build_adamw", "write_step_scalars", "build_sumsq", "sumsq_reference"]
__all__ += ["build_stencil", "stencil_reference", "Flow", "build_multicast",
            "build_neighbour_exchange", "build_shared_link", "build_shift", "build_streams",
            "build_traffic", "build_transpose", "traffic_inputs", "traffic_reference"]
