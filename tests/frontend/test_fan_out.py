"""Fan-out relays (`frontend.fan_out`): a producer sending to more consumers than its PEs
have colors gets copies of its output on tiles of their own under `colors="fit"`, which
give the consumers the producer's words bit for bit, in the parts run apart and in the one
fabric program; what the relays are built from (the stage list, the busiest PE's producer,
the task ids a PE's tiles need) checked on its own."""

import re

import pytest
import torch

import frontend
from fabric import ColorPart, FabricConfig, Program, Rect, Tile, assign_part_colors
from frontend.color_fit import try_placement
from frontend.fan_out import (
    add_relay,
    busiest_fan_out,
    crowded_pe,
    stage_edges,
    task_shortfall,
)
from frontend.model_program import build_model_program
from tests.frontend.models import words_apart

# 6 colors: the linear layer's PE starts a route to each of its 8 consumers, more than that
FEW = FabricConfig.small(5, 5).replace(reserved_colors=tuple(range(6, 24)))


class FanOut(torch.nn.Module):
    """A linear layer whose output columns each feed a consumer of their own."""

    def __init__(self, consumers: int = 8):
        super().__init__()
        self.fc = torch.nn.Linear(16, consumers)

    def forward(self, x):
        y = self.fc(x)
        return torch.stack([y[:, i] * (i + 2) for i in range(y.shape[1])], 1)


def _compile(colors: str, **kw):
    torch.manual_seed(0)
    return frontend.compile(FanOut().eval(), (torch.randn(4, 16),), FEW, mode="pipelined",
                            colors=colors, **kw)


@pytest.fixture(scope="module")
def relayed():
    return _compile("fit")


def test_fit_relays_a_fan_out_the_starting_tiles_cannot_color(relayed):
    """Even on its starting tiles the model needs 8 colors of 6 (the shortfall "report"
    keeps); "fit" adds relays of the linear layer's output until they fit, each a stage
    on the producer's FX node right after it, and says so in the report."""
    short = _compile("report")
    assert not short.colors.assignment.ok
    assert relayed.colors.assignment.ok and relayed.colors.assignment.used <= 6
    names = [s.name for s in relayed.lowered.stages]
    relays = [n for n in names if "_relay" in n]
    assert relays and all(n.startswith("addmm_relay") for n in relays)
    assert names[:len(relays) + 1] == ["addmm", *sorted(relays, reverse=True)]
    stages = {s.name: s for s in relayed.lowered.stages}
    assert all(stages[n].node is stages["addmm"].node and stages[n].kind == "map"
               for n in relays)
    assert set(relayed.placement.rects) == set(names)
    assert (f"{len(relays)} fan-out relays (" in relayed.report()
            and "without them even the starting tiles needed 8" in relayed.report())
    # every relay and the producer feed some of the 8 consumers, none feeds all
    fed = {p: {c for q, c in relayed.edges if q == p and "_relay" not in c}
           for p in ["addmm", *relays]}
    assert all(0 < len(c) < 8 for c in fed.values())
    assert set().union(*fed.values()) == {n for n in names if n.startswith("mul")}


def test_relays_pass_the_producers_words_bit_for_bit(relayed):
    """The relay multiplies by 1: its words are the producer's, so every consumer's words
    and the outputs are those of the model without relays (its parts run apart anyway),
    bit for bit, and every node is within its fp32 tolerance against eager."""
    x = torch.randn(4, 16)
    short = _compile("report")
    torch.testing.assert_close(relayed(x), short(x), rtol=0, atol=0)
    tensors = relayed.lowered.tensors
    producer = relayed.last.value(tensors["addmm"].ref().index)
    for name in tensors:
        if "_relay" in name:
            torch.testing.assert_close(relayed.last.value(tensors[name].ref().index),
                                       producer, rtol=0, atol=0, msg=name)
    relayed.validate(x)


def test_a_16_bit_producer_is_relayed_in_its_format():
    """Mixed precision: the linear layer stores bfloat16, and so does its relay (a copy in
    fp32 would round nothing but double the words moved); the outputs are those of the
    model without relays, bit for bit."""
    mixed = {"precision": "mixed", "half": "bfloat16"}
    fit, short = _compile("fit", **mixed), _compile("report", **mixed)
    stages = {s.name: s for s in fit.lowered.stages}
    relays = [n for n in stages if "_relay" in n]
    assert relays and {stages[n].dtype for n in relays} == {stages["addmm"].dtype} == {"bf16"}
    x = torch.randn(4, 16)
    torch.testing.assert_close(fit(x), short(x), rtol=0, atol=0)


def test_a_relayed_model_runs_as_one_program(relayed):
    """The relays make it one fabric program: a call in it gives the words of the parts
    run apart, samples streamed by their data too."""
    xs = [torch.randn(4, 16) for _ in range(2)]
    apart = words_apart(relayed, xs)
    run = relayed.one_program_stream([(x,) for x in xs], start="data")
    assert all(run.same_words(s, words) for s, words in enumerate(apart))


def test_add_relay_moves_the_later_half_of_the_consumers(relayed):
    """On the model without relays: the relay reads the producer's elements in order, the
    later half of the consumers (graph order) read the relay's instead, the others and
    the given lists are left as they were."""
    short = _compile("report")
    stages, tensors = short.lowered.stages, short.lowered.tensors
    before = [(s.name, [op.index.clone() for op in s.operands if op.index is not None])
              for s in stages]
    new_stages, new_tensors, relay_name = add_relay(stages, tensors, "addmm")
    assert relay_name == "addmm_relay"
    for s, (name, indices) in zip(stages, before):
        kept = [op.index for op in s.operands if op.index is not None]
        assert s.name == name and all(torch.equal(a, b) for a, b in zip(indices, kept))
    assert "addmm_relay" not in tensors
    out, relay = tensors["addmm"], new_tensors["addmm_relay"]
    assert relay.shape == out.shape and relay.base >= max(t.base + t.numel
                                                          for t in tensors.values())
    assert [s.name for s in new_stages][:2] == ["addmm", "addmm_relay"]
    assert out.in_order(new_stages[1].operands[0].index)
    edges = stage_edges(new_stages, new_tensors)
    consumers = [s.name for s in stages if s.name.startswith("mul")]
    assert {c for p, c in edges if p == "addmm_relay"} == set(consumers[4:])
    assert {c for p, c in edges if p == "addmm"} == set(consumers[:4]) | {"addmm_relay"}
    with pytest.raises(ValueError, match="stage 'mul_7_mul' has no consumer to relay to"):
        add_relay(stages, tensors, "mul_7_mul")


def test_the_busiest_pes_producer_is_the_one_with_most_consumers_there():
    short = _compile("report")
    assert busiest_fan_out(short.colors) == "addmm"
    assert busiest_fan_out(short.colors, minimum=9) is None  # 8 consumers at most


def _tasks(n_local: int, colors: int = 0) -> Tile:
    tile = Tile(f"t{n_local}_{colors}")
    for i in range(n_local):
        tile.local_task(f"l{i}", [])
    for c in range(colors):
        tile.data_task(f"d{c}", c, [])
    return tile


def test_a_pe_whose_tiles_need_more_task_ids_than_it_has_is_crowded():
    """31 task ids on WSE-2, 3 of them the reserved colors', one for each color a tile
    there binds: 24 local tasks and 4 data tasks at one PE need 31, one more is one too
    many; tiles elsewhere do not count there."""
    config = FabricConfig.small(3, 3)
    middle = Rect(1, 1, 1, 1)

    def parts(local: int, where: Rect = middle):
        out = []
        for i in range(local):
            program = Program(config)
            program.place(_tasks(1, colors=4 if i == 0 else 0), where)
            out.append(ColorPart(f"part {i} at {where}", program))
        return out

    assert crowded_pe(assign_part_colors(config, parts(24))) is None
    assert task_shortfall(assign_part_colors(config, parts(24))) is None
    crowded = assign_part_colors(config, parts(25))
    assert crowded_pe(crowded) == (1, 1)
    text = task_shortfall(crowded)
    assert text.startswith("PE (1, 1) runs 25 local tasks of 25 parts but has at most 24 "
                           "task ids for them (31 ids, less 3 reserved colors and the 4 "
                           "colors its tiles bind, read or write;"), text
    assert "  part 0 at Rect(row=1, col=1, rows=1, cols=1): 1 local task" in text
    spread = parts(25, Rect(0, 0, 1, 1))[:13] + parts(12, Rect(2, 2, 1, 1))
    assert crowded_pe(assign_part_colors(config, spread)) is None


def test_on_wse3_local_tasks_have_the_ids_after_the_input_queues():
    """WSE-3 binds data tasks to its 8 input queues and gives local tasks the ids 8..30,
    whatever colors the tiles use: 23 local tasks at a PE fit, 24 do not."""
    config = FabricConfig.small(3, 3, "wse3")

    def parts(local: int):
        out = []
        for i in range(local):
            program = Program(config)
            program.place(_tasks(1, colors=4 if i == 0 else 0), Rect(1, 1, 1, 1))
            out.append(ColorPart(f"part {i}", program))
        return out

    assert crowded_pe(assign_part_colors(config, parts(23))) is None
    crowded = assign_part_colors(config, parts(24))
    assert crowded_pe(crowded) == (1, 1)
    assert "has at most 23 task ids for them (31 ids, the first 8 bound to the input " \
           "queues;" in task_shortfall(crowded)


def test_tasks_that_crowd_a_pe_are_refused_under_fit():
    """28 task ids, 18 of them reserved colors: the linear layer's PE sends to its 4
    consumers on the 6 colors, but its sends' local tasks and its kernel's need more ids
    than are left there, on every placement "fit" tries and with relays; "fit" refuses it
    at compile time, naming the PE, the tasks, the ids and the parts, where "report"
    compiles it (on the starting tiles, whose colors fit) and the one program's build is
    what fails."""
    cramped = FEW.replace(num_task_ids=28)
    torch.manual_seed(0)
    model, x = FanOut(4).eval(), torch.randn(4, 16)
    cm = frontend.compile(model, (x,), cramped, mode="pipelined", colors="report")
    # the ladder's last placement (every stage on its starting tile, no spare PEs): its
    # colors fit, its tasks do not, which its one program's build confirms
    _, prepared, colors = try_placement(cm.lowered.stages, cm.lowered.tensors, cramped,
                                        cm.edges, 0.0, False, "report")
    assert colors.assignment.ok and crowded_pe(colors.assignment) is not None
    with pytest.raises(frontend.PlacementError, match="local tasks but"):
        build_model_program(prepared, colors, gated=True)
    with pytest.raises(frontend.PlacementError) as refused:
        frontend.compile(model, (x,), cramped, mode="pipelined", colors="fit")
    text = str(refused.value)
    assert re.search(r"their tasks do not fit a PE's task ids even with every stage on its "
                     r"starting tile: PE \(\d+, \d+\) runs (\d+) local tasks of \d+ parts but "
                     r"has at most (\d+) task ids for them \(28 ids, less 18 reserved colors",
                     text), text
    assert "stage 'addmm' (gemm_summa)" in text and "move 'addmm'" in text
