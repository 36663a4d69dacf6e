"""Tiny random-weight configurations of common architectures: Hugging Face `transformers`
models (text encoders, decoders, encoder-decoders, vision, detection, time-series and
audio models) and plain
torch models (recurrent nets, a depthwise-separable CNN, an MLP-Mixer, a DLRM, a 3D CNN over
video clips, graph networks over an edge list: `frontend.graph_networks`, a diffusion
U-Net: `frontend.diffusion_unet`), for the model-zoo
test and benchmark.

Sizes follow one rule: one layer (or one stage per level), width 32, two heads, vocabulary
64, 8 tokens, images 32 x 32 (3 channels), audio 400 samples, time series 32 steps of 3
channels; weights are seeded, so a
model is the same on every call. `transformers` is imported only by the factories that need
it (the `hf` extra).

Each architecture names the fabric it runs on, `fabric_config(name)`: small(12, 12) (the
frontend tests' fabric) unless its stages need more PEs (MobileNet-V2's 17 blocks: 237
stages, at least 290 PEs, whose tiles pack onto small(24, 16) but not onto small(20, 20)
or small(22, 22)).

Example:
    >>> model, inputs = build("llama")                                  # doctest: +SKIP
    >>> cm = frontend.compile(model, inputs, config=fabric_config("llama"))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn as nn

from fabric.config import FabricConfig
from frontend.diffusion_unet import DiffusionUNet, unet_inputs
from frontend.graph_networks import GAT, GCN, GraphSAGE, graph_inputs

VOCAB, WIDTH, HEADS, TOKENS, IMAGE = 64, 32, 2, 8, 32
GRID = (12, 12)  # the fabric most architectures run on: small(12, 12), rows x cols
# architectures whose stages need a larger fabric: name -> its (rows, cols)
LARGER_FABRIC = {"mobilenet-v2": (24, 16), "mixtral": (24, 24),
                 "qwen2-moe": (24, 24), "canine": (16, 16), "olmoe": (24, 24),
                 "deepseek-v3": (24, 24), "gpt-oss": (16, 16), "jamba": (24, 16),
                 "rwkv": (24, 24), "llama4": (24, 16), "phimoe": (16, 16)}


@dataclasses.dataclass(frozen=True)
class Architecture:
    """name; family ("text encoder", "decoder", "encoder-decoder", "state space", "vision",
    "detection", "time series", "audio", "multimodal", "recurrent", "cnn", "mlp",
    "recommendation", "video", "graph", "diffusion");
    source ("transformers" or "torch"); make() -> (model in eval mode, example inputs);
    fabric: the (rows, cols) of the small fabric it runs on."""

    name: str
    family: str
    source: str
    make: Callable[[], tuple[nn.Module, tuple]]
    fabric: tuple[int, int] = GRID


def build(name: str) -> tuple[nn.Module, tuple]:
    """(model, example inputs) of architecture `name` (a key of `ARCHITECTURES`)."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[name].make()


def fabric_config(name: str) -> FabricConfig:
    """The fabric architecture `name` runs on: small(rows, cols) of its `fabric`."""
    return FabricConfig.small(*ARCHITECTURES[name].fabric)


def output_tensor(out) -> torch.Tensor:
    """The tensor a zoo model is judged by: a Hugging Face output's last_hidden_state (or
    its first field), a plain tensor, or the first element of a tuple."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        return out["last_hidden_state"] if "last_hidden_state" in out else next(
            iter(out.values()))
    if hasattr(out, "last_hidden_state") and out.last_hidden_state is not None:
        return out.last_hidden_state
    return out[0]


# ---- transformers -------------------------------------------------------------------------
def _ids() -> tuple:
    return (torch.randint(0, VOCAB, (1, TOKENS), generator=torch.Generator().manual_seed(1)),)


def _ids_and_targets() -> tuple:
    """An encoder-decoder's source ids, no attention mask (None) and its decoder's ids."""
    target = torch.randint(0, VOCAB, (1, TOKENS), generator=torch.Generator().manual_seed(2))
    return (*_ids(), None, target)


def _mel() -> tuple:
    """Log-mel frames: 16 bins x 16 frames (two per position of the encoder's 8)."""
    return (torch.randn(1, 16, 2 * TOKENS, generator=torch.Generator().manual_seed(1)),)


def _image() -> tuple:
    return (torch.randn(1, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(1)),)


def _clip() -> tuple:
    """A video clip: 4 frames of 32 x 32 (3 channels), frames before channels."""
    return (torch.randn(1, 4, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(1)),)


def _texts_and_image() -> tuple:
    """Two captions of 8 token ids and one 32 x 32 image (a contrastive model's pair)."""
    gen = torch.Generator().manual_seed(1)
    return (torch.randint(0, VOCAB, (2, TOKENS), generator=gen),
            torch.randn(1, 3, IMAGE, IMAGE, generator=gen))


def _series() -> tuple:
    """A time series: 32 steps of 3 channels."""
    return (torch.randn(1, 4 * 8, 3, generator=torch.Generator().manual_seed(1)),)


def _audio() -> tuple:
    return (torch.randn(1, 400, generator=torch.Generator().manual_seed(1)),)


def _hf(config_name: str, model_name: str, inputs: Callable[[], tuple], **config):
    """A factory of transformers' `model_name` (a class of `transformers`, or dotted: of
    one of its submodules) from `config_name(**config)`, eager attention, seeded weights,
    no cache."""

    def make():
        import importlib

        import transformers

        torch.manual_seed(0)
        cfg = getattr(transformers, config_name)(**config)
        cfg._attn_implementation = "eager"
        if hasattr(cfg, "use_cache"):
            cfg.use_cache = False
        # a dotted name: a class of a transformers submodule (WhisperEncoder)
        module, _, cls = model_name.rpartition(".")
        where = importlib.import_module(f"transformers.{module}") if module else transformers
        return getattr(where, cls)(cfg).eval(), inputs()

    return make


_TEXT = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=1,
             num_attention_heads=HEADS, intermediate_size=2 * WIDTH,
             max_position_embeddings=2 * TOKENS)
_DECODER = dict(_TEXT, num_key_value_heads=HEADS, bos_token_id=0, eos_token_id=0,
                pad_token_id=0)
_SEQ2SEQ = dict(vocab_size=VOCAB, d_model=WIDTH, encoder_layers=1, decoder_layers=1,
                encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
                encoder_ffn_dim=2 * WIDTH, decoder_ffn_dim=2 * WIDTH,
                max_position_embeddings=2 * TOKENS, pad_token_id=0, bos_token_id=0,
                eos_token_id=2, decoder_start_token_id=2)
_VIT = dict(hidden_size=WIDTH, num_hidden_layers=1, num_attention_heads=HEADS,
            intermediate_size=2 * WIDTH, image_size=IMAGE, patch_size=8)

_PATCHES = dict(num_input_channels=3, context_length=4 * 8, patch_length=8, patch_stride=8)

_HF = [
    # text encoders
    ("bert", "text encoder", _hf("BertConfig", "BertModel", _ids, **_TEXT)),
    ("distilbert", "text encoder", _hf(
        "DistilBertConfig", "DistilBertModel", _ids, vocab_size=VOCAB, dim=WIDTH, n_layers=1,
        n_heads=HEADS, hidden_dim=2 * WIDTH, max_position_embeddings=2 * TOKENS)),
    ("electra", "text encoder", _hf("ElectraConfig", "ElectraModel", _ids, embedding_size=16,
                                     **_TEXT)),
    ("roberta", "text encoder", _hf("RobertaConfig", "RobertaModel", _ids,
                                     **dict(_TEXT, max_position_embeddings=TOKENS + 4))),
    ("albert", "text encoder", _hf("AlbertConfig", "AlbertModel", _ids, embedding_size=16,
                                    **_TEXT)),
    ("mpnet", "text encoder", _hf("MPNetConfig", "MPNetModel", _ids,
                                   **dict(_TEXT, max_position_embeddings=TOKENS + 4))),
    ("deberta-v2", "text encoder", _hf("DebertaV2Config", "DebertaV2Model", _ids, **_TEXT)),
    # a pooling encoder: blocks of attention at halving lengths, the shift of its relative
    # attention an assignment into a slice (slice_scatter)
    ("funnel", "text encoder", _hf("FunnelConfig", "FunnelModel", _ids, vocab_size=VOCAB,
                                    d_model=WIDTH, n_head=HEADS, d_head=WIDTH // HEADS,
                                    d_inner=2 * WIDTH, block_sizes=[1, 1],
                                    num_decoder_layers=1)),
    # characters hashed into buckets: ((id + 1) * prime) % buckets per hash, 8 hashes
    ("canine", "text encoder", _hf("CanineConfig", "CanineModel", _ids, **{
        k: v for k, v in _TEXT.items() if k != "vocab_size"}, num_hash_buckets=VOCAB,
        downsampling_rate=2)),
    ("t5-encoder", "text encoder", _hf(
        "T5Config", "T5EncoderModel", _ids, vocab_size=VOCAB, d_model=WIDTH, d_kv=16,
        d_ff=2 * WIDTH, num_layers=1, num_heads=HEADS)),
    # its lengths counted from the ids and asserted within the sequence (`.item()`: the
    # host's check)
    ("xlm", "text encoder", _hf("XLMConfig", "XLMModel", _ids, vocab_size=VOCAB, emb_dim=WIDTH,
                                n_layers=1, n_heads=HEADS, max_position_embeddings=2 * TOKENS)),
    # token mixing by a 2D Fourier transform's real part instead of attention
    ("fnet", "text encoder", _hf("FNetConfig", "FNetModel", _ids, **{
        k: v for k, v in _TEXT.items() if k != "num_attention_heads"})),
    # alternating local and global attention (here one layer of local: a band of 4
    # tokens each side), rotary positions, gated gelu, no biases
    ("modernbert", "text encoder", _hf(
        "ModernBertConfig", "ModernBertModel", _ids, layer_types=["sliding_attention"],
        local_attention=4, **dict(_TEXT, pad_token_id=0, bos_token_id=0, eos_token_id=0,
                                  cls_token_id=0, sep_token_id=0))),
    # decoders
    ("gpt2", "decoder", _hf("GPT2Config", "GPT2Model", _ids, vocab_size=VOCAB,
                             n_positions=2 * TOKENS, n_embd=WIDTH, n_layer=1, n_head=HEADS,
                             bos_token_id=0, eos_token_id=0)),
    ("gpt-neo", "decoder", _hf("GPTNeoConfig", "GPTNeoModel", _ids, vocab_size=VOCAB,
                                max_position_embeddings=2 * TOKENS, hidden_size=WIDTH,
                                num_layers=1, num_heads=HEADS, attention_types=[[["global"], 1]],
                                bos_token_id=0, eos_token_id=0)),
    ("gptj", "decoder", _hf("GPTJConfig", "GPTJModel", _ids, vocab_size=VOCAB,
                             n_positions=2 * TOKENS, n_embd=WIDTH, n_layer=1, n_head=HEADS,
                             rotary_dim=8, bos_token_id=0, eos_token_id=0)),
    ("opt", "decoder", _hf("OPTConfig", "OPTModel", _ids, vocab_size=VOCAB, hidden_size=WIDTH,
                            num_hidden_layers=1, num_attention_heads=HEADS, ffn_dim=2 * WIDTH,
                            max_position_embeddings=2 * TOKENS, word_embed_proj_dim=WIDTH)),
    ("bloom", "decoder", _hf("BloomConfig", "BloomModel", _ids, vocab_size=VOCAB,
                              hidden_size=WIDTH, n_layer=1, n_head=HEADS)),
    ("gpt-neox", "decoder", _hf("GPTNeoXConfig", "GPTNeoXModel", _ids, **_TEXT)),
    ("falcon", "decoder", _hf("FalconConfig", "FalconModel", _ids, vocab_size=VOCAB,
                              hidden_size=WIDTH, num_hidden_layers=1,
                              num_attention_heads=HEADS)),
    ("llama", "decoder", _hf("LlamaConfig", "LlamaModel", _ids, **_DECODER)),
    ("mistral", "decoder", _hf("MistralConfig", "MistralModel", _ids, **_DECODER)),
    ("qwen2", "decoder", _hf("Qwen2Config", "Qwen2Model", _ids, **_DECODER)),
    ("gemma", "decoder", _hf("GemmaConfig", "GemmaModel", _ids, head_dim=16, **_DECODER)),
    # attention logits soft-capped (tanh), norms before and after each sublayer
    ("gemma2", "decoder", _hf("Gemma2Config", "Gemma2Model", _ids, head_dim=16, **_DECODER)),
    ("olmo", "decoder", _hf("OlmoConfig", "OlmoModel", _ids, **_DECODER)),
    # norms on each head's queries and keys
    ("qwen3", "decoder", _hf("Qwen3Config", "Qwen3Model", _ids, head_dim=16, **_DECODER)),
    ("phi3", "decoder", _hf("Phi3Config", "Phi3Model", _ids, **_DECODER)),
    ("phi", "decoder", _hf("PhiConfig", "PhiModel", _ids, **_DECODER)),
    # sinusoidal positions in a buffer the model assigns its own value on every call
    ("ctrl", "decoder", _hf("CTRLConfig", "CTRLModel", _ids, vocab_size=VOCAB, n_embd=WIDTH,
                            n_layer=1, n_head=HEADS, dff=2 * WIDTH, n_positions=2 * TOKENS)),
    # mixture of experts: the router's softmax and topk, each token's 2 experts' weights
    # picked by the computed expert ids (a one-hot product) and applied as batched matmuls
    # (experts_implementation="batched_mm"; OLMoE below takes the default, grouped path)
    ("mixtral", "decoder", _hf("MixtralConfig", "MixtralModel", _ids, num_local_experts=4,
                                num_experts_per_tok=2, experts_implementation="batched_mm",
                                **_DECODER)),
    # with a shared expert behind a sigmoid gate, and top-2 weights left unnormalized
    ("qwen2-moe", "decoder", _hf("Qwen2MoeConfig", "Qwen2MoeModel", _ids, num_experts=4,
                                  num_experts_per_tok=2, moe_intermediate_size=WIDTH,
                                  shared_expert_intermediate_size=WIDTH,
                                  experts_implementation="batched_mm", **_DECODER)),
    # transformers' default experts: the token rows sorted by expert id, one product per
    # group of rows (its grouped_mm op, offsets from a histogram), put back by the
    # inverse order; every row meets every expert in one GEMM, masked to its group
    ("olmoe", "decoder", _hf("OlmoeConfig", "OlmoeModel", _ids, num_experts=4,
                              num_experts_per_tok=2, **_DECODER)),
    # multi-head latent attention (queries and keys-values through low-rank projections,
    # rotary and plain halves of each head), a dense first layer, then grouped experts
    # behind a sigmoid router whose group mask is a scatter by topk's indices
    ("deepseek-v3", "decoder", _hf(
        "DeepseekV3Config", "DeepseekV3Model", _ids, vocab_size=VOCAB, hidden_size=WIDTH,
        intermediate_size=2 * WIDTH, moe_intermediate_size=WIDTH // 2, num_hidden_layers=2,
        first_k_dense_replace=1, num_attention_heads=HEADS, num_key_value_heads=HEADS,
        n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, q_lora_rank=16,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
        max_position_embeddings=2 * TOKENS)),
    # attention sinks (a learned logit per head beside the keys), sliding-window layers,
    # experts whose gated linear unit is clamped
    ("gpt-oss", "decoder", _hf("GptOssConfig", "GptOssModel", _ids, head_dim=16,
                                num_local_experts=4, num_experts_per_tok=2,
                                layer_types=["sliding_attention"], sliding_window=4,
                                **_DECODER)),
    # Llama 4: rotary embeddings as complex phasors, chunked attention (4 tokens) in one
    # layer and a layer without rotary embeddings (its queries scaled by position), a
    # sigmoid router writing its top-1 logit into -inf beside a shared expert
    ("llama4", "decoder", _hf("Llama4TextConfig", "Llama4TextModel", _ids, head_dim=16,
                               num_local_experts=4, num_experts_per_tok=1,
                               interleave_moe_layer_step=1, moe_layers=[0, 1],
                               no_rope_layers=[1, 0], attention_chunk_size=4,
                               layer_types=["chunked_attention", "full_attention"],
                               intermediate_size_mlp=2 * WIDTH,
                               **dict(_DECODER, num_hidden_layers=2))),
    # Phi-3.5-MoE: the sparse mixer's router, each of its 2 experts picked as a max after
    # the one before is masked out by a scatter of -inf at its index
    ("phimoe", "decoder", _hf("PhimoeConfig", "PhimoeModel", _ids, num_local_experts=4,
                               num_experts_per_tok=2, **_DECODER)),
    # encoder-decoders: the decoder's self-attention causal, its cross-attention over the
    # encoder's output
    # BART makes its decoder's ids from the source's, shifted right behind the start
    # token (a constant beside the input's ids: both as numbers, a one-hot lookup)
    ("bart", "encoder-decoder", _hf("BartConfig", "BartModel", _ids, **_SEQ2SEQ)),
    ("t5", "encoder-decoder", _hf(
        "T5Config", "T5Model", _ids_and_targets, vocab_size=VOCAB, d_model=WIDTH, d_kv=16,
        d_ff=2 * WIDTH, num_layers=1, num_decoder_layers=1, num_heads=HEADS)),
    ("marian", "encoder-decoder", _hf("MarianConfig", "MarianModel", _ids_and_targets,
                                      **_SEQ2SEQ)),
    ("pegasus", "encoder-decoder", _hf("PegasusConfig", "PegasusModel", _ids_and_targets,
                                       **_SEQ2SEQ)),
    # mBART's decoder starts with the source's last id before the padding: a gather by a
    # count computed on the fabric
    ("mbart", "encoder-decoder", _hf("MBartConfig", "MBartModel", _ids, **_SEQ2SEQ)),
    # speech to text: the encoder over log-mel frames, the decoder over token ids
    ("whisper", "encoder-decoder", _hf(
        "WhisperConfig", "WhisperModel", lambda: (*_mel(), None, _ids_and_targets()[2]),
        vocab_size=VOCAB, d_model=WIDTH, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=2 * WIDTH,
        decoder_ffn_dim=2 * WIDTH, num_mel_bins=16, max_source_positions=TOKENS,
        max_target_positions=2 * TOKENS, pad_token_id=0, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2)),
    # state space: a selective scan (input-dependent decay and gates) after a causal
    # depthwise convolution, no attention
    ("mamba", "state space", _hf("MambaConfig", "MambaModel", _ids, vocab_size=VOCAB,
                                 hidden_size=WIDTH, state_size=4, num_hidden_layers=1, expand=2,
                                 conv_kernel=4, use_mambapy=False)),
    # Mamba-2's state space duality: the scan in chunks of 4 tokens, within a chunk as a
    # masked (attention-like) product of cumulative decays, between chunks a recurrence
    ("mamba2", "state space", _hf("Mamba2Config", "Mamba2Model", _ids, vocab_size=VOCAB,
                                  hidden_size=WIDTH, num_hidden_layers=1, num_heads=4,
                                  head_dim=16, state_size=8, n_groups=1, expand=2,
                                  chunk_size=4)),
    # hybrids: a gated linear recurrence (RG-LRU) after a causal convolution, then a
    # local attention layer (Griffin); Mamba layers beside attention, experts every
    # other layer (Jamba)
    ("recurrent-gemma", "state space", _hf(
        "RecurrentGemmaConfig", "RecurrentGemmaModel", _ids, vocab_size=VOCAB,
        hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
        num_key_value_heads=HEADS, intermediate_size=2 * WIDTH, lru_width=WIDTH,
        attention_window_size=TOKENS, block_types=["recurrent", "attention"], pad_token_id=0,
        bos_token_id=0, eos_token_id=0)),
    ("jamba", "state space", _hf(
        "JambaConfig", "JambaModel", _ids, attn_layer_period=2, attn_layer_offset=1,
        expert_layer_period=2, expert_layer_offset=1, num_experts=2, num_experts_per_tok=1,
        mamba_d_state=4, mamba_expand=2, mamba_dt_rank=4, mamba_d_conv=4,
        **dict(_DECODER, num_hidden_layers=2))),
    # Falcon-H1: attention and a Mamba-2 mixer side by side in every layer, their outputs
    # summed with learned multipliers
    ("falcon-h1", "state space", _hf(
        "FalconH1Config", "FalconH1Model", _ids, head_dim=16, mamba_d_state=4,
        mamba_expand=2, mamba_d_head=8, mamba_n_heads=8, mamba_n_groups=1,
        mamba_chunk_size=8, mamba_d_ssm=64, **_DECODER)),
    # linear attention as a recurrence: each channel's state decays by a learned rate
    # and takes exp(k) v, a token at a time (RWKV's time mixing, unrolled over the 8
    # tokens), token shifts feeding its channel mixing; 2 layers (transformers' init
    # spreads its rates over the layers), weights not rescaled by the layer's depth
    ("rwkv", "recurrent", _hf("RwkvConfig", "RwkvModel", _ids, vocab_size=VOCAB,
                              hidden_size=WIDTH, num_hidden_layers=2,
                              attention_hidden_size=WIDTH, intermediate_size=2 * WIDTH,
                              context_length=2 * TOKENS, rescale_every=0)),
    # vision
    ("vit", "vision", _hf("ViTConfig", "ViTModel", _image, **_VIT)),
    ("deit", "vision", _hf("DeiTConfig", "DeiTModel", _image, **_VIT)),
    ("clip-vision", "vision", _hf("CLIPVisionConfig", "CLIPVisionModel", _image, **_VIT)),
    ("dinov2", "vision", _hf("Dinov2Config", "Dinov2Model", _image, **_VIT)),
    ("beit", "vision", _hf("BeitConfig", "BeitModel", _image, **_VIT)),
    # hierarchical: overlapping patch embeddings, attention over a reduced sequence
    ("segformer", "vision", _hf("SegformerConfig", "SegformerModel", _image,
                                num_encoder_blocks=1, depths=[1], sr_ratios=[2],
                                hidden_sizes=[16], num_attention_heads=[2], patch_sizes=[4],
                                strides=[4], mlp_ratios=[2])),
    # attention replaced by average pooling, group norms
    ("poolformer", "vision", _hf("PoolFormerConfig", "PoolFormerModel", _image,
                                 hidden_sizes=[8, 16], depths=[1, 1], num_encoder_blocks=2,
                                 patch_sizes=[4, 2], strides=[4, 2], padding=[1, 0])),
    ("swin", "vision", _hf("SwinConfig", "SwinModel", _image, image_size=IMAGE, patch_size=4,
                            embed_dim=16, depths=[1], num_heads=[HEADS], window_size=4)),
    # weight-standardized convolutions (each kernel normalized in forward), group norms,
    # zeros padded before the stem's max pool (BiT)
    ("bit", "vision", _hf("BitConfig", "BitModel", _image, embedding_size=8,
                          hidden_sizes=[8, 16], depths=[1, 1], num_groups=4)),
    ("resnet", "vision", _hf("ResNetConfig", "ResNetModel", _image, embedding_size=8,
                              hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")),
    ("convnext", "vision", _hf("ConvNextConfig", "ConvNextModel", _image, hidden_sizes=[8, 16],
                                depths=[1, 1], num_stages=2)),
    ("mobilenet-v2", "vision", _hf("MobileNetV2Config", "MobileNetV2Model", _image,
                                    image_size=IMAGE, depth_multiplier=0.25)),
    ("regnet", "vision", _hf("RegNetConfig", "RegNetModel", _image, embedding_size=8,
                              hidden_sizes=[8, 16], depths=[1, 1], groups_width=8)),
    # convolutional tokens: each stage embeds its input by a strided convolution and
    # projects q, k and v by depthwise convolutions with batch norm (CvT); the second stage
    # has 2 layers, as transformers indexes a stage's drop-path rates by the stage's index
    ("cvt", "vision", _hf("CvtConfig", "CvtModel", _image, embed_dim=[16, WIDTH],
                          num_heads=[1, HEADS], depth=[1, 2], patch_sizes=[7, 3],
                          patch_stride=[4, 2], patch_padding=[2, 1], cls_token=[False, True])),
    # detection: a ViT whose sequence carries 4 learned detection tokens
    ("yolos", "detection", _hf("YolosConfig", "YolosModel", _image,
                               **dict(_VIT, image_size=[IMAGE, IMAGE]), num_detection_tokens=4)),
    # time series: 32 steps of 3 channels, patches of 8 steps (`Tensor.unfold`), each
    # channel's patches a sequence: a transformer encoder (PatchTST) or MLPs mixing
    # patches and features (PatchTSMixer)
    ("patchtst", "time series", _hf("PatchTSTConfig", "PatchTSTModel", _series, **_PATCHES,
                                    d_model=WIDTH, num_attention_heads=HEADS,
                                    num_hidden_layers=1, ffn_dim=2 * WIDTH)),
    ("patchtsmixer", "time series", _hf("PatchTSMixerConfig", "PatchTSMixerModel", _series,
                                        **_PATCHES, d_model=WIDTH, num_layers=1)),
    # video: tubelets of 2 frames x 8 x 8 embedded by a 3D convolution, a ViT over them
    ("videomae", "video", _hf("VideoMAEConfig", "VideoMAEModel", _clip, **_VIT, num_frames=4,
                              tubelet_size=2)),
    # audio
    ("wav2vec2", "audio", _hf("Wav2Vec2Config", "Wav2Vec2Model", _audio, **dict(
        _TEXT, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2))),
    ("hubert", "audio", _hf("HubertConfig", "HubertModel", _audio, **dict(
        _TEXT, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2))),
    # contrastive text and image towers: each caption's pooled token (picked at its
    # end-of-text id, a runtime index beside a constant one) against the image's
    ("clip", "multimodal", _hf("CLIPConfig", "CLIPModel", _texts_and_image, projection_dim=16,
                               text_config=dict(_TEXT, max_position_embeddings=2 * TOKENS),
                               vision_config=_VIT)),
    ("whisper-encoder", "audio", _hf(
        "WhisperConfig", "models.whisper.modeling_whisper.WhisperEncoder", _mel,
        vocab_size=VOCAB, d_model=WIDTH, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=2 * WIDTH,
        decoder_ffn_dim=2 * WIDTH, num_mel_bins=16, max_source_positions=TOKENS)),
]


# ---- plain torch ----------------------------------------------------------------------------
class Recurrent(nn.Module):
    """An LSTM or GRU over (1, 8, 16) inputs, one layer of 32, the last hidden states."""

    def __init__(self, cell: str):
        super().__init__()
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(16, WIDTH, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class SeparableCNN(nn.Module):
    """Depthwise 3x3 + pointwise 1x1 convolutions with batch norm and relu6, global average
    pool, linear: MobileNet's block on (1, 3, 16, 16) images."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.bn = nn.BatchNorm2d(8)
        self.pointwise = nn.Conv2d(8, 16, 1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = nn.functional.relu6(self.bn(self.depthwise(x)))
        x = self.pointwise(x).mean(dim=(2, 3))
        return self.head(x)


class MixerBlock(nn.Module):
    """An MLP-Mixer: 4x4 patches of a (1, 3, 16, 16) image, one token-mixing and one
    channel-mixing MLP with layer norms and gelu, mean over tokens."""

    def __init__(self, patch=4, dim=WIDTH):
        super().__init__()
        tokens = (16 // patch) ** 2
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.tokens = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(),
                                    nn.Linear(2 * tokens, tokens))
        self.channels = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(),
                                      nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)  # (B, tokens, dim)
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        x = x + self.channels(self.norm2(x))
        return x.mean(dim=1)


class VideoCNN(nn.Module):
    """A 3D CNN over a clip (C3D's layout): two 3x3x3 convolutions with batch norm and relu,
    a spatial max pool between them, a global average pool and a linear classifier, on
    (1, 3, 4, 16, 16): 4 frames of 16 x 16."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv3d(3, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(),
            nn.MaxPool3d((1, 2, 2)),
            nn.Conv3d(8, 16, 3, padding=1), nn.BatchNorm3d(16), nn.ReLU(),
            nn.AdaptiveAvgPool3d(1))
        self.head = nn.Linear(16, 10)

    def forward(self, clip):
        return self.head(self.features(clip).flatten(1))


class DLRM(nn.Module):
    """A deep learning recommendation model (DLRM's layout): 13 dense features through a
    bottom MLP, three sparse features each a bag of 3 ids pooled by an EmbeddingBag (sum),
    the pairwise dot products of the four vectors (the strictly lower triangle of their
    Gram matrix) beside the dense vector, a top MLP and a sigmoid: a click probability per
    sample, for a batch of 2."""

    def __init__(self, tables=3, dim=16, dense=13):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, WIDTH), nn.ReLU(), nn.Linear(WIDTH, dim),
                                    nn.ReLU())
        self.bags = nn.ModuleList(nn.EmbeddingBag(VOCAB, dim, mode="sum") for _ in range(tables))
        rows, cols = torch.tril_indices(tables + 1, tables + 1, offset=-1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)
        pairs = (tables + 1) * tables // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1))

    def forward(self, dense, *ids):
        x = self.bottom(dense)  # (B, dim)
        vectors = torch.stack([x, *(bag(i) for bag, i in zip(self.bags, ids))], dim=1)
        gram = torch.bmm(vectors, vectors.transpose(1, 2))  # (B, tables + 1, tables + 1)
        pairs = gram[:, self.rows, self.cols]
        return torch.sigmoid(self.top(torch.cat([x, pairs], dim=1)))


def _dlrm():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    ids = tuple(torch.randint(0, VOCAB, (2, 3), generator=gen) for _ in range(3))
    return DLRM().eval(), (torch.randn(2, 13, generator=gen), *ids)


def _given(module: Callable[[], nn.Module], inputs: Callable[[], tuple]):
    """A factory of `module` (seeded weights) with the example inputs `inputs()` makes."""
    def make():
        torch.manual_seed(0)
        return module().eval(), inputs()

    return make


def _torch(module: Callable[[], nn.Module], shape: tuple):
    def make():
        torch.manual_seed(0)
        return module().eval(), (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)

    return make


_TORCH = [
    ("lstm", "recurrent", _torch(lambda: Recurrent("lstm"), (1, TOKENS, 16))),
    ("gru", "recurrent", _torch(lambda: Recurrent("gru"), (1, TOKENS, 16))),
    ("separable-cnn", "cnn", _torch(SeparableCNN, (1, 3, 16, 16))),
    ("mlp-mixer", "mlp", _torch(MixerBlock, (1, 3, 16, 16))),
    ("dlrm", "recommendation", _dlrm),
    ("video-cnn", "video", _torch(VideoCNN, (1, 3, 4, 16, 16))),
    ("gcn", "graph", _given(GCN, graph_inputs)),
    ("graphsage", "graph", _given(GraphSAGE, graph_inputs)),
    ("gat", "graph", _given(GAT, graph_inputs)),
    ("unet", "diffusion", _given(DiffusionUNet, unet_inputs)),
]

ARCHITECTURES: dict[str, Architecture] = {
    **{name: Architecture(name, family, "transformers", make, LARGER_FABRIC.get(name, GRID))
       for name, family, make in _HF},
    **{name: Architecture(name, family, "torch", make, LARGER_FABRIC.get(name, GRID))
       for name, family, make in _TORCH},
}
