"""Published architectures: each preset against its config's dimensions, computed by hand."""

from __future__ import annotations

import pytest
from attnlab.architectures import (
    DEEPSEEK_V3,
    JAMBA_15_MINI,
    KIMI_LINEAR,
    LLAMA3_8B,
    MINIMAX_TEXT_01,
    NEMOTRON_H_8B,
    PRESETS,
    QWEN3_NEXT,
    Architecture,
    LayerMemory,
    architecture_from_config,
)
from attnlab.serving import cache_bytes_per_token, sequence_bytes


def test_llama3_8b_caches_2_x_8_heads_x_128_in_32_layers():
    assert LLAMA3_8B.layout == "32 attn"
    assert {layer.per_token for layer in LLAMA3_8B.layers} == {2 * 8 * 128}
    assert cache_bytes_per_token(LLAMA3_8B) == 131_072


def test_deepseek_v3_caches_576_numbers_in_61_mla_layers():
    assert DEEPSEEK_V3.layout == "61 mla"
    assert cache_bytes_per_token(DEEPSEEK_V3) == 61 * 576 * 2 == 70_272
    assert (DEEPSEEK_V3.n_experts, DEEPSEEK_V3.experts_per_token) == (256, 8)


def test_kimi_linear_is_20_kda_and_7_mla_with_mla_last():
    kinds = [layer.kind for layer in KIMI_LINEAR.layers]
    assert [i + 1 for i, k in enumerate(kinds) if k == "mla"] == [4, 8, 12, 16, 20, 24, 27]
    assert KIMI_LINEAR.layout == "20 kda + 7 mla"
    assert cache_bytes_per_token(KIMI_LINEAR) == 7 * 576 * 2 == 8_064
    seq = sequence_bytes(KIMI_LINEAR, 0, state_dtype="fp32")
    assert seq.state == 20 * 32 * 128 * 128 * 4 == 40 * 2**20
    assert seq.conv == 20 * 3 * 3 * 32 * 128 * 2  # q, k, v convolutions, 3 rows kept


def test_qwen3_next_is_36_gated_deltanet_and_12_attention_layers():
    kinds = [layer.kind for layer in QWEN3_NEXT.layers]
    assert kinds == ["gdn", "gdn", "gdn", "attn"] * 12
    assert cache_bytes_per_token(QWEN3_NEXT) == 12 * 2 * 2 * 256 * 2 == 24_576
    seq = sequence_bytes(QWEN3_NEXT, 0, state_dtype="fp32")
    assert seq.state == 36 * 32 * 128 * 128 * 4  # one 128 x 128 state per value head
    assert seq.conv == 36 * 3 * (2 * 16 * 128 + 32 * 128) * 2


def test_minimax_text_01_is_70_lightning_and_10_softmax_layers():
    assert MINIMAX_TEXT_01.layout == "70 lightning + 10 attn"
    assert [layer.kind for layer in MINIMAX_TEXT_01.layers][:8] == ["lightning"] * 7 + ["attn"]
    assert cache_bytes_per_token(MINIMAX_TEXT_01) == 10 * 2 * 8 * 128 * 2 == 40_960
    seq = sequence_bytes(MINIMAX_TEXT_01, 0, state_dtype="fp32")
    assert seq.state == 70 * 64 * 128 * 128 * 4 and seq.conv == 0


def test_jamba_attention_at_layers_4_12_20_28_and_mamba_states():
    kinds = [layer.kind for layer in JAMBA_15_MINI.layers]
    assert [i for i, k in enumerate(kinds) if k == "attn"] == [4, 12, 20, 28]
    assert cache_bytes_per_token(JAMBA_15_MINI) == 4 * 2 * 8 * 128 * 2 == 16_384
    # the Jamba paper's KV-cache table: 4 GB at 256K tokens (16 KiB per token = 4 GiB)
    assert sequence_bytes(JAMBA_15_MINI, 256 * 1024).cache == 4 * 2**30
    seq = sequence_bytes(JAMBA_15_MINI, 0, state_dtype="fp32")
    assert seq.state == 28 * 8192 * 16 * 4 and seq.conv == 28 * 3 * 8192 * 2


def test_nemotron_h_pattern_and_mamba2_state():
    assert NEMOTRON_H_8B.n_layers == 52
    assert (NEMOTRON_H_8B.count("mamba2"), NEMOTRON_H_8B.count("attn"),
            NEMOTRON_H_8B.count("mlp")) == (24, 4, 24)
    assert cache_bytes_per_token(NEMOTRON_H_8B) == 4 * 2 * 8 * 128 * 2
    seq = sequence_bytes(NEMOTRON_H_8B, 0, state_dtype="fp32")
    assert seq.state == 24 * 128 * 64 * 128 * 4
    assert seq.conv == 24 * 3 * (128 * 64 + 2 * 8 * 128) * 2


def test_every_preset_cites_a_config_and_a_paper_in_references_bib():
    from pathlib import Path
    bib = (Path(__file__).parents[1] / "references.bib").read_text()
    for arch in PRESETS.values():
        assert len(arch.bib) >= 2 and arch.reading
        for key in arch.bib:
            assert "{" + key + "," in bib, f"{arch.name}: {key} not in references.bib"
        assert arch.params_active <= arch.params_total


def test_a_config_of_another_model_type_is_refused_by_name():
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        architecture_from_config({"model_type": "gpt2", "num_hidden_layers": 2},
                                 params_total=10)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        architecture_from_config({"model_type": "minimax", "num_hidden_layers": 9,
                                  "num_attention_heads": 2, "head_dim": 4,
                                  "attn_type_list": [0] * 7 + [1]}, params_total=10)
    with pytest.raises(ValueError, match="config: expected a dict"):
        architecture_from_config([1, 2], params_total=10)


PRESETS_CONFIG_JAMBA = {
    "model_type": "jamba", "num_hidden_layers": 8, "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "attn_layer_period": 8,
    "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
}


def test_a_small_pasted_config_gives_its_layers():
    arch = architecture_from_config(PRESETS_CONFIG_JAMBA, params_total=1000, name="tiny")
    assert arch.layout == "7 mamba + 1 attn" and arch.layers[4] == LayerMemory("attn", 2 * 2 * 16)
    assert arch.params_active == 1000 and arch.n_experts is None


def test_architecture_checks_its_counts():
    with pytest.raises(ValueError, match="params_active"):
        Architecture("x", (), params_total=1, params_active=2)
    with pytest.raises(ValueError, match="n_experts"):
        Architecture("x", (), params_total=2, params_active=1, n_experts=4)


def test_expert_counts_are_read_from_either_field_name():
    assert (KIMI_LINEAR.n_experts, KIMI_LINEAR.experts_per_token) == (256, 8)  # ..._per_token
    assert (QWEN3_NEXT.n_experts, QWEN3_NEXT.experts_per_token) == (512, 10)  # ..._per_tok
    assert (MINIMAX_TEXT_01.n_experts, JAMBA_15_MINI.n_experts) == (32, 16)
    assert LLAMA3_8B.n_experts is None and NEMOTRON_H_8B.experts_per_token is None
