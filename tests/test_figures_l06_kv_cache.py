"""Tests of Lesson 6's figures (attnbook.figures.l06_kv_cache) and its helpers in
attnbook.demos.decoding: decoding without a cache, decode work counts and the context that fits a
budget."""

from __future__ import annotations

import itertools

import pytest
import torch
from attnbook.demos.decoding import (
    decode_step_work,
    decode_total_work,
    decode_without_cache,
    max_cached_tokens,
)
from attnbook.figures import l06_kv_cache as l06
from attnbook.plotting import new_figure
from attnlab.attention import softmax_attention
from attnlab.configs import LLAMA3_8B, SOPHIA
from attnlab.kv_cache import kv_cache_bytes
from attnlab.memory import (
    as_all_attention,
    cache_breakdown,
    cache_bytes_per_token,
    format_bytes,
)

PRESETS = list(l06.CALCULATOR_MODELS)
CONTEXTS = [1024, 4096, 16384, 65536, 131072]
DTYPES = ["fp32", "bf16", "fp8"]


# ---------------------------------------------------------------- figures


@pytest.mark.parametrize("n_steps", [1, 8, 32])
def test_draw_recompute_draws(n_steps):
    fig = new_figure(8, 3.6)
    l06.draw_recompute(fig, n_steps=n_steps)
    assert len(fig.axes) == 2
    rows_uncached = decode_total_work(n_steps, cached=False)[0]
    assert f"{rows_uncached} K/V rows computed" in fig.axes[0].get_title()


@pytest.mark.parametrize("bad", [0, 65, 2.0, True, "8"])
def test_draw_recompute_rejects_bad_steps(bad):
    with pytest.raises(ValueError, match="n_steps"):
        l06.draw_recompute(new_figure(), n_steps=bad)


def test_draw_step_times_draws_and_reports_ratio():
    fig = new_figure(7, 4)
    l06.draw_step_times(fig, [64, 128, 256], [1e-4, 1.1e-4, 1.2e-4], [2e-4, 8e-4, 3.6e-3])
    title = fig.axes[0].get_title()
    assert "T = 256" in title and "30×" in title


@pytest.mark.parametrize(
    ("contexts", "cached", "uncached", "name"),
    [([64], [1e-4], [1e-3], "contexts"),
     ([64, 128], [1e-4], [1e-3, 2e-3], "cached_seconds"),
     ([64, 128], [1e-4, 1e-4], [1e-3, 0.0], "uncached_seconds")],
)
def test_draw_step_times_rejects_bad_input(contexts, cached, uncached, name):
    with pytest.raises(ValueError, match=name):
        l06.draw_step_times(new_figure(), contexts, cached, uncached)


@pytest.mark.parametrize(
    ("preset", "context", "dtype"),
    [("Sophia as all-attention", 4096, "bf16"),  # the panel's default
     *itertools.product([PRESETS[0], PRESETS[-1]], [CONTEXTS[0], CONTEXTS[-1]],
                        [DTYPES[0], DTYPES[-1]])],
)
def test_draw_cache_calculator_draws_with_exact_bytes_in_title(preset, context, dtype):
    fig = new_figure()
    l06.draw_cache_calculator(fig, preset=preset, context=context, dtype=dtype)
    expected = cache_breakdown(l06.CALCULATOR_MODELS[preset], context, dtype=dtype).total_bytes
    assert format_bytes(expected) in fig.axes[0].get_title()


def test_sophia_as_built_keeps_its_states_and_a_small_cache():
    """At 4k tokens in bf16: 24.8 MB of MLA latents plus the KDA states, against 704.6 MB."""
    fig = new_figure()
    l06.draw_cache_calculator(fig, 4096, "bf16", preset="Sophia as built")
    assert "31.5 MB" in fig.axes[0].get_title()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(label.startswith("Sophia as built: 6,048 B per token + 6.8 MB fixed")
               for label in labels), labels


def test_calculator_default_is_the_lessons_figure():
    fig = new_figure()
    l06.draw_cache_calculator(fig, context=4096, dtype="bf16")  # the default preset
    assert "704.6 MB (672.0 MiB)" in fig.axes[0].get_title()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"preset": "Sophia", "context": 4096, "dtype": "bf16"}, "preset"),
     ({"preset": PRESETS[0], "context": 0, "dtype": "bf16"}, "context"),
     ({"preset": PRESETS[0], "context": 4096.0, "dtype": "bf16"}, "context"),
     ({"preset": PRESETS[0], "context": 4096, "dtype": "int4"}, "dtype")],
)
def test_draw_cache_calculator_rejects_bad_values(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l06.draw_cache_calculator(new_figure(), **kwargs)


def test_calculator_models_are_the_two_baselines_and_sophia_as_built():
    sophia_all, llama, sophia = l06.CALCULATOR_MODELS.values()
    assert sophia_all.layer_pattern == ("attn",) * 28 and sophia_all.n_kv_heads == 16
    assert llama is LLAMA3_8B and llama.n_kv_heads == 8
    assert sophia is SOPHIA


# ---------------------------------------------------------------- the lesson's numbers


def test_sophia_all_attention_numbers():
    sophia_all = as_all_attention(SOPHIA)
    total = cache_breakdown(sophia_all, 4096, dtype="bf16").cache_bytes
    assert total == kv_cache_bytes(28, 16, 96, 4096, 2) == 704_643_072
    # the source's "688 MB" is neither MB nor MiB of this figure
    assert round(total / 1e6, 1) == 704.6 and total / 2**20 == 672
    assert total / 1024 / 1000 == pytest.approx(688.128)
    assert cache_bytes_per_token(sophia_all) == 172_032
    assert cache_bytes_per_token(LLAMA3_8B) == 131_072


# ---------------------------------------------------------------- decoding without a cache


@pytest.mark.parametrize(("t", "scale"), [(1, None), (9, None), (9, 0.7)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decoding_without_cache_equals_full_causal_pass(t, scale, dtype):
    g = torch.Generator().manual_seed(t)
    q, k, v = (torch.randn(2, 3, t, 4, generator=g, dtype=dtype) for _ in range(3))
    full, _ = softmax_attention(q, k, v, causal=True, scale=scale)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(decode_without_cache(q, k, v, scale=scale), full,
                               rtol=0, atol=tol)


@pytest.mark.parametrize(("args", "name"), [
    ((torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4, dtype=torch.float64),
      torch.zeros(1, 2, 3, 4)), "k"),
    ((torch.zeros(1, 2, 0, 4),) * 3, "T"),
])
def test_decoding_without_cache_rejects_bad_input(args, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        decode_without_cache(*args)


# ---------------------------------------------------------------- decode work counts


@pytest.mark.parametrize("n", [1, 2, 7, 100])
@pytest.mark.parametrize("cached", [True, False])
def test_total_work_is_the_sum_of_steps(n, cached):
    steps = [decode_step_work(t, cached=cached) for t in range(1, n + 1)]
    assert decode_total_work(n, cached=cached) == (sum(r for r, _ in steps),
                                                   sum(s for _, s in steps))


def test_work_closed_forms():
    assert decode_step_work(5, cached=True) == (1, 5)
    assert decode_step_work(5, cached=False) == (5, 15)
    assert decode_total_work(1000, cached=True) == (1000, 500_500)
    assert decode_total_work(1000, cached=False) == (500_500, 167_167_000)


@pytest.mark.parametrize("fn", [decode_step_work, decode_total_work])
def test_work_rejects_bad_input(fn):
    with pytest.raises(ValueError, match="cached"):
        fn(3, cached=1)
    with pytest.raises(ValueError):
        fn(0, cached=True)


# ---------------------------------------------------------------- budget


def test_max_cached_tokens():
    per_token = cache_bytes_per_token(as_all_attention(SOPHIA))
    fit = max_cached_tokens(per_token, 24 * 2**30)
    assert fit == 149_796
    assert fit * per_token <= 24 * 2**30 < (fit + 1) * per_token
    assert max_cached_tokens(131_072, 24 * 2**30) == 196_608
    assert max_cached_tokens(10, 9) == 0


@pytest.mark.parametrize(("args", "name"), [((0, 10), "bytes_per_token"),
                                            ((10, -1), "budget_bytes"),
                                            ((1.5, 10), "bytes_per_token")])
def test_max_cached_tokens_rejects_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        max_cached_tokens(*args)


@pytest.mark.parametrize("step", [1, 4, 8])
def test_draw_decode_step_shows_the_rows_appended_so_far(step):
    fig = new_figure(6.4, 3.4)
    l06.draw_decode_step(fig, step)
    bars = fig.axes[2].patches
    assert len(bars) == step  # one weight per cached token
    assert sum(b.get_width() for b in bars) == pytest.approx(1.0)
    assert f"{2 * step * l06.DECODE_WIDTH * 4:,} bytes" in fig._suptitle.get_text()
    assert f"{step}" in l06.decode_step_alt(step)


@pytest.mark.parametrize("bad", [0, l06.DECODE_STEPS + 1, 2.0])
def test_draw_decode_step_rejects_bad_steps(bad):
    with pytest.raises(ValueError, match="step"):
        l06.draw_decode_step(new_figure(), bad)


def test_step_traffic_adds_the_weights_once_and_a_cache_per_sequence():
    from attnbook.decode_cost import cache_dominates_from, step_traffic
    from attnlab.model import parameter_count

    one = step_traffic(SOPHIA, 4096)
    eight = step_traffic(SOPHIA, 4096, batch=8)
    assert one.weights == eight.weights == parameter_count(SOPHIA) * 2
    assert one.caches == cache_breakdown(SOPHIA, 4096, dtype="bf16").total_bytes
    assert eight.caches == 8 * one.caches
    start = cache_dominates_from(SOPHIA, batch=8)
    assert step_traffic(SOPHIA, start, batch=8).cache_share >= 0.5
    assert step_traffic(SOPHIA, start - 1, batch=8).cache_share < 0.5


# ---------------------------------------------------------------- the Chinese edition


def test_figures_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    with language("zh_CN"):
        fig = new_figure(6.4, 3.6)
        l06.draw_recompute(fig, n_steps=8)
        assert fig.axes[0].get_title() == "无缓存：\n计算 36 行 K/V"
        assert fig.axes[1].get_title() == "有 KV 缓存：\n计算 8 行 K/V，读取 28 行"
        fig = new_figure(7, 4)
        l06.draw_step_times(fig, [64, 128, 256], [1e-4, 1.1e-4, 1.2e-4], [2e-4, 8e-4, 3.6e-3])
        assert "T = 256" in fig.axes[0].get_title() and "30×" in fig.axes[0].get_title()
        fig = new_figure()
        l06.draw_cache_calculator(fig, context=4096, dtype="bf16")
        title = fig.axes[0].get_title()
        assert title.startswith("全注意力 Sophia，T = 4,096，bf16")
        assert "704.6 MB (672.0 MiB)" in title
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "实际构建的 Sophia：每 Token 6,048 B + 固定 6.8 MB（状态、卷积输入）" in labels
        fig = new_figure(6.4, 3.4)
        l06.draw_decode_step(fig, 4)
        assert "缓存占 128 字节" in fig._suptitle.get_text()
        assert "生成第 4 步" in l06.decode_step_alt(4)
        assert "4,096 个 Token" in l06.cache_calculator_alt(4096, "bf16")
    fig = new_figure(6.4, 3.6)  # outside the block: English again
    l06.draw_recompute(fig, n_steps=8)
    assert fig.axes[0].get_title() == "without a cache:\n36 K/V rows computed"
