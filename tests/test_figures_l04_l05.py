"""Tests of Lessons 4–5: the multi-head counting functions (attnbook.demos.attention_counts), and
the figures (and their data) in attnbook.figures.l04_multi_head_attention, l05_order_and_position
and attnbook.demos.heads_position."""

from __future__ import annotations

import pytest
import torch
from attnbook.demos import heads_position as heads
from attnbook.demos.attention_counts import mha_flops, mha_parameter_counts
from attnbook.figures import l04_multi_head_attention as l04
from attnbook.figures import l05_order_and_position as l05
from attnbook.plotting import course_style, new_figure
from attnlab.attention import MultiHeadAttention, head_attention_weights, split_heads
from torch.utils.flop_counter import FlopCounterMode

# ---------------------------------------------------------------- counting


@pytest.mark.parametrize(("d_model", "n_heads", "head_dim", "n_kv_heads"),
                         [(32, 1, None, None), (32, 4, None, None), (32, 4, None, 2),
                          (32, 8, None, 1), (24, 3, 5, None), (48, 6, 8, 3)])
def test_parameter_counts_match_the_layer(d_model, n_heads, head_dim, n_kv_heads):
    layer = MultiHeadAttention(d_model, n_heads, head_dim or d_model // n_heads,
                               n_kv_heads=n_kv_heads, rope=False)
    counts = mha_parameter_counts(d_model, n_heads, head_dim, n_kv_heads)
    assert counts["W_Q"] == layer.w_q.weight.numel()
    assert counts["W_K"] == layer.w_k.weight.numel()
    assert counts["W_V"] == layer.w_v.weight.numel()
    assert counts["W_O"] == layer.w_o.weight.numel()
    assert counts["total"] == sum(p.numel() for p in layer.parameters())


@pytest.mark.parametrize(("seq_len", "d_model", "n_heads", "head_dim", "n_kv_heads"),
                         [(1, 16, 1, None, None), (7, 32, 4, None, None), (9, 32, 4, None, 2),
                          (5, 32, 8, None, 1), (6, 24, 3, 5, None)])
def test_flops_match_torch_flop_counter(seq_len, d_model, n_heads, head_dim, n_kv_heads):
    layer = MultiHeadAttention(d_model, n_heads, head_dim or d_model // n_heads,
                               n_kv_heads=n_kv_heads, rope=False)
    x = torch.randn(1, seq_len, d_model)
    with FlopCounterMode(display=False) as counter:
        layer(x)
    assert mha_flops(seq_len, d_model, n_heads, head_dim, n_kv_heads)["total"] == \
        counter.get_total_flops()


@pytest.mark.parametrize("d_model", [48, 1536])
def test_head_count_changes_neither_parameters_nor_flops(d_model):
    t = 11
    for h in [1, 2, 3, 4, 6, 8, 12, 16]:
        assert mha_parameter_counts(d_model, h)["total"] == 4 * d_model**2
        flops = mha_flops(t, d_model, h)
        assert flops["total"] == 8 * t * d_model**2 + 4 * t**2 * d_model
        assert flops["scores"] == flops["mix"] == 2 * t * t * d_model


def test_grouped_query_shrinks_only_k_and_v():
    mha = mha_parameter_counts(1536, 16)
    gqa = mha_parameter_counts(1536, 16, n_kv_heads=4)
    mqa = mha_parameter_counts(1536, 16, n_kv_heads=1)
    assert gqa["W_Q"] == mha["W_Q"] and gqa["W_O"] == mha["W_O"]
    assert gqa["W_K"] * 4 == mha["W_K"] and mqa["W_V"] * 16 == mha["W_V"]


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"d_model": 48, "n_heads": 5}, "n_heads"),
    ({"d_model": 48, "n_heads": 0}, "n_heads"),
    ({"d_model": 0, "n_heads": 1}, "d_model"),
    ({"d_model": 48, "n_heads": 4, "n_kv_heads": 3}, "n_kv_heads"),
    ({"d_model": 48, "n_heads": 4, "head_dim": -1}, "head_dim"),
])
def test_counts_reject_bad_sizes(kwargs, name):
    with pytest.raises(ValueError, match=name):
        mha_parameter_counts(**kwargs)
    with pytest.raises(ValueError, match=name):
        mha_flops(4, **kwargs)


def test_flops_reject_bad_length():
    with pytest.raises(ValueError, match="seq_len"):
        mha_flops(0, 48, 4)


# ---------------------------------------------------------------- the data behind the figures


def test_constructed_heads_do_what_they_were_built_for():
    words = heads.HEADS_SENTENCE
    layer, x = heads.constructed_two_head_layer(words, sharpness=8.0)
    with torch.no_grad():
        w = head_attention_weights(layer, x)[0]
    for i in range(1, len(words)):
        assert int(w[0, i].argmax()) == i - 1  # head 1: the previous word
        earlier = [j for j in range(i) if words[j] == words[i]]
        focus = w[1, i, earlier].sum() if earlier else w[1, i, i]
        assert focus > 0.99  # head 2: earlier copies of the word, else itself


def test_one_wide_head_sees_the_sum_of_the_head_scores():
    two, x = heads.constructed_two_head_layer(n_heads=2)
    one, _ = heads.constructed_two_head_layer(n_heads=1)
    with torch.no_grad():
        q2, k2 = split_heads(two.w_q(x), 2), split_heads(two.w_k(x), 2)
        q1, k1 = split_heads(one.w_q(x), 1), split_heads(one.w_k(x), 1)
    scores_two = (q2 @ k2.transpose(-1, -2)).sum(1)  # Σ_h q_h k_hᵀ, unscaled
    torch.testing.assert_close(scores_two, (q1 @ k1.transpose(-1, -2))[:, 0])


def test_gqa_bytes_per_token_scale_with_the_key_value_heads():
    assert l04.KV_HEAD_COUNTS[0] == 1 and l04.KV_HEAD_COUNTS[-1] == l04.GQA_HEADS
    for h in l04.KV_HEAD_COUNTS:
        assert l04.GQA_HEADS % h == 0
        assert l04.gqa_bytes_per_token(h) == 2 * h * l04.GQA_HEAD_DIM * 2  # K and V, bf16
    # MQA keeps 1/H of multi-head attention's cache
    assert l04.gqa_bytes_per_token(l04.GQA_HEADS) == l04.GQA_HEADS * l04.gqa_bytes_per_token(1)


def test_attention_without_positions_is_permutation_equivariant_but_causal_is_not():
    words = heads.ORDER_SENTENCE
    perm = [0, 4, 2, 3, 1]  # the dog bit the man -> the man bit the dog
    permuted = tuple(words[p] for p in perm)
    torch.testing.assert_close(heads.order_attention(permuted), heads.order_attention(words)[perm])
    difference = (heads.order_attention(permuted, causal=True)
                  - heads.order_attention(words, True)[perm])
    assert difference.abs().max() > 1e-3
    with pytest.raises(ValueError, match="words"):
        heads.order_attention(("the", "cat"))


def test_rope_score_depends_on_the_offset_only():
    q, k = heads.rope_demo_vectors()
    offsets = torch.arange(0, 65)
    reference = heads.rope_scores(q, k, offsets, 0)
    for shift in l05.ROPE_SHIFTS[1:]:
        torch.testing.assert_close(heads.rope_scores(q, k, shift + offsets, shift), reference,
                                   rtol=0, atol=1e-10)
    assert (reference[1:] - reference[0]).abs().max() > 1  # the offset does change it


def test_rope_self_score_is_the_mean_of_the_cos_map_and_starts_at_one():
    offsets = heads.rope_log_offsets()
    for base in (100.0, 500000.0):
        torch.testing.assert_close(heads.rope_self_score(offsets, 96, base),
                                   heads.rope_cos_map(offsets, 96, base).mean(0))
    assert float(heads.rope_self_score(torch.tensor([0.0]), 96, 10000.0)[0]) == pytest.approx(1)
    # a whole offset: brute force over cos of the angles
    assert heads.rope_reach(8, 100.0) == next(
        m for m in range(1, 10_000)
        if (100.0 ** (-torch.arange(0, 8, 2) / 8) * m).cos().mean() < 0.5)


def test_rope_reach_grows_with_the_base():
    reaches = [heads.rope_reach(96, base) for base in l05.ROPE_BASES]
    assert reaches == sorted(reaches) and reaches[0] < reaches[-1]
    with pytest.raises(ValueError, match="max_offset"):
        heads.rope_reach(96, 10000.0, level=-0.99, max_offset=64)
    with pytest.raises(ValueError, match="level"):
        heads.rope_reach(96, 10000.0, level=2.0)


# ---------------------------------------------------------------- figures


def draw(function, **values):
    with course_style():
        fig = new_figure()
        function(fig, **values)
    assert fig.axes
    return fig


@pytest.mark.parametrize(("function", "values"), [
    (l04.draw_constructed_heads, {}),
    (l04.draw_constructed_heads, {"sharpness": 0.0}),
    (l04.draw_kv_heads, {"n_kv_heads": 4}),
    (l04.draw_kv_heads, {"n_kv_heads": l04.KV_HEAD_COUNTS[0]}),
    (l04.draw_kv_heads, {"n_kv_heads": l04.KV_HEAD_COUNTS[-1]}),
    (l05.draw_permutation, {}),
    (l05.draw_permutation, {"causal": True}),
    (l05.draw_causal_mask, {}),
    (l05.draw_rope_offset, {"shift": 0, "offset": 4}),
    (l05.draw_rope_offset, {"shift": l05.ROPE_SHIFTS[0], "offset": l05.ROPE_OFFSETS[0]}),
    (l05.draw_rope_offset, {"shift": l05.ROPE_SHIFTS[-1], "offset": l05.ROPE_OFFSETS[-1]}),
    (l05.draw_rope_frequencies, {"base": 10000.0}),
    (l05.draw_rope_frequencies, {"base": l05.ROPE_BASES[0]}),
    (l05.draw_rope_frequencies, {"base": l05.ROPE_BASES[-1]}),
])
def test_figures_draw(function, values):
    draw(function, **values)


@pytest.mark.parametrize(("function", "values", "name"), [
    (l04.draw_constructed_heads, {"sharpness": -1.0}, "sharpness"),
    (l04.draw_kv_heads, {"n_kv_heads": 3}, "n_kv_heads"),
    (l05.draw_rope_offset, {"shift": 7, "offset": 4}, "shift"),
    (l05.draw_rope_offset, {"shift": 0, "offset": 3}, "offset"),
    (l05.draw_rope_frequencies, {"base": 5.0}, "base"),
])
def test_figures_reject_bad_values(function, values, name):
    with pytest.raises(ValueError, match=name):
        draw(function, **values)


# ---------------------------------------------------------------- Lesson 4 in Chinese


def _l04_texts(fig):
    """Titles, axis labels and annotations of every axes (tick labels excluded: the rows are
    the English sentence's words, shared by both editions)."""
    return [text for ax in fig.axes
            for text in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel(),
                         *(t.get_text() for t in ax.texts)) if text]


@pytest.mark.parametrize(("function", "values"), [
    (l04.draw_constructed_heads, {}),
    *[(l04.draw_kv_heads, {"n_kv_heads": h}) for h in l04.KV_HEAD_COUNTS],
])
def test_l04_figures_speak_chinese(function, values):
    import re

    from attnlab.i18n import language

    with language("zh_CN"):
        texts = _l04_texts(draw(function, **values))
    english = re.compile(r"\b(heads?|query|key|value|weights?|word|bytes|cached|previous)\b")
    assert texts and not [t for t in texts if english.search(t)]
    assert any(re.search(r"[\u4e00-\u9fff]", t) for t in texts)
    assert _l04_texts(draw(function, **values)) != texts  # English outside the block


@pytest.mark.parametrize("n_kv_heads", l04.KV_HEAD_COUNTS)
def test_l04_alt_text_in_chinese_keeps_its_numbers(n_kv_heads):
    import re

    from attnlab.i18n import language

    english = l04.kv_heads_alt(n_kv_heads)
    with language("zh_CN"):
        chinese = l04.kv_heads_alt(n_kv_heads)
    assert re.search(r"[\u4e00-\u9fff]", chinese)
    assert sorted(re.findall(r"[\d,]*\d", chinese)) == sorted(re.findall(r"[\d,]*\d", english))


def test_constructed_layer_rejects_bad_head_count():
    with pytest.raises(ValueError, match="n_heads"):
        heads.constructed_two_head_layer(n_heads=3)


def test_smoothed_self_score_is_the_mean_over_the_window():
    """The closed form equals the self-score averaged over offsets o / w … o · w (sampled
    densely), and follows the exact score where it does not flicker."""
    from attnbook.demos.heads_position import rope_self_score, smoothed_self_score

    width, dim, base = 2**0.25, 96, 10000.0
    for o in (3.0, 200.0, 5000.0):
        dense = torch.linspace(o / width, o * width, 20001, dtype=torch.float64)
        brute = rope_self_score(dense, dim, base).mean()
        closed = smoothed_self_score(torch.tensor([o], dtype=torch.float64), dim, base, width)
        assert float(closed[0]) == pytest.approx(float(brute), abs=1e-3)
    short = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert torch.allclose(smoothed_self_score(short, dim, base),
                          rope_self_score(short, dim, base), atol=0.02)


def test_mask_figure_shows_whole_percents_that_never_collide():
    from attnbook.figures import l05_order_and_position as l05
    from attnbook.plotting import new_figure

    fig = new_figure(6.4, 3)
    l05.draw_causal_mask(fig)
    texts = [t.get_text() for t in fig.axes[2].texts]
    assert texts and all(t.isdigit() and len(t) <= 3 for t in texts)


# ---------------------------------------------------------------- Lesson 5 in Chinese

@pytest.mark.parametrize(("function", "values"), [
    (l05.draw_permutation, {}),
    (l05.draw_permutation, {"causal": True}),
    (l05.draw_causal_mask, {}),
    (l05.draw_rope_offset, {"shift": l05.ROPE_SHIFTS[-1], "offset": l05.ROPE_OFFSETS[-1]}),
    (l05.draw_rope_frequencies, {"base": 10000.0}),
])
def test_lesson5_figures_draw_their_words_in_chinese(function, values):
    """Under language("zh_CN") no English word is left in the image (the example sentences'
    three-letter words and the symbols stay), and the English frame is unchanged afterwards."""
    import re

    from attnlab.i18n import language
    from matplotlib.text import Text

    def words(fig):
        return [t.get_text() for t in fig.findobj(Text) if t.get_text()]

    with language("zh_CN"):
        chinese = words(draw(function, **values))
    english_left = [t for t in chinese if re.search(r"\b[a-z]{4,}\b", t)]
    assert not english_left
    assert any(re.search(r"[\u4e00-\u9fff]", t) for t in chinese)
    assert not any(re.search(r"[\u4e00-\u9fff]", t) for t in words(draw(function, **values)))


def test_lesson5_alt_texts_are_written_in_the_current_language():
    import re

    from attnlab.i18n import language

    with language("zh_CN"):
        alts = [l05.rope_offset_alt(0, 4), l05.rope_frequencies_alt(500000.0)]
    assert all(re.search(r"[\u4e00-\u9fff]", alt) for alt in alts)
    assert "135" in alts[1] and "500,000" in alts[1]  # the numbers, formatted as in English
    assert l05.rope_offset_alt(0, 4).startswith("Left: two unit arrows")
