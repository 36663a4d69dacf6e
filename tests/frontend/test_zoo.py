"""The model zoo: tiny random-weight configurations of common architectures
(`frontend.architectures`: Hugging Face text encoders, decoders, vision and audio models,
plain torch recurrent nets, a separable CNN, an MLP-Mixer).

`STOPS` says, for every architecture, what happens today: None when every op lowers, or
the ATen op that stops it with an UnsupportedOpError. The default run captures and lowers
each one and holds it to that (so a model that starts to lower, or stops, shows here); the
long run compiles, runs and validates every model that lowers against eager fp32, node by
node and at the output with assert_close(rtol=1e-4, atol=1e-4).
"""

import pytest
import torch

import frontend
from frontend.architectures import ARCHITECTURES, build, output_tensor
from frontend.capture import capture_module
from frontend.lowering import lower
from tests.frontend.models import CONFIG

pytest.importorskip("transformers")

STOPS = {
    "bert": None,
    "distilbert": None,
    "electra": None,
    "roberta": "aten.cumsum.default",  # position ids from the input ids
    "albert": None,
    "mpnet": "aten.cumsum.default",
    "t5-encoder": None,
    "gpt2": None,
    "gpt-neo": "aten.where.self",
    "gptj": None,
    "opt": None,
    "bloom": None,
    "llama": None,
    "mistral": None,
    "qwen2": None,
    "gemma": None,
    "phi3": None,
    "phi": None,
    "vit": "aten.cat.default",  # the class token
    "deit": "aten.cat.default",
    "clip-vision": "aten.cat.default",
    "swin": "aten.constant_pad_nd.default",
    "resnet": "aten.max_pool2d_with_indices.default",  # padding 1
    "convnext": "aten.convolution.default",  # depthwise
    "mobilenet-v2": "aten.constant_pad_nd.default",
    "regnet": "aten.convolution.default",  # grouped
    "wav2vec2": "aten.convolution.default",  # 1D
    "whisper-encoder": "aten.convolution.default",  # 1D
    "lstm": None,
    "gru": None,
    "separable-cnn": "aten.convolution.default",  # depthwise
    "mlp-mixer": None,
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
@pytest.mark.parametrize("name", [n for n, op in STOPS.items() if op is None])
def test_architecture_runs_and_matches_eager(name):
    model, inputs = build(name)
    cm = frontend.compile(model, inputs, config=CONFIG)
    rows = cm.validate(*inputs)  # raises with a table when a node leaves its tolerance
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        want = output_tensor(model(*inputs))
    torch.testing.assert_close(output_tensor(cm.outputs()), want, rtol=1e-4, atol=1e-4)
