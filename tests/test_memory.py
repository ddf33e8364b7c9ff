"""Cache and state bytes: the hand-checked numbers of the Notation appendix, §1, §7, §8 and §11,
and the arithmetic over every preset."""

from __future__ import annotations

import pytest
import torch
from attnlab.configs import (
    DEEPSEEK_V3,
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    PRESETS,
    SOPHIA,
    SOPHIA_NANO,
)
from attnlab.memory import (
    as_all_attention,
    bits_per_element,
    bytes_per_element,
    cache_breakdown,
    cache_bytes_per_token,
    dtype_name,
    format_bytes,
    layer_numbers,
    tensor_bytes,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def test_sophia_all_attention_at_4096_tokens_is_704_6_mb_not_688():
    # 4096 tokens × 28 layers × 2 (K, V) × 16 heads × 96 × 2 bytes (Notation appendix §11).
    baseline = cache_breakdown(as_all_attention(SOPHIA), 4096, dtype="bf16")
    assert baseline.total_bytes == 704_643_072 == 4096 * 28 * 2 * 16 * 96 * 2
    assert baseline.total_bytes == 672 * 2**20
    assert baseline.state_bytes == baseline.conv_bytes == 0
    assert format_bytes(baseline.total_bytes) == "704.6 MB (672.0 MiB)"
    assert baseline.total_bytes != 688 * 10**6 and baseline.total_bytes != 688 * 2**20


def test_sophia_kda_states_are_3_1_million_numbers_6_2_mb_in_bf16():
    numbers = SOPHIA.count("kda") * layer_numbers("kda", SOPHIA, 4096).state
    assert numbers == 21 * 16 * 96 * 96 == 3_096_576
    breakdown = cache_breakdown(SOPHIA, 4096, dtype="bf16")
    assert breakdown.state_bytes == 6_193_152
    assert format_bytes(breakdown.state_bytes) == "6.2 MB (5.9 MiB)"
    # the state does not grow with the context; in fp32 it doubles
    assert cache_breakdown(SOPHIA, 10**6, dtype="bf16").state_bytes == 6_193_152
    assert cache_breakdown(SOPHIA, 4096, dtype="bf16", state_dtype="fp32").state_bytes == (
        2 * 6_193_152
    )


def test_sophia_layout_and_its_mla_cache():
    assert SOPHIA.n_layers == 28 and SOPHIA.count("kda") == 21 and SOPHIA.count("mla") == 7
    assert SOPHIA.mla.cache_dim == 384 + 48
    breakdown = cache_breakdown(SOPHIA, 4096, dtype="bf16")
    assert breakdown.cache_bytes == 7 * (384 + 48) * 4096 * 2
    # short convolutions: 3 inputs (q, k, v) × (4 − 1) rows × 16·96 channels per KDA layer
    assert breakdown.conv_bytes == 21 * 3 * 3 * 16 * 96 * 2
    assert breakdown.total_bytes == (
        breakdown.cache_bytes + breakdown.state_bytes + breakdown.conv_bytes
    )
    by_kind = breakdown.bytes_by_kind()
    assert list(by_kind) == ["kda", "mla"]
    assert by_kind["mla"] == breakdown.cache_bytes
    assert by_kind["kda"] == breakdown.state_bytes + breakdown.conv_bytes
    # "75 % less KV cache" counts layers; the latent makes the real cut far larger
    baseline = cache_breakdown(as_all_attention(SOPHIA), 4096, dtype="bf16")
    assert 1 - breakdown.cache_bytes / baseline.cache_bytes > 0.95


def test_kimi_linear_mla_cache_is_8064_bytes_per_token_in_bf16():
    assert KIMI_LINEAR_48B_A3B.count("kda") == 20 and KIMI_LINEAR_48B_A3B.count("mla") == 7
    mla_layers = [i + 1 for i, k in enumerate(KIMI_LINEAR_48B_A3B.layer_pattern) if k == "mla"]
    assert mla_layers == [4, 8, 12, 16, 20, 24, 27]
    assert cache_bytes_per_token(KIMI_LINEAR_48B_A3B, "bf16") == 7 * 576 * 2 == 8_064
    per_million = cache_breakdown(KIMI_LINEAR_48B_A3B, 2**20, dtype="bf16").cache_bytes
    assert per_million == 8_064 * 2**20
    assert format_bytes(per_million) == "8.5 GB (7.9 GiB)"


def test_kimi_linear_kda_state_is_10_5_million_numbers_40_mib_in_fp32():
    numbers = KIMI_LINEAR_48B_A3B.count("kda") * layer_numbers(
        "kda", KIMI_LINEAR_48B_A3B, 1
    ).state
    assert numbers == 20 * 32 * 128 * 128 == 10_485_760
    fp32 = cache_breakdown(KIMI_LINEAR_48B_A3B, 1, dtype="bf16", state_dtype="fp32")
    assert fp32.state_bytes == 40 * 2**20


def test_deepseek_v3_caches_576_numbers_per_token_per_layer():
    assert layer_numbers("mla", DEEPSEEK_V3, 1).cache == 576
    one_layer = cache_breakdown(DEEPSEEK_V3, 1, dtype="bf16").layers[0]
    assert one_layer.cache_bytes == 1_152
    assert cache_bytes_per_token(DEEPSEEK_V3, "bf16") == 70_272 == 61 * 1_152
    # against multi-head attention with 128 heads × 128 (DeepSeek-V2 Table 1): 2·128·128
    assert layer_numbers("attn", as_all_attention(DEEPSEEK_V3), 1).cache == 32_768


def test_llama3_8b_kv_cache_is_128_kib_per_token():
    assert cache_bytes_per_token(LLAMA3_8B, "bf16") == 2 * 32 * 8 * 128 * 2 == 131_072
    assert cache_bytes_per_token(LLAMA3_8B, torch.bfloat16) == 131_072
    assert cache_bytes_per_token(LLAMA3_8B, "fp8") == 65_536
    assert cache_bytes_per_token(LLAMA3_8B, torch.float32) == 262_144
    # GQA keeps 8 of 32 heads: a quarter of the multi-head cache
    assert cache_bytes_per_token(as_all_attention(LLAMA3_8B), "bf16") == 4 * 131_072


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(PRESETS)),
    context=st.integers(1, 10**6),
    batch=st.integers(1, 64),
    dtype=st.sampled_from(["bf16", "fp16", "fp32", "fp8"]),
)
def test_cache_grows_linearly_with_context_and_batch(name, context, batch, dtype):
    config = PRESETS[name]
    one = cache_breakdown(config, 1, dtype=dtype)
    many = cache_breakdown(config, context, batch=batch, dtype=dtype)
    assert many.cache_bytes == batch * context * one.cache_bytes
    assert many.state_bytes == batch * one.state_bytes
    assert many.conv_bytes == batch * one.conv_bytes
    assert sum(many.bytes_by_layer()) == many.total_bytes == sum(many.bytes_by_kind().values())
    assert len(many.layers) == config.n_layers
    assert [x.kind for x in many.layers] == list(config.layer_pattern)


def test_as_all_attention_keeps_the_size_and_drops_mla():
    base = as_all_attention(SOPHIA)
    assert base.layer_pattern == ("attn",) * 28
    assert (base.n_heads, base.head_dim, base.n_kv_heads, base.mla) == (16, 96, 16, None)
    assert base.d_model == SOPHIA.d_model and base.name != SOPHIA.name
    assert as_all_attention(LLAMA3_8B).n_kv_heads == 32


def test_dtypes_by_name_and_by_torch_dtype():
    assert [bytes_per_element(d) for d in ("bf16", "fp16", "fp32", "fp8", "fp64")] == [
        2, 2, 4, 1, 8
    ]
    assert dtype_name(torch.bfloat16) == "bf16"
    assert dtype_name(torch.float16) == "fp16"
    assert dtype_name(torch.float32) == "fp32"
    assert dtype_name(torch.float8_e4m3fn) == dtype_name(torch.float8_e5m2) == "fp8"
    assert dtype_name(torch.float64) == "fp64"
    assert dtype_name("float32") == dtype_name("FP32") == "fp32"
    assert dtype_name("bfloat16") == "bf16"
    breakdown = cache_breakdown(SOPHIA_NANO, 10, dtype=torch.float32, state_dtype=torch.float64)
    assert (breakdown.dtype, breakdown.state_dtype) == ("fp32", "fp64")


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1_000, "1.0 kB (1.0 KiB)"),
        (8_064, "8.1 kB (7.9 KiB)"),
        (131_072, "131.1 kB (128.0 KiB)"),
        (704_643_072, "704.6 MB (672.0 MiB)"),
        (40 * 2**20, "41.9 MB (40.0 MiB)"),
        (2**40, "1.1 TB (1.0 TiB)"),
    ],
)
def test_format_bytes_shows_decimal_and_binary_units(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("bad", [-1, 1.5, "12", True, None])
def test_format_bytes_rejects_non_byte_counts(bad):
    with pytest.raises(ValueError, match="n: expected"):
        format_bytes(bad)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="dtype: expected one of"):
        cache_breakdown(SOPHIA, 10, dtype="int3")
    with pytest.raises(ValueError, match="dtype: expected float64, float32, bfloat16"):
        dtype_name(torch.int64)
    with pytest.raises(ValueError, match="dtype: expected float64, float32, bfloat16"):
        dtype_name(torch.complex64)
    with pytest.raises(ValueError, match="dtype: expected a dtype name"):
        dtype_name(2)
    with pytest.raises(ValueError, match="context: expected an integer >= 0"):
        cache_breakdown(SOPHIA, -1)
    with pytest.raises(ValueError, match="context: expected an integer >= 0"):
        layer_numbers("kda", SOPHIA, 2.5)
    with pytest.raises(ValueError, match="batch: expected a positive integer"):
        cache_breakdown(SOPHIA, 10, batch=0)
    with pytest.raises(ValueError, match="config: expected a ModelConfig"):
        cache_breakdown({"layers": 28}, 10)
    with pytest.raises(ValueError, match="kind: expected one of"):
        layer_numbers("rnn", SOPHIA, 10)
    with pytest.raises(ValueError, match="Llama-3-8B has no dimensions for 'mla' layers"):
        layer_numbers("mla", LLAMA3_8B, 10)
    with pytest.raises(ValueError, match="no dimensions for 'mamba2' layers"):
        layer_numbers("mamba2", SOPHIA, 10)


def test_at_context_0_only_the_fixed_part_is_kept():
    empty = cache_breakdown(SOPHIA, 0, dtype="bf16", state_dtype="fp32")
    assert empty.cache_bytes == 0
    assert empty.state_bytes == cache_breakdown(SOPHIA, 4096, state_dtype="fp32").state_bytes
    assert empty.conv_bytes == 21 * 3 * 3 * 16 * 96 * 2


def test_breakdown_prints_a_table():
    text = str(cache_breakdown(SOPHIA, 4096))
    assert "Sophia" in text and "4096 tokens" in text and "kda" in text and "mla" in text
    assert format_bytes(cache_breakdown(SOPHIA, 4096).total_bytes) in text


def test_4_bit_caches_count_half_a_byte_a_number_rounded_up_per_tensor():
    assert [bits_per_element(d) for d in ("int4", "fp4", "fp8", "bf16")] == [4, 4, 8, 16]
    assert tensor_bytes(3, "int4") == 2 and tensor_bytes(4, "fp4") == 2
    assert tensor_bytes(3, "fp8") == 3 and tensor_bytes(0, "int4") == 0
    assert cache_bytes_per_token(LLAMA3_8B, "int4") == 32_768 == 131_072 // 4
    # Sophia's MLA layers: 432 numbers a token, 216 bytes in 4 bits, 7 layers
    assert cache_bytes_per_token(SOPHIA, "int4") == 7 * 216 == 1_512
    four = cache_breakdown(SOPHIA, 4096, dtype="int4", state_dtype="fp32")
    assert isinstance(four.total_bytes, int)
    assert four.cache_bytes == 7 * 432 * 4096 // 2
    assert format_bytes(four.total_bytes)
    # an odd count per tensor: one 3-number conv row per layer rounds up to 2 bytes
    assert cache_breakdown(SOPHIA_NANO, 1, dtype="int4").conv_bytes == (
        SOPHIA_NANO.count("kda") * tensor_bytes(3 * 3 * 2 * 32, "int4"))


def test_bytes_per_element_refuses_a_4_bit_format_and_tensor_bytes_bad_counts():
    with pytest.raises(ValueError, match="dtype: int4 takes 4 bits"):
        bytes_per_element("int4")
    with pytest.raises(ValueError, match="numbers"):
        tensor_bytes(-1, "bf16")
    with pytest.raises(ValueError, match="numbers"):
        tensor_bytes(2.5, "bf16")
