"""Calls of a pipelined model simulated as its one fabric program
(`frontend.compile(..., simulate="program")`, `frontend.program_calls`): a call or a stream
is one engine run, kernels started by their data, the host link in the stream; outputs,
per-node validation, figures and the report come from that run. The outputs are those of
the parts simulated apart, bit for bit (the same kernels and moves on the same words)."""

import pytest
import torch

import frontend
from fabric import FabricConfig, Rect
from frontend.errors import FrontendError, PlacementError
from frontend.program_calls import active_cycles, longest_part
from frontend.runtime import ResidentTensor, input_words
from tests.frontend.models import CONFIG, MLP, LeNet, TinyGPT
from tests.frontend.test_model_program import Residual

# small enough that the pipelined tiles' routes fit the 21 program colors (test_model_program)
SMALL = FabricConfig.small(5, 5)


@pytest.fixture(scope="module", params=[MLP, Residual], ids=["mlp", "residual"])
def pair(request):
    """(eager model, compiled simulated as one program, compiled simulated by parts)."""
    torch.manual_seed(0)
    model = request.param().eval()
    x = torch.randn(3, 16)
    return (model, frontend.compile(model, (x,), SMALL, simulate="program"),
            frontend.compile(model, (x,), SMALL))


def test_a_call_gives_the_parts_outputs_and_passes_validation(pair):
    model, cm, parts = pair
    x = torch.randn(3, 16)
    assert torch.equal(cm(x), parts(x))
    rows = cm.validate(x)
    assert rows and all(r.ok for r in rows)
    # every node's value read from the program's words: those of the parts, bit for bit
    for stage, words in parts.last.words.items():
        for symbol, w in words.items():
            assert (cm.last.words[stage][symbol] == w).all(), (stage, symbol)
    assert cm.timeline is None and len(cm.program_stream.words) == 1


def test_one_calls_figures_are_its_engine_runs(pair):
    _, cm, parts = pair
    x = torch.randn(3, 16)
    cm(x)
    stream, program = cm.program_stream, cm.call_program
    assert cm.cycles == cm.latency == stream.latency > 0
    # one sample: the period is its longest part, the rate a stream approaches at best
    what, cycles = longest_part(program, stream)
    assert cm.period == cycles > 0
    assert what.startswith(("stage ", "move ", "input "))
    peak = SMALL.simd_width("fma", "f32") * SMALL.num_pes
    assert cm.utilization == pytest.approx(cm.fmas / (peak * cycles))
    parts(x)
    assert cm.load_cycles == parts.load_cycles > 0  # weights loaded once, as a part's load
    link = sum(end - start for (_, s, _), (start, end) in stream.host.items() if s == 0)
    assert link > 0 and cm.host_cycles == cm.load_cycles + link
    # each stage's kernel: its cycles in the program, from its first PE's start
    figures = cm.last.stage_figures()
    for p in cm.prepared:
        kernel = program.stages[p.stage.name]
        start = min(stream.starts[(kernel, 0)].values())
        assert figures[p.stage.name][0] == stream.spans[(kernel, 0)][1] - start
        assert figures[p.stage.name][0] == active_cycles(program, stream, kernel, 0)
        assert 0 < figures[p.stage.name][2] <= SMALL.sram_bytes


def test_a_stream_is_one_engine_run_at_its_slowest_parts_rate(pair):
    _, cm, parts = pair
    samples = [(torch.randn(3, 16),) for _ in range(4)]
    outs = cm.stream(samples)
    assert all(torch.equal(o, parts(*s)) for o, s in zip(outs, samples))
    stream = cm.program_stream
    assert len(stream.words) == 4 and cm.latency == stream.latency
    assert cm.period == stream.period
    # the steady state runs at the slowest part's rate, within 10 %
    _, slowest = longest_part(cm.call_program, stream)
    assert slowest <= cm.period <= 1.1 * slowest
    # k x the compiled batch: k micro-batches streamed, their outputs joined
    joined = cm(torch.cat([s[0] for s in samples]))
    assert torch.equal(joined, torch.cat(outs))
    assert len(cm.program_stream.words) == 4


def test_the_report_gives_the_programs_figures(pair):
    _, cm, _ = pair
    cm(torch.randn(3, 16))
    text = cm.report()
    assert "pipelined as one fabric program" in text
    assert "its longest part" in text and "(the rate a stream approaches at best)" in text
    for p in cm.prepared:
        assert p.stage.name in text
    cm.stream([(torch.randn(3, 16),) for _ in range(3)])
    assert f"{cm.period:.0f} cycles per sample in steady state" in cm.report()


@pytest.mark.parametrize("half", ["bfloat16", "cbfloat16"])
def test_mixed_precision_simulated_as_one_program(half):
    """Nodes in a 16-bit format (autocast's rules) in the one program: the parts' words,
    every node within its format's bound of eager (autocast, or fp32 for cbfloat16)."""
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(3, 16)
    cm = frontend.compile(model, (x,), SMALL, precision="mixed", half=half,
                          simulate="program")
    parts = frontend.compile(model, (x,), SMALL, precision="mixed", half=half)
    assert torch.equal(cm(x), parts(x))
    rows = cm.validate(x)
    assert rows and all(r.ok for r in rows)
    assert {"bf16" if half == "bfloat16" else "cb16"} <= {r.fmt for r in rows}


def test_a_bad_sample_of_a_stream_is_named():
    x = torch.randn(3, 16)
    cm = frontend.compile(MLP().eval(), (x,), SMALL, simulate="program")
    with pytest.raises(FrontendError, match=r"sample 1 of the stream: input 'x' is \(3, 8\)"):
        cm.stream([(x,), (torch.randn(3, 8),)])
    with pytest.raises(FrontendError, match="no samples given"):
        cm.stream([])


def test_simulate_is_checked():
    x = torch.randn(3, 16)
    with pytest.raises(FrontendError, match=r"simulate must be one of \['parts', 'program'\]"):
        frontend.compile(MLP().eval(), (x,), SMALL, simulate="engine")
    with pytest.raises(FrontendError, match="mode 'sequential' runs one stage at a time"):
        frontend.compile(MLP().eval(), (x,), SMALL, mode="sequential", simulate="program")


def test_a_model_one_program_cannot_hold_is_refused_when_compiled():
    x = torch.randn(3, 16)
    few = CONFIG.replace(reserved_colors=tuple(range(6, 24)))  # the MLP needs 10 here
    with pytest.raises(PlacementError, match=r"simulate='program': the pipelined model does "
                                             r"not fit one fabric program: the parts need at "
                                             r"least \d+ colors .*compile with colors='fit'"):
        frontend.compile(MLP().eval(), (x,), few, colors="report", simulate="program")


def _hf(name: str):
    """GPT-2 or BERT from transformers, as tests/frontend/test_frontend_hf.py builds them."""
    transformers = pytest.importorskip("transformers")
    if name == "gpt2":
        model = transformers.GPT2Model(transformers.GPT2Config(
            vocab_size=32, n_positions=8, n_embd=16, n_layer=1, n_head=2,
            attn_implementation="eager", use_cache=False, bos_token_id=0, eos_token_id=0))
    else:
        model = transformers.BertModel(transformers.BertConfig(
            vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=8, hidden_act="gelu_new",
            attn_implementation="eager"))
    return model, lambda: torch.randint(0, 32, (1, 4))


@pytest.mark.long
@pytest.mark.parametrize("name", ["lenet", "tinygpt", "gpt2", "bert"])
def test_the_test_models_pass_validation_simulated_as_one_program(name):
    """LeNet, TinyGPT, GPT-2 and BERT from transformers, placed so that their colors fit
    (colors="fit") with their token ids looked up on the fabric: each call one engine run
    of the one program, every node within its tolerance against eager, the outputs those
    of the parts simulated apart, bit for bit, in a stream too."""
    torch.manual_seed(0)
    model, sample = {
        "lenet": (LeNet(), lambda: torch.randn(2, 1, 8, 8)),
        "tinygpt": (TinyGPT(), lambda: torch.randint(0, 32, (1, 4))),
    }[name] if name in ("lenet", "tinygpt") else _hf(name)
    model.eval()
    xs = [sample() for _ in range(2)]
    kwargs = {"colors": "fit", "lookups": "onehot"}
    cm = frontend.compile(model, (xs[0],), CONFIG, simulate="program", **kwargs)
    parts = frontend.compile(model, (xs[0],), CONFIG, **kwargs)
    rows = cm.validate(xs[0])
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]
    flat = torch.utils._pytree.tree_leaves
    for got, x in zip(cm.stream([(x,) for x in xs]), xs):
        got, want = flat(got), flat(parts(x))
        assert got and len(got) == len(want)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert len(cm.program_stream.words) == 2 and cm.period > 0


def _home(cm, row: int):
    """A home for input 'x' in its first operand's layout, moved to row `row`."""
    src = next(s for p in cm.prepared for sources in p.sources.values() for s in sources
               if s.tensor.name == "x")
    return src.dst.at(Rect(row, 0, src.dst.rect.rows, src.dst.rect.cols))


def test_a_resident_input_lives_in_its_home_in_the_program():
    """make_resident: the input's home is a part of the one program holding its words
    (placed there before the call, no host transfer), its moves read them there; the
    outputs are those of the parts simulated apart, in a stream too."""
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(3, 16)
    cm = frontend.compile(model, (x,), SMALL, simulate="program")
    parts = frontend.compile(model, (x,), SMALL)
    for c in (cm, parts):
        assert c.make_resident("x", _home(c, 4)) == 2
    part, home = cm.call_program.resident["x"]
    assert home.rect == Rect(4, 0, 1, 5) and cm.call_program.merged.part(part)
    xs = [torch.randn(3, 16) for _ in range(2)]
    for v in xs:
        words = {"x": ResidentTensor(home, input_words(home, v))}
        assert torch.equal(cm(resident=words), parts(resident=words))
        torch.testing.assert_close(cm(resident=words), model(v))
        # no host write of x: the link carries the output read alone
        assert set(k[2] for k in cm.program_stream.host) == {"read"}
    words = {"x": ResidentTensor(home, input_words(home, xs[0]))}
    assert torch.equal(cm.stream([(), ()], resident=words)[1], parts(resident=words))
    with pytest.raises(FrontendError, match=r"resident inputs \['x'\] need their words"):
        cm()
    # the one program of a model simulated by parts takes the home as a part too
    run = parts.one_program_stream([()], start="data", resident=words)
    stages = {p.stage.name for p in parts.prepared}
    assert run.same_words(0, {k: w for k, w in parts.last.words.items() if k in stages})


def test_a_home_whose_moves_the_colors_cannot_hold_is_refused_and_undone():
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(3, 16)
    cm = frontend.compile(model, (x,), SMALL, simulate="program")
    # as many colors as the model uses: the moves from a home need one more
    few = SMALL.replace(reserved_colors=tuple(range(cm.colors.assignment.used, 24)))
    tight = frontend.compile(model, (x,), few, simulate="program")
    before = tight.call_program
    with pytest.raises(PlacementError, match=r"simulate='program': the pipelined model does "
                                             r"not fit one fabric program: .*colors"):
        tight.make_resident("x", _home(tight, 2))
    # nothing changed: x still comes from the host, the program is the one compiled
    assert tight.resident_inputs == set() and tight.call_program is before
    assert torch.equal(tight(x), cm(x))
