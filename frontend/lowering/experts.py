"""Products with expert weights picked per token (mixture-of-experts layers, as Hugging
Face's Mixtral and Qwen2-MoE trace them) under `frontend.compile(..., experts="dense")`:
bmm(W[ids], x) or bmm(x, W[ids]) for a constant W (E experts, ...) and indices computed on
the fabric (a router's topk).

Picking W's rows by a one-hot product and then running one small product per token
(`layout.index`, `matmul.bmm`; "picked", the default) spreads each token's weights over a
tile of their own: a move from the one-hot product's tile to every token's product, all
to all between two tiles, 9 to 16 flows crossing one PE, more colors than a fabric has
(Mixtral: 184 at one PE). Here every token's rows meet every expert's weights instead, in
one GEMM, and a one-hot mask keeps each row's own expert:

    m[s, e] = (ids[s] - e == 0) + p[s]      (S, E): the mask of `one_hot_lookup`, and
    p[s] = (sum_e m[s, e] - 1) * 3e38 * 4   0 for an index in range, -inf otherwise
    M = [m_0 X | m_1 X | ... | m_(E-1) X]   (S R, E D): X's rows once per expert, masked
    out = M @ [W_0; W_1; ...; W_(E-1)]      (S R, F): one GEMM, the weights constant

(S tokens, R rows of x per token, D the contracted size, F the product's width.) A row's
terms from the experts it did not pick are zeros, and adding a zero leaves a sum as it
is, so each row's sum is its own expert's terms in the GEMM's order (an fp32 sum of D
products, in another order than eager's). An index out of range poisons its row (inf or
NaN, where eager raises IndexError), never a silent zero. A term eager never computes
(an unpicked expert's weight times x) is zero unless x holds an inf or NaN, which eager's
picked product has too. The GEMM runs transposed, out^T = W^T M^T, its rows the F
outputs. The work is E times the picked products' (the one-hot product of the picking
had as much: S E F D multiply-adds), and the moves are one GEMM's.

Measured on small(24, 24) (`frontend.compile`, one sample; latency / cycles per sample,
colors needed on the balanced tiles): Mixtral 36,877 / 5,747, 89 colors, against 32,950 /
4,886, 218 picked; Qwen2-MoE 32,900 / 5,779, 122, against 26,674 / 3,664, 255. The
balanced pipeline is slower dense (a GEMM of 16 token rows paced by its fma ops' fixed
cost), so "picked" stays the default; with colors "fit" the dense Mixtral and Qwen2-MoE
build as one fabric program, which no tiles of the picked products allow.

Picked weights used by anything but bmm are looked up as under "picked" (`layout.index`).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.fx

from frontend.lowering.common import binary, gemm, map_, reduce_rows, relayout
from frontend.lowering.core import rule
from frontend.lowering.embedding import compare_mask
from frontend.lowering.layout import take_along
from frontend.lowering.masks import relation
from frontend.values import Const, Ref, Symbolic

aten = torch.ops.aten


@dataclasses.dataclass
class Picked(Symbolic):
    """W[ids]: the matrices of a constant table (E, ., .) that indices computed on the
    fabric (S,) pick, kept symbolic until a bmm reads them."""

    table: torch.Tensor
    ids: Ref


def _picked_for_products(low, node, x, indices) -> bool:
    """A constant 3-D table indexed along its first dimension by one vector of indices
    computed on the fabric (not an integer input's, which `layout.index` checks against
    the table), every use of the result a bmm."""
    return (low.experts == "dense" and isinstance(x, Const) and x.value.dim() == 3
            and len(indices) == 1 and isinstance(indices[0], Ref) and len(indices[0].shape) == 1
            and not low.int_words(indices[0]) and x.value.is_floating_point()
            and all(u.target is aten.bmm.default for u in node.users))


def picked_products(graph: torch.fx.Graph, constants) -> list[str]:
    """The bmm nodes of `graph` that read a constant 3-D table (a name of `constants`)
    indexed along its first dimension by one runtime vector: the products "dense" runs as
    one GEMM each (whether the indices are computed is the lowering's to tell; this is
    what a refusal for colors names)."""
    out = []
    for node in graph.nodes:
        table = node.args[0] if node.target is aten.index.Tensor else None
        if (isinstance(table, torch.fx.Node) and table.name in constants
                and constants[table.name].dim() == 3 and len(node.args[1]) == 1
                and isinstance(node.args[1][0], torch.fx.Node)):
            out += [u.name for u in node.users if u.target is aten.bmm.default]
    return out


@rule(aten.index.Tensor, case=_picked_for_products)
def picked(low, node, x, indices):
    return Picked(x.value, indices[0])


def _reads_picked(low, node, a, b) -> bool:
    return isinstance(a, Picked) or isinstance(b, Picked)


@rule(aten.bmm.default, case=_reads_picked)
def expert_bmm(low, node, a, b):
    """bmm with W[ids] as either operand, as the module docstring's dense product; both
    picked: the second is looked up (`layout.take_along`) first."""
    if isinstance(a, Picked) and isinstance(b, Picked):
        b = take_along(low, node, Const(b.table), 0, b.ids)
    if isinstance(a, Picked):  # out[s] = W[e_s] (F, D) @ b[s] (D, R): rows b[s]^T
        s, d, r = b.shape
        rows = relayout(b, lambda t: t.permute(0, 2, 1).reshape(s * r, d))
        stacked = a.table.permute(0, 2, 1)  # (E, D, F): [e, d, f] = W[e, f, d]
        pick = a
    else:  # out[s] = a[s] (R, D) @ W[e_s] (D, F)
        s, r, d = a.shape
        rows = relayout(a, lambda t: t.reshape(s * r, d))
        stacked, pick = b.table, b
    out = _masked_experts(low, rows, _mask(low, pick.ids, stacked.shape[0]), stacked, s, r)
    return Ref(out.permute(0, 2, 1) if isinstance(a, Picked) else out)


def _masked_experts(low, rows: Ref, mask: Ref, stacked: torch.Tensor, s: int, r: int
                    ) -> torch.Tensor:
    """The module docstring's product: rows (S R, D) of X, mask (S, E), stacked (E, D, F)
    the experts' weights; out[s, r] = sum_e mask[s, e] X[s, r] @ stacked[e], as one GEMM.
    The index of the (S, R, F) result."""
    d = rows.shape[1]
    experts, width = stacked.shape[0], stacked.shape[2]
    # computed transposed, out^T = W^T M^T, so that the GEMM's rows are the F outputs
    # rather than the S R token rows: a SUMMA tile's PEs hold blocks of many rows, where
    # few rows leave each fma op's fixed cost unshared (docs/benchmarks.md, "Kernels")
    spread = (experts * d, s * r)
    # column (s, r): row (s, r) of X once per expert, each copy times that expert's mask
    copies = relayout(rows, lambda t: t.t().reshape(1, d, s * r).expand(experts, d, s * r)
                      .reshape(spread))

    def spread_mask(t):  # (S, E) -> (E D, S R): column (s, r), rows of expert e
        return t.t().reshape(experts, 1, s, 1).expand(experts, d, s, r).reshape(spread)

    masks = (Const(spread_mask(mask.value).contiguous()) if isinstance(mask, Const)
             else Ref(spread_mask(mask.index)))
    masked = binary(low, copies, masks, "mul", spread)
    weights = Const(stacked.reshape(experts * d, width).t().contiguous())  # (F, E D)
    out = gemm(low, weights, masked, suffix="_experts")  # (F, S R)
    return out.index.t().reshape(s, r, width)


def _mask(low, ids: Ref, experts: int) -> Ref:
    """The one-hot mask (S, E) of `ids`, poisoned: m[s, e] = (ids[s] == e) where an index
    hits an expert, -inf where none does; computed once per vector of indices and
    lowering (a layer's two expert products read the same)."""
    key = ("expert mask", tuple(ids.index.reshape(-1).tolist()), experts)
    if key not in low.shared:
        tokens = ids.index.numel()
        shape = (tokens, experts)
        columns = Const(torch.arange(experts, dtype=torch.float32).expand(shape))
        spread = Ref(ids.index.reshape(tokens, 1).expand(shape))
        mask = compare_mask(low, binary(low, spread, columns, "sub", shape), 0.0, shape)
        hits = reduce_rows(low, mask.index.reshape(shape), "sum")  # (S,)
        poison = map_(low, map_(low, map_(low, hits, "add", -1.0, (tokens,)), "mul", 3e38,
                                (tokens,)), "mul", 4.0, (tokens,))
        low.shared[key] = binary(low, mask, Ref(poison.index.reshape(tokens, 1)), "add",
                                 shape)
    return low.shared[key]


# transformers' product of token rows grouped by expert (its experts_implementation
# "grouped_mm", the default, as it runs on a CPU), named: the op exists once transformers
# is imported
GROUPED_MM_FALLBACK = "transformers.grouped_mm_fallback.default"


@rule(GROUPED_MM_FALLBACK)
def grouped_mm(low, node, x, w, offs):
    """out[s] = x[s] @ w[g] for the rows s of group g, offs[g - 1] <= s < offs[g] (offs
    the groups' running ends, nondecreasing; rows past the last end are zeros, as
    transformers' product leaves them): the rows sorted by their expert, w a
    constant (E, D, F). Every row meets every expert in one GEMM, a mask keeping its
    group's (the module docstring's product, with

        ends[s, g] = (offs[g] > s),   m[s, g] = ends[s, g] - ends[s, g - 1]

    for the mask), whatever the offsets computed on the fabric (a histogram's running sum)."""
    if (not isinstance(x, Ref) or len(x.shape) != 2 or not isinstance(w, Const)
            or w.value.dim() != 3 or not w.value.is_floating_point()):
        raise low.unsupported("a grouped product other than 2-D rows by constant 3-D "
                              "weights")
    s, experts = x.shape[0], w.value.shape[0]
    shape = (s, experts)
    rows = torch.arange(s, dtype=torch.float32).reshape(s, 1).expand(shape)
    if isinstance(offs, Const):
        ends = (offs.value.reshape(1, experts) > rows).to(torch.float32)
        mask = Const(ends - torch.nn.functional.pad(ends[:, :-1], (1, 0)))
    else:
        ends = relation(low, Ref(offs.index.reshape(1, experts).expand(shape)),
                        Const(rows), "gt")
        # ends[:, g - 1] (zeros, index -1, before the first group)
        before = Ref(torch.cat((torch.full((s, 1), -1, dtype=torch.int64),
                                ends.index[:, :-1]), 1))
        mask = binary(low, ends, before, "sub", shape)
    return Ref(_masked_experts(low, x, mask, w.value, s, 1).reshape(s, -1), x.dtype)
