"""Lessons 2–3: the dot-product count (attnbook.demos.attention_counts), the hand-made
projections, the toy example and the overflow threshold (attnbook.demos.toy_attention), and every
figure of attnbook.figures.l02_self_attention and l03_scaling_and_softmax (defaults, slider
extremes, rejected values)."""

from __future__ import annotations

import math

import pytest
import torch
from attnbook.demos import toy_attention as toy
from attnbook.demos.attention_counts import attention_dot_products
from attnbook.demos.toy_attention import exp_overflow_threshold, relation_projections
from attnbook.figures import l02_self_attention as l02
from attnbook.figures import l03_scaling_and_softmax as l03
from attnbook.plotting import new_figure
from attnlab.attention import causal_mask, naive_softmax, softmax_attention, stable_softmax
from hypothesis import given
from hypothesis import strategies as st

# ------------------------------------------------------------------ attention_dot_products


@given(t_q=st.integers(1, 40), extra=st.integers(0, 40))
def test_dot_products_count_the_allowed_cells_of_the_mask(t_q, extra):
    t_k = t_q + extra
    assert attention_dot_products(t_q, t_k) == int(causal_mask(t_q, t_k).sum())
    assert attention_dot_products(t_q, t_k, causal=False) == t_q * t_k


@pytest.mark.parametrize(("t", "full", "causal"), [(1, 1, 1), (9, 81, 45),
                                                   (4096, 16_777_216, 8_390_656)])
def test_dot_products_self_attention(t, full, causal):
    assert attention_dot_products(t, causal=False) == full == t * t
    assert attention_dot_products(t) == causal == t * (t + 1) // 2


def test_dot_products_one_decoding_step_scores_every_cached_key():
    assert attention_dot_products(1, 4097) == 4097


@pytest.mark.parametrize(("call", "name"), [
    (lambda: attention_dot_products(0), "t_q"),
    (lambda: attention_dot_products(3, 0), "t_k"),
    (lambda: attention_dot_products(5, 3), "t_q"),
    (lambda: attention_dot_products(2.0), "t_q"),
    (lambda: attention_dot_products(3, causal=1), "causal"),
])
def test_dot_products_reject_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------------------ relation_projections


def test_relation_projections_give_keys_the_features_and_queries_the_relations():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 5, generator=g, dtype=torch.float64)          # invertible: exact fit
    features = torch.randn(5, 3, generator=g, dtype=torch.float64)
    relations = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]],
                             dtype=torch.float64)
    w_q, w_k = relation_projections(x, features, relations, strength=2.5)
    assert w_q.shape == w_k.shape == (5, 3)
    torch.testing.assert_close(x @ w_k, features, rtol=0, atol=1e-10)
    torch.testing.assert_close((x @ w_q) @ (x @ w_k).T, 2.5 * features @ relations @ features.T,
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: relation_projections(torch.zeros(4), torch.zeros(4, 2), torch.zeros(2, 2)), "x"),
    (lambda: relation_projections(torch.zeros(4, 3), torch.zeros(5, 2), torch.zeros(2, 2)),
     "features"),
    (lambda: relation_projections(torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(3, 3)),
     "relations"),
    (lambda: relation_projections(torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(2, 2),
                                  strength="big"), "strength"),
])
def test_relation_projections_reject_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------------------ the toy example


def test_toy_example_attends_to_the_related_word():
    tokens, full = toy.sentence_weights(toy.SENTENCE, False)
    assert tokens == ("the", "red", "cat", "eats", "cheese", "in", "the", "kitchen", ".")
    top = {tokens[i]: tokens[int(full[i].argmax())] for i in range(len(tokens))}
    assert top["red"] == "cat" and top["cat"] == "red" and top["cheese"] == "cat"
    assert top["kitchen"] == "cat"
    # "eats" looks for an animal and a food: both beat every other key
    eats = full[3]
    others = [j for j in range(len(tokens)) if tokens[j] not in ("cat", "cheese")]
    assert min(eats[2], eats[4]) > eats[others].max()
    torch.testing.assert_close(full.sum(-1), torch.ones(len(tokens), dtype=full.dtype))


def test_toy_example_causal_mask_hides_the_future():
    tokens, causal = toy.sentence_weights(toy.SENTENCE, True)
    assert torch.all(causal.triu(1) == 0)
    assert tokens[int(causal[3].argmax())] == "cat"           # "eats" cannot see "cheese" yet
    assert float(causal[0, 0]) == 1.0                          # the first token sees only itself


def test_random_scores_have_variance_d_and_scaling_restores_one():
    raw = toy.random_scores(96, n_queries=512, n_keys=64)
    assert raw.shape == (512, 64)
    assert 0.9 * 96 < float(raw.var()) < 1.1 * 96
    scaled = toy.random_scores(96, n_queries=512, n_keys=64, scale=96**-0.5)
    assert 0.9 < float(scaled.var()) < 1.1
    assert float(stable_softmax(raw).amax(-1).mean()) > 0.7
    assert float(stable_softmax(scaled).amax(-1).mean()) < 0.2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_exp_overflow_threshold_is_where_exp_becomes_inf(dtype):
    x = exp_overflow_threshold(dtype)
    assert torch.isfinite(torch.exp(torch.tensor(x - 0.01 * abs(x) ** 0.5, dtype=dtype)))
    assert torch.isinf(torch.exp(torch.tensor(x + 0.1, dtype=dtype)))
    assert torch.isnan(naive_softmax(torch.tensor([0.0, x + 0.1], dtype=dtype))).any()
    assert torch.isfinite(stable_softmax(torch.tensor([0.0, x + 0.1], dtype=dtype))).all()


def test_exp_overflow_threshold_values_and_bad_dtype():
    assert exp_overflow_threshold(torch.float32) == pytest.approx(88.7228, abs=1e-4)
    assert exp_overflow_threshold(torch.float16) == pytest.approx(11.0899, abs=1e-4)
    with pytest.raises(ValueError, match="dtype"):
        exp_overflow_threshold(torch.int32)


def test_toy_outputs_are_closest_to_the_attended_word():
    ex = toy.toy_attention()
    _, q, k, v = ex.qkv()
    o, _ = softmax_attention(q, k, v, causal=False)
    assert ex.nearest_words(o[0, 0, 4], k=1)[0][0] == "cat"      # cheese: who eats me?
    assert ex.nearest_words(o[0, 0, 2], k=1)[0][0] == "red"      # cat: what do I look like?
    with pytest.raises(ValueError, match="vector"):
        ex.nearest_words(torch.zeros(3))


# ------------------------------------------------------------------ figures


@pytest.mark.parametrize(("draw", "values"), [
    (l02.draw_query_meets_keys, {}),
    (l02.draw_query_meets_keys, {"query": 0}),
    (l02.draw_query_meets_keys, {"query": 8}),
    (l02.draw_attention_row, {}),
    (l02.draw_attention_row, {"query": 0, "causal": True}),
    (l02.draw_attention_row, {"query": 8, "causal": False}),
    (l02.draw_attention_row, {"query": 8, "causal": True}),
    (l02.draw_dot_product_growth, {}),
    (l02.draw_dot_product_growth, {"context": 1}),
    (l03.draw_score_spread, {}),
    (l03.draw_score_spread, {"dim": min(toy.SPREAD_DIMS)}),
    (l03.draw_score_spread, {"dim": max(toy.SPREAD_DIMS)}),
    (l03.draw_scaled_vs_unscaled, {}),
    (l03.draw_temperature, {}),
    (l03.draw_temperature, {"temperature": min(l03.TEMPERATURES)}),
    (l03.draw_temperature, {"temperature": max(l03.TEMPERATURES), "query": 0}),
])
def test_figures_draw(draw, values):
    fig = new_figure(8, 4)
    draw(fig, **values)
    assert fig.axes
    fig.canvas.draw()


@pytest.mark.parametrize(("draw", "values", "name"), [
    (l02.draw_query_meets_keys, {"query": 9}, "query"),
    (l02.draw_attention_row, {"query": -1}, "query"),
    (l02.draw_attention_row, {"query": 2, "causal": "yes"}, "causal"),
    (l02.draw_dot_product_growth, {"context": 0}, "context"),
    (l03.draw_score_spread, {"dim": 0}, "dim"),
    (l03.draw_temperature, {"temperature": 0.0}, "temperature"),
    (l03.draw_temperature, {"query": 42}, "query"),
])
def test_figures_reject_bad_values(draw, values, name):
    with pytest.raises(ValueError, match=name):
        draw(new_figure(), **values)


def _texts(ax):
    return [t.get_text() for t in ax.texts]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_row_names_every_key_and_query(causal):
    fig = new_figure(9, 3.8)
    l02.draw_attention_row(fig, query=4, causal=causal)
    tokens, _ = toy.sentence_weights(toy.SENTENCE, causal)
    ax_bar, ax_map = fig.axes
    assert _texts(ax_bar) == _texts(ax_map)[: len(tokens)] == list(tokens)
    rows = [f"{i}·{t}" for i, t in enumerate(tokens)] + ["query i"]
    assert _texts(ax_map)[len(tokens):len(tokens) + len(rows)] == rows
    assert "cheese" in ax_bar.get_title()
    assert f"= {45 if causal else 81} products" in ax_map.get_title()
    assert "key token j" in fig.texts[0].get_text()


def test_score_spread_and_temperature_keep_their_keys_and_token_names():
    fig = new_figure(9, 3.6)
    l03.draw_score_spread(fig, dim=96)
    data = toy.score_spread(96)
    ax_s, ax_w = fig.axes
    assert not ax_s.get_legend() and not ax_w.get_legend()
    assert _texts(ax_s) == [f"■ q·k: std {data.raw_std:.1f} (√d = {math.sqrt(96):.1f})",
                            f"■ q·k/√d: std {data.scaled_std:.2f}"]
    assert _texts(ax_w) == [f"■ unscaled: mean {data.top_raw_mean:.2f}",
                            f"■ scaled: mean {data.top_scaled_mean:.2f}"]
    fig = new_figure(9, 3.4)
    l03.draw_temperature(fig, temperature=0.5)
    tokens, *_ = toy.toy_attention().qkv(toy.SENTENCE)
    assert all(_texts(ax) == tokens for ax in fig.axes)
    assert fig.texts[0].get_text() == "key token"


# ------------------------------------------------------------------ Lesson 2 in Chinese


def test_lesson_2_figures_draw_in_chinese():
    import warnings

    from attnbook.plotting import course_style
    from attnlab.i18n import language

    # the course style falls back to a CJK font: no glyph may be missing
    with language("zh_CN"), course_style(), warnings.catch_warnings():
        warnings.filterwarnings("error", message="Glyph .* missing")
        fig = new_figure(9, 3.8)
        l02.draw_attention_row(fig, query=4, causal=True)
        ax_bar, ax_map = fig.axes
        assert ax_bar.get_title() == "查询 4：“cheese”"
        assert ax_map.get_title() == "T(T+1)/2 = 45 次点积"
        assert "查询 i" in _texts(ax_map)
        assert fig.texts[0].get_text() == "键 Token j（灰色：被遮盖的未来）"
        fig.canvas.draw()
        fig = new_figure(6.4, 3.4)
        l02.draw_dot_product_growth(fig)
        (ax,) = fig.axes
        assert ax.get_title() == "自注意力给每一对 Token 打分"
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == ["完整：T²", "因果：T(T+1)/2", "T（线性，作对照）"]
        fig.canvas.draw()
        fig = new_figure(6.4, 4.2)
        l02.draw_query_meets_keys(fig)
        assert fig.axes[0].get_title() == "“cheese”的查询 q = x W_Q：它要找什么"
        fig.canvas.draw()


@pytest.mark.parametrize(("draw", "values"), [
    (l03.draw_score_spread, {"dim": max(toy.SPREAD_DIMS)}),
    (l03.draw_scaled_vs_unscaled, {}),
    (l03.draw_temperature, {"temperature": min(l03.TEMPERATURES)}),
])
def test_lesson_3_figures_speak_chinese(draw, values):
    from attnbook.plotting import course_style
    from attnlab.i18n import language

    with language("zh_CN"), course_style():
        fig = new_figure(6.4, 3.2)
        draw(fig, **values)
        fig.canvas.draw()
    labels = [t for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel())]
    labels += [t.get_text() for ax in fig.axes for t in ax.texts if "■" in t.get_text()]
    words = [t for t in labels
             if any(c.isalpha() and c.isascii() for c in t) and "softmax(" not in t]
    assert words and all(any("\u4e00" <= c <= "\u9fff" for c in t) for t in words), words
