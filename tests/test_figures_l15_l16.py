"""Tests of the figures of Lessons 15 (MLA) and 16 (the hybrid stack): attnbook.figures.l15_mla and
l16_hybrid_stack."""

from __future__ import annotations

import dataclasses

import pytest
from attnbook.demos import calculators as calc
from attnbook.figures import l15_mla as l15
from attnbook.figures import l16_hybrid_stack as l16
from attnbook.plotting import figure_png, new_figure
from attnlab.configs import DEEPSEEK_V3, KIMI_LINEAR_48B_A3B, LLAMA3_8B, SOPHIA
from attnlab.memory import as_all_attention, cache_breakdown, format_bytes

# ---------------------------------------------------------------- Lesson 15


def test_draw_cache_entry_counts():
    fig = new_figure(7.5, 4.4)
    l15.draw_cache_entry(fig)
    titles = [ax.get_title() for ax in fig.axes]
    assert "32,768 → 576" in titles[0]
    assert "3,072 → 432" in titles[1]


def test_draw_cache_entry_rejects_model_without_mla():
    with pytest.raises(ValueError, match="configs"):
        l15.draw_cache_entry(new_figure(), configs=(LLAMA3_8B,))
    with pytest.raises(ValueError, match="configs"):
        l15.draw_cache_entry(new_figure(), configs=())


@pytest.mark.parametrize(("d_c", "d_r"), [(384, 48), (128, 16), (1024, 96), (128, 96), (1024, 16)])
def test_draw_mla_bytes_draws(d_c, d_r):
    fig = new_figure()
    l15.draw_mla_bytes(fig, kv_lora_rank=d_c, rope_dim=d_r)
    title = fig.axes[0].get_title()
    assert f"{(d_c + d_r) * 2:,} B per token" in title


def test_draw_mla_bytes_default_is_gqa_2_25():
    fig = new_figure()
    l15.draw_mla_bytes(fig, kv_lora_rank=384, rope_dim=48)
    assert "GQA with 2.25 K/V heads" in fig.axes[0].get_title()
    assert "14.1% of MHA" in fig.axes[0].get_title()


def test_draw_mla_bytes_labels_every_level_and_the_line():
    fig = new_figure()
    l15.draw_mla_bytes(fig, kv_lora_rank=384, rope_dim=48)
    texts = [t.get_text() for t in fig.axes[0].texts]
    for heads in (16, 8, 4, 2):
        name = "MHA" if heads == 16 else "GQA"
        assert f"{name}, {heads} K/V heads: {2 * heads * 96 * 2:,} B" in texts
    assert "MQA, 1 K/V head: 384 B" in texts
    assert any("MLA: (d_c + 48) × 2 B" in t for t in texts)
    assert figure_png(fig).startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"kv_lora_rank": 0, "rope_dim": 48}, "kv_lora_rank"),
     ({"kv_lora_rank": 384.0, "rope_dim": 48}, "kv_lora_rank"),
     ({"kv_lora_rank": 384, "rope_dim": -1}, "rope_dim"),
     ({"kv_lora_rank": 384, "rope_dim": True}, "rope_dim"),
     ({"kv_lora_rank": 384, "rope_dim": 48, "dtype": "int4"}, "dtype")],
)
def test_draw_mla_bytes_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l15.draw_mla_bytes(new_figure(), **kwargs)


def test_mla_sweep_bytes():
    assert calc.mla_sweep_bytes(512, 64) == 1152  # DeepSeek-V3 in bf16
    assert calc.mla_sweep_bytes(384, 48, "fp32") == 1728


# ---------------------------------------------------------------- Lesson 16


def test_draw_layer_pattern_blocks_and_counts():
    fig = new_figure(8, 2.6)
    l16.draw_layer_pattern(fig)
    ax = fig.axes[0]
    assert len(ax.patches) == SOPHIA.n_layers + KIMI_LINEAR_48B_A3B.n_layers
    texts = [t.get_text() for t in ax.texts]
    assert any("21 KDA + 7 MLA" in t for t in texts)
    assert any("20 KDA + 7 MLA" in t for t in texts)


def test_draw_layer_pattern_rejects():
    with pytest.raises(ValueError, match="configs"):
        l16.draw_layer_pattern(new_figure(), configs=())
    with pytest.raises(ValueError, match="configs"):
        l16.draw_layer_pattern(new_figure(), configs=("Sophia",))


@pytest.mark.parametrize("preset", list(l16.MEMORY_PRESETS))
@pytest.mark.parametrize("context", [4096, 2**20])
@pytest.mark.parametrize("number_format", list(l16.NUMBER_FORMATS))
def test_draw_memory_calculator_grid_extremes(preset, context, number_format):
    fig = new_figure()
    l16.draw_memory_calculator(fig, preset=preset, context=context, number_format=number_format)
    dtype, state_dtype = l16.NUMBER_FORMATS[number_format]
    config = l16.MEMORY_PRESETS[preset]
    total = cache_breakdown(config, context, dtype=dtype, state_dtype=state_dtype).total_bytes
    assert format_bytes(total) in fig.axes[0].get_title()


def test_draw_memory_calculator_sophia_default_numbers():
    fig = new_figure()
    l16.draw_memory_calculator(fig, preset="Sophia", context=4096, number_format="bf16")
    title = fig.axes[0].get_title()
    assert "31.5 MB" in title and "704.6 MB" in title and "22.3× more" in title
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("6.2 MB" in label for label in labels)  # the KDA state, 6,193,152 B


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"preset": "GPT-2", "context": 4096, "number_format": "bf16"}, "preset"),
     ({"preset": "Sophia", "context": 0, "number_format": "bf16"}, "context"),
     ({"preset": "Sophia", "context": 4096.0, "number_format": "bf16"}, "context"),
     ({"preset": "Sophia", "context": 4096, "number_format": "fp4"}, "number_format")],
)
def test_draw_memory_calculator_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l16.draw_memory_calculator(new_figure(), **kwargs)


def test_draw_bytes_vs_context_draws_one_line_per_model():
    fig = new_figure(7, 4.2)
    l16.draw_bytes_vs_context(fig)
    ax = fig.axes[0]
    sophia = ax.get_lines()[0].get_ydata()
    assert sophia[-1] == pytest.approx(cache_breakdown(SOPHIA, 2**20).total_bytes / 2**20)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"configs": ()}, "configs"), ({"max_context": 100}, "max_context"),
     ({"dtype": "int4"}, "dtype")],
)
def test_draw_bytes_vs_context_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l16.draw_bytes_vs_context(new_figure(), **kwargs)


# ---------------------------------------------------------------- the lessons' numbers


def test_lesson_numbers():
    """The figures glued into Lessons 15–16, recomputed from the configs."""
    assert DEEPSEEK_V3.mla.cache_dim == 576
    assert SOPHIA.mla.cache_dim == 432
    assert cache_breakdown(SOPHIA, 4096).state_bytes == 6_193_152
    assert cache_breakdown(as_all_attention(SOPHIA), 4096).cache_bytes == 704_643_072
    mha_global = dataclasses.replace(SOPHIA, layer_pattern=("kda", "kda", "kda", "attn") * 7,
                                     mla=None)
    assert cache_breakdown(mha_global, 4096).cache_bytes * 4 == 704_643_072
    assert 1 - KIMI_LINEAR_48B_A3B.count("mla") / KIMI_LINEAR_48B_A3B.n_layers == pytest.approx(
        20 / 27)
    # Sophia's MLA cache passes its bf16 KDA state at exactly 1,024 tokens.
    assert cache_breakdown(SOPHIA, 1024).cache_bytes == cache_breakdown(SOPHIA, 1024).state_bytes


# ---------------------------------------------------------------- Lesson 16: the Chinese edition


def test_lesson16_figures_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    with language("zh_CN"):
        fig = new_figure()
        l16.draw_memory_calculator(fig, preset="Sophia", context=4096, number_format="bf16")
        title = fig.axes[0].get_title()
        assert title.startswith("Sophia，T = 4k：31.5 MB") and "是其 22.3 倍" in title
        fig = new_figure(7, 4.2)
        l16.draw_bytes_vs_context(fig)
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert labels[1] == "全注意力 Sophia"
        assert l16.number_format_label("bf16, fp32 state") == "bf16，状态用 fp32"
        assert "4,096 个 Token" in l16.memory_calculator_alt("Sophia", 4096, "bf16")
    # outside the block: English again, word for word what the notebook used to write
    assert l16.memory_calculator_alt("Sophia", 4096, "bf16, fp32 state") == (
        "Stacked bar of the bytes Sophia keeps for one sequence of 4,096 tokens in bf16, fp32 "
        "state: the growing KV or latent cache, the fixed recurrent state and the fixed "
        "convolution inputs, with the all-attention total in the title."
    )
    fig = new_figure(7, 4.2)
    l16.draw_bytes_vs_context(fig)
    assert fig.axes[0].get_legend().get_texts()[1].get_text() == "Sophia (all attention)"
