"""Holds on a skip connection's move in a model program (`frontend.skip_holds`): the
move writes hold 1, relays copy each hold into the next and the last into the operand, so
more samples are on the move's way; sized from the plans, and the words of every sample
those of the parts run apart, bit for bit, in every start policy."""

import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend.demo import DemoBlock
from frontend.model_program import build_model_program
from frontend.program_run import run_stream
from frontend.skip_holds import hold_counts
from tests.frontend.models import words_apart
from tests.frontend.test_model_program import MLP, SMALL, Fan


def _compiled(model, xs, config=SMALL, **kw):
    cm = frontend.compile(model().eval(), (xs[0],), config, mode="pipelined", **kw)
    return cm, words_apart(cm, xs)


def test_holds_go_where_a_longer_path_joins():
    """The fan's relu output reaches the product directly and through a GEMM: that move
    gets a hold; a chain (the MLP) none."""
    x = torch.randn(3, 16)
    fan = frontend.compile(Fan().eval(), (x,), SMALL, mode="pipelined")
    assert hold_counts(fan.prepared) == {("mul_mul", "y", 0): 1}
    mlp = frontend.compile(MLP().eval(), (x,), SMALL, mode="pipelined")
    assert hold_counts(mlp.prepared) == {}


def test_samples_through_holds_keep_their_words():
    """Two holds on every move of the fan: each move writes hold 1, two relays carry the
    words on (each once its reader has taken the previous sample); four samples streamed
    by parts and one part at a time give the words of the parts run apart, bit for bit."""
    torch.manual_seed(0)
    xs = [torch.randn(3, 16) for _ in range(4)]
    cm, apart = _compiled(Fan, xs)
    keys = [(p.stage.name, op, i) for p in cm.prepared for op, sources in p.sources.items()
            for i, src in enumerate(sources) if src.plan is not None]
    program = build_model_program(cm.prepared, cm.colors, holds=dict.fromkeys(keys, 2))
    reuses = program.reuses()
    for m in program.moves:
        assert len(m.relays) == 2
        assert all(reuses[r] >= {m.relays[0]} for r in m.rounds)  # hold 1 read by relay 1
        assert program.stages[m.consumer] in reuses[m.relays[-1]]  # the operand by its kernel
        assert program.after[m.relays[0]] == {m.rounds[-1]}
    inputs = [cm._inputs((x,)) for x in xs]
    gated = build_model_program(cm.prepared, cm.colors, gated=True,
                                holds=dict.fromkeys(keys, 2))
    for start in ("part", "serial", "pe", "data"):
        run = run_stream(gated if start == "data" else program, inputs, 200_000, start=start)
        assert all(run.same_words(s, words) for s, words in enumerate(apart)), start


@pytest.mark.long
def test_holds_let_the_gpt_block_stream_at_its_rate():
    """The demo's GPT block on tiles its colors fit: the second residual's move waits for
    a layer norm, two GEMMs and a gelu; without holds the block streams at that path's
    latency per sample, with them near its slowest stage's rate (the timeline's)."""
    torch.manual_seed(0)
    xs = [torch.randn(1, 4, 16) for _ in range(6)]
    cm, apart = _compiled(DemoBlock, xs, FabricConfig.small(12, 12), colors="fit")
    assert hold_counts(cm.prepared)
    inputs = [cm._inputs((x,)) for x in xs]
    held = run_stream(cm.model_program(), inputs, cm.max_cycles)
    bare = run_stream(cm.model_program(holds=False), inputs, cm.max_cycles)
    for run in (held, bare):
        assert all(run.same_words(s, words) for s, words in enumerate(apart))
    assert held.period < 0.8 * bare.period
    # started PE by PE with holds: the second layer norm works in place, so the next
    # sample's move into it waits for the move of its output too (else, the residual's
    # path now faster, that sample's words reach the GEMM after it: `ModelProgram.reuses`)
    by_pe = run_stream(cm.model_program(), inputs, cm.max_cycles, start="pe")
    assert all(by_pe.same_words(s, words) for s, words in enumerate(apart))


def test_a_hold_that_does_not_fit_beside_its_operand():
    """An operand of 7,000 words on one PE: a hold beside it needs 56,000 B of the 49,152
    B; make_holds refuses it (PlacementError naming the operand and the stage), and a
    model program sized "auto" goes without that hold (the video CNN's third chained
    convolution GEMM, whose A operand is 27,648 B a PE)."""
    import numpy as np

    from fabric import Rect
    from fabric.kernels import WordMap
    from frontend.skip_holds import make_holds

    dst = WordMap((7000,), Rect(0, 0, 1, 1), {"abuf": np.arange(7000).reshape(1, 1, 7000)})
    with pytest.raises(frontend.PlacementError, match="hold of operand 'A' of stage 'g'.*"
                       "56000 B"):
        make_holds(SMALL, "g", "A", 0, dst, 1)


@pytest.mark.long
def test_auto_holds_leave_out_one_that_does_not_fit():
    from frontend.architectures import build, fabric_config

    model, inputs = build("video-cnn")
    cm = frontend.compile(model, inputs, config=fabric_config("video-cnn"), colors="fit")
    counts = hold_counts(cm.prepared)
    assert counts == {("convolution_1_gemm_2", "A", 0): 1}
    program = cm.model_program(gated=True)  # built, without the hold
    assert not any(m.relays for m in program.moves)
    with pytest.raises(frontend.PlacementError, match="hold of operand 'A'"):
        build_model_program(cm.prepared, cm.colors, holds=counts)


@pytest.mark.long
def test_auto_holds_shrink_where_merged_tiles_overfill_sram():
    """CANINE on small(16, 16): four residual moves into its downsampling convolution's
    GEMM parts get 4 holds each, which beside the GEMM tile and the relays' rounds need
    more SRAM than a PE has. Sized "auto", each keeps the holds that fit (2) and the model
    builds as one program; the counts as planned are refused, naming the merged tile."""
    from frontend.architectures import build, fabric_config

    model, inputs = build("canine")
    # the scenario's tiles are the balance's where the GEMMs' fmas run async: under the
    # SDK's async rule (the presets) CANINE's routes need more colors than small(16, 16)
    # has, even on the ladder's smallest tiles
    config = fabric_config("canine").replace(async_memory_ops=True)
    cm = frontend.compile(model, inputs, config=config, colors="fit",
                          lookups="onehot", experts="dense")
    counts = hold_counts(cm.prepared)
    crowded = [key for key, n in counts.items() if key[0].startswith("convolution_1_gemm")]
    assert crowded and all(counts[key] == 4 for key in crowded)
    program = cm.model_program(gated=True)
    held = {(m.consumer, m.operand, m.source): len(m.relays) for m in program.moves}
    assert all(held[key] == 2 for key in crowded)
    assert all(held[key] == n for key, n in counts.items() if key not in crowded)
    with pytest.raises(frontend.PlacementError, match="SRAM per PE"):
        build_model_program(cm.prepared, cm.colors, gated=True, holds=counts)
