"""Tests of attnlab.mla: multi-head latent attention against a per-head loop of the DeepSeek-V2
equations, the absorbed path against the naive one, latent-cache decoding, NoPE, and sizes."""

from __future__ import annotations

import math

import pytest
import torch
from attnlab.mla import LatentCache, MultiHeadLatentAttention, mla_cache_elements_per_token
from conftest import assert_close, decode_in_pieces, randn
from hypothesis import given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=20, deadline=None)


def make_mla(dtype=torch.float64, seed=0, d_model=16, n_heads=2, head_dim=4, kv_lora_rank=6,
             qk_rope_head_dim=4, **kw) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    layer = MultiHeadLatentAttention(d_model, n_heads, head_dim, kv_lora_rank=kv_lora_rank,
                                     qk_rope_head_dim=qk_rope_head_dim, **kw).to(dtype)
    with torch.no_grad():  # non-trivial RMSNorm gains, so the norms are exercised
        layer.kv_norm.weight.uniform_(0.5, 1.5)
        if layer.q_lora_rank is not None:
            layer.q_norm.weight.uniform_(0.5, 1.5)
    return layer


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm written out: x / sqrt(mean(x²) + eps) · weight (DeepSeek-V3's eps)."""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate(x: torch.Tensor, position: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE of one vector, written out pair by pair (interleaved pairs)."""
    out = x.clone()
    for p in range(x.shape[0] // 2):
        theta = position * base ** (-2 * p / x.shape[0])
        c, s = math.cos(theta), math.sin(theta)
        out[2 * p] = c * x[2 * p] - s * x[2 * p + 1]
        out[2 * p + 1] = s * x[2 * p] + c * x[2 * p + 1]
    return out


def reference_mla(layer: MultiHeadLatentAttention, x: torch.Tensor) -> torch.Tensor:
    """The MLA equations per batch, token and head: c_j = RMSNorm(W^DKV h_j),
    [q^C; q^R] = W^Q h (or W^UQ RMSNorm(W^DQ h)), k_{j,i} = [W^UK_i c_j; k^R_j],
    v_{j,i} = W^UV_i c_j, o_{t,i} = Σ_j softmax_j(q_{t,i}·k_{j,i} / sqrt(d_h + d_h^R)) v_{j,i},
    u_t = W^O [o_{t,i}]."""
    b_, t_, _ = x.shape
    h_, dh, dr, dv = layer.n_heads, layer.head_dim, layer.qk_rope_head_dim, layer.v_head_dim
    if layer.q_lora_rank is None:
        q_all = x @ layer.w_q.weight.T
    else:
        q_all = rms_norm(x @ layer.w_dq.weight.T, layer.q_norm.weight) @ layer.w_uq.weight.T
    c = rms_norm(x @ layer.w_dkv.weight.T, layer.kv_norm.weight)
    k_rope = layer.w_kr(x)
    w_uk, w_uv = layer.w_uk.weight, layer.w_uv.weight
    o = torch.zeros(b_, t_, h_ * dv, dtype=x.dtype)
    for b in range(b_):
        for t in range(t_):
            for i in range(h_):
                q = q_all[b, t, i * (dh + dr) : (i + 1) * (dh + dr)]
                q_c, q_r = q[:dh], q[dh:]
                if layer.rope:
                    q_r = rotate(q_r, t)
                scores, values = [], []
                for j in range(t + 1):
                    k_c = w_uk[i * dh : (i + 1) * dh] @ c[b, j]
                    k_r = rotate(k_rope[b, j], j) if layer.rope else k_rope[b, j]
                    scores.append((q_c @ k_c + q_r @ k_r) / math.sqrt(dh + dr))
                    values.append(w_uv[i * dv : (i + 1) * dv] @ c[b, j])
                p = torch.softmax(torch.stack(scores), dim=0)
                o[b, t, i * dv : (i + 1) * dv] = p @ torch.stack(values)
    return layer.w_o(o)


# ---------------------------------------------------------------- equations


@pytest.mark.parametrize("rope", [True, False])
@pytest.mark.parametrize("q_lora_rank", [None, 5])
@pytest.mark.parametrize("absorb", [False, True])
def test_mla_matches_per_head_loop_of_the_equations(rope, q_lora_rank, absorb):
    layer = make_mla(rope=rope, q_lora_rank=q_lora_rank, v_head_dim=3)
    x = randn(2, 5, 16, seed=1)
    with torch.no_grad():
        y, _ = layer(x, absorb=absorb)
        assert_close(y, reference_mla(layer, x))


@SETTINGS
@given(n_heads=st.integers(1, 3), head_dim=st.integers(1, 5), kv_lora_rank=st.integers(1, 7),
       qk_rope_head_dim=st.sampled_from([2, 4]), v_head_dim=st.sampled_from([None, 3]),
       q_lora_rank=st.sampled_from([None, 4]), rope=st.booleans(), t=st.integers(1, 9),
       dtype=st.sampled_from([torch.float32, torch.float64]), seed=st.integers(0, 1000))
def test_absorbed_path_equals_naive_path(n_heads, head_dim, kv_lora_rank, qk_rope_head_dim,
                                         v_head_dim, q_lora_rank, rope, t, dtype, seed):
    layer = make_mla(dtype, seed, 12, n_heads, head_dim, kv_lora_rank, qk_rope_head_dim,
                     v_head_dim=v_head_dim, q_lora_rank=q_lora_rank, rope=rope)
    x = randn(2, t, 12, dtype=dtype, seed=seed)
    with torch.no_grad():
        assert_close(layer(x, absorb=True)[0], layer(x, absorb=False)[0])


# ---------------------------------------------------------------- decoding with the latent cache


@pytest.mark.parametrize("rope", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_token_by_token_decoding_equals_full_pass_and_paths_agree_at_every_step(rope, dtype):
    layer = make_mla(dtype, rope=rope, q_lora_rank=5)
    x = randn(2, 8, 16, dtype=dtype, seed=3)
    with torch.no_grad():
        full, no_cache = layer(x)
        assert no_cache is None
        naive_cache = absorbed_cache = None
        for t in range(8):
            y_naive, naive_cache = layer(x[:, t : t + 1], naive_cache, use_cache=True)
            y_absorbed, absorbed_cache = layer(x[:, t : t + 1], absorbed_cache, use_cache=True,
                                               absorb=True)
            assert_close(y_absorbed, y_naive)
            assert_close(y_naive, full[:, t : t + 1])
    assert naive_cache.length == absorbed_cache.length == 8
    assert torch.equal(naive_cache.c_kv, absorbed_cache.c_kv)


@SETTINGS
@given(cuts=st.lists(st.integers(1, 11), max_size=4, unique=True).map(sorted),
       absorb=st.booleans(), rope=st.booleans(), seed=st.integers(0, 100))
def test_any_prefill_split_equals_full_pass(cuts, absorb, rope, seed):
    layer = make_mla(seed=seed, rope=rope)
    x = randn(1, 12, 16, seed=seed)
    with torch.no_grad():
        full, _ = layer(x)
        pieces, cache = decode_in_pieces(layer, x, cuts, absorb=absorb)
    assert_close(pieces, full)
    assert cache.length == 12


def test_output_at_t_ignores_future_inputs():
    layer = make_mla()
    x = randn(1, 9, 16, seed=4)
    x2 = x.clone()
    x2[:, 5:] += randn(1, 4, 16, seed=8)
    with torch.no_grad():
        y, y2 = layer(x)[0], layer(x2)[0]
    assert_close(y2[:, :5], y[:, :5])
    assert (y2[:, 5:] - y[:, 5:]).abs().max() > 1e-3


# ---------------------------------------------------------------- NoPE and RoPE


@pytest.mark.parametrize("rope", [True, False])
def test_cache_holds_normed_latent_and_rope_key_rotated_only_with_rope(rope):
    layer = make_mla(rope=rope)
    x = randn(2, 5, 16, seed=5)
    with torch.no_grad():
        _, cache = layer(x, use_cache=True)
        assert_close(cache.c_kv, rms_norm(layer.w_dkv(x), layer.kv_norm.weight))
        k_rope = layer.w_kr(x)
        if rope:
            expected = torch.stack([torch.stack([rotate(k_rope[b, t], t) for t in range(5)])
                                    for b in range(2)])
        else:
            expected = k_rope
        assert_close(cache.k_rope, expected)


def test_nope_last_output_ignores_the_order_of_the_prefix_but_rope_does_not():
    x = randn(1, 7, 16, seed=6)
    shuffled = torch.cat([x[:, [3, 0, 5, 1, 4, 2]], x[:, 6:]], dim=1)
    with torch.no_grad():
        nope, rope = make_mla(rope=False), make_mla(rope=True)
        assert_close(nope(shuffled)[0][:, -1], nope(x)[0][:, -1])
        assert (rope(shuffled)[0][:, -1] - rope(x)[0][:, -1]).abs().max() > 1e-6


def test_odd_rope_dim_is_fine_without_rope():
    layer = make_mla(qk_rope_head_dim=3, rope=False)
    y, _ = layer(randn(1, 4, 16))
    assert y.shape == (1, 4, 16)


# ---------------------------------------------------------------- sizes


def test_cache_elements_per_token():
    assert mla_cache_elements_per_token(512, 64) == 576  # DeepSeek-V3 and Kimi Linear
    # Kimi-Linear-48B: 7 MLA layers in bf16 (Notation appendix §8)
    assert 7 * mla_cache_elements_per_token(512, 64) * 2 == 8_064


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_latent_cache_bytes_grow_linearly_and_match_formula(dtype):
    layer = make_mla(dtype, kv_lora_rank=6, qk_rope_head_dim=4)
    b, element = 2, torch.finfo(dtype).bits // 8
    cache, sizes = None, []
    with torch.no_grad():
        for t in range(1, 7):
            _, cache = layer(randn(b, 1, 16, dtype=dtype, seed=t), cache, use_cache=True)
            sizes.append(cache.num_bytes())
            assert cache.num_bytes() == b * t * mla_cache_elements_per_token(6, 4) * element
    assert {y - x for x, y in zip(sizes, sizes[1:], strict=False)} == {b * 10 * element}


def test_latent_cache_append_and_length():
    c, r = randn(1, 3, 6), randn(1, 3, 4)
    cache = LatentCache(c, r)
    c_all, r_all = cache.append(randn(1, 2, 6, seed=1), randn(1, 2, 4, seed=2))
    assert cache.length == 5
    assert torch.equal(c_all[:, :3], c) and torch.equal(r_all[:, :3], r)


# ---------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: make_mla(qk_rope_head_dim=3), "qk_rope_head_dim"),
        (lambda: make_mla(kv_lora_rank=0), "kv_lora_rank"),
        (lambda: make_mla(q_lora_rank=0), "q_lora_rank"),
        (lambda: make_mla(v_head_dim=-1), "v_head_dim"),
        (lambda: make_mla()(randn(1, 3, 15)), "x"),
        (lambda: make_mla()(randn(1, 3, 16, dtype=torch.float32)), "x"),
        (lambda: make_mla()(randn(3, 16)), "x"),
        (lambda: make_mla()(randn(1, 3, 16), cache=(1, 2)), "cache"),
        (lambda: make_mla()(randn(2, 1, 16), LatentCache(randn(1, 3, 6), randn(1, 3, 4))),
         "cache"),
        (lambda: make_mla()(randn(1, 1, 16), LatentCache(randn(1, 3, 6), randn(1, 3, 2))),
         "cache"),
        (lambda: make_mla()(randn(1, 1, 16), LatentCache(randn(1, 3, 6).float(),
                                                         randn(1, 3, 4).float())), "cache"),
        (lambda: LatentCache(randn(1, 3, 6), randn(1, 3, 4)).append(randn(2, 1, 6),
                                                                    randn(2, 1, 4)), "c_kv_new"),
        (lambda: LatentCache(randn(1, 3, 6), randn(1, 3, 4)).append(randn(1, 1, 6),
                                                                    randn(1, 1, 2)), "k_rope_new"),
        (lambda: LatentCache(randn(1, 3, 6), randn(1, 2, 4)), "k_rope"),
        (lambda: LatentCache(randn(3, 6), randn(1, 3, 4)), "c_kv"),
        (lambda: mla_cache_elements_per_token(0, 64), "kv_lora_rank"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_mla_on_no_tokens_names_x():
    with pytest.raises(ValueError, match=r"^x: expected at least one token"):
        make_mla()(torch.zeros(1, 0, 16, dtype=torch.float64))
