"""Tests of attnlab.kv_cache: the cache object, its size formula, and cached decoding that
reproduces the full causal pass."""

from __future__ import annotations

import pytest
import torch
from attnlab.attention import softmax_attention
from attnlab.kv_cache import KVCache, decode_with_cache, kv_cache_bytes
from conftest import assert_close, randn
from hypothesis import given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=20, deadline=None)
DTYPES = st.sampled_from([torch.float32, torch.float64])


# ---------------------------------------------------------------- the cache object


def test_append_returns_the_whole_history_and_length_counts_tokens():
    k0, v0 = randn(2, 3, 4, 5, seed=1), randn(2, 3, 4, 7, seed=2)
    cache = KVCache(k0, v0)
    assert cache.length == 4
    k1, v1 = randn(2, 3, 2, 5, seed=3), randn(2, 3, 2, 7, seed=4)
    k, v = cache.append(k1, v1)
    assert cache.length == 6
    assert torch.equal(k, torch.cat([k0, k1], dim=2))
    assert torch.equal(v, torch.cat([v0, v1], dim=2))
    assert k is cache.k and v is cache.v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_num_bytes_grows_linearly_with_t_and_equals_formula(dtype):
    b, h, d = 1, 3, 8
    cache = KVCache(randn(b, h, 0, d, dtype=dtype), randn(b, h, 0, d, dtype=dtype))
    sizes = [cache.num_bytes()]
    for t in range(1, 8):
        cache.append(randn(b, h, 1, d, dtype=dtype, seed=t), randn(b, h, 1, d, dtype=dtype))
        sizes.append(cache.num_bytes())
        element = torch.finfo(dtype).bits // 8
        assert cache.num_bytes() == kv_cache_bytes(1, h, d, t, element)
    assert sizes[0] == 0
    assert {b - a for a, b in zip(sizes, sizes[1:], strict=False)} == {2 * h * d * element}


def test_kv_cache_bytes_for_sophia_as_full_attention():
    # Notation appendix §11: 28 layers × 2 × 16 heads × 96 × 4096 tokens × 2 bytes (bf16)
    assert kv_cache_bytes(28, 16, 96, 4096, 2) == 704_643_072
    # DeepSeek-V2 Table 1: MHA caches 2·n_h·d_h elements per token per layer
    assert kv_cache_bytes(1, 128, 128, 1, 1) == 32_768
    # 4-bit: half a byte a number, each layer's K and V rounded up to whole bytes
    assert kv_cache_bytes(28, 16, 96, 4096, 0.5) == 704_643_072 // 4
    assert kv_cache_bytes(1, 1, 3, 1, 0.5) == 2 * 2
    assert isinstance(kv_cache_bytes(32, 8, 128, 1, 2), int)


# ---------------------------------------------------------------- cached decoding


@SETTINGS
@given(b=st.integers(1, 2), h=st.integers(1, 3), t=st.integers(1, 20), dk=st.integers(1, 6),
       dv=st.integers(1, 6), dtype=DTYPES, scale=st.sampled_from([None, 0.7]),
       seed=st.integers(0, 10_000))
def test_decoding_with_cache_equals_full_causal_pass(b, h, t, dk, dv, dtype, scale, seed):
    q = randn(b, h, t, dk, dtype=dtype, seed=seed) * 2
    k = randn(b, h, t, dk, dtype=dtype, seed=seed + 1) * 2
    v = randn(b, h, t, dv, dtype=dtype, seed=seed + 2)
    full, _ = softmax_attention(q, k, v, causal=True, scale=scale)
    assert_close(decode_with_cache(q, k, v, scale=scale), full)


def test_decoding_is_not_the_non_causal_pass():
    q, k, v = randn(1, 1, 6, 4, seed=1), randn(1, 1, 6, 4, seed=2), randn(1, 1, 6, 4, seed=3)
    non_causal, _ = softmax_attention(q, k, v, causal=False)
    assert (decode_with_cache(q, k, v) - non_causal).abs().max() > 1e-3


# ---------------------------------------------------------------- bad inputs

K = randn(1, 2, 3, 4)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: KVCache(randn(2, 3, 4), K), "k"),
        (lambda: KVCache(K, randn(1, 2, 4, 4)), "v"),
        (lambda: KVCache(K, K.float()), "v"),
        (lambda: KVCache(K, K).append(randn(1, 3, 1, 4), randn(1, 3, 1, 4)), "k_new"),
        (lambda: KVCache(K, K).append(randn(1, 2, 1, 5), randn(1, 2, 1, 4)), "k_new"),
        (lambda: KVCache(K, K).append(randn(1, 2, 1, 4), randn(1, 2, 2, 4)), "v_new"),
        (lambda: KVCache(K, K).append(randn(1, 2, 1, 4).float(), randn(1, 2, 1, 4)), "k_new"),
        (lambda: decode_with_cache(K, randn(1, 2, 4, 4), K), "k"),
        (lambda: decode_with_cache(K, K, randn(1, 2, 3)), "v"),
        (lambda: decode_with_cache(K, K.float(), K), "k"),
        (lambda: decode_with_cache(K[:, :, :0], K[:, :, :0], K[:, :, :0]), "q"),
        (lambda: decode_with_cache(K, K, K.clone().fill_(float("nan"))), "v"),
        (lambda: decode_with_cache(K, K, K, scale="big"), "scale"),
        (lambda: kv_cache_bytes(0, 16, 96, 4096, 2), "n_layers"),
        (lambda: kv_cache_bytes(28, 16, 96.5, 4096, 2), "head_dim"),
        (lambda: kv_cache_bytes(28, 16, 96, 4096, -2), "bytes_per_element"),
        (lambda: kv_cache_bytes(28, 16, 96, 4096, 0.3), "bytes_per_element"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()
