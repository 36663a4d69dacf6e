"""A pipelined placement whose routes fit the fabric's colors: tiles shrunk until they do.

Every stage's kernel and every move are on the fabric at once in pipelined mode, so their
routes share the program colors (`frontend.graph_colors`). Larger tiles need more of them:
a SUMMA GEMM one per tile row and column, a move one per flow crossing a PE, and more flows
cross where tiles are wide. The balanced placement (`frontend.balance`) sizes tiles for
the rate alone; with `colors="fit"` a placement whose parts the colors cannot hold is
placed again with smaller tiles, the period set within a smaller share of the fabric,
with and then without spare PEs (`FIT_TRIES`, in order); the first that fits is kept (its
colors, and every PE's task ids as far as `fan_out.crowded_pe` can tell: what one program
needs), after
a search between its share and the larger one before it that fell short (`REFINE_STEPS`
halvings; of the shares that fit, the one of the lowest predicted period): a pipeline
that runs as one fabric program (`cm.one_program`), often slower, instead of a refusal.
When even every stage's starting tile needs more colors (or task ids) than the fabric
has, fan-out relays are tried (`frontend.fan_out`): where the busiest PE is crossed by
the moves of one producer to many consumers, a copy of its output on a tile of its own
serves the later half of them, one relay at a time (`MAX_RELAYS` at most) until the
starting tiles fit the colors and every PE's tiles its task ids (a sending PE runs a local
task per move leaving it), and the ladder runs again with the relays; a model they do not
help is refused with the shortfall of its smallest placement without them.

The test models on small(12, 12) (docs/frontend.md): the balanced tiles need 10 (MLP,
which fits), 26 (LeNet) and 34 (TinyGPT) of the 21 colors; LeNet fits with the period
set within 18 % of the fabric, TinyGPT within 48 %.

Cost: one placement, one preparation of the moves and one color assignment per try, only
for a model whose balanced placement does not fit (at most `REFINE_STEPS` more for the
search); with relays one more per relay on the starting tiles and the ladder once more.
"""

from __future__ import annotations

import dataclasses

from fabric.config import FabricConfig
from frontend.balance import PERIOD_SHARE
from frontend.errors import PlacementError
from frontend.fan_out import (
    add_relay,
    busiest_fan_out,
    crowded_pe,
    stage_edges,
    task_shortfall,
)
from frontend.graph_colors import GraphColors, graph_colors
from frontend.placement import Placement, place
from frontend.runtime import PreparedStage, prepare
from frontend.stages import Stage

# (period share, spare PEs) of each placement tried, the balanced one first; a share of 0
# keeps every stage on its starting tile
FIT_TRIES = ((PERIOD_SHARE, True), (0.4, True), (0.4, False), (0.2, True), (0.2, False),
             (0.1, False), (0.05, False), (0.0, False))
# halvings of the gap between the share found short of colors and the first that fits
REFINE_STEPS = 3
# fan-out relays "fit" adds at most, one at a time, before it refuses a model
MAX_RELAYS = 8


@dataclasses.dataclass(frozen=True)
class ColorFit:
    """The placement kept, its prepared stages and colors; `tries` how many were made."""

    placement: Placement
    prepared: list[PreparedStage]
    colors: GraphColors
    tries: int
    # the stages placed (with the relays "fit" added, `frontend.fan_out`), their tensors
    # and (producer, consumer) edges
    stages: list[Stage]
    tensors: dict
    edges: list
    first: GraphColors  # the balanced placement's, before any shrinking or relay


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
    smaller tiles of `FIT_TRIES` whose parts the colors hold (module docstring), with
    fan-out relays where even the starting tiles need more colors (`_relays`); "refuse"
    and "report" the balanced one alone, refused or reported as `graph_colors` does.

    Raises PlacementError: the stages do not fit the fabric, or their colors do not (under
    "fit", not even on their starting tiles with relays; the shortfall is that placement's
    without them)."""
    fit = _ladder(stages, tensors, config, edges, policy, period_share)
    if _fits(fit.colors, policy) or policy != "fit":
        return fit
    relayed = _relays(stages, tensors, config, fit.colors)
    if relayed is None:
        graph_colors(fit.prepared, config, policy)  # raises when short of colors
        raise PlacementError("pipelined mode keeps every stage's kernel and every move on "
                             "the fabric at once, and their tasks do not fit a PE's task "
                             "ids even with every stage on its starting tile: "
                             + task_shortfall(fit.colors.assignment))
    stages, tensors, edges, relays = relayed
    again = _ladder(stages, tensors, config, edges, policy, period_share, first=fit.first)
    note = (f"{len(relays)} fan-out relay{'s' * (len(relays) > 1)} ("
            + ", ".join(repr(r) for r in relays) + "; without them even the starting tiles "
            f"needed {fit.colors.assignment.needed})")
    fitted = f"{again.colors.fitted}; {note}" if again.colors.fitted else note
    colors = dataclasses.replace(again.colors, fitted=fitted)
    return dataclasses.replace(again, colors=colors, tries=fit.tries + again.tries)


def _ladder(stages, tensors, config, edges, policy: str, period_share: float,
            first: GraphColors | None = None) -> ColorFit:
    """`fit_colors` without relays; under "fit" the last try's shortfall is returned, not
    raised. `first`: the balanced placement's colors to report as what was needed."""
    tries = [(period_share, True)] + ([(s, spare) for s, spare in FIT_TRIES[1:]
                                       if s < period_share] if policy == "fit" else [])
    for n, (share, spare) in enumerate(tries, 1):
        placement, prepared, colors = (
            _try_fit(stages, tensors, config, edges, share, spare) if policy == "fit" else
            try_placement(stages, tensors, config, edges, share, spare,
                          policy if n == len(tries) else "report"))
        first = first or colors
        if _fits(colors, policy):
            made = n
            short = [s for s, _ in tries[:n - 1] if s > share]  # shares short of colors
            if short:
                (share, placement, prepared, colors), extra = _refine(
                    stages, tensors, config, edges, min(short), share, spare,
                    (placement, prepared, colors))
                made += extra
            if n > 1:
                colors = dataclasses.replace(colors, fitted=_fitted(share, spare, first))
            return ColorFit(placement, prepared, colors, made, stages, tensors, edges, first)
    # "report" or "fit": short of colors (or, under "fit", of task ids)
    return ColorFit(placement, prepared, colors, len(tries), stages, tensors, edges, first)


def _relays(stages, tensors, config: FabricConfig, failed: GraphColors):
    """Relays (`frontend.fan_out`) added one at a time until the starting tiles' placement
    (`failed`'s, then that with the relays so far) fits the colors and every PE's tiles
    fit its task ids (`crowded_pe`), each for the producer with the most moves crossing
    the busiest (or the crowded) PE: (stages, tensors, edges, the relays' names), or None
    when that PE has no such producer or `MAX_RELAYS` do not do."""
    relays = []
    for _ in range(MAX_RELAYS):
        producer = busiest_fan_out(failed, None if not failed.assignment.ok
                                   else crowded_pe(failed.assignment))
        if producer is None:
            return None
        stages, tensors, relay = add_relay(stages, tensors, producer)
        relays.append(relay)
        edges = stage_edges(stages, tensors)
        _, _, failed = try_placement(stages, tensors, config, edges, 0.0, False, "report")
        if _fits(failed, "fit"):
            return stages, tensors, edges, relays
    return None


def _fits(colors: GraphColors, policy: str) -> bool:
    """Whether a placement's parts fit the colors and, under "fit" (which promises one
    fabric program), every PE's task ids (`crowded_pe`)."""
    return colors.assignment.ok and (policy != "fit" or crowded_pe(colors.assignment) is None)


def try_placement(stages, tensors, config, edges, share: float, spare: bool, policy: str,
                  stack: str = "latency"):
    """The balanced placement with the period set within `share` (riders as `place`'s
    `stack`), its moves and colors."""
    placement = place(stages, config, edges, balance="cycles", period_share=share,
                      spare=spare, stack=stack)
    prepared = prepare(stages, placement.rects, tensors, config)
    return placement, prepared, graph_colors(prepared, config, policy)


def _try_fit(stages, tensors, config, edges, share: float, spare: bool):
    """`try_placement` for the "fit" ladder: where the placement is short of colors or task
    ids, the one with riders judged by the rate alone (`place`'s `stack`: more riders,
    each move below its producer one color), then the one without riders, at the same
    share, the first of them that fits. A rider's tile shape moves the other tiles too, and
    the moves around them may cross one PE more often (RoBERTa at 55 %: 28 colors with one
    rider, 21 or fewer without)."""
    tried = try_placement(stages, tensors, config, edges, share, spare, "report")
    if _fits(tried[2], "fit"):
        return tried
    # "rate" differs only where riders were left apart for the way, "off" where any ride
    others = [stack for stack, differs in (("rate", tried[0].left_for_way),
                                           ("off", bool(tried[0].riders))) if differs]
    for stack in others:
        other = try_placement(stages, tensors, config, edges, share, spare, "report", stack)
        if _fits(other[2], "fit"):
            return other
    return tried


def _refine(stages, tensors, config, edges, short: float, fits: float, spare: bool, kept,
            steps: int = REFINE_STEPS):
    """Shares between `short` (its tiles need more colors) and `fits` (`kept`: its
    placement, moves and colors), halving the gap `steps` times (the ladder's steps halve
    the share, and a model with many stages can go from too many colors to one PE a stage
    in one of them); of those that fit, the one of the lowest predicted period
    (`predicted_period`; a larger share first when equal: the placement is not monotone
    in the share). Returns ((share, placement, prepared, colors), the placements made)."""
    fitting = [(fits, *kept)]
    for _ in range(steps):
        mid = (short + fits) / 2
        placement, prepared, colors = _try_fit(stages, tensors, config, edges, mid, spare)
        if _fits(colors, "fit"):
            fits = mid
            fitting.append((mid, placement, prepared, colors))
        else:
            short = mid
    best = min(fitting, key=lambda f: (predicted_period(f[2]), -f[0]))
    return best, steps


def predicted_period(prepared: list[PreparedStage]) -> int:
    """The pipeline's period as its plans predict it: the largest, over its stages, of the
    kernel's analytic cycles plus the estimated cycles of the moves into it (host writes
    apart)."""
    return max((p.kernel.model_cycles
                + sum(src.plan.estimate_cycles for sources in p.sources.values()
                      for src in sources if src.plan is not None)
                for p in prepared), default=0)


def _fitted(share: float, spare: bool, first: GraphColors) -> str:
    where = (f"the period set within {share:.0%} of the fabric" if share
             else "every stage on its starting tile")
    return (f"tiles shrunk for the colors to fit ({where}"
            + (", spare PEs given" if spare else ", no spare PEs")
            + f"; the balanced placement needed {first.assignment.needed})")
