"""Colors over a whole pipelined model: every stage's kernel and every move between stages
given colors as if they were one fabric program (`fabric.assign_part_colors`).

In "pipelined" mode every stage stays resident on its tile, so the kernels' routes and the
moves' routes are all on the fabric at once: two that cross one router need different
colors, and the host's memcpy keeps its reserved ones. The parts are still simulated apart,
each with its own colors; this assignment is the plan one fabric program per model will
use. A model it cannot color is refused at compile time (`PlacementError`), or with
`compile(..., colors="report")` compiled anyway, the shortfall in its report.

Parts: each stage's kernel (`PreparedStage.kernel`, on the whole fabric at its tile) and
each round of each move planned at compile time (`Source.plan`, on its window). Not among
them: the per-call gathers of an embedding's rows (their routes follow each call's
indices) and the host's writes (host I/O, on the reserved colors).

Example:
    >>> colors = graph_colors(cm.prepared, cm.config)                 # doctest: +SKIP
    >>> colors.summary()                                              # doctest: +SKIP
    "colors over the whole graph (one program's plan): 12 used of 21 colors (0..20;
    21..23 reserved for the host's memcpy); busiest PE (0, 0): 12 colors of 2 parts cross
    it, the fewest any assignment needs"
"""

from __future__ import annotations

import dataclasses

from fabric import ColorAssignment, ColorPart, FabricConfig, assign_part_colors
from frontend.errors import PlacementError
from frontend.runtime import PreparedStage
from frontend.sources import describe

COLOR_POLICIES = ("fit", "refuse", "report")  # compile's `colors` (`compile`'s docstring)
# the parts of a model short of colors still run apart, the shortfall in its report
DEFAULT_COLOR_POLICY = "report"


def check_color_policy(colors: str) -> str:
    if colors not in COLOR_POLICIES:
        raise ValueError(f"colors must be one of {list(COLOR_POLICIES)}, got {colors!r}")
    return colors


@dataclasses.dataclass(frozen=True)
class GraphColors:
    """The assignment over a model's parts; `moves`: {(producer stage, consumer stage):
    labels of the parts (move rounds) that carry that edge}."""

    assignment: ColorAssignment
    moves: dict[tuple[str, str], list[str]]
    fitted: str = ""  # how the tiles were shrunk for the colors to fit (colors="fit")

    def edge_colors(self, producer: str, consumer: str) -> list[int]:
        """The colors assigned to the moves from `producer` into `consumer`, ascending."""
        a = self.assignment
        return sorted({c for label in self.moves.get((producer, consumer), [])
                       for c in a.colors_of(label).values()})

    def summary(self) -> str:
        """One line for the report: colors used of those available (or needed, when they
        do not suffice), the busiest PE and how many colors of how many parts cross it."""
        a = self.assignment
        busiest = ""
        if a.busiest_pe is not None:
            parts = {n.label for n in a.at(*a.busiest_pe)}
            busiest = (f"; busiest PE {a.busiest_pe}: {a.lower_bound} colors of {len(parts)} "
                       "parts cross it, the fewest any assignment needs")
        if a.ok:
            return (f"colors over the whole graph (one program's plan): {a.used} used of "
                    f"{a.config.palette_text()}{busiest}"
                    + (f"; {self.fitted}" if self.fitted else ""))
        return (f"colors over the whole graph: {a.needed} needed (greedy), "
                f"{a.config.palette_text()}{busiest}: not one program on this fabric; "
                "its parts are simulated apart, each with its own colors")


def stage_label(p: PreparedStage) -> str:
    return f"stage {p.stage.name!r} ({p.stage.kind}), {describe(p.stage.node)}"


def move_label(producer: str, stages: dict[str, PreparedStage], consumer: PreparedStage,
               operand: str) -> str:
    """"move 'a' (FX node 'a') -> 'b' (FX node 'b'), operand 'x'"; a resident input has
    no stage: "move input 'w' -> ..."."""
    def name(stage: str) -> str:
        p = stages.get(stage)
        return f"{stage!r} (FX node {p.stage.node.name!r})" if p else f"input {stage!r}"

    return f"move {name(producer)} -> {name(consumer.stage.name)}, operand {operand!r}"


def graph_parts(prepared: list[PreparedStage]) -> tuple[list[ColorPart], dict]:
    """The parts of a pipelined model (module docstring) and {(producer, consumer):
    labels of its moves' rounds}."""
    stages = {p.stage.name: p for p in prepared}
    parts = [ColorPart(stage_label(p), p.kernel.program) for p in prepared]
    moves: dict[tuple[str, str], list[str]] = {}
    for p in prepared:
        for operand, sources in p.sources.items():
            for src in sources:
                if src.plan is None:  # the host writes it
                    continue
                label = move_label(src.tensor.name, stages, p, operand)
                rounds = src.plan.rounds
                for i, rnd in enumerate(rounds):
                    part = ColorPart(label + (f", round {i}" if len(rounds) > 1 else ""),
                                     rnd.program, src.plan.window.corner)
                    parts.append(part)
                    moves.setdefault((src.tensor.name, p.stage.name), []).append(part.label)
    return parts, moves


def graph_colors(prepared: list[PreparedStage], config: FabricConfig,
                 colors: str = "refuse") -> GraphColors:
    """Colors for every part of a pipelined model on `config`.

    colors: what a model whose parts the fabric's colors cannot hold gets: "refuse" (or
        "fit": the compile has shrunk its tiles as far as it goes) a PlacementError naming
        the colors needed and available, the busiest PE and the stages and moves crossing
        it, and the parts left without a color; "report" the assignment as far as it goes
        (`GraphColors.summary` says what is short)."""
    check_color_policy(colors)
    parts, moves = graph_parts(prepared)
    assignment = assign_part_colors(config, parts)
    if not assignment.ok and colors != "report":
        shrunk = (" even with every stage on its starting tile (colors=\"fit\" shrank the "
                  "tiles as far as they go)" if colors == "fit" else "")
        raise PlacementError(
            "pipelined mode keeps every stage's kernel and every move on the fabric at once, "
            f"and their routes do not fit its colors{shrunk}: " + assignment.shortfall()
            + "\n(smaller tiles take fewer colors: a SUMMA GEMM one per tile row and column, "
            "a move one per flow crossing a PE; compile(..., colors=\"fit\") places the "
            "model on smaller tiles until they fit, colors=\"report\") compiles it on these "
            "anyway, its parts simulated apart as in every mode)")
    return GraphColors(assignment, moves)
