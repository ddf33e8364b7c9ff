"""Lesson 16b figures draw what attnlab.serving computes, and refuse unknown models."""

from __future__ import annotations

import dataclasses

import pytest
from attnbook.figures import l16b_real_hybrids as figs
from attnbook.plotting import new_figure
from attnlab.configs import KIMI_LINEAR_48B_A3B, PUBLISHED
from attnlab.serving import H200, Deployment, capacity, decode_step_bytes, sequence_bytes


def test_size_and_context_labels():
    assert figs.size_label(KIMI_LINEAR_48B_A3B) == "48B, 3B active"
    assert figs.size_label(PUBLISHED["Llama-3-8B"]) == "8B"
    assert [figs.context_label(t) for t in (4096, 131072, 2**20, 1000)] == [
        "4k", "128k", "1M", "1,000"]


def test_calculator_labels_each_cache_dtype_with_its_batch_per_gpu_and_per_node():
    node = Deployment(H200, gpus=8, tp=8)
    fig = new_figure(7, 3.6)
    figs.draw_calculator(fig, KIMI_LINEAR_48B_A3B.name, 2**20, node)
    texts = [t.get_text() for t in fig.axes[0].texts]
    for dtype in figs.CACHE_DTYPES:
        fit = capacity(KIMI_LINEAR_48B_A3B, 2**20, dataclasses.replace(node, cache_dtype=dtype))
        assert f"{fit.per_gpu:,} held by each GPU, {fit.per_node:,} served by the node" in texts


def test_the_sweep_draws_only_the_batches_that_fit():
    node = Deployment(H200, gpus=8, tp=8)
    batches = [2**i for i in range(10)]
    fig = new_figure(7, 5)
    figs.draw_batch_sweep(fig, ["MiniMax-Text-01"], 131072, batches, node)
    line = fig.axes[0].lines[0]
    most = capacity(PUBLISHED["MiniMax-Text-01"], 131072, node).per_gpu
    assert list(line.get_xdata()) == [b for b in batches if b <= most] != batches
    step = decode_step_bytes(PUBLISHED["MiniMax-Text-01"], 131072, 1, deployment=node)
    assert line.get_ydata()[0] == 100 * step.per_sequence / step.total


def test_bars_and_sweep_draw_one_series_per_model_and_context():
    fig = new_figure(7, 5)
    figs.draw_memory_per_sequence(fig, list(PUBLISHED), [4096, 2**20])
    widths = sorted(round(p.get_width(), 9) for p in fig.axes[0].patches)
    assert widths == sorted(round(sequence_bytes(PUBLISHED[n], t).total_bytes / 2**30, 9)
                            for n in PUBLISHED for t in (4096, 2**20))  # one bar each, in GiB
    fig = new_figure(7, 5)
    figs.draw_batch_sweep(fig, ["Llama-3-8B", KIMI_LINEAR_48B_A3B.name], 4096, [1, 4, 16],
                          Deployment(H200, 8, 8))
    assert len(fig.axes[0].lines) == 2 + 1  # two models and the 50 % line


@pytest.mark.parametrize("call", [
    lambda fig: figs.draw_memory_per_sequence(fig, ["GPT-5"], [4096]),
    lambda fig: figs.draw_memory_per_sequence(fig, ["Llama-3-8B"], []),
    lambda fig: figs.draw_calculator(fig, "GPT-5", 4096, Deployment(H200)),
    lambda fig: figs.draw_calculator(fig, "Llama-3-8B", 4096, 80),
    lambda fig: figs.draw_batch_sweep(fig, ["Llama-3-8B"], 4096, [0, 2], Deployment(H200)),
])
def test_bad_input_is_refused(call):
    with pytest.raises(ValueError):
        call(new_figure())


def test_lesson16b_labels_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    node = Deployment(H200, gpus=8, tp=8)
    with language("zh_CN"):
        assert figs.size_label(KIMI_LINEAR_48B_A3B) == "48B，激活 3B"
        assert figs.placement_label("TP 8 + DP attention") == "TP 8 + 数据并行注意力"
        fig = new_figure(7, 3.6)
        figs.draw_calculator(fig, KIMI_LINEAR_48B_A3B.name, 2**20, node)
        fit = capacity(KIMI_LINEAR_48B_A3B, 2**20, dataclasses.replace(node, cache_dtype="bf16"))
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert f"每块 GPU 容纳 {fit.per_gpu:,} 条，整个节点服务 {fit.per_node:,} 条" in texts
        assert "131,072 个 Token" in figs.calculator_alt("Qwen3-Next 80B-A3B", 131072, "TP 8")
    # outside the block: English again, word for word what the notebook used to write
    assert figs.placement_label("TP 8 + DP attention") == "TP 8 + DP attention"
    assert figs.calculator_alt("Qwen3-Next 80B-A3B", 131072, "TP 8 + DP attention") == (
        "Three stacked bars for one GPU serving Qwen3-Next 80B-A3B at 131,072 tokens (TP 8 + DP "
        "attention), one per cache format (bf16, fp8, 4-bit): its share of the weights, caches "
        "and states at the largest batch that fits, with that batch per GPU and per node "
        "written above each bar and the usable memory dashed."
    )
