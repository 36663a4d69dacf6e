"""Hugging Face models from small configs with random weights (no network): GPT2Model and
BertModel (eager attention, no cache) through frontend.compile, against eager PyTorch with
assert_close's fp32 tolerances. BERT here uses the tanh gelu ("gelu_new"); its default, the
exact erf gelu, runs in the model zoo (test_zoo.py)."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG

transformers = pytest.importorskip("transformers")


def _check(model, inputs):
    cm = frontend.compile(model.eval(), inputs, config=CONFIG)
    rows = cm.validate(*inputs)
    assert all(r.ok for r in rows)
    with torch.no_grad():
        want = model(*inputs).last_hidden_state
    got = cm.outputs()
    got = got["last_hidden_state"] if isinstance(got, dict) else got[0]
    torch.testing.assert_close(got, want)


def test_gpt2_model():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32, n_positions=8, n_embd=16, n_layer=1,
                                     n_head=2, attn_implementation="eager", use_cache=False,
                                     bos_token_id=0, eos_token_id=0)
    _check(transformers.GPT2Model(config), (torch.randint(0, 32, (1, 4)),))


@pytest.mark.long  # GPT-2 from transformers stays in the default run
def test_bert_model():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=8, hidden_act="gelu_new",
                                     attn_implementation="eager")
    _check(transformers.BertModel(config), (torch.randint(0, 32, (1, 4)),))
