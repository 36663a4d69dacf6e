"""Execution modes: the pipelined timeline of streamed samples against the sequential one,
and the schedule's rules on hand-made stage results (theory: a chain's period is its
slowest stage's kernel plus its longer transfer)."""

import pytest
import torch

import frontend
from fabric import FabricConfig
from frontend.errors import FrontendError
from frontend.placement import place, planned
from frontend.runtime import StageResult, Transfer
from frontend.schedule import HOST, timeline

CONFIG = FabricConfig.small(8, 8)


def _stage(name, kernel, *transfers):
    return StageResult(name, kernel, sum(c for _, c, h in transfers if not h),
                       sum(c for _, c, h in transfers if h), 0, 0.0, 0, 0.0, 0,
                       [Transfer(t, c, h) for t, c, h in transfers])


def _chain(k1=100, k2=40, move=10, write=5):
    """input --host--> a --move--> b, the host reading b."""
    return [_stage("a", k1, ("x", write, True)), _stage("b", k2, ("a", move, False))]


def test_sequential_timeline_adds_every_part():
    tl = timeline("sequential", [_chain()] * 3, {"b": 7})
    one = 5 + 100 + 10 + 40 + 7
    assert tl.latency == one and tl.makespan == 3 * one and tl.period == one


def test_pipelined_chain_runs_at_its_slowest_stage():
    tl = timeline("pipelined", [_chain()] * 6, {"b": 7})
    assert tl.latency == 5 + 100 + 10 + 40 + 7  # one sample alone: nothing to overlap
    # a: its kernel, then its output moved out (its operand comes in meanwhile)
    assert tl.rates == {"a": 100 + 10, "b": 40 + 10}
    assert tl.bottleneck == "a" and tl.period == 110 == tl.bound
    # sample 1 starts on a once sample 0's output has left it
    assert tl.spans[1]["a"].run.start == tl.spans[0]["a"].taken == 5 + 100 + 10


def test_pipelined_stage_waits_for_its_consumer_to_free_its_operand():
    tl = timeline("pipelined", [_chain(k1=10, k2=100)] * 5, {"b": 7})
    assert tl.bottleneck == "b" and tl.period == pytest.approx(100 + 10)
    for b in range(1, 5):  # the move into b waits for b's previous sample to finish
        assert tl.spans[b]["b"].transfers[0].start >= tl.spans[b - 1]["b"].run.end


def test_independent_branches_overlap_in_one_sample():
    branches = [_stage("a", 100, ("x", 5, True)), _stage("b", 100, ("x", 5, True)),
                _stage("c", 10, ("a", 3, False), ("b", 3, False))]
    seq = timeline("sequential", [branches], {"c": 2})
    pipe = timeline("pipelined", [branches], {"c": 2})
    assert seq.latency == 5 + 100 + 5 + 100 + 3 + 3 + 10 + 2
    assert pipe.latency == 5 + 5 + 100 + 3 + 10 + 2  # b's write waits for a's on the host link


def test_host_link_can_be_the_bottleneck():
    stages = [_stage("a", 10, ("x", 500, True)), _stage("b", 10, ("y", 500, True))]
    tl = timeline("pipelined", [stages] * 4, {"a": 3, "b": 3})
    assert tl.rates == {"a": 510, "b": 510}  # each alone would take a sample per 510
    assert tl.bottleneck == HOST and tl.period == 1000 == tl.bound  # the writes queue


def test_resident_inputs_are_there_from_the_start():
    stages = [_stage("a", 50, ("w", 20, False))]  # "w" is no stage: a resident input
    tl = timeline("pipelined", [stages] * 3, {"a": 0})
    assert tl.spans[0]["a"].run.start == 20 and tl.period == 70


def test_bad_mode_is_refused_with_the_modes():
    with pytest.raises(FrontendError, match=r"mode must be one of \['sequential', "
                                            r"'pipelined'\], got 'streamed'"):
        frontend.compile(torch.nn.Linear(4, 4), (torch.randn(2, 4),), CONFIG,
                         mode="streamed")


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 8)).eval()


@pytest.fixture(scope="module")
def streamed():
    """The MLP compiled in both modes, 4 samples streamed through each."""
    model = _mlp()
    torch.manual_seed(1)
    samples = [(torch.randn(4, 16),) for _ in range(4)]
    out = {}
    for mode in ("sequential", "pipelined"):
        cm = frontend.compile(model, samples[0], CONFIG, mode=mode, colors="report")
        out[mode] = (cm, cm.stream(samples))
    return model, samples, out


def test_a_larger_batch_runs_as_micro_batches(streamed):
    """A call on 4 x the compiled batch: the same outputs as the 4 samples streamed, bit
    for bit, joined along the batch, and the stream's figures; a batch that is not a
    multiple of the compiled one, or a model whose output has no batch dimension, is
    refused with what to do instead."""
    model, samples, out = streamed
    batch = torch.cat([x for (x,) in samples])
    for cm, outputs in out.values():
        y = cm(batch)
        assert torch.equal(y, torch.cat(outputs))
        assert len(cm.timeline.spans) == len(samples)  # the stream's timeline, 4 samples
        with pytest.raises(FrontendError, match=r"input 'input' is \(10, 16\).*compiled for "
                                                r"\(4, 16\).*a call on k x 4 along dimension "
                                                r"0 runs as k micro-batches"):
            cm(torch.randn(10, 16))
    summed = frontend.compile(_Summed(), (torch.randn(4, 16),), CONFIG)
    with pytest.raises(FrontendError, match=r"output 0 of the model is \(\), without the "
                                            r"micro-batch of 4 along dimension 0.*cm.stream"):
        summed(torch.randn(8, 16))


class _Summed(torch.nn.Module):
    def forward(self, x):
        return (2 * x).sum()


def test_stream_gives_each_samples_outputs_in_both_modes(streamed):
    model, samples, out = streamed
    for _, outputs in out.values():
        assert len(outputs) == len(samples)
        for x, y in zip(samples, outputs):
            torch.testing.assert_close(y, model(*x), rtol=1e-5, atol=1e-5)  # fp32 GEMMs of 32
    for a, b in zip(out["sequential"][1], out["pipelined"][1]):
        # other tiles, so other orders of the GEMMs' partial sums (K = 32, fp32)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_pipelined_stream_overlaps_samples(streamed):
    _, samples, out = streamed
    pipe = out["pipelined"][0]
    # the same simulated parts one at a time (its tiles are sized for the pipeline)
    alone = timeline("sequential", [pipe.last.results] * len(samples), pipe.output_reads)
    assert pipe.latency == alone.latency  # a chain: one sample's path is the same
    assert pipe.period < 0.75 * alone.period  # then samples overlap
    assert pipe.period == pytest.approx(pipe.timeline.bound, rel=0.10)
    assert pipe.cycles == pipe.latency  # pipelined: cycles are the latency
    text = pipe.report()
    assert "<- bottleneck" in text and "steady state" in text and "predicted" in text
    # what the placement planned: kernel models and move bounds, host I/O apart, so at
    # most the simulated latency; its slowest stage within the kernels' models' 10 %
    way, path, rate = planned([p.stage for p in pipe.prepared], pipe.placement)
    assert 0 < way <= pipe.latency and rate <= 1.1 * pipe.timeline.bound
    assert path[0] == pipe.prepared[0].stage.name
    assert (f"planned (kernel models and move bounds, host I/O apart): latency at least "
            f"{way} cycles, through {path[0]} ... {path[-1]} ({len(path)} stages), "
            f"{rate} cycles per sample") in text


def test_each_mode_places_for_its_objective(streamed):
    _, _, out = streamed
    for mode, balance in (("sequential", "work"), ("pipelined", "cycles")):
        cm = out[mode][0]
        want = place(cm.lowered.stages, cm.config, cm.edges, balance=balance)
        assert cm.placement.rects == want.rects


def test_sequential_cycles_keep_their_meaning(streamed):
    _, _, out = streamed
    seq = out["sequential"][0]
    parts = sum(r.kernel_cycles + r.move_cycles for r in seq.last.results)
    assert seq.cycles == parts
    # latency: those parts plus the host's writes of the inputs and read of the output
    assert seq.latency == parts + sum(t.cycles for r in seq.last.results
                                      for t in r.transfers if t.host) + \
        sum(seq.output_reads.values())


def test_empty_stream_is_refused():
    cm = frontend.compile(_mlp(), (torch.randn(4, 16),), CONFIG, mode="pipelined",
                          colors="report")
    with pytest.raises(FrontendError, match="no samples"):
        cm.stream([])
    with pytest.raises(FrontendError, match="sample 1 of the stream"):
        cm.stream([(torch.randn(4, 16),), (torch.randn(3, 16),)])


def test_attention_heads_overlap_in_one_pipelined_sample():
    """A GPT block: the heads' products and the stages off the critical path overlap, so one
    sample's latency is below the sequential sum of the same simulated parts. On 8 x 8 PEs,
    whose tiles' and moves' routes fit the fabric's colors as one program (16 of 21; on
    12 x 12 they need 28: larger tiles, more flows per move)."""
    from frontend.zoo import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(layers=1).eval()
    x = torch.randint(0, 32, (2, 4))
    cm = frontend.compile(model, (x,), FabricConfig.small(8, 8), mode="pipelined")
    torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)  # fp32, rows of 32
    seq = timeline("sequential", [cm.last.results], cm.output_reads)
    assert cm.latency < 0.9 * seq.latency
    heads = list(cm.timeline.spans[0].values())
    assert any(a.run.start < b.run.end and b.run.start < a.run.end
               for i, a in enumerate(heads) for b in heads[i + 1:])  # two stages at once


def _skip(words):
    """a -> b -> c -> d, and a's output also into d (a residual): the skip operand of d
    takes `words` words per PE; the stages use 1000 B of their PEs' SRAM."""
    def stage(name, kernel, *transfers):
        r = _stage(name, kernel, *transfers)
        r.sram_bytes = 1000
        r.transfers = [Transfer(t.tensor, t.cycles, t.host, words) for t in r.transfers]
        return r
    return [stage("a", 10, ("x", 1, True)), stage("b", 100, ("a", 5, False)),
            stage("c", 100, ("b", 5, False)), stage("d", 10, ("c", 5, False), ("a", 5, False))]


def test_a_skip_connection_single_buffered_stalls_the_pipeline():
    tl = timeline("pipelined", [_skip(words=10)] * 6, {"d": 1}, sram_bytes=0)
    assert tl.buffers["d"] == [1, 1, 1]  # its two operands, its output
    # a cannot take sample b + 1 before d has taken a's sample b: the path a-b-c-d
    assert tl.period > 1.1 * tl.bound


def test_free_sram_buffers_a_skip_connection():
    # 1000 B used of 2000: 333 B per operand and output of d, 40 B each -> 1 + 8 buffers
    # (at most the 6 samples); its output takes no words here
    tl = timeline("pipelined", [_skip(words=10)] * 6, {"d": 1}, sram_bytes=2000)
    assert tl.buffers["d"] == [6, 6, 1]
    assert tl.period == pytest.approx(tl.bound) and tl.bottleneck in ("b", "c")
    # an operand too large for the free SRAM stays single buffered
    big = timeline("pipelined", [_skip(words=200)] * 6, {"d": 1}, sram_bytes=2000)
    assert big.buffers["d"] == [1, 1, 1]


def test_the_stalling_skip_connection_is_named():
    tl = timeline("pipelined", [_skip(words=10)] * 6, {"d": 1}, sram_bytes=0)
    assert tl.buffer_stall == ("d", "a", 1)
    assert timeline("pipelined", [_skip(words=10)] * 6, {"d": 1},
                    sram_bytes=2000).buffer_stall is None


def test_a_stage_that_does_not_finish_is_named_with_its_node():
    """The cycle limit (as a deadlock would) stops a stage's run: the error names the stage,
    its FX node and the user's line, and keeps the engine's error as its cause."""
    from fabric import CycleLimitError

    cm = frontend.compile(_mlp(), (torch.randn(4, 16),), CONFIG, max_cycles=200)
    with pytest.raises(frontend.StageRunError, match=r"FX node 'addmm' .*stage 'addmm' "
                       r"\(gemm_summa\) on its tile Rect\(.*\) did not finish") as info:
        cm(torch.randn(4, 16))
    assert isinstance(info.value.__cause__, CycleLimitError)


def test_a_buffered_output_moves_out_while_the_next_sample_computes():
    chain = _chain(k1=100, k2=40, move=60)
    for r in chain:
        r.sram_bytes, r.out_words = 1000, 10
        r.transfers = [Transfer(t.tensor, t.cycles, t.host, 10) for t in r.transfers]
    single = timeline("pipelined", [chain] * 6, {"b": 7})
    double = timeline("pipelined", [chain] * 6, {"b": 7}, sram_bytes=2000)
    assert single.rates["a"] == 100 + 60 and single.period == 160
    assert double.buffers["a"][-1] > 1 and double.rates["a"] == 100
    assert double.period == pytest.approx(100)


def test_one_calls_bound_counts_the_buffers_a_stream_would_have():
    chain = _chain(k1=100, k2=40, move=60)
    for r in chain:
        r.sram_bytes, r.out_words = 1000, 10
        r.transfers = [Transfer(t.tensor, t.cycles, t.host, 10) for t in r.transfers]
    one = timeline("pipelined", [chain], {"b": 7}, sram_bytes=2000)
    stream = timeline("pipelined", [chain] * 6, {"b": 7}, sram_bytes=2000)
    assert one.buffers["a"] == [2, 2] and one.period == one.bound == 100 == stream.period


def test_the_period_share_sizes_the_pipelined_tiles():
    """compile's period_share is the balance's: each placement is the one `place` gives
    within that share (LeNet on small(12, 12): other tiles within 10 % than within the
    whole fabric); the same through the dynamo backend; out of [0, 1], or in sequential
    mode, it is refused."""
    from frontend.dynamo_backend import fabric_backend
    from frontend.placement import place
    from tests.frontend.models import CONFIG as LENET_FABRIC
    from tests.frontend.models import LeNet

    torch.manual_seed(0)
    model, x = LeNet().eval(), torch.randn(2, 1, 8, 8)
    rects = {}
    for share in (0.1, 1.0):
        cm = frontend.compile(model, (x,), LENET_FABRIC, mode="pipelined", colors="report",
                              period_share=share)
        want = place(cm.lowered.stages, LENET_FABRIC, cm.edges, balance="cycles",
                     period_share=share)
        assert cm.placement.rects == want.rects
        rects[share] = cm.placement.rects
    assert rects[0.1] != rects[1.0]
    gm = torch.fx.symbolic_trace(model)
    cm = fabric_backend(gm, [x], {"config": LENET_FABRIC, "mode": "pipelined",
                                  "colors": "report", "period_share": 0.1, "fallback": False})
    assert list(cm.placement.rects.values()) == list(rects[0.1].values())
    mlp, y = _mlp(), torch.randn(4, 16)
    with pytest.raises(FrontendError, match=r"period_share must be a fraction of the fabric "
                                            r"in \[0, 1\], got 1.5"):
        frontend.compile(mlp, (y,), CONFIG, mode="pipelined", period_share=1.5)
    with pytest.raises(FrontendError, match="period_share sizes the pipelined placement; "
                                            "mode is 'sequential'"):
        frontend.compile(mlp, (y,), CONFIG, mode="sequential", period_share=0.5)
