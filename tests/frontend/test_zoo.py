"""The model zoo: tiny random-weight configurations of common architectures
(`frontend.architectures`: Hugging Face text encoders, decoders, vision, detection,
time-series and audio models, plain torch recurrent nets, a separable CNN, an MLP-Mixer, a
DLRM recommendation model, a 3D CNN over video clips, graph networks over an edge list, a
diffusion U-Net).

`STOPS` says, for every architecture, what happens today: None when it runs, or the ATen
op that stops it with an UnsupportedOpError. The default run captures and lowers each one
and holds it to that (so a model that starts to lower, or stops, shows here); the long run
compiles, runs and validates every model that runs against eager fp32, node by node and at
the output with assert_close(rtol=1e-4, atol=1e-4), on the architecture's own fabric
(`fabric_config`: the tests' small(12, 12), or a larger one for a model whose stages need
more PEs, which the long run shows does not fit small(12, 12)).
"""

import re

import pytest
import torch

import frontend
from frontend.architectures import ARCHITECTURES, build, fabric_config, output_tensor
from frontend.capture import capture_module
from frontend.lowering import lower
from tests.frontend.models import CONFIG

pytest.importorskip("transformers")

TOO_BIG = "does not fit small(12,12)"
STOPS = {
    "bert": None,
    "distilbert": None,
    "electra": None,
    "roberta": None,  # position ids from the input ids: cumsum, one-hot lookup
    "albert": None,
    "mpnet": None,
    "deberta-v2": None,
    "funnel": None,  # its relative attention's shift: slice_scatter
    "canine": None,  # hashed character ids: remainder of computed integers
    "t5-encoder": None,
    "xlm": None,  # assert lengths.max().item() <= slen: checked by the host
    "fnet": None,  # fftn(x, dim=(1, 2)).real: DFT matrices as GEMMs
    "modernbert": None,  # a sliding window's band mask
    "gpt2": None,
    "gpt-neo": None,
    "gptj": None,
    "opt": None,
    "bloom": None,
    "gpt-neox": None,
    "falcon": None,
    "llama": None,
    "mistral": None,
    "qwen2": None,
    "gemma": None,
    "gemma2": None,
    "olmo": None,
    "qwen3": None,  # query and key norms per head
    "phi3": None,
    "phi": None,
    "ctrl": None,  # its position buffer assigned its own value in forward
    "mixtral": None,  # router topk; experts' weights picked by computed ids
    "qwen2-moe": None,  # the same, and a gated shared expert
    "olmoe": None,  # transformers' default experts: rows sorted by expert, grouped_mm
    "gpt-oss": None,  # attention sinks: a learned column beside the scores
    "llama4": None,  # rotary embeddings as complex phasors; its router's scatter of logits
    "phimoe": None,  # its router's scatter by max's index
    "deepseek-v3": None,  # latent attention; its router's group mask a scatter by topk
    "bart": None,  # decoder ids shifted from the source's beside a start token
    "t5": None,  # called with attention_mask None (an input fixed in the graph)
    "marian": None,
    "pegasus": None,
    "mbart": None,  # its start token gathered by a count computed on the fabric
    "whisper": None,
    "mamba": None,  # a selective scan, a causal depthwise convolution
    "recurrent-gemma": None,  # a gated linear recurrence, its scan unrolled
    "jamba": None,
    "falcon-h1": None,
    "rwkv": None,  # its time mixing's recurrence unrolled: 460 stages, on small(24, 24)
    "mamba2": None,  # the scan in chunks: masked products of cumulative decays
    "vit": None,
    "deit": None,
    "clip-vision": None,
    "dinov2": None,
    "beit": None,
    "segformer": None,
    "poolformer": None,
    "swin": None,  # as_strided after the adaptive pool
    "bit": None,  # weights standardized in forward, zeros padded before a max pool
    "resnet": None,
    "convnext": None,
    "mobilenet-v2": None,  # 17 blocks, 150 stages: at least 188 PEs, on small(24, 16)
    "regnet": None,
    "cvt": None,  # depthwise-convolution projections of q, k and v, batch norm
    "yolos": None,  # detection tokens beside the patches
    "patchtst": None,  # a series' patches by unfold
    "patchtsmixer": None,
    "videomae": None,  # a 3D convolution's tubelets
    "wav2vec2": None,  # group norm in the feature encoder
    "hubert": None,
    "clip": None,  # pooled at each caption's end-of-text id (argmax of the ids)
    "whisper-encoder": None,
    "lstm": None,
    "gru": None,
    "separable-cnn": None,
    "mlp-mixer": None,
    "dlrm": None,  # embedding bags of 2-D ids, the Gram matrix's lower triangle
    "video-cnn": None,  # 3D convolutions and pools over a clip
    "gcn": None,  # messages gathered by an edge list, summed by scatter_add
    "graphsage": None,  # mean aggregation by index_add
    "gat": None,  # attention normalized over each node's in-edges
    "unet": None,  # a noise level's sinusoids, group norms, a skip joined by cat
}


def test_every_architecture_has_an_expectation():
    assert set(STOPS) == set(ARCHITECTURES)
    assert len(ARCHITECTURES) >= 30


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_architecture_lowers_or_names_the_op_that_stops_it(name):
    model, inputs = build(name)
    captured = capture_module(model, inputs)
    if STOPS[name] is None:
        lowered = lower(captured)
        assert lowered.stages
    else:
        with pytest.raises(frontend.UnsupportedOpError, match=rf"\({STOPS[name]}\)"):
            lower(captured)


@pytest.mark.long
@pytest.mark.parametrize("name", [n for n, a in ARCHITECTURES.items()
                                  if a.fabric != (CONFIG.rows, CONFIG.cols)])
def test_architecture_on_a_larger_fabric_does_not_fit_the_test_fabric(name):
    model, inputs = build(name)
    with pytest.raises(frontend.PlacementError, match=re.escape(TOO_BIG)):
        frontend.compile(model, inputs, config=CONFIG)


@pytest.mark.long
@pytest.mark.parametrize("name", [n for n, op in STOPS.items() if op is None])
def test_architecture_runs_and_matches_eager(name):
    model, inputs = build(name)
    cm = frontend.compile(model, inputs, config=fabric_config(name))
    rows = cm.validate(*inputs)  # raises with a table when a node leaves its tolerance
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        want = output_tensor(model(*inputs))
    torch.testing.assert_close(output_tensor(cm.outputs()), want, rtol=1e-4, atol=1e-4)
