"""Colors over a whole pipelined model (`frontend.graph_colors`, docs/frontend.md,
"Execution modes"): every stage's kernel and every move round get colors as one program
would need them, checked here against footprints walked program by program; a fabric
whose colors cannot hold them refuses the model, naming the stages and moves at the
busiest PE, the colors needed and those available. Compile only: nothing runs."""

import inspect
import re

import matplotlib.colors
import pytest
import torch

import frontend
from fabric import FabricConfig, Rect
from fabric import instructions as ins
from frontend.placement import planned

CONFIG = FabricConfig.small(5, 5)  # the model's tiles take 18 of the 21 colors here
FEW = CONFIG.replace(reserved_colors=tuple(range(10, 24)))  # 10 colors: too few for them


class TwoLayers(torch.nn.Module):
    """The relu reads part of the first layer's output, so it does not ride below it
    (`frontend.companions`): its moves keep the colors these tests count."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(24, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x)[:, :24])
        return self.fc2(h)


def _compile(config=CONFIG, **kw):
    torch.manual_seed(0)
    return frontend.compile(TwoLayers().eval(), (torch.randn(4, 16),), config,
                            mode="pipelined", **kw)


@pytest.fixture(scope="module")
def pipelined():
    return _compile()


def _tile_colors(tile) -> set:
    """The colors a tile's tasks use, read from its code here (data tasks, fabric DSDs)."""
    found = {t.color for t in tile.tasks.values() if t.kind == "data"}
    for task in tile.tasks.values():
        for item in task.code:
            for opnd in (getattr(item, "dst", None), getattr(item, "a", None),
                         getattr(item, "b", None)):
                if isinstance(opnd, (ins.FabIn, ins.FabOut)):
                    found.add(opnd.color)
    return found


def _footprints(cm) -> dict:
    """{(part label, its color): PEs of the fabric}, from the stages' kernels and the
    moves' rounds as compiled (walked PE by PE)."""
    out: dict = {}

    def add(label, program, r0, c0):
        for route in program.routes:
            out.setdefault((label, route.color), set()).update(
                (r + r0, c + c0) for r, c in route.rect.pes())
        for p in program.placements:
            for color in _tile_colors(p.tile):
                out.setdefault((label, color), set()).update(
                    (r + r0, c + c0) for r, c in p.rect.pes())

    labels = iter(part.label for part in cm.colors.assignment.parts)
    for p in cm.prepared:
        add(next(labels), p.kernel.program, 0, 0)
    for p in cm.prepared:
        for sources in p.sources.values():
            for src in sources:
                for rnd in (src.plan.rounds if src.plan is not None else []):
                    add(next(labels), rnd.program, *src.plan.window.corner)
    assert next(labels, None) is None  # one part per kernel and per move round
    return out


def test_pipelined_compile_gives_crossing_routes_different_colors(pipelined):
    cm = pipelined
    a = cm.colors.assignment
    feet = _footprints(cm)
    assert a.ok and sorted(a.assigned) == sorted(feet)
    assert set(a.assigned.values()) <= set(CONFIG.program_colors)
    keys = sorted(feet)
    crossing = 0
    for i, x in enumerate(keys):
        for y in keys[i + 1:]:
            if feet[x] & feet[y]:
                crossing += 1
                assert a.assigned[x] != a.assigned[y], (x, y)
    assert crossing > 0 and any("move" in k[0] for k in keys)
    most = max(sum(pe in f for f in feet.values()) for f in feet.values() for pe in f)
    assert a.lower_bound == most


def test_report_and_placement_show_the_colors(pipelined):
    cm = pipelined
    a = cm.colors.assignment
    assert (f"{a.used} used of 21 colors (0..20; 21..23 reserved for the host's memcpy); "
            f"busiest PE {a.busiest_pe}: {a.lower_bound} colors") in cm.report()
    fig = cm.plot_placement()
    arrows = [p for p in fig.axes[0].patches if type(p).__name__ == "FancyArrowPatch"]
    assert len(arrows) == len(cm.edges)
    black = matplotlib.colors.to_rgba("black")
    for arrow, (producer, consumer) in zip(arrows, cm.edges):
        moved = cm.colors.edge_colors(producer, consumer)
        assert (tuple(arrow.get_edgecolor()) != black) == bool(moved)
    # the planned way's arrows thicker than the others (a chain: all of them)
    _, way, _ = planned([p.stage for p in cm.prepared], cm.placement)
    on_way = set(zip(way, way[1:]))
    assert on_way and on_way <= set(cm.edges)
    for arrow, edge in zip(arrows, cm.edges):
        assert (arrow.get_linewidth() > 2) == (edge in on_way)


def test_a_resident_inputs_moves_join_the_assignment():
    cm = _compile()
    src = next(s for p in cm.prepared for sources in p.sources.values() for s in sources
               if s.tensor.name == "x")
    home = src.dst.at(Rect(4, 0, src.dst.rect.rows, src.dst.rect.cols))  # the last row
    assert cm.make_resident("x", home) == 1
    a = cm.colors.assignment
    label = next(part.label for part in a.parts if part.label.startswith("move input 'x'"))
    assert label == "move input 'x' -> 'addmm' (FX node 'addmm'), operand 'A'"
    assert a.ok and a.colors_of(label)


def test_sequential_mode_assigns_no_colors():
    torch.manual_seed(0)
    cm = frontend.compile(TwoLayers().eval(), (torch.randn(4, 16),), CONFIG, mode="sequential")
    assert cm.colors is None and "colors over the whole graph" not in cm.report()


def test_too_few_colors_refuse_the_model_naming_its_stages_and_moves():
    # 14 colors reserved, 10 left; the model's busiest PE needs more
    few = FEW
    with pytest.raises(frontend.PlacementError) as info:
        _compile(few, colors="refuse")
    text = str(info.value)
    needed = _compile(few, colors="report").colors.assignment.lower_bound
    line = inspect.getsourcelines(TwoLayers.forward)[1] + 1  # h = torch.relu(...)
    assert needed > 10
    for words in (f"need at least {needed} colors and small(5,5) has 10 colors (0..9; "
                  "10..23 reserved for the host's memcpy)",
                  f"is crossed by {needed} color-using routes",
                  "stage 'addmm' (gemm_summa), FX node 'addmm' (aten.addmm.default) at File ",
                  f"test_graph_colors.py\", line {line}, in forward: "
                  "h = torch.relu(self.fc1(x)[:, :24])",
                  "move 'addmm' (FX node 'addmm') -> 'relu_relu' (FX node 'relu'), operand",
                  "parts left without a color"):
        assert words in text, text


def test_report_policy_compiles_a_model_short_of_colors_and_says_so():
    few = FEW
    cm = _compile(few, colors="report")
    assert not cm.colors.assignment.ok and cm.colors.assignment.needed > 10
    assert "not one program on this fabric" in cm.report()


def test_the_dynamo_backend_takes_the_color_policy():
    from frontend.dynamo_backend import fabric_backend

    few = FEW
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(TwoLayers().eval())
    options = {"config": few, "fallback": False}  # pipelined and "report" by default
    with pytest.raises(frontend.PlacementError, match="do not fit its colors"):
        fabric_backend(gm, [torch.randn(4, 16)], {**options, "colors": "refuse"})
    cm = fabric_backend(gm, [torch.randn(4, 16)], options)
    assert cm.mode == "pipelined" and not cm.colors.assignment.ok


def test_fit_policy_shrinks_the_tiles_until_the_colors_fit():
    """With 10 colors the balanced tiles need more; "fit" places the model again on
    smaller tiles (fewer PEs) whose routes fit, as large as it finds, says so, and runs
    it right; with 2 colors its GEMMs split in three (`frontend.gemm_split`) need more
    even on their starting tiles, and the graph unsplit fits, on one PE a stage; with 1
    not even that fits and the model is refused, saying the tiles were shrunk. (This
    file compiles only, but for that one validated call.)"""
    few = FEW
    balanced = _compile(few, colors="report")
    fit = _compile(few, colors="fit")
    assert fit.colors.assignment.ok and fit.colors.assignment.used <= 10
    assert fit.placement.pes_used < balanced.placement.pes_used
    needed = balanced.colors.assignment.needed
    # the ladder's 40 % fits and 60 % does not: the search between them keeps the largest
    # share it finds that fits (57 % here), so no more PEs are given up than the colors ask
    share = re.search(r"tiles shrunk for the colors to fit \(the period set within (\d+)% of "
                      r"the fabric", fit.report())
    assert share and 40 < int(share.group(1)) < 60
    assert f"the balanced placement needed {needed})" in fit.report()
    fit.validate(torch.randn(4, 16))  # every node against eager, fp32 tolerances
    two = CONFIG.replace(reserved_colors=tuple(range(2, 24)))
    unsplit = _compile(two, colors="fit")
    assert [s.name for s in unsplit.lowered.stages] == ["addmm", "relu_relu", "addmm_1"]
    assert unsplit.colors.assignment.used == 2
    one = CONFIG.replace(reserved_colors=tuple(range(1, 24)))
    with pytest.raises(frontend.PlacementError, match="do not fit its colors even with every "
                                                      "stage on its starting tile"):
        _compile(one, colors="fit")


def test_an_unknown_color_policy_is_refused():
    with pytest.raises(frontend.FrontendError, match=r"colors must be one of \['fit', "
                                                     r"'refuse', 'report'\], got 'ignore'"):
        _compile(colors="ignore")


@pytest.mark.long  # RoBERTa compiled and placed three times over: 10-20 s
def test_the_fit_ladder_takes_the_tiles_without_riders_where_only_they_fit():
    """RoBERTa with the period set within 55 % and no spare PEs: with one rider its moves
    cross one PE 28 times, without it they fit the 21 colors; "fit" takes those
    (`color_fit._try_fit`) rather than shrinking the tiles further."""
    pytest.importorskip("transformers")
    from frontend.architectures import build, fabric_config
    from frontend.color_fit import _fits, _try_fit, try_placement

    model, inputs = build("roberta")
    # the tiles of this scenario are the balance's where the GEMMs' fmas run async (the
    # synchronous GEMMs of the presets take other tiles, other riders)
    config = fabric_config("roberta").replace(async_memory_ops=True)
    cm = frontend.compile(model, inputs, config=config, lookups="onehot")
    args = (cm.lowered.stages, cm.lowered.tensors, config, cm.edges, 0.55, False)
    riding, _, short = try_placement(*args, "report")
    assert riding.riders and not _fits(short, "fit")
    apart, _, colors = _try_fit(*args)
    assert not apart.riders and _fits(colors, "fit")
    # where the tiles with riders fit, they are kept
    kept, _, fits = _try_fit(*args[:4], 0.4, False)
    assert kept.riders and _fits(fits, "fit")


@pytest.mark.parametrize("left_for_way, riders, fitting, tried, kept", [
    (True, {"relu": "mm"}, {"rate"}, ["latency", "rate"], "rate"),
    (True, {}, {"off"}, ["latency", "rate"], "latency"),  # no riders: "off" is "latency"
    (False, {"relu": "mm"}, {"rate", "off"}, ["latency", "off"], "off"),
    (True, {"relu": "mm"}, {"latency"}, ["latency"], "latency"),
    (True, {"relu": "mm"}, set(), ["latency", "rate", "off"], "latency"),
])
def test_the_fit_ladder_tries_riders_by_rate_then_none(monkeypatch, left_for_way, riders,
                                                       fitting, tried, kept):
    """Where the default placement (riders judged by rate and latency) is short of
    colors, "fit" tries riders judged by the rate alone, where that differs (riders were
    left apart for the way), then no riders, where some ride; the first that fits is
    kept, else the default (and the ladder shrinks the tiles)."""
    from types import SimpleNamespace

    from frontend import color_fit

    calls = []

    def fake(stages, tensors, config, edges, share, spare, policy, stack="latency"):
        calls.append(stack)
        placement = SimpleNamespace(stack=stack, riders=riders, left_for_way=left_for_way)
        return placement, None, SimpleNamespace(fits=stack in fitting)

    monkeypatch.setattr(color_fit, "try_placement", fake)
    monkeypatch.setattr(color_fit, "_fits", lambda colors, policy: colors.fits)
    placement, _, _ = color_fit._try_fit([], {}, CONFIG, [], 0.6, True)
    assert calls == tried and placement.stack == kept
