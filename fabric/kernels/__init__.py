"""The kernel library: reusable fabric programs, each with a numpy reference and an analytic
cycle model (`fabric.kernels.base` gives the common shape of a kernel), and the data-movement
layer that places tensors on them: `WordMap` / `probe_inputs` / `probe_output` say where a
kernel's elements lie, `read_words` / `write_words` move them between the host and a
`Simulator`, `plan_redistribution` moves them between tiles over the mesh."""

from fabric.kernels import mathlib
from fabric.kernels.activations import GELU_WORDS, build_gelu, gelu_cycles, gelu_reference
from fabric.kernels.base import Kernel, KernelResult, pick_colors, run_kernel, split
from fabric.kernels.binary_math import (
    BINARY_MATH_WORDS,
    binary_math_cycles,
    binary_math_reference,
    build_binary_math,
)
from fabric.kernels.caches import clear_model_caches
from fabric.kernels.collectives import (
    Fragment,
    build_allreduce,
    build_broadcast,
    build_gather,
    build_reduce,
    build_scatter,
)
from fabric.kernels.compare import (
    RELATIONS,
    build_compare,
    build_extremum,
    build_relation,
    build_select,
    compare_reference,
    extremum_reference,
    relation_reference,
    select_reference,
)
from fabric.kernels.elementwise import build_broadcast_op, build_elementwise, build_map
from fabric.kernels.elementwise_chains import (
    affine_reference,
    build_affine,
    build_clamp,
    clamp_reference,
)
from fabric.kernels.gemm_cannon import build_gemm_cannon, cannon_reference
from fabric.kernels.gemm_summa import (
    build_gemm_summa,
    summa_model,
    summa_reference,
)
from fabric.kernels.gemv import build_gemv, gemv_reference
from fabric.kernels.gradnorm import build_sumsq, sumsq_reference
from fabric.kernels.layout import WordMap, probe_inputs, probe_output, read_words, write_words
from fabric.kernels.modulo import MODULO_OPS, build_modulo, modulo_cycles, modulo_words
from fabric.kernels.optimizers import build_adamw, build_sgd, write_step_scalars
from fabric.kernels.redistribute import (
    GATE,
    SHARED_COUNTER,
    Redistribution,
    deliveries,
    plan_redistribution,
    round_programs,
)
from fabric.kernels.resident import build_resident
from fabric.kernels.rowdot import build_rowdot, rowdot_reference
from fabric.kernels.rownorm import (
    build_layernorm,
    build_softmax,
    layernorm_reference,
    softmax_reference,
)
from fabric.kernels.rowreduce import build_rowreduce, rowreduce_reference
from fabric.kernels.scan import build_cumsum, build_scan, cumsum_reference, scan_reference
from fabric.kernels.stencil import build_stencil, stencil_reference
from fabric.kernels.stream_stages import (
    StreamStage,
    affine_stage,
    binary_math_stage,
    binary_stage,
    blockwise_stage,
    broadcast_stage,
    clamp_stage,
    elu_stage,
    extremum_stage,
    gelu_stage,
    map_stage,
    modulo_stage,
    pow_stage,
    unary_stage,
)
from fabric.kernels.streams import (
    build_stream_chain,
    read_stage,
    stream_chain_reference,
    stream_colors_needed,
)
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
from fabric.kernels.unary import UNARY_WORDS, build_blockwise, build_unary, unary_cycles
from fabric.kernels.unary_params import (
    ELU_SCRATCH,
    build_elu,
    build_pow,
    elu_reference,
    pow_reference,
    pow_scratch,
)

__all__ = [
    "affine_reference", "build_affine", "build_clamp", "clamp_reference",
    "BINARY_MATH_WORDS", "binary_math_cycles", "binary_math_reference", "build_binary_math",
    "build_adamw", "build_allreduce", "build_blockwise", "build_broadcast", "build_broadcast_op",
    "build_compare", "build_cumsum", "build_elementwise", "build_extremum", "build_gather",
    "clear_model_caches", "ELU_SCRATCH", "build_elu", "build_pow", "elu_reference", "pow_reference",
    "pow_scratch",
    "build_gelu", "build_gemm_cannon", "build_gemm_summa", "build_gemv", "build_layernorm",
    "build_map", "build_multicast", "build_neighbour_exchange", "build_reduce", "build_relation",
    "build_resident", "build_rowdot", "build_rowreduce", "build_scan", "build_scatter",
    "build_select",
    "build_sgd", "build_shared_link", "build_shift", "build_softmax", "build_stencil",
    "build_streams", "build_sumsq", "build_traffic", "build_transpose", "build_unary",
    "cannon_reference", "compare_reference", "cumsum_reference", "deliveries",
    "extremum_reference", "Flow", "GATE",
    "Fragment", "gelu_cycles", "gelu_reference", "GELU_WORDS", "gemv_reference", "Kernel",
    "KernelResult", "layernorm_reference", "mathlib", "pick_colors", "plan_redistribution",
    "probe_inputs", "probe_output", "read_words", "Redistribution", "relation_reference",
    "RELATIONS", "round_programs", "rowdot_reference", "rowreduce_reference", "run_kernel",
    "scan_reference", "select_reference", "SHARED_COUNTER", "softmax_reference", "split",
    "stencil_reference", "StreamStage", "affine_stage", "binary_stage", "broadcast_stage",
    "clamp_stage", "map_stage", "unary_stage", "binary_math_stage", "modulo_stage",
    "blockwise_stage", "gelu_stage", "elu_stage", "pow_stage", "extremum_stage",
    "build_stream_chain", "read_stage",
    "stream_chain_reference", "stream_colors_needed",
    "summa_model", "summa_reference", "sumsq_reference", "traffic_inputs",
    "traffic_reference", "unary_cycles", "UNARY_WORDS", "WordMap", "write_step_scalars",
    "write_words",
    "build_modulo", "MODULO_OPS", "modulo_cycles", "modulo_words",
]
