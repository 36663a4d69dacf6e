"""A pipelined placement whose routes fit the fabric's colors: tiles shrunk until they do.

Every stage's kernel and every move are on the fabric at once in pipelined mode, so their
routes share the program colors (`frontend.graph_colors`). Larger tiles need more of them:
a SUMMA GEMM one per tile row and column, a move one per flow crossing a PE, and more flows
cross where tiles are wide. The balanced placement (`frontend.balance`) sizes tiles for
the rate alone; with `colors="fit"` a placement whose parts the colors cannot hold is
placed again with smaller tiles, the period set within a smaller share of the fabric,
with and then without spare PEs (`FIT_TRIES`, in order), and the first that fits is kept:
a pipeline that runs as one fabric program (`cm.one_program`), often slower, instead of a
refusal. When even every stage's starting tile needs more colors than the fabric has,
the model is refused with the shortfall of that smallest placement.

The test models on small(12, 12): the balanced tiles need 26 (MLP), 34 (LeNet) and 37
(TinyGPT) of the 21 colors; their starting tiles 2, 3 and 14.

Cost: one placement, one preparation of the moves and one color assignment per try, only
for a model whose balanced placement does not fit.
"""

from __future__ import annotations

import dataclasses

from fabric.config import FabricConfig
from frontend.balance import PERIOD_SHARE
from frontend.graph_colors import GraphColors, graph_colors
from frontend.placement import Placement, place
from frontend.runtime import PreparedStage, prepare
from frontend.stages import Stage

# (period share, spare PEs) of each placement tried, the balanced one first; a share of 0
# keeps every stage on its starting tile
FIT_TRIES = ((PERIOD_SHARE, True), (0.4, True), (0.4, False), (0.2, True), (0.2, False),
             (0.1, False), (0.05, False), (0.0, False))


@dataclasses.dataclass(frozen=True)
class ColorFit:
    """The placement kept, its prepared stages and colors; `tries` how many were made."""

    placement: Placement
    prepared: list[PreparedStage]
    colors: GraphColors
    tries: int


def check_period_share(share: float | None, mode: str) -> float:
    """compile's `period_share` (None: `PERIOD_SHARE`); ValueError unless a fraction in
    [0, 1], given in pipelined mode only."""
    if share is None:
        return PERIOD_SHARE
    if mode != "pipelined":
        raise ValueError(f"period_share sizes the pipelined placement; mode is {mode!r}")
    if not 0 <= share <= 1:
        raise ValueError(f"period_share must be a fraction of the fabric in [0, 1], got "
                         f"{share!r}")
    return float(share)


def fit_colors(stages: list[Stage], tensors, config: FabricConfig, edges,
               policy: str, period_share: float = PERIOD_SHARE) -> ColorFit:
    """The pipelined placement of `stages` by colors policy `policy` (compile's `colors`),
    the period set within `period_share` of the fabric: "fit" the first of that and the
    smaller tiles of `FIT_TRIES` whose parts the colors hold (module docstring); "refuse"
    and "report" the balanced one alone, refused or reported as `graph_colors` does.

    Raises PlacementError: the stages do not fit the fabric, or their colors do not (under
    "fit", not even on their starting tiles; the shortfall is that placement's)."""
    tries = [(period_share, True)] + ([(s, spare) for s, spare in FIT_TRIES[1:]
                                       if s < period_share] if policy == "fit" else [])
    first = None
    for n, (share, spare) in enumerate(tries, 1):
        placement = place(stages, config, edges, balance="cycles", period_share=share,
                          spare=spare)
        prepared = prepare(stages, placement.rects, tensors, config)
        last = n == len(tries)
        colors = graph_colors(prepared, config, policy if last else "report")
        first = first or colors
        if colors.assignment.ok:
            if n > 1:
                colors = dataclasses.replace(colors, fitted=_fitted(share, spare, first))
            return ColorFit(placement, prepared, colors, n)
    return ColorFit(placement, prepared, colors, len(tries))  # "report": short of colors


def _fitted(share: float, spare: bool, first: GraphColors) -> str:
    where = (f"the period set within {share:.0%} of the fabric" if share
             else "every stage on its starting tile")
    return (f"tiles shrunk for the colors to fit ({where}"
            + (", spare PEs given" if spare else ", no spare PEs")
            + f"; the balanced placement needed {first.assignment.needed})")
