"""The one description of models: the course's presets, the published ones read from their
config.json fields (cross-checked against those fields by hand), and bad configs failing
clearly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from attnlab.configs import (
    DEEPSEEK_V3,
    DEEPSEEK_V3_CONFIG,
    JAMBA_15_MINI,
    JAMBA_15_MINI_CONFIG,
    KIMI_LINEAR_48B_A3B,
    KIMI_LINEAR_CONFIG,
    LLAMA3_8B,
    LLAMA3_8B_CONFIG,
    MINIMAX_TEXT_01,
    MINIMAX_TEXT_01_CONFIG,
    NEMOTRON_H_8B,
    NEMOTRON_H_8B_CONFIG,
    PRESETS,
    PUBLISHED,
    QWEN3_NEXT,
    QWEN3_NEXT_CONFIG,
    SOPHIA,
    SOPHIA_NANO,
    MLAConfig,
    ModelConfig,
    RecurrentHeads,
    SSMConfig,
    architecture_from_config,
    pattern_from_full_attn_layers,
)
from attnlab.memory import cache_bytes_per_token
from attnlab.serving import sequence_bytes

# --- the course's models -----------------------------------------------------------------------


def test_sophia_is_the_source_layout_with_the_course_mla_choice():
    assert SOPHIA.layer_pattern == ("kda", "kda", "kda", "mla") * 7
    assert (SOPHIA.n_layers, SOPHIA.n_heads, SOPHIA.head_dim) == (28, 16, 96)
    assert SOPHIA.d_model == 16 * 96 == 1536 and SOPHIA.vocab_size == 32000
    assert SOPHIA.conv_size == 4
    m = SOPHIA.mla
    assert (m.n_heads, m.qk_nope_head_dim, m.v_head_dim) == (16, 96, 96)
    assert m.kv_lora_rank == 4 * 96 and m.qk_rope_head_dim == 96 // 2
    assert m.q_lora_rank is None and m.rope is False
    assert "688" in SOPHIA.notes and "704,643,072" in SOPHIA.notes
    assert "Kimi Delta Attention" in SOPHIA.notes
    assert SOPHIA.params_total is None and SOPHIA.recurrent is None
    assert SOPHIA.recurrent_heads == RecurrentHeads(n_key_heads=16, key_dim=96,
                                                    n_value_heads=16, value_dim=96)


def test_sophia_nano_is_a_tiny_sophia():
    c = SOPHIA_NANO
    assert c.layer_pattern == ("kda", "kda", "kda", "mla") * 2
    assert (c.vocab_size, c.d_model, c.n_heads, c.head_dim, c.mlp_hidden) == (256, 64, 2, 32, 128)
    assert c.mla.kv_lora_rank == 32 and c.mla.qk_rope_head_dim == 16


# --- the published models against their config.json fields, by hand ---------------------------
# Each test reads the dimensions from the config dict itself and counts the bytes the way the
# serving engine (vLLM) keeps them by default: bf16 caches and conv inputs (2 bytes), states in
# the model's bf16 (2 bytes), KDA's states in fp32 (4 bytes).


def _shared_fields(preset: ModelConfig, config: dict) -> None:
    assert preset.n_layers == config["num_hidden_layers"]
    assert preset.d_model == config["hidden_size"]
    assert preset.vocab_size == config["vocab_size"]
    assert preset.mlp_hidden == config["intermediate_size"]


def test_llama3_8b_agrees_with_its_config():
    c = LLAMA3_8B_CONFIG
    _shared_fields(LLAMA3_8B, c)
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    assert LLAMA3_8B.layer_pattern == ("attn",) * c["num_hidden_layers"]
    assert (LLAMA3_8B.n_heads, LLAMA3_8B.n_kv_heads, LLAMA3_8B.head_dim) == (
        c["num_attention_heads"], c["num_key_value_heads"], head_dim)
    per_token = c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * head_dim * 2
    assert cache_bytes_per_token(LLAMA3_8B) == per_token == 131_072  # 128 KiB (model card)
    assert sequence_bytes(LLAMA3_8B, 0).total_bytes == 0


def test_deepseek_v3_agrees_with_its_config():
    c = DEEPSEEK_V3_CONFIG
    _shared_fields(DEEPSEEK_V3, c)
    assert DEEPSEEK_V3.layer_pattern == ("mla",) * c["num_hidden_layers"]
    m = DEEPSEEK_V3.mla
    assert (m.n_heads, m.kv_lora_rank, m.q_lora_rank, m.qk_rope_head_dim) == (
        c["num_attention_heads"], c["kv_lora_rank"], c["q_lora_rank"], c["qk_rope_head_dim"])
    assert (m.qk_nope_head_dim, m.v_head_dim, m.rope) == (
        c["qk_nope_head_dim"], c["v_head_dim"], True)
    per_token = c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    assert cache_bytes_per_token(DEEPSEEK_V3) == per_token == 61 * 576 * 2
    # the multi-head baseline of DeepSeek-V2 Table 1: 128 heads of qk_nope_head_dim
    assert (DEEPSEEK_V3.n_heads, DEEPSEEK_V3.head_dim) == (128, 128)
    assert (DEEPSEEK_V3.n_experts, DEEPSEEK_V3.experts_per_token) == (
        c["n_routed_experts"], c["num_experts_per_tok"])


def test_kimi_linear_agrees_with_its_config():
    c, linear = KIMI_LINEAR_CONFIG, KIMI_LINEAR_CONFIG["linear_attn_config"]
    _shared_fields(KIMI_LINEAR_48B_A3B, c)
    kimi = KIMI_LINEAR_48B_A3B
    mla_layers = [i + 1 for i, k in enumerate(kimi.layer_pattern) if k == "mla"]
    assert mla_layers == linear["full_attn_layers"]  # 1-based in the config
    n_mla, n_kda = len(mla_layers), c["num_hidden_layers"] - len(mla_layers)
    assert (kimi.count("kda"), kimi.count("mla"), kimi.layout) == (n_kda, n_mla, "20 kda + 7 mla")
    assert (kimi.n_heads, kimi.head_dim, kimi.conv_size) == (
        linear["num_heads"], linear["head_dim"], linear["short_conv_kernel_size"])
    assert kimi.mla == MLAConfig(
        n_heads=c["num_attention_heads"], qk_nope_head_dim=c["qk_nope_head_dim"],
        qk_rope_head_dim=c["qk_rope_head_dim"], v_head_dim=c["v_head_dim"],
        kv_lora_rank=c["kv_lora_rank"], q_lora_rank=None, rope=not c["mla_use_nope"])
    assert cache_bytes_per_token(kimi) == n_mla * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    h, d, w = linear["num_heads"], linear["head_dim"], linear["short_conv_kernel_size"]
    seq = sequence_bytes(kimi, 0)
    assert seq.state_bytes == n_kda * h * d * d * 4 == 40 * 2**20  # the Notation appendix, §8
    assert seq.conv_bytes == n_kda * (w - 1) * 3 * h * d * 2  # q, k and v convolved
    assert (kimi.n_experts, kimi.experts_per_token) == (
        c["num_experts"], c["num_experts_per_token"])
    kda_layers = [i + 1 for i, k in enumerate(kimi.layer_pattern) if k == "kda"]
    assert kda_layers == linear["kda_layers"]  # the config lists both, 1-based
    assert "unconfirmed" not in kimi.notes and "Firworks" in kimi.notes


def test_qwen3_next_agrees_with_its_config():
    c = QWEN3_NEXT_CONFIG
    _shared_fields(QWEN3_NEXT, c)
    n = c["num_hidden_layers"]
    n_attn = n // c["full_attention_interval"]
    assert QWEN3_NEXT.layer_pattern == ("gdn", "gdn", "gdn", "attn") * n_attn
    assert (QWEN3_NEXT.n_heads, QWEN3_NEXT.n_kv_heads, QWEN3_NEXT.head_dim) == (
        c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"])
    assert cache_bytes_per_token(QWEN3_NEXT) == (
        n_attn * 2 * c["num_key_value_heads"] * c["head_dim"] * 2)
    hk, hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, w = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    seq = sequence_bytes(QWEN3_NEXT, 0)
    assert seq.state_bytes == (n - n_attn) * hv * dk * dv * 2  # one state per value head
    assert seq.conv_bytes == (n - n_attn) * (w - 1) * (2 * hk * dk + hv * dv) * 2
    assert (QWEN3_NEXT.n_experts, QWEN3_NEXT.experts_per_token) == (512, 10)


def test_minimax_text_01_agrees_with_its_config():
    c = MINIMAX_TEXT_01_CONFIG
    _shared_fields(MINIMAX_TEXT_01, c)
    n_attn = sum(c["attn_type_list"])
    n_lightning = c["num_hidden_layers"] - n_attn
    assert MINIMAX_TEXT_01.layout == f"{n_lightning} lightning + {n_attn} attn"
    assert MINIMAX_TEXT_01.layer_pattern[:8] == ("lightning",) * 7 + ("attn",)
    assert cache_bytes_per_token(MINIMAX_TEXT_01) == (
        n_attn * 2 * c["num_key_value_heads"] * c["head_dim"] * 2)
    seq = sequence_bytes(MINIMAX_TEXT_01, 0)
    assert seq.state_bytes == n_lightning * c["num_attention_heads"] * c["head_dim"] ** 2 * 2
    assert seq.conv_bytes == 0
    assert MINIMAX_TEXT_01.n_experts == c["num_local_experts"]


def test_jamba_agrees_with_its_config():
    c = JAMBA_15_MINI_CONFIG
    _shared_fields(JAMBA_15_MINI, c)
    attn = [i for i, k in enumerate(JAMBA_15_MINI.layer_pattern) if k == "attn"]
    assert attn == list(range(c["attn_layer_offset"], c["num_hidden_layers"],
                              c["attn_layer_period"]))
    n_mamba = c["num_hidden_layers"] - len(attn)
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    per_token = len(attn) * 2 * c["num_key_value_heads"] * head_dim * 2
    assert cache_bytes_per_token(JAMBA_15_MINI) == per_token
    # the Jamba paper's KV-cache table: "4GB" at 256K tokens, which is 4 GiB
    assert sequence_bytes(JAMBA_15_MINI, 256 * 1024).cache_bytes == 4 * 2**30
    d_inner = c["mamba_expand"] * c["hidden_size"]
    seq = sequence_bytes(JAMBA_15_MINI, 0)
    assert seq.state_bytes == n_mamba * d_inner * c["mamba_d_state"] * 2
    assert seq.conv_bytes == n_mamba * (c["mamba_d_conv"] - 1) * d_inner * 2


def test_nemotron_h_agrees_with_its_config():
    c = NEMOTRON_H_8B_CONFIG
    _shared_fields(NEMOTRON_H_8B, c)
    pattern = c["hybrid_override_pattern"]
    n_m, n_a, n_mlp = pattern.count("M"), pattern.count("*"), pattern.count("-")
    assert (NEMOTRON_H_8B.count("mamba2"), NEMOTRON_H_8B.count("attn"),
            NEMOTRON_H_8B.count("mlp")) == (n_m, n_a, n_mlp) == (24, 4, 24)
    assert cache_bytes_per_token(NEMOTRON_H_8B) == (
        n_a * 2 * c["num_key_value_heads"] * c["attention_head_dim"] * 2)
    d_inner = c["mamba_num_heads"] * c["mamba_head_dim"]
    seq = sequence_bytes(NEMOTRON_H_8B, 0)
    assert seq.state_bytes == n_m * d_inner * c["ssm_state_size"] * 2
    channels = d_inner + 2 * c["n_groups"] * c["ssm_state_size"]
    assert seq.conv_bytes == n_m * (c["conv_kernel"] - 1) * channels * 2
    assert NEMOTRON_H_8B.n_experts is None and NEMOTRON_H_8B.experts_per_token is None


def test_every_published_model_cites_its_config_and_paper_in_references_bib():
    bib = (Path(__file__).parents[1] / "references.bib").read_text()
    assert list(PUBLISHED) == ["Kimi-Linear-48B-A3B", "Qwen3-Next 80B-A3B", "MiniMax-Text-01",
                               "Jamba 1.5 Mini", "Nemotron-H 8B", "Llama-3-8B", "DeepSeek-V3"]
    for config in PUBLISHED.values():
        assert len(config.bib) >= 2 and config.notes and config.source
        for key in config.bib:
            assert "{" + key + "," in bib, f"{config.name}: {key} not in references.bib"
        assert config.params_active <= config.params_total
    assert set(PRESETS) == {SOPHIA.name, SOPHIA_NANO.name, *PUBLISHED}
    assert all(PRESETS[name].name == name and PRESETS[name].source for name in PRESETS)


# --- the reader --------------------------------------------------------------------------------


def test_full_attn_layers_are_one_based():
    assert pattern_from_full_attn_layers(5, (2, 5)) == ("kda", "mla", "kda", "kda", "mla")
    assert pattern_from_full_attn_layers(3, (1,), full="attn", linear="gdn") == (
        "attn", "gdn", "gdn"
    )
    with pytest.raises(ValueError, match=r"full_attn_layers: expected 1-based .* got 0"):
        pattern_from_full_attn_layers(5, (0, 4))
    with pytest.raises(ValueError, match=r"full_attn_layers: .* got 6"):
        pattern_from_full_attn_layers(5, (6,))


TINY_JAMBA = {
    "model_type": "jamba", "num_hidden_layers": 8, "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "attn_layer_period": 8,
    "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
    "intermediate_size": 128, "vocab_size": 100,
}


def test_a_small_pasted_config_gives_its_layers():
    tiny = architecture_from_config(TINY_JAMBA, params_total=1000, name="tiny")
    assert tiny.layout == "7 mamba + 1 attn" and tiny.layer_pattern[4] == "attn"
    assert (tiny.n_kv_heads, tiny.head_dim) == (2, 64 // 4)
    assert tiny.ssm == SSMConfig(d_inner=128, d_state=16)
    assert tiny.params_active == 1000 and tiny.n_experts is None
    assert cache_bytes_per_token(tiny) == 2 * 2 * 16 * 2


def test_a_config_without_a_model_type_is_read_as_dense_attention():
    bare = {k: v for k, v in LLAMA3_8B_CONFIG.items() if k != "model_type"}
    config = architecture_from_config(bare, params_total=10, name="bare")
    assert config.layer_pattern == LLAMA3_8B.layer_pattern
    assert cache_bytes_per_token(config) == cache_bytes_per_token(LLAMA3_8B)


def test_qwen3_next_reads_layer_types_when_given():
    listed = {**QWEN3_NEXT_CONFIG, "num_hidden_layers": 3, "full_attention_interval": None,
              "layer_types": ["full_attention", "linear_attention", "linear_attention"]}
    config = architecture_from_config(listed, params_total=10)
    assert config.layer_pattern == ("attn", "gdn", "gdn")
    assert config.recurrent == RecurrentHeads(n_key_heads=16, key_dim=128,
                                              n_value_heads=32, value_dim=128)


def test_a_config_the_reader_cannot_read_is_refused_by_name():
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        architecture_from_config({"model_type": "gpt2", "num_hidden_layers": 2},
                                 params_total=10)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        architecture_from_config({**MINIMAX_TEXT_01_CONFIG, "num_hidden_layers": 9,
                                  "attn_type_list": [0] * 7 + [1]}, params_total=10)
    with pytest.raises(TypeError, match="config: expected a dict"):
        architecture_from_config([1, 2], params_total=10)
    missing = {k: v for k, v in TINY_JAMBA.items() if k != "mamba_d_state"}
    with pytest.raises(ValueError, match="'mamba_d_state' .*model_type 'jamba'"):
        architecture_from_config(missing, params_total=10)
    with pytest.raises(ValueError, match="params_active"):
        architecture_from_config(TINY_JAMBA, params_total=10, params_active=20)


def test_expert_counts_are_read_from_either_field_name():
    assert (KIMI_LINEAR_48B_A3B.n_experts, KIMI_LINEAR_48B_A3B.experts_per_token) == (256, 8)
    assert (QWEN3_NEXT.n_experts, QWEN3_NEXT.experts_per_token) == (512, 10)
    assert (MINIMAX_TEXT_01.n_experts, JAMBA_15_MINI.n_experts) == (32, 16)
    assert LLAMA3_8B.n_experts is None and NEMOTRON_H_8B.experts_per_token is None


# --- config validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"layer_pattern": ("kda", "rnn")}, r"layer_pattern\[1\]: expected one of"),
        ({"layer_pattern": ()}, "layer_pattern: expected a non-empty tuple"),
        ({"layer_pattern": "kda"}, "layer_pattern: expected a non-empty tuple"),
        ({"mla": None}, "ModelConfig.mla: the layer pattern has 'mla' layers"),
        ({"layer_pattern": ("mamba",)}, "ModelConfig.ssm: the layer pattern has 'mamba'"),
        ({"mla": {"kv_lora_rank": 32}}, "ModelConfig.mla: expected MLAConfig or None"),
        ({"recurrent": (2, 32)}, "ModelConfig.recurrent: expected RecurrentHeads"),
        ({"n_kv_heads": 3}, "n_kv_heads: expected a divisor of n_heads=2, got 3"),
        ({"n_kv_heads": 0}, "n_kv_heads: expected a positive integer"),
        ({"d_model": 0}, "ModelConfig.d_model: expected a positive integer"),
        ({"head_dim": 32.0}, "ModelConfig.head_dim: expected a positive integer"),
        ({"vocab_size": True}, "ModelConfig.vocab_size: expected a positive integer"),
        ({"conv_size": -1}, "ModelConfig.conv_size: expected a positive integer"),
        ({"name": ""}, "ModelConfig.name: expected a non-empty string"),
        ({"rope": 1}, "ModelConfig.rope: expected True or False"),
        ({"params_active": 5}, "ModelConfig.params_total: expected the total"),
        ({"params_total": 0}, "ModelConfig.params_total: expected a positive integer"),
        ({"params_total": 4, "params_active": 5}, "params_active: expected at most"),
        ({"params_total": 4, "n_experts": 8}, "n_experts: give both"),
        ({"params_total": 4, "n_experts": 2, "experts_per_token": 3},
         "experts_per_token: expected at most n_experts=2"),
    ],
)
def test_bad_model_configs_raise_clear_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(SOPHIA_NANO, **changes)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: dataclasses.replace(SOPHIA.mla, kv_lora_rank=0),
         "MLAConfig.kv_lora_rank: expected a positive integer"),
        (lambda: dataclasses.replace(SOPHIA.mla, q_lora_rank=0),
         "MLAConfig.q_lora_rank: expected a positive integer"),
        (lambda: dataclasses.replace(SOPHIA.mla, n_heads=2.5),
         "MLAConfig.n_heads: expected a positive integer"),
        (lambda: dataclasses.replace(SOPHIA.mla, rope="no"), "MLAConfig.rope: expected True"),
        (lambda: RecurrentHeads(n_key_heads=2, key_dim=0, n_value_heads=2, value_dim=4),
         "RecurrentHeads.key_dim: expected a positive integer"),
        (lambda: SSMConfig(d_inner=8, d_state=4, n_groups=0),
         "SSMConfig.n_groups: expected a positive integer"),
    ],
)
def test_bad_dimensions_raise_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_configs_are_frozen_and_counted():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SOPHIA.n_heads = 8
    listed = dataclasses.replace(SOPHIA_NANO, layer_pattern=["kda", "mla"])
    assert listed.layer_pattern == ("kda", "mla")
    assert LLAMA3_8B.count("attn") == 32 and LLAMA3_8B.count("kda") == 0
    assert SOPHIA_NANO.n_kv_heads == SOPHIA_NANO.n_heads
    assert SOPHIA.kinds == ("kda", "mla") and SOPHIA.layout == "21 kda + 7 mla"
    with pytest.raises(ValueError, match="kind: expected one of"):
        SOPHIA.count("KDA")
    # the recurrent heads follow n_heads and head_dim unless given apart
    wider = dataclasses.replace(SOPHIA_NANO, n_heads=4, head_dim=16)
    assert (wider.recurrent_heads.n_value_heads, wider.recurrent_heads.key_dim) == (4, 16)
