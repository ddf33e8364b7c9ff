"""Lesson 16b figures draw what attnlab.serving computes, and refuse unknown models."""

from __future__ import annotations

import pytest
from attnbook.figures import l16b_real_hybrids as figs
from attnbook.plotting import new_figure
from attnlab.configs import KIMI_LINEAR_48B_A3B, PUBLISHED
from attnlab.serving import largest_batch, sequence_bytes


def test_size_and_context_labels():
    assert figs.size_label(KIMI_LINEAR_48B_A3B) == "48B, 3B active"
    assert figs.size_label(PUBLISHED["Llama-3-8B"]) == "8B"
    assert [figs.context_label(t) for t in (4096, 131072, 2**20, 1000)] == [
        "4k", "128k", "1M", "1,000"]


def test_calculator_labels_each_cache_dtype_with_its_largest_batch():
    fig = new_figure(7, 3.6)
    figs.draw_calculator(fig, KIMI_LINEAR_48B_A3B.name, 2**20, 1128)
    texts = [t.get_text() for t in fig.axes[0].texts]
    for dtype in figs.CACHE_DTYPES:
        batch = largest_batch(KIMI_LINEAR_48B_A3B, 2**20, 1128 * 10**9, cache_dtype=dtype)
        assert f"batch {batch:,}" in texts


def test_bars_and_sweep_draw_one_series_per_model_and_context():
    fig = new_figure(7, 5)
    figs.draw_memory_per_sequence(fig, list(PUBLISHED), [4096, 2**20])
    widths = sorted(round(p.get_width(), 9) for p in fig.axes[0].patches)
    assert widths == sorted(round(sequence_bytes(PUBLISHED[n], t).total_bytes / 2**30, 9)
                            for n in PUBLISHED for t in (4096, 2**20))  # one bar each, in GiB
    fig = new_figure(7, 5)
    figs.draw_batch_sweep(fig, ["Llama-3-8B", KIMI_LINEAR_48B_A3B.name], 4096, [1, 4, 16])
    assert len(fig.axes[0].lines) == 2 + 1  # two models and the 50 % line


@pytest.mark.parametrize("call", [
    lambda fig: figs.draw_memory_per_sequence(fig, ["GPT-5"], [4096]),
    lambda fig: figs.draw_memory_per_sequence(fig, ["Llama-3-8B"], []),
    lambda fig: figs.draw_calculator(fig, "GPT-5", 4096, 80),
    lambda fig: figs.draw_batch_sweep(fig, ["Llama-3-8B"], 4096, [0, 2]),
])
def test_bad_input_is_refused(call):
    with pytest.raises(ValueError):
        call(new_figure())
