"""The config reader against released config.json files, the bytes counted by hand from their
fields: every model type it reads, sliding-window and local/global stacks, and bad configs
refused by the field's name (tests/data/hf_configs.json holds the configs, keyed by the Hugging
Face repository each comes from)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from attnlab.configs import (
    DEEPSEEK_V3_CONFIG,
    JAMBA_15_MINI_CONFIG,
    KIMI_LINEAR_CONFIG,
    LLAMA3_8B_CONFIG,
    MINIMAX_TEXT_01_CONFIG,
    NEMOTRON_H_8B,
    NEMOTRON_H_8B_CONFIG,
    QWEN3_NEXT_CONFIG,
    ModelConfig,
    architecture_from_config,
    parameters_from_config,
)
from attnlab.memory import cache_bytes_per_token, context_limit
from attnlab.serving import largest_context, sequence_bytes, weight_bytes, what_if
from hypothesis import given, settings
from hypothesis import strategies as st

HF = json.loads((Path(__file__).parent / "data" / "hf_configs.json").read_text())
BF16 = 2  # bytes a number: caches, conv inputs and (but for KDA's) states in bf16, as vLLM


def read(repo: str, **changes) -> ModelConfig:
    """The calculator's model of ``repo``'s config, with ``changes`` to its fields."""
    return architecture_from_config({**HF[repo], **changes}, params_total=10**9, name=repo)


def kv_per_token(config: dict) -> int:
    """K and V of one token in one layer, bf16: 2 · n_kv_heads · head_dim · 2 B."""
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_key_value_heads"] * head_dim * BF16


# --- sliding windows ---------------------------------------------------------------------------


def test_mistral_7b_v01_keeps_a_rolling_4096_token_cache():
    c = HF["mistralai/Mistral-7B-v0.1"]
    mistral = read("mistralai/Mistral-7B-v0.1")
    assert mistral.layer_pattern == ("swa",) * 32 and mistral.sliding_window == 4096
    per_layer = 2 * 8 * 128 * BF16  # K and V, 8 KV heads of 4096 / 32 = 128
    assert kv_per_token(c) == per_layer
    # 32k tokens: the window keeps 4096 of them in each of the 32 layers
    assert sequence_bytes(mistral, 32_768).cache_bytes == 32 * per_layer * 4096 == 536_870_912
    unwindowed = read("mistralai/Mistral-7B-v0.1", sliding_window=None)
    assert unwindowed.layer_pattern == ("attn",) * 32
    assert sequence_bytes(unwindowed, 32_768).cache_bytes == 32 * per_layer * 32_768
    assert sequence_bytes(unwindowed, 32_768).cache_bytes == 4_294_967_296  # 8x the window's
    # below the window the two are the same
    assert sequence_bytes(mistral, 4096).cache_bytes == sequence_bytes(unwindowed, 4096).cache_bytes


def test_a_model_whose_every_cache_is_bounded_has_no_context_limit():
    mistral = read("mistralai/Mistral-7B-v0.1")
    assert context_limit(mistral) == 4096
    window = 32 * 2 * 8 * 128 * BF16 * 4096  # the full rolling cache, 536,870,912 B
    memory = weight_bytes(mistral) + window
    assert largest_context(mistral, 1, memory) == -1
    assert largest_context(mistral, 1, memory - 1) == 4095  # the window itself does not fit
    assert largest_context(mistral, 2, memory) == 2048  # two half windows
    answer = str(what_if(mistral, 32_768, 1, memory))
    assert "longest context at batch 1: no cache limit" in answer
    unwindowed = read("mistralai/Mistral-7B-v0.1", sliding_window=None)
    assert context_limit(unwindowed) is None
    assert largest_context(unwindowed, 1, memory) == 4096  # its cache grows past the window


def test_gemma_3_27b_has_one_global_layer_in_six():
    c = HF["google/gemma-3-27b-it"]["text_config"]
    gemma = architecture_from_config(HF["google/gemma-3-27b-it"], params_total=27 * 10**9)
    n = c["num_hidden_layers"]
    globals_ = [i for i in range(n) if (i + 1) % 6 == 0]  # transformers' sliding_window_pattern
    assert [i for i, k in enumerate(gemma.layer_pattern) if k == "attn"] == globals_
    assert (len(globals_), n - len(globals_)) == (10, 52)
    # left out of the text_config, so Gemma3TextConfig's defaults
    assert gemma.vocab_size == 262_208 and gemma.tie_embeddings
    assert gemma.sliding_window == 1024 and context_limit(gemma) is None
    per_layer = 2 * c["num_key_value_heads"] * c["head_dim"] * BF16  # 8192 B a token
    t = 131_072
    expected = 10 * per_layer * t + 52 * per_layer * 1024
    assert sequence_bytes(gemma, t).cache_bytes == expected == 11_173_625_856
    # read as all-global attention (forced through as a llama), it is 6x too large
    as_llama = architecture_from_config(
        {**c, "model_type": "llama", "vocab_size": 262_208}, params_total=1)
    assert sequence_bytes(as_llama, t).cache_bytes == 62 * per_layer * t == 66_571_993_088
    assert round(66_571_993_088 / expected, 2) == 5.96


def test_gemma_3_1b_reads_its_pattern_field():
    c = HF["google/gemma-3-1b-it"]
    gemma = read("google/gemma-3-1b-it")
    assert gemma.layout == "22 swa + 4 attn" and gemma.vocab_size == c["vocab_size"]
    per_layer = 2 * 1 * 256 * BF16  # one KV head of 256 (multi-query)
    assert sequence_bytes(gemma, 32_768).cache_bytes == (
        4 * per_layer * 32_768 + 22 * per_layer * 512) == 145_752_064
    every_third = read("google/gemma-3-1b-it", sliding_window_pattern=3)
    assert every_third.layer_pattern[:6] == ("swa", "swa", "attn") * 2


def test_gemma_2_alternates_local_and_global_layers_local_first():
    c = HF["google/gemma-2-9b"]
    gemma = read("google/gemma-2-9b")
    assert gemma.layer_pattern == ("swa", "attn") * 21
    per_layer = 2 * c["num_key_value_heads"] * c["head_dim"] * BF16  # 8192 B
    assert sequence_bytes(gemma, 8192).cache_bytes == (
        21 * per_layer * 8192 + 21 * per_layer * 4096) == 2_113_929_216


def test_layer_types_say_which_layers_slide():
    types = ["sliding_attention", "full_attention"] * 16
    mistral = read("mistralai/Mistral-7B-v0.1", layer_types=types)
    assert mistral.layer_pattern == ("swa", "attn") * 16


def test_qwen_slides_only_with_use_sliding_window_and_from_max_window_layers_on():
    c = HF["Qwen/Qwen2.5-1.5B-Instruct"]
    qwen = read("Qwen/Qwen2.5-1.5B-Instruct")
    assert qwen.layer_pattern == ("attn",) * 28 and qwen.sliding_window is None
    assert qwen.head_dim == c["hidden_size"] // c["num_attention_heads"] == 128
    assert cache_bytes_per_token(qwen) == 28 * 2 * 2 * 128 * BF16 == 28_672
    sliding = read("Qwen/Qwen2.5-1.5B-Instruct", use_sliding_window=True)
    assert sliding.layer_pattern == ("attn",) * 21 + ("swa",) * 7
    per_layer = 2 * 2 * 128 * BF16
    assert sequence_bytes(sliding, 65_536).cache_bytes == (
        21 * per_layer * 65_536 + 7 * per_layer * 32_768) == 1_644_167_168


def test_llama_4_scout_attends_in_chunks_in_three_layers_of_four():
    c = HF["meta-llama/Llama-4-Scout-17B-16E-Instruct"]["text_config"]
    scout = read("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    # no_rope_layers is empty, so transformers' default: a NoPE (global) layer every 4th
    assert scout.layer_pattern == ("chunked", "chunked", "chunked", "attn") * 12
    assert scout.attention_chunk_size == 8192 and context_limit(scout) is None
    assert scout.mlp_hidden == c["intermediate_size_mlp"]
    assert (scout.n_experts, scout.experts_per_token) == (16, 1)
    per_layer = 2 * c["num_key_value_heads"] * c["head_dim"] * BF16  # 4096 B a token
    t = 2**20
    assert sequence_bytes(scout, t).cache_bytes == (
        12 * per_layer * t + 36 * per_layer * 8192) == 52_747_567_104
    # a few tokens: every layer still holds them all
    assert sequence_bytes(scout, 100).cache_bytes == 48 * per_layer * 100
    listed = {**c, "no_rope_layers": [1, 0] * 24}
    assert architecture_from_config(listed, params_total=1).layer_pattern == (
        "chunked", "attn") * 24
    with pytest.raises(ValueError, match=r"\['no_rope_layers'\]\[1\]: expected 0 \(NoPE"):
        architecture_from_config({**c, "no_rope_layers": [1, 2] * 24}, params_total=1)
    with pytest.raises(ValueError, match=r"expected a field 'attention_chunk_size'"):
        architecture_from_config({**c, "attention_chunk_size": None}, params_total=1)


# --- the other model types -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "layers", "per_token", "experts"),
    [
        # 32 layers · 2 · 8 KV heads · 128 · 2 B; 8 experts, 2 a token
        ("mistralai/Mixtral-8x7B-v0.1", 32, 32 * 2 * 8 * 128 * 2, (8, 2)),
        # 64 layers · 2 · 8 · head_dim 128 · 2 B
        ("Qwen/Qwen3-32B", 64, 64 * 2 * 8 * 128 * 2, (None, None)),
        # 48 layers · 2 · 4 · 128 · 2 B; 128 experts, 8 a token
        ("Qwen/Qwen3-30B-A3B", 48, 48 * 2 * 4 * 128 * 2, (128, 8)),
        # 24 layers · 2 · 16 · 2048/16 · 2 B (multi-head); 60 experts, 4 a token
        ("Qwen/Qwen1.5-MoE-A2.7B", 24, 24 * 2 * 16 * 128 * 2, (60, 4)),
        # 28 layers · 2 · 16 · head_dim 256 (not 3072/16) · 2 B
        ("google/gemma-7b", 28, 28 * 2 * 16 * 256 * 2, (None, None)),
        # MLA: 27 layers · (kv_lora_rank 512 + qk_rope_head_dim 64) · 2 B; 64 experts, 6 a token
        ("deepseek-ai/DeepSeek-V2-Lite", 27, 27 * (512 + 64) * 2, (64, 6)),
    ],
)
def test_every_layer_of_a_dense_cache_model_caches_what_its_config_says(
    repo, layers, per_token, experts
):
    arch = read(repo)
    assert arch.n_layers == layers == HF[repo]["num_hidden_layers"]
    assert cache_bytes_per_token(arch) == per_token
    assert sequence_bytes(arch, 1000).total_bytes == 1000 * per_token
    assert (arch.n_experts, arch.experts_per_token) == experts
    assert context_limit(arch) is None


def test_deepseek_v2_lite_has_full_rank_queries():
    arch = read("deepseek-ai/DeepSeek-V2-Lite")
    assert arch.kinds == ("mla",) and arch.mla.q_lora_rank is None and arch.mla.rope


def test_mamba2_keeps_only_fixed_states():
    c = HF["mistralai/Mamba-Codestral-7B-v0.1"]
    mamba = read("mistralai/Mamba-Codestral-7B-v0.1")
    d_inner = c["num_heads"] * c["head_dim"]
    assert d_inner == c["expand"] * c["hidden_size"] == 8192
    seq = sequence_bytes(mamba, 10**6)
    assert seq.cache_bytes == 0
    assert seq.state_bytes == 64 * d_inner * c["state_size"] * BF16 == 134_217_728
    channels = d_inner + 2 * c["n_groups"] * c["state_size"]  # x, B and C convolved
    assert seq.conv_bytes == 64 * (c["conv_kernel"] - 1) * channels * BF16 == 3_932_160
    assert context_limit(mamba) == 0
    assert largest_context(mamba, 1, weight_bytes(mamba) + seq.total_bytes) == -1


def test_nemotron_h_reads_transformers_key_names_too():
    renamed = {k: v for k, v in NEMOTRON_H_8B_CONFIG.items() if k not in ("n_groups",
                                                                          "conv_kernel")}
    renamed.update(mamba_n_groups=8, mamba_d_conv=4)
    arch = architecture_from_config(renamed, params_total=8 * 10**9)
    assert arch.ssm == NEMOTRON_H_8B.ssm and arch.conv_size == NEMOTRON_H_8B.conv_size
    assert sequence_bytes(arch, 4096).total_bytes == sequence_bytes(NEMOTRON_H_8B, 4096).total_bytes
    with pytest.raises(ValueError, match=r"'n_groups'\], config\['mamba_n_groups'\]: expected "
                                         r"one value, got 8, 4"):
        architecture_from_config({**NEMOTRON_H_8B_CONFIG, "mamba_n_groups": 4}, params_total=1)


# --- weights counted from the config -------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "total", "active", "card"),
    [
        # the parameter counts of the released checkpoints (their model cards in brackets)
        (LLAMA3_8B_CONFIG, 8_030_261_248, None, "8.03B"),
        (HF["mistralai/Mistral-7B-v0.1"], 7_241_732_096, None, "7.24B"),
        (HF["mistralai/Mixtral-8x7B-v0.1"], 46_702_792_704, 12_879_925_248, "46.7B, 12.9B active"),
        (HF["Qwen/Qwen2.5-1.5B-Instruct"], 1_543_714_304, None, "1.54B"),
        (HF["Qwen/Qwen1.5-MoE-A2.7B"], 14_315_784_192, 2_689_173_504, "14.3B, A2.7B"),
        (HF["Qwen/Qwen3-32B"], 32_762_123_264, None, "32.8B"),
        (HF["Qwen/Qwen3-30B-A3B"], 30_532_122_624, 3_353_032_704, "30.5B, 3.3B activated"),
        (HF["google/gemma-7b"], 8_537_680_896, None, "8.54B"),
        (HF["google/gemma-2-9b"], 9_241_705_984, None, "9.24B"),
        (HF["google/gemma-3-1b-it"], 999_885_952, None, "1B"),
    ],
)
def test_weights_are_counted_from_the_config(config, total, active, card):
    assert parameters_from_config(config) == (total, active or total)
    arch = architecture_from_config(config)
    assert (arch.params_total, arch.params_active) == (total, active or total)
    given = architecture_from_config(config, params_total=10, params_active=5)
    assert (given.params_total, given.params_active) == (10, 5)  # as given


def test_mixtral_by_hand():
    d, ff, v, layers = 4096, 14336, 32000, 32
    attention = d * 4096 + 2 * d * 1024 + 4096 * d  # W_q, W_k and W_v (8 KV heads), W_o
    per_layer = attention + 2 * d + d * 8  # two RMSNorms, the router
    expert = 3 * d * ff  # SwiGLU: gate, up, down
    total = layers * (per_layer + 8 * expert) + 2 * v * d + d  # untied head, final norm
    active = layers * (per_layer + 2 * expert) + 2 * v * d + d
    assert parameters_from_config(HF["mistralai/Mixtral-8x7B-v0.1"]) == (total, active)


def test_weights_the_config_does_not_size_must_be_given():
    with pytest.raises(ValueError, match="'deepseek_v2' model are not counted"):
        architecture_from_config(HF["deepseek-ai/DeepSeek-V2-Lite"])
    with pytest.raises(ValueError, match="a 'gemma3' checkpoint holds a vision tower"):
        architecture_from_config(HF["google/gemma-3-27b-it"])
    with pytest.raises(ValueError, match="params_active: expected it with params_total"):
        architecture_from_config(LLAMA3_8B_CONFIG, params_active=10)
    with pytest.raises(ValueError, match=r"\['mlp_only_layers'\]\[0\]: expected a layer number "
                                         r"in \[0, 47\]"):
        parameters_from_config({**HF["Qwen/Qwen3-30B-A3B"], "mlp_only_layers": [48]})


# --- bad configs are refused by the field's name -------------------------------------------------


BAD_CONFIGS = [
    # a typo in a layer word is not read as Gated DeltaNet
    ({**QWEN3_NEXT_CONFIG, "layer_types": ["linear_attention"] * 3 + ["full_atention"]
      + ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 11},
     ValueError, r"config\['layer_types'\]\[3\]: expected one of \['full_attention', "
                 r"'linear_attention'\], got 'full_atention'"),
    ({**HF["google/gemma-2-9b"], "layer_types": ["sliding_attention", "global"] * 21},
     ValueError, r"\['layer_types'\]\[1\]: expected one of .*got 'global'"),
    ({**HF["google/gemma-2-9b"], "layer_types": ["full_attention"] * 41},
     ValueError, r"\['layer_types'\]: expected num_hidden_layers=42 entries, got 41"),
    # Kimi's 1-based layer numbers within the 27 layers, each once
    ({**KIMI_LINEAR_CONFIG, "linear_attn_config": {
        **KIMI_LINEAR_CONFIG["linear_attn_config"], "full_attn_layers": [4, 8, 28]}},
     ValueError, r"\['full_attn_layers'\]\[2\]: expected a layer number in \[1, 27\] "
                 r"\(num_hidden_layers=27\), got 28"),
    ({**KIMI_LINEAR_CONFIG, "linear_attn_config": {
        **KIMI_LINEAR_CONFIG["linear_attn_config"], "full_attn_layers": [4, 4]}},
     ValueError, r"\['full_attn_layers'\]: expected distinct layer numbers"),
    ({**KIMI_LINEAR_CONFIG, "linear_attn_config": {
        **KIMI_LINEAR_CONFIG["linear_attn_config"], "kda_layers": [1, 2, 3, 4]}},
     ValueError, r"\['kda_layers'\], .*\['full_attn_layers'\]: expected each of the layers "
                 r"1..27 \(num_hidden_layers=27\) in exactly one list"),
    # MiniMax: 0 or 1 only
    ({**MINIMAX_TEXT_01_CONFIG, "attn_type_list": [0, 2] * 40},
     ValueError, r"\['attn_type_list'\]\[1\]: expected 0 \(lightning\) or 1 \(softmax\), "
                 r"got 2"),
    ({**MINIMAX_TEXT_01_CONFIG, "attn_type_list": ["0", "1"] * 40},
     ValueError, r"\['attn_type_list'\]\[0\]: .* got '0'"),
    ({**MINIMAX_TEXT_01_CONFIG, "attn_type_list": [False, True] * 40},
     ValueError, r"\['attn_type_list'\]\[0\]: .* got False"),
    # Jamba's offset within its period
    ({**JAMBA_15_MINI_CONFIG, "attn_layer_offset": 8},
     ValueError, r"\['attn_layer_offset'\]: expected less than attn_layer_period=8, got 8"),
    # key/value heads: at least one, and a divisor of the heads
    ({**LLAMA3_8B_CONFIG, "num_key_value_heads": 0},
     ValueError, r"\['num_key_value_heads'\]: expected an integer >= 1, got 0"),
    ({**LLAMA3_8B_CONFIG, "num_key_value_heads": 12},
     ValueError, r"\['num_key_value_heads'\]: expected a divisor of "
                 r"num_attention_heads=32, got 12"),
    # zero sizes
    ({**LLAMA3_8B_CONFIG, "hidden_size": 0}, ValueError, r"\['hidden_size'\]: .* got 0"),
    ({**HF["mistralai/Mistral-7B-v0.1"], "sliding_window": 0},
     ValueError, r"\['sliding_window'\]: expected an integer >= 1, got 0"),
    ({**DEEPSEEK_V3_CONFIG, "kv_lora_rank": 0}, ValueError, r"\['kv_lora_rank'\]: .*got 0"),
    ({**HF["google/gemma-2-9b"], "sliding_window": None},
     ValueError, r"\['sliding_window'\]: the config has sliding-window layers"),
    # types: a bool, a string, a float, NaN are not integers
    ({**LLAMA3_8B_CONFIG, "num_hidden_layers": True},
     TypeError, r"\['num_hidden_layers'\]: expected an integer >= 1, got True \(bool\)"),
    ({**LLAMA3_8B_CONFIG, "num_attention_heads": "32"},
     TypeError, r"\['num_attention_heads'\]: .* got '32' \(str\)"),
    ({**LLAMA3_8B_CONFIG, "hidden_size": 4096.0},
     TypeError, r"\['hidden_size'\]: .* got 4096.0 \(float\)"),
    ({**LLAMA3_8B_CONFIG, "vocab_size": math.nan},
     TypeError, r"\['vocab_size'\]: .* got nan \(float\)"),
    ({**LLAMA3_8B_CONFIG, "num_hidden_layers": None},
     ValueError, r"expected a field 'num_hidden_layers' \(model_type 'llama'\)"),
    ({**LLAMA3_8B_CONFIG, "tie_word_embeddings": "false"},
     TypeError, r"\['tie_word_embeddings'\]: expected true or false, got 'false'"),
    ({**HF["Qwen/Qwen2.5-1.5B-Instruct"], "use_sliding_window": 1},
     TypeError, r"\['use_sliding_window'\]: expected true or false, got 1"),
    ({**HF["google/gemma-3-27b-it"], "text_config": [1]},
     TypeError, r"config\['text_config'\]: expected a dict"),
    ({**HF["google/gemma-3-27b-it"], "text_config": {
        **HF["google/gemma-3-27b-it"]["text_config"], "num_key_value_heads": -16}},
     ValueError, r"config\['text_config'\]\['num_key_value_heads'\]: .* got -16"),
    ({**NEMOTRON_H_8B_CONFIG, "hybrid_override_pattern": "M-M?" + "M-" * 24},
     ValueError, r"\['hybrid_override_pattern'\]\[3\]: expected one of .* got '\?'"),
    ({**NEMOTRON_H_8B_CONFIG, "mamba_num_heads": 12},
     ValueError, r"\['n_groups'\] .*: expected a divisor of mamba_num_heads=12, got 8"),
    ({**QWEN3_NEXT_CONFIG, "num_experts_per_tok": 513},
     ValueError, r"\['num_experts_per_tok'\]: expected at most the experts "
                 r"\(num_experts = 512\), got 513"),
    ({**QWEN3_NEXT_CONFIG, "num_experts_per_tok": None},
     ValueError, r"expected a field 'num_experts_per_tok' or 'num_experts_per_token'"),
    ({**HF["mistralai/Mamba-Codestral-7B-v0.1"], "expand": 3},
     ValueError, r"\['expand'\]: expected expand · hidden_size = num_heads · head_dim"),
    ({k: v for k, v in HF["mistralai/Mistral-7B-v0.1"].items() if k != "model_type"},
     ValueError, r"\['sliding_window'\]: a config without a model_type is read as Llama's"),
    ({**LLAMA3_8B_CONFIG, "model_type": "gemma4"},
     ValueError, r"config\['model_type'\]: model_type 'gemma4' is not one"),
]
"""Bad configs, the error each raises and a pattern of its message (the website's calculator
must refuse them too: tests/test_calculator_parity.py)."""


@pytest.mark.parametrize(("config", "error", "message"), BAD_CONFIGS)
def test_a_bad_config_is_refused_by_the_field_it_gets_wrong(config, error, message):
    with pytest.raises(error, match=message):
        architecture_from_config(config, params_total=10**9)


# --- any mutation: a clear refusal or a finite answer --------------------------------------------

VALID = {
    **{repo: config for repo, config in HF.items() if not repo.startswith("_")},
    "Llama-3-8B": LLAMA3_8B_CONFIG, "DeepSeek-V3": DEEPSEEK_V3_CONFIG,
    "Kimi Linear": KIMI_LINEAR_CONFIG, "Qwen3-Next": QWEN3_NEXT_CONFIG,
    "MiniMax-Text-01": MINIMAX_TEXT_01_CONFIG, "Jamba 1.5 Mini": JAMBA_15_MINI_CONFIG,
    "Nemotron-H 8B": NEMOTRON_H_8B_CONFIG,
}
COUNTED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
           "gemma2", "gemma3_text")
DELETE = object()
MUTATIONS = [DELETE, None, True, False, 0, -1, 1, 3, 10_000, 1.5, 4096.0, math.nan, math.inf,
             "x", "32", "full_atention", [], {}, [0, 1]]


def _paths(config: dict, prefix: tuple = ()) -> list[tuple]:
    """Every field of a config, nested dicts and list entries included."""
    paths = []
    for key, value in config.items():
        paths.append((*prefix, key))
        if isinstance(value, dict):
            paths += _paths(value, (*prefix, key))
        elif isinstance(value, list):
            paths += [(*prefix, key, i) for i in range(len(value))]
    return paths


def _mutate(config: dict, path: tuple, value: object) -> dict:
    config = copy.deepcopy(config)
    *parents, last = path
    target = config
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return config


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_a_mutated_config_is_refused_by_name_or_gives_a_finite_answer(data):
    repo = data.draw(st.sampled_from(sorted(VALID)))
    path = data.draw(st.sampled_from(_paths(VALID[repo])))
    value = data.draw(st.sampled_from(MUTATIONS))
    config = _mutate(VALID[repo], path, value)
    field = next(key for key in reversed(path) if isinstance(key, str))
    counted = VALID[repo].get("model_type") in COUNTED
    try:
        arch = architecture_from_config(config, params_total=10**9)
        if counted:  # the weights counted from the config too
            arch = architecture_from_config(config)
    except (ValueError, TypeError) as error:
        assert field in str(error), (repo, path, value, error)
        return
    assert arch.params_active <= arch.params_total
    seq = sequence_bytes(arch, 4096)
    for n in (seq.cache_bytes, seq.state_bytes, seq.conv_bytes):
        assert isinstance(n, int) and n >= 0
    longest = largest_context(arch, 1, weight_bytes(arch) + 10**12)
    assert isinstance(longest, int) and longest >= -1
