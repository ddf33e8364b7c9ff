"""Tests of attnlab.attention: softmax, scores, mask, softmax attention (full and online),
split/merge heads, RoPE and the multi-head attention layer with its KV cache."""

from __future__ import annotations

import math

import pytest
import torch
from attnlab.attention import (
    MultiHeadAttention,
    apply_rope,
    attention_scores,
    causal_mask,
    head_attention_weights,
    merge_heads,
    naive_softmax,
    repeat_kv_heads,
    rope_angles,
    softmax_attention,
    softmax_attention_online,
    split_heads,
    stable_softmax,
)
from attnlab.kv_cache import KVCache, kv_cache_bytes
from conftest import assert_close, decode_in_pieces, randn
from hypothesis import given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=20, deadline=None)
DTYPES = st.sampled_from([torch.float32, torch.float64])


def reference_attention(q, k, v, causal, scale):
    """Direct per-row loop: o_i = Σ_{j allowed} softmax_j(s q_i·k_j) v_j."""
    b_, h_, t_q, _ = q.shape
    t_k = k.shape[2]
    o = torch.zeros(b_, h_, t_q, v.shape[3], dtype=q.dtype)
    for b in range(b_):
        for h in range(h_):
            for i in range(t_q):
                n = (t_k - t_q + i + 1) if causal else t_k
                scores = torch.stack([scale * torch.dot(q[b, h, i], k[b, h, j]) for j in range(n)])
                weights = torch.softmax(scores, dim=0)
                o[b, h, i] = sum(weights[j] * v[b, h, j] for j in range(n))
    return o


# ---------------------------------------------------------------- softmax


@SETTINGS
@given(seed=st.integers(0, 10_000), magnitude=st.sampled_from([1.0, 30.0, 1e3, 1e5]),
       dtype=DTYPES)
def test_stable_softmax_equals_torch_softmax(seed, magnitude, dtype):
    x = randn(3, 7, dtype=dtype, seed=seed) * magnitude
    out = stable_softmax(x, dim=-1)
    assert torch.isfinite(out).all()
    assert_close(out, torch.softmax(x, dim=-1))
    assert_close(stable_softmax(x, dim=0), torch.softmax(x, dim=0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stable_softmax_survives_huge_inputs_where_naive_overflows(dtype):
    x = torch.tensor([1000.0, 1001.0], dtype=dtype)
    stable = stable_softmax(x)
    e = math.e
    assert_close(stable, torch.tensor([1 / (1 + e), e / (1 + e)], dtype=dtype))
    naive = naive_softmax(x)
    assert not torch.isfinite(naive).all()  # exp(1000) = inf, inf / inf = nan


def test_naive_softmax_is_right_on_small_inputs():
    x = randn(4, 5)
    assert_close(naive_softmax(x), torch.softmax(x, dim=-1))


def test_stable_softmax_gives_masked_entries_zero_weight():
    x = torch.tensor([[0.5, float("-inf"), 2.0]], dtype=torch.float64)
    out = stable_softmax(x)
    assert out[0, 1] == 0
    assert_close(out[:, [0, 2]], torch.softmax(x[:, [0, 2]], dim=-1))


# ---------------------------------------------------------------- scores and mask


def test_attention_scores_are_scaled_dot_products():
    q, k = randn(2, 3, 4, 8, seed=1), randn(2, 3, 5, 8, seed=2)
    s = attention_scores(q, k)
    assert s.shape == (2, 3, 4, 5)
    assert_close(s[1, 2, 3, 4], torch.dot(q[1, 2, 3], k[1, 2, 4]) / math.sqrt(8))
    assert_close(attention_scores(q, k, scale=0.5), 0.5 * (q @ k.transpose(-2, -1)))


def test_causal_mask_square_is_lower_triangle():
    expected = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    assert torch.equal(causal_mask(5, 5), expected)


def test_causal_mask_with_fewer_queries_sits_at_the_end():
    # queries at positions 2 and 3 of 4 keys
    expected = torch.tensor([[True, True, True, False], [True, True, True, True]])
    assert torch.equal(causal_mask(2, 4), expected)
    assert causal_mask(1, 6).all()


def test_causal_mask_rejects_more_queries_than_keys():
    with pytest.raises(ValueError, match="t_q"):
        causal_mask(3, 2)


# ---------------------------------------------------------------- softmax attention


@SETTINGS
@given(b=st.integers(1, 2), h=st.integers(1, 3), t_q=st.integers(1, 6), extra=st.integers(0, 3),
       dk=st.integers(1, 5), dv=st.integers(1, 5), causal=st.booleans(), dtype=DTYPES,
       scale=st.sampled_from([None, 0.3]), seed=st.integers(0, 10_000))
def test_softmax_attention_equals_per_row_loop(b, h, t_q, extra, dk, dv, causal, dtype, scale,
                                               seed):
    t_k = t_q + extra
    q = randn(b, h, t_q, dk, dtype=dtype, seed=seed)
    k = randn(b, h, t_k, dk, dtype=dtype, seed=seed + 1)
    v = randn(b, h, t_k, dv, dtype=dtype, seed=seed + 2)
    o, none = softmax_attention(q, k, v, causal=causal, scale=scale)
    assert none is None
    s = 1 / math.sqrt(dk) if scale is None else scale
    assert_close(o, reference_attention(q, k, v, causal, s))


def test_softmax_attention_returns_weights_on_request():
    q, k, v = randn(1, 2, 6, 4, seed=1), randn(1, 2, 6, 4, seed=2), randn(1, 2, 6, 3, seed=3)
    o, weights = softmax_attention(q, k, v, return_weights=True)
    assert weights.shape == (1, 2, 6, 6)
    assert_close(weights.sum(-1), torch.ones(1, 2, 6, dtype=torch.float64))
    assert (weights.triu(diagonal=1) == 0).all()
    assert_close(o, weights @ v)


@SETTINGS
@given(t=st.integers(1, 150), block_size=st.integers(1, 64), causal=st.booleans(),
       extra=st.sampled_from([0, 0, 5]), dtype=DTYPES, seed=st.integers(0, 10_000))
def test_online_softmax_equals_full(t, block_size, causal, extra, dtype, seed):
    t_q = max(1, t - extra)
    q = randn(2, 2, t_q, 8, dtype=dtype, seed=seed) * 3
    k = randn(2, 2, t, 8, dtype=dtype, seed=seed + 1) * 3
    v = randn(2, 2, t, 5, dtype=dtype, seed=seed + 2)
    expected, _ = softmax_attention(q, k, v, causal=causal)
    o, state = softmax_attention_online(q, k, v, causal=causal, block_size=block_size)
    assert state is None
    assert_close(o, expected)


@pytest.mark.parametrize("online", [False, True])
def test_output_at_t_ignores_future_tokens(online):
    t, cut = 12, 7
    q, k, v = randn(2, 3, t, 4, seed=1), randn(2, 3, t, 4, seed=2), randn(2, 3, t, 4, seed=3)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    for x in (q2, k2, v2):
        x[:, :, cut:] += 10 * randn(2, 3, t - cut, 4, seed=4)

    def attend(q, k, v):
        if online:
            return softmax_attention_online(q, k, v, block_size=5)[0]
        return softmax_attention(q, k, v)[0]

    o, o2 = attend(q, k, v), attend(q2, k2, v2)
    assert_close(o2[:, :, :cut], o[:, :, :cut])
    assert (o2[:, :, cut:] - o[:, :, cut:]).abs().max() > 1e-3  # the future does change


# ---------------------------------------------------------------- heads


@SETTINGS
@given(b=st.integers(1, 3), t=st.integers(1, 5), h=st.integers(1, 4), d=st.integers(1, 5))
def test_split_merge_round_trip(b, t, h, d):
    x = randn(b, t, h * d)
    heads = split_heads(x, h)
    assert heads.shape == (b, h, t, d)
    assert torch.equal(heads[b - 1, h - 1, t - 1], x[b - 1, t - 1, (h - 1) * d : h * d])
    assert torch.equal(merge_heads(heads), x)


def test_repeat_kv_heads_groups_consecutive_query_heads():
    kv = randn(1, 2, 3, 4)
    rep = repeat_kv_heads(kv, 3)
    assert rep.shape == (1, 6, 3, 4)
    for h in range(6):
        assert torch.equal(rep[:, h], kv[:, h // 3])


# ---------------------------------------------------------------- RoPE


def test_rope_angles_values():
    angles = rope_angles(torch.tensor([0, 1, 5]), dim=6, base=100.0)
    expected = torch.tensor([[m * 100.0 ** (-2 * i / 6) for i in range(3)] for m in (0, 1, 5)],
                            dtype=torch.float64)
    assert_close(angles, expected)


def test_rope_matches_complex_rotation_of_interleaved_pairs():
    x = randn(2, 3, 5, 8, seed=3)
    positions = torch.tensor([0, 3, 7, 100, 4096])
    rotated = apply_rope(x, positions)
    pairs = torch.complex(x[..., 0::2], x[..., 1::2])
    angles = rope_angles(positions, 8)
    turned = pairs * torch.polar(torch.ones_like(angles), angles)  # z · e^{iθ}
    assert_close(rotated[..., 0::2], turned.real)
    assert_close(rotated[..., 1::2], turned.imag)


@SETTINGS
@given(dtype=DTYPES, seed=st.integers(0, 10_000), base=st.sampled_from([10.0, 10000.0]))
def test_rope_preserves_norm_and_position_zero_is_identity(dtype, seed, base):
    x = randn(2, 2, 6, 8, dtype=dtype, seed=seed)
    positions = torch.tensor([0, 1, 2, 50, 999, 123456])
    rotated = apply_rope(x, positions, base)
    assert rotated.dtype == dtype
    assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert torch.equal(rotated[:, :, 0], x[:, :, 0])
    assert (rotated[:, :, 1:] - x[:, :, 1:]).abs().max() > 1e-3


@SETTINGS
@given(m=st.integers(0, 2000), n=st.integers(0, 2000), shift=st.integers(-500, 5000),
       seed=st.integers(0, 10_000))
def test_rope_dot_product_depends_only_on_offset(m, n, shift, seed):
    q, k = randn(1, 1, 1, 16, seed=seed), randn(1, 1, 1, 16, seed=seed + 1)

    def score(a, b):
        rq = apply_rope(q, torch.tensor([a]))
        rk = apply_rope(k, torch.tensor([b]))
        return (rq * rk).sum()

    shift = max(shift, -min(m, n))  # keep positions >= 0
    assert_close(score(m + shift, n + shift), score(m, n))


def test_rope_dot_product_changes_with_offset():
    q, k = randn(1, 1, 1, 16, seed=1), randn(1, 1, 1, 16, seed=2)
    scores = [(apply_rope(q, torch.tensor([d])) * k).sum().item() for d in range(4)]
    assert len({round(s, 6) for s in scores}) == 4


# ---------------------------------------------------------------- the layer


def make_mha(n_kv_heads=None, rope=True, dtype=torch.float64, seed=0, **kw):
    torch.manual_seed(seed)
    return MultiHeadAttention(16, 4, 6, n_kv_heads=n_kv_heads, rope=rope, **kw).to(dtype)

@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
@pytest.mark.parametrize("rope", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mha_token_by_token_decoding_equals_full_pass(n_kv_heads, rope, dtype):
    layer = make_mha(n_kv_heads, rope, dtype)
    x = randn(2, 9, 16, dtype=dtype, seed=5)
    full, no_cache = layer(x)
    assert no_cache is None
    stepped, cache = decode_in_pieces(layer, x, list(range(1, 9)))
    assert_close(stepped, full)
    assert cache.length == 9
    assert cache.k.shape == (2, n_kv_heads or 4, 9, 6)


@SETTINGS
@given(cuts=st.lists(st.integers(1, 13), max_size=4, unique=True).map(sorted),
       n_kv_heads=st.sampled_from([None, 2, 1]), seed=st.integers(0, 100))
def test_mha_any_prefill_split_equals_full_pass(cuts, n_kv_heads, seed):
    layer = make_mha(n_kv_heads, seed=seed)
    x = randn(1, 14, 16, seed=seed)
    full, _ = layer(x)
    pieces, _ = decode_in_pieces(layer, x, cuts)
    assert_close(pieces, full)


def test_gqa_equals_mha_with_replicated_kv_weights():
    gqa = make_mha(n_kv_heads=2)
    mha = make_mha()
    with torch.no_grad():
        mha.w_q.weight.copy_(gqa.w_q.weight)
        mha.w_o.weight.copy_(gqa.w_o.weight)
        for name in ("w_k", "w_v"):
            per_head = getattr(gqa, name).weight.view(2, 6, 16)
            getattr(mha, name).weight.copy_(per_head.repeat_interleave(2, dim=0).reshape(24, 16))
    x = randn(2, 7, 16, seed=3)
    assert_close(gqa(x)[0], mha(x)[0])


def test_mha_output_at_t_ignores_future_inputs():
    layer = make_mha(n_kv_heads=2)
    x = randn(1, 10, 16, seed=4)
    x2 = x.clone()
    x2[:, 6:] += randn(1, 4, 16, seed=9)
    y, y2 = layer(x)[0], layer(x2)[0]
    assert_close(y2[:, :6], y[:, :6])
    assert (y2[:, 6:] - y[:, 6:]).abs().max() > 1e-3


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_mha_cache_bytes_grow_linearly_and_match_formula(n_kv_heads):
    layer = make_mha(n_kv_heads, dtype=torch.float32)
    cache, sizes = None, []
    for t in range(1, 6):
        _, cache = layer(randn(1, 1, 16, dtype=torch.float32, seed=t), cache, use_cache=True)
        sizes.append(cache.num_bytes())
        assert sizes[-1] == kv_cache_bytes(1, n_kv_heads, 6, t, 4)
    assert len({b - a for a, b in zip(sizes, sizes[1:], strict=False)}) == 1


# ---------------------------------------------------------------- per-head weights


@pytest.mark.parametrize(("n_heads", "n_kv_heads", "rope"), [(4, 4, True), (4, 2, True),
                                                             (2, 1, False), (1, 1, True)])
def test_head_weights_reproduce_the_layer_output(n_heads, n_kv_heads, rope):
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, n_heads, 16 // n_heads, n_kv_heads=n_kv_heads,
                               rope=rope).double()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    weights = head_attention_weights(layer, x)
    assert weights.shape == (2, n_heads, 6, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, n_heads, 6, dtype=torch.float64))
    assert (weights.triu(1) == 0).all()  # causal: nothing above the diagonal
    v = repeat_kv_heads(split_heads(layer.w_v(x), n_kv_heads), n_heads // n_kv_heads)
    y = layer.w_o(merge_heads(weights @ v))
    torch.testing.assert_close(y, layer(x)[0], rtol=0, atol=1e-12)


def test_head_weights_reject_bad_inputs():
    layer = MultiHeadAttention(8, 2, 4)
    with pytest.raises(ValueError, match="^layer"):
        head_attention_weights(torch.nn.Linear(8, 8), torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="^x"):
        head_attention_weights(layer, torch.randn(1, 3, 7))


# ---------------------------------------------------------------- bad inputs

Q = randn(1, 2, 3, 4)
V = randn(1, 2, 3, 5)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: softmax_attention(Q[0], Q, V), "q"),
        (lambda: softmax_attention(Q, Q[:, :1], V), "k"),
        (lambda: softmax_attention(Q, Q, V[:, :, :2]), "v"),
        (lambda: softmax_attention(Q, Q.float(), V), "k"),
        (lambda: softmax_attention(Q, Q, V.float()), "v"),
        (lambda: softmax_attention(Q.int(), Q, V), "q"),
        (lambda: softmax_attention(Q, Q, V, scale="big"), "scale"),
        (lambda: softmax_attention(Q, Q[:, :, :2], V[:, :, :2]), "q"),
        (lambda: softmax_attention_online(Q, Q, V, block_size=0), "block_size"),
        (lambda: softmax_attention_online(Q, Q[..., :3], V), "k"),
        (lambda: attention_scores(Q, randn(1, 2, 3, 5)), "k"),
        (lambda: split_heads(randn(2, 3, 10), 4), "n_heads"),
        (lambda: split_heads(randn(2, 3, 10), 0), "n_heads"),
        (lambda: split_heads(randn(3, 10), 2), "x"),
        (lambda: merge_heads(randn(3, 10)), "x"),
        (lambda: apply_rope(randn(1, 2, 3, 5), torch.arange(3)), "x"),
        (lambda: apply_rope(Q, torch.arange(4)), "positions"),
        (lambda: apply_rope(Q, [0, 1, 2]), "positions"),
        (lambda: rope_angles(torch.arange(3), 7), "dim"),
        (lambda: MultiHeadAttention(16, 4, 5), "head_dim"),
        (lambda: MultiHeadAttention(16, 4, 6, n_kv_heads=3), "n_kv_heads"),
        (lambda: MultiHeadAttention(16, 0, 6), "n_heads"),
        (lambda: make_mha()(randn(1, 3, 15)), "x"),
        (lambda: make_mha()(randn(1, 3, 16, dtype=torch.float32)), "x"),
        (lambda: make_mha()(randn(16)), "x"),
        (lambda: make_mha()(randn(1, 3, 16), cache=(Q, Q)), "cache"),
        (lambda: make_mha()(randn(2, 3, 16), KVCache(randn(1, 4, 2, 6), randn(1, 4, 2, 6))),
         "cache"),
        (lambda: make_mha(n_kv_heads=2)(randn(1, 3, 16), KVCache(randn(1, 4, 2, 6),
                                                                 randn(1, 4, 2, 6))), "cache"),
        (lambda: make_mha()(randn(1, 3, 16), KVCache(randn(1, 4, 2, 6).float(),
                                                     randn(1, 4, 2, 6).float())), "cache"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_causal_attention_names_q_when_there_are_more_queries_than_keys():
    with pytest.raises(ValueError, match=r"^q: expected at most as many queries as keys"):
        softmax_attention(Q, Q[:, :, :2], V[:, :, :2])
    o, _ = softmax_attention(Q, Q[:, :, :2], V[:, :, :2], causal=False)  # fine without the mask
    assert o.shape == (1, 2, 3, 5)


def test_mha_without_rope_accepts_odd_head_dim():
    layer = MultiHeadAttention(10, 2, 5, rope=False).double()
    y, _ = layer(randn(1, 4, 10))
    assert y.shape == (1, 4, 10)


def test_stable_softmax_gives_an_all_masked_row_weight_zero():
    x = torch.tensor([[0.0, -torch.inf, 1.0], [-torch.inf, -torch.inf, -torch.inf]],
                     dtype=torch.float64)
    p = stable_softmax(x)
    assert torch.isfinite(p).all()
    assert_close(p[0], torch.softmax(x[0], dim=0))
    assert_close(p[1], torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_rope_refuses_non_finite_positions(bad):
    x = torch.randn(1, 1, 3, 4)
    positions = torch.tensor([0.0, bad, 2.0])
    with pytest.raises(ValueError, match="^positions: expected finite"):
        apply_rope(x, positions)
    with pytest.raises(ValueError, match="^positions: expected finite"):
        rope_angles(positions, 4)


def test_attention_layer_on_no_tokens_names_x():
    with pytest.raises(ValueError, match=r"^x: expected at least one token"):
        MultiHeadAttention(8, 2, 4)(torch.zeros(1, 0, 8))
