"""Configs and presets: the numbers match their sources, and bad configs fail clearly."""

from __future__ import annotations

import dataclasses

import pytest
from attnlab.configs import (
    DEEPSEEK_V3,
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    PRESETS,
    SOPHIA,
    SOPHIA_NANO,
    MLAConfig,
    pattern_from_full_attn_layers,
)

# --- presets -----------------------------------------------------------------------------------


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


def test_sophia_nano_is_a_tiny_sophia():
    c = SOPHIA_NANO
    assert c.layer_pattern == ("kda", "kda", "kda", "mla") * 2
    assert (c.vocab_size, c.d_model, c.n_heads, c.head_dim, c.mlp_hidden) == (256, 64, 2, 32, 128)
    assert c.mla.kv_lora_rank == 32 and c.mla.qk_rope_head_dim == 16


def test_real_model_presets_match_their_configs():
    kimi = KIMI_LINEAR_48B_A3B
    assert (kimi.n_layers, kimi.d_model, kimi.vocab_size) == (27, 2304, 163840)
    assert (kimi.count("kda"), kimi.count("mla")) == (20, 7)
    assert kimi.layer_pattern[:4] == ("kda", "kda", "kda", "mla")
    assert kimi.layer_pattern[-4:] == ("mla", "kda", "kda", "mla")  # layers 24 … 27
    assert (kimi.n_heads, kimi.head_dim, kimi.conv_size) == (32, 128, 4)
    assert kimi.mla == MLAConfig(n_heads=32, qk_nope_head_dim=128, qk_rope_head_dim=64,
                                 v_head_dim=128, kv_lora_rank=512, q_lora_rank=None, rope=False)
    assert "unconfirmed" in kimi.notes
    ds = DEEPSEEK_V3
    assert ds.layer_pattern == ("mla",) * 61 and (ds.d_model, ds.vocab_size) == (7168, 129280)
    assert (ds.mla.n_heads, ds.mla.kv_lora_rank, ds.mla.q_lora_rank) == (128, 512, 1536)
    assert (ds.mla.qk_nope_head_dim, ds.mla.qk_rope_head_dim, ds.mla.v_head_dim) == (128, 64, 128)
    assert ds.mla.rope is True
    llama = LLAMA3_8B
    assert llama.layer_pattern == ("attn",) * 32
    assert (llama.d_model, llama.n_heads, llama.n_kv_heads, llama.head_dim) == (4096, 32, 8, 128)
    assert llama.vocab_size == 128256
    assert set(PRESETS) == {c.name for c in (SOPHIA, SOPHIA_NANO, kimi, ds, llama)}
    assert all(PRESETS[name].name == name and PRESETS[name].source for name in PRESETS)


def test_full_attn_layers_are_one_based():
    assert pattern_from_full_attn_layers(5, (2, 5)) == ("kda", "mla", "kda", "kda", "mla")
    assert pattern_from_full_attn_layers(3, (1,), full="attn", linear="gdn") == (
        "attn", "gdn", "gdn"
    )
    with pytest.raises(ValueError, match=r"full_attn_layers: expected 1-based .* got 0"):
        pattern_from_full_attn_layers(5, (0, 4))
    with pytest.raises(ValueError, match=r"full_attn_layers: .* got 6"):
        pattern_from_full_attn_layers(5, (6,))


# --- config validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"layer_pattern": ("kda", "rnn")}, r"layer_pattern\[1\]: expected one of"),
        ({"layer_pattern": ()}, "layer_pattern: expected a non-empty tuple"),
        ({"layer_pattern": "kda"}, "layer_pattern: expected a non-empty tuple"),
        ({"mla": None}, "ModelConfig.mla: the layer pattern has 'mla' layers"),
        ({"n_kv_heads": 3}, "n_kv_heads: expected a divisor of n_heads=2, got 3"),
        ({"n_kv_heads": 0}, "n_kv_heads: expected a positive integer"),
        ({"d_model": 0}, "ModelConfig.d_model: expected a positive integer"),
        ({"head_dim": 32.0}, "ModelConfig.head_dim: expected a positive integer"),
        ({"vocab_size": True}, "ModelConfig.vocab_size: expected a positive integer"),
        ({"conv_size": -1}, "ModelConfig.conv_size: expected a positive integer"),
        ({"name": ""}, "ModelConfig.name: expected a non-empty string"),
        ({"rope": 1}, "ModelConfig.rope: expected True or False"),
    ],
)
def test_bad_model_configs_raise_clear_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(SOPHIA_NANO, **changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kv_lora_rank": 0}, "MLAConfig.kv_lora_rank: expected a positive integer"),
        ({"q_lora_rank": 0}, "MLAConfig.q_lora_rank: expected a positive integer"),
        ({"n_heads": 2.5}, "MLAConfig.n_heads: expected a positive integer"),
        ({"rope": "no"}, "MLAConfig.rope: expected True or False"),
    ],
)
def test_bad_mla_configs_raise_clear_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(SOPHIA.mla, **changes)


def test_configs_are_frozen_and_counted():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SOPHIA.n_heads = 8
    listed = dataclasses.replace(SOPHIA_NANO, layer_pattern=["kda", "mla"])
    assert listed.layer_pattern == ("kda", "mla")
    assert LLAMA3_8B.count("attn") == 32 and LLAMA3_8B.count("kda") == 0
    assert SOPHIA_NANO.n_kv_heads == SOPHIA_NANO.n_heads
    with pytest.raises(ValueError, match="kind: expected one of"):
        SOPHIA.count("KDA")


