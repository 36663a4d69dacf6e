"""The test models in pipelined mode: every node within its tolerance (validate) and the
output against eager PyTorch with assert_close's fp32 tolerances, as the sequential tests
check them (test_frontend_models.py, test_frontend_hf.py), so both modes give eager's
outputs. The tiles differ between the modes (balanced for the pipeline's rate), so the
order of partial sums in the GEMMs does too: fp32 rounding, inside those tolerances."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG, MLP, TinyGPT, lenet_with_statistics


def _check_pipelined(model, inputs, output=lambda out: out):
    model.eval()
    # the parts run apart in this mode; whether their routes fit one program's colors on
    # this fabric is test_graph_colors.py's concern, so a shortfall is only reported
    cm = frontend.compile(model, inputs, config=CONFIG, mode="pipelined", colors="report")
    rows = cm.validate(*inputs)  # runs the model; raises on any node out of tolerance
    assert rows and all(r.ok for r in rows)
    with torch.no_grad():
        want = output(model(*inputs))
    torch.testing.assert_close(output(cm.outputs()), want)
    # one call: the pipeline's figures are those of a stream of one sample
    assert cm.cycles == cm.latency > 0
    assert 0 < cm.period <= cm.latency
    assert 0 < cm.utilization < 1
    return cm


def test_mlp_pipelined():
    torch.manual_seed(0)
    _check_pipelined(MLP(), (torch.randn(3, 16),))


@pytest.mark.long  # convolutions pipelined; LeNet runs sequentially by default
def test_lenet_pipelined():
    torch.manual_seed(0)
    _check_pipelined(lenet_with_statistics(), (torch.randn(2, 1, 8, 8),))


@pytest.mark.long
def test_gpt_two_layers_pipelined():
    torch.manual_seed(0)
    model = TinyGPT()
    cm = _check_pipelined(model, (torch.randint(0, 32, (2, 4)),))
    # new indices: the embedding's rows are planned per call in this mode too
    idx = torch.randint(0, 32, (2, 4))
    with torch.no_grad():
        torch.testing.assert_close(cm(idx), model(idx))


def _hidden(out):
    if isinstance(out, dict):
        return out["last_hidden_state"]
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


@pytest.mark.long
def test_hf_gpt2_pipelined():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32, n_positions=8, n_embd=16, n_layer=1,
                                     n_head=2, attn_implementation="eager", use_cache=False,
                                     bos_token_id=0, eos_token_id=0)
    _check_pipelined(transformers.GPT2Model(config), (torch.randint(0, 32, (1, 4)),),
                     _hidden)


@pytest.mark.long
def test_hf_bert_pipelined():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=8, hidden_act="gelu_new",
                                     attn_implementation="eager")
    _check_pipelined(transformers.BertModel(config), (torch.randint(0, 32, (1, 4)),), _hidden)
