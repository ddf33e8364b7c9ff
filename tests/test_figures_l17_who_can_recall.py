"""Tests of the figures of Lesson 17 (who can recall?): attnbook.figures.l17_who_can_recall.

The result figures are drawn from a hand-made study and live rows shaped like
``benchmarks/recall_sweep.py``'s and ``train_cell``'s, so nothing here trains a model.
"""

from __future__ import annotations

import math

import pytest
import torch
from attnbook.figures import l17_who_can_recall as figs
from attnbook.plotting import figure_png, new_figure
from attnbook.recall_study import summarize
from attnlab.tasks import mqar_batch

MIXERS = ("attn", "kda", "gdn", "deltanet", "linear", "kda→attn", "attn→kda")
FINAL = {"attn": 0.999, "kda": 0.9, "gdn": 0.85, "deltanet": 0.8, "linear": 0.5, "kda→attn": 0.7,
         "attn→kda": 0.98}


def fake_study(ns=(2, 4, 8), seeds=(0, 1, 2), lrs=(3e-3, 8e-3), mixers=MIXERS):
    """A study dict shaped like benchmarks/recall_sweep.py's output, accuracy falling with N."""
    rows = []
    for n in ns:
        for lr in lrs:
            for mixer in mixers:
                for seed in seeds:
                    acc = min(1.0, FINAL[mixer] * (2 / n) ** 0.5 + 0.01 * seed)
                    rows.append({"mixer": mixer, "pattern": mixer.split("→"), "n_pairs": n,
                                 "lr": lr, "seed": seed, "val_accuracy": acc, "accuracy": acc,
                                 "value": 1.0, "in_context": min(1.0, acc + 0.3),
                                 "curve_steps": [50, 100], "curve_val": [0.1, acc]})
    return {"meta": {}, "config": {"head_dim": 8}, "grid": {"lrs": list(lrs)}, "rows": rows}


def fake_rows(n=4, mixers=MIXERS):
    """Live-run rows shaped like train_cell's."""
    return [{"mixer": m, "n_pairs": n, "seed": 0, "accuracy": FINAL[m] * 0.9,
             "curve_steps": [50, 100, 150], "curve_val": [0.1, 0.5, FINAL[m] * 0.9]}
            for m in mixers]


@pytest.mark.parametrize("n_pairs", [1, 4, 8])
def test_draw_mqar_sequence(n_pairs):
    fig = new_figure(9, 2.8)
    figs.draw_mqar_sequence(fig, n_pairs=n_pairs)
    (ax,) = fig.axes
    inputs, _ = mqar_batch(1, n_pairs, generator=torch.Generator().manual_seed(0))
    texts = [t.get_text() for t in ax.texts]
    # every input token and every scored target is written on the figure
    for token in inputs[0].tolist():
        assert str(token) in texts
    assert texts.count("·") == 4 * n_pairs - n_pairs  # unscored target positions
    assert figure_png(fig)


@pytest.mark.parametrize("n_pairs", [0, 9, 2.5, True])
def test_draw_mqar_sequence_rejects_n_pairs(n_pairs):
    with pytest.raises(ValueError, match="n_pairs"):
        figs.draw_mqar_sequence(new_figure(), n_pairs=n_pairs)


def test_draw_study_one_line_per_mixer_and_a_dot_per_seed():
    summary = summarize(fake_study())
    fig = new_figure(7.2, 4.0)
    figs.draw_study(fig, summary, head_dim=8)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == len(MIXERS) + 1  # the mixers and the 1/N line
    dots = sum(len(c.get_offsets()) for c in ax.collections)
    assert dots == len(MIXERS) * 3 * 3  # 3 values of N, 3 seeds
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.25\n(N = 2)", "0.5\n(N = 4)",
                                                           "1\n(N = 8)"]
    attn = next(line for line in ax.get_lines() if line.get_label() == "softmax attention")
    assert list(attn.get_ydata()) == pytest.approx(
        [100 * summary["attn", n].mean for n in (2, 4, 8)])
    assert figure_png(fig)


def test_draw_answer_analysis_bars_add_up():
    summary = summarize(fake_study())
    fig = new_figure(7.0, 3.6)
    figs.draw_answer_analysis(fig, summary, 8)
    (ax,) = fig.axes
    assert len(ax.patches) == 3 * len(MIXERS)
    ends = {}
    for p in ax.patches:
        y = round(p.get_y(), 3)
        ends[y] = max(ends.get(y, 0), p.get_x() + p.get_width())
    assert all(e == pytest.approx(100) for e in ends.values())
    with pytest.raises(ValueError, match="n_pairs"):
        figs.draw_answer_analysis(new_figure(), summary, 5)


def test_draw_live_vs_study_marks_the_study_range():
    summary = summarize(fake_study(ns=(4,)))
    fig = new_figure(7.0, 3.8)
    figs.draw_live_vs_study(fig, fake_rows(), summary)
    (ax,) = fig.axes
    assert [p.get_height() for p in ax.patches] == pytest.approx(
        [100 * 0.9 * FINAL[m] for m in figs.mixers_in(fake_rows())])
    assert len(ax.containers) == 2 * len(MIXERS)  # bars and error bars
    assert figure_png(fig)


def test_study_figures_reject_bad_input():
    with pytest.raises(ValueError, match="summary"):
        figs.draw_study(new_figure(), {}, head_dim=8)
    with pytest.raises(ValueError, match="rows"):
        figs.draw_live_vs_study(new_figure(), [], summarize(fake_study()))


@pytest.mark.parametrize("mixer", [MIXERS[0], MIXERS[-1]])
def test_draw_training_curves_extremes(mixer):
    fig = new_figure(6.4, 3.4)
    figs.draw_training_curves(fig, fake_rows(), mixer=mixer)
    (ax,) = fig.axes
    assert figs.mixer_name(mixer) in ax.get_title()
    bold = [line for line in ax.get_lines() if line.get_linewidth() == 2.2]
    assert len(bold) == 1
    # the other mixers: one grey line of len(MIXERS) - 1 curves, each ended by a NaN gap
    (grey,) = [line for line in ax.get_lines() if line.get_color() == "0.75"]
    assert sum(math.isnan(y) for y in grey.get_ydata()) == len(MIXERS) - 1
    assert len(ax.get_lines()) == 3  # the chosen mixer, the others in grey, the 1/N line
    assert figure_png(fig)


def test_draw_training_curves_rejects_unknown_mixer():
    with pytest.raises(ValueError, match="mixer"):
        figs.draw_training_curves(new_figure(), fake_rows(), mixer="mamba")


def test_mixer_names_colours_and_markers_cover_the_study():
    for mixer in MIXERS:
        assert figs.mixer_name(mixer) != mixer
        assert mixer in figs.MIXER_COLOURS and mixer in figs.MIXER_MARKERS
    assert len({figs.MIXER_COLOURS[m] for m in MIXERS}) == len(MIXERS)


def test_alt_texts_name_every_mixer_with_its_numbers():
    summary = summarize(fake_study())
    alt = figs.study_alt(summary, head_dim=8)
    assert "(0.25, 0.5, 1)" in alt
    attn = summary["attn", 2].mean, summary["attn", 8].mean
    assert f"softmax attention from {100 * attn[0]:.1f} % to {100 * attn[1]:.1f} %" in alt
    alt = figs.answer_analysis_alt(summary, 8)
    assert "at N = 8" in alt and "1/N = 12.5 %" in alt
    assert all(f"{figs.mixer_name(m)} " in alt for m in MIXERS)
    with pytest.raises(ValueError, match="n_pairs"):
        figs.answer_analysis_alt(summary, 5)
    alt = figs.live_vs_study_alt(fake_rows())
    assert "at N = 4" in alt
    assert f"KDA {100 * 0.9 * FINAL['kda']:.1f} %" in alt
    with pytest.raises(ValueError, match="rows"):
        figs.live_vs_study_alt([])
