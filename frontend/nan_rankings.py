"""Rankings that NaN would make wrong, checked after every call.

topk, sort and the index of argmax, max.dim and min.dim are lowered on comparisons that do
not order NaN (`frontend.lowering.ranking`, `frontend.lowering.reductions`): eager ranks
NaN above every number, the fabric's passes and counts give another element or an index
out of the row for a row that holds one. So after every call the host reads each such
node's input from the words where it lies (as `cm.validate` reads a node's value), and a
NaN there raises `RankingNaNError` naming the node, its source line and where the NaN is,
instead of returning an answer eager would not give. (kthvalue, median and nanmedian
order NaN as eager does, `frontend.lowering.order_statistics`; max and min over a whole
dimension give NaN as eager does, their values being a NaN-propagating max.)

Example:
    >>> guards = nan_guards(cm.captured.graph, cm.lowered.env)   # doctest: +SKIP
    >>> check_rankings(guards, cm.last.value)                    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx

from frontend.errors import RankingNaNError
from frontend.sources import describe
from frontend.values import Ref

aten = torch.ops.aten

# the rankings whose values or indices a NaN in their input makes differ from eager's
UNORDERED = (aten.topk.default, aten.sort.default, aten.sort.stable, aten.argmax.default,
             aten.max.dim, aten.min.dim)


def nan_guards(graph: torch.fx.Graph, env: dict) -> list[tuple[torch.fx.Node, Ref]]:
    """(ranking node, its input's Ref) for every node of `UNORDERED` whose input is a
    floating tensor the fabric computes or the host writes (an integer input has no NaN)."""
    guards = []
    for node in graph.nodes:
        if node.target not in UNORDERED or not isinstance(node.args[0], torch.fx.Node):
            continue
        x = env.get(node.args[0].name)
        val = node.args[0].meta.get("val")
        if isinstance(x, Ref) and isinstance(val, torch.Tensor) and val.is_floating_point():
            guards.append((node, x))
    return guards


def check_rankings(guards: list[tuple[torch.fx.Node, Ref]],
                   value: Callable[[torch.Tensor], torch.Tensor], sample: int | None = None
                   ) -> None:
    """RankingNaNError at the first guarded node whose input, read by `value` (a call's
    `value`: element ids to their values), holds NaN; `sample`: the call's place in a
    stream, named in the message."""
    stream = "" if sample is None else f"sample {sample} of the stream: "
    for node, x in guards:
        nan = torch.isnan(value(x.index))
        if bool(nan.any()):
            at = tuple(int(i) for i in nan.nonzero()[0])
            raise RankingNaNError(
                f"{stream}{describe(node)}: its input holds NaN at {at} in this call; the fabric's "
                f"{node.target.__name__.split('.')[0]} does not order NaN (eager ranks it "
                "above every number), so its result would not be eager's")
