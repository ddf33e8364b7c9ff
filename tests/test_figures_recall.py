"""Tests of the figures of Lesson 17 (who can recall?): attnlab.figures.recall.

The result figures are drawn from hand-made rows shaped like ``run_recall_experiment``'s, so
nothing here trains a model.
"""

from __future__ import annotations

import math

import pytest
import torch
from attnlab.figures import recall as figs
from attnlab.plotting import figure_png, new_figure
from attnlab.tasks import mqar_batch
from attnlab.train import TrainHistory

MIXERS = ("attn", "kda", "gdn", "deltanet", "linear", "kda→attn")
FINAL = {"attn": 0.999, "kda": 0.9, "gdn": 0.85, "deltanet": 0.8, "linear": 0.5, "kda→attn": 1.0}


def fake_rows(ns=(8,), seeds=(0,), mixers=MIXERS):
    rows = []
    for n in ns:
        for mixer in mixers:
            for seed in seeds:
                acc = FINAL[mixer] * (8 / n) ** 0.5 if n > 8 else FINAL[mixer]
                steps = [50, 100, 150, 200]
                history = TrainHistory(step=steps, loss=[3.0, 1.0, 0.5, 0.2],
                                       accuracy=[0.1, 0.4, 0.7, acc],
                                       seconds=[1.0, 2.0, 3.0, 4.0])
                rows.append({"mixer": mixer, "pattern": (mixer,), "n_pairs": n, "seed": seed,
                             "accuracy": acc, "steps": 200, "seconds": 4.0,
                             "history": history})
    return rows


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


def test_draw_recall_accuracy_one_seed():
    fig = new_figure()
    figs.draw_recall_accuracy(fig, fake_rows(), n_pairs=8)
    (ax,) = fig.axes
    assert len(ax.patches) == len(MIXERS)
    heights = [p.get_height() for p in ax.patches]
    assert heights[0] == pytest.approx(99.9)
    assert "N/head_dim = 0.25" in ax.get_title()
    assert figure_png(fig)


def test_draw_recall_accuracy_subset_and_seeds():
    rows = fake_rows(ns=(4, 8, 16), seeds=(0, 1, 2), mixers=("attn", "linear"))
    fig = new_figure()
    figs.draw_recall_accuracy(fig, rows, n_pairs=16)
    (ax,) = fig.axes
    assert len(ax.patches) == 2
    assert "3 seeds" in ax.get_title()


def test_draw_recall_accuracy_rejects_bad_input():
    with pytest.raises(ValueError, match="n_pairs"):
        figs.draw_recall_accuracy(new_figure(), fake_rows(), n_pairs=5)
    with pytest.raises(ValueError, match="rows"):
        figs.draw_recall_accuracy(new_figure(), [])


def test_draw_accuracy_vs_pairs():
    rows = fake_rows(ns=(4, 8, 16), seeds=(0, 1, 2))
    fig = new_figure()
    figs.draw_accuracy_vs_pairs(fig, rows)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == len(MIXERS)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4\n(0.125)", "8\n(0.25)",
                                                           "16\n(0.5)"]
    assert figure_png(fig)


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


def test_draw_training_curves_several_seeds_and_sizes():
    rows = fake_rows(ns=(4, 8, 16), seeds=(0, 1, 2))
    fig = new_figure(6.4, 3.4)
    figs.draw_training_curves(fig, rows, mixer="linear", n_pairs=16)
    (ax,) = fig.axes
    assert "N = 16" in ax.get_title()
    bold = [line for line in ax.get_lines() if line.get_linewidth() == 2.2]
    assert len(bold) == 3  # one per seed


def test_draw_training_curves_rejects_unknown_mixer():
    with pytest.raises(ValueError, match="mixer"):
        figs.draw_training_curves(new_figure(), fake_rows(), mixer="mamba")


def test_mixer_names_and_colours_cover_the_experiment():
    for mixer in MIXERS:
        assert figs.mixer_name(mixer) != mixer
        assert mixer in figs.MIXER_COLOURS
    assert len({figs.MIXER_COLOURS[m] for m in MIXERS}) == len(MIXERS)
