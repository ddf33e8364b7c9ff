"""Figures of Lesson 5b (from attention to a language model): a head built by
hand next to a head a tiny model learned, and the learned head as it forms.
They draw weights measured in the lesson; the layers behind them are built in
:mod:`attnbook.demos.heads_position` and :mod:`attnbook.learned_head`."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.figure import Figure

from attnlab.attention import head_attention_weights

from ..demos.heads_position import constructed_two_head_layer
from ..plotting import heatmap


def _check_square(weights: torch.Tensor, words: Sequence[str]) -> None:
    t = len(words)
    if not isinstance(weights, torch.Tensor) or tuple(weights.shape) != (
        t,
        t,
    ):
        raise ValueError(
            f"weights: expected a tensor [{t}, {t}] (one row per word), got "
            f"{tuple(getattr(weights, 'shape', ()))}"
        )


def _labels(words: Sequence[str]) -> list[str]:
    return [f"{w} {i}" for i, w in enumerate(words)]


def _word_labels(ax, words: Sequence[str]) -> None:
    """Key labels written upwards, so 16 of them fit side by side, and every
    "the" in bold: the rows and columns the lesson reads."""
    ax.set_xticks(range(len(words)), _labels(words), rotation=90, ha="center")
    for label in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
        if label.get_text().split(" ")[0] == "the":
            label.set_fontweight("bold")


def built_previous_word_weights(words: Sequence[str]) -> torch.Tensor:
    """Lesson 4's hand-built "previous word" head (head 1) on ``words``.

    Returns its weights ``[T, T]``: row t puts ≈ all its weight on t − 1."""
    layer, x = constructed_two_head_layer(tuple(words), 8.0, n_heads=2)
    with torch.no_grad():
        return head_attention_weights(layer, x)[0, 0]


def draw_built_and_learned(
    fig: Figure, learned: torch.Tensor, words: Sequence[str], name: str
) -> None:
    """The hand-built previous-word head beside a learned head, same words.

    ``learned`` ``[T, T]``: the learned head's weights on ``words``;
    ``name`` says which head it is (e.g. "layer 2, head 2")."""
    _check_square(learned, words)
    built = built_previous_word_weights(words)
    labels = _labels(words)
    axes = fig.subplots(1, 2, sharey=True)
    titles = ["built by hand (Lesson 4):\nprevious word", f"learned: {name}"]
    for ax, weights, title in zip(
        axes, [built, learned], titles, strict=True
    ):
        heatmap(
            ax,
            weights,
            xlabel="key",
            ylabel="",
            title=title,
            yticklabels=labels,
            vmin=0,
            vmax=1,
        )
        _word_labels(ax, words)
    axes[0].set_ylabel("query (word, position)")
    fig.colorbar(
        axes[-1].images[0],
        ax=list(axes),
        label="attention weight",
        orientation="horizontal",
        location="top",
        shrink=0.5,
        aspect=30,
    )


def draw_head_at_step(
    fig: Figure,
    weights: torch.Tensor,
    words: Sequence[str],
    step: int,
    share: float,
) -> None:
    """One learned head's weights on ``words`` after ``step`` training steps.

    ``share``: its mean weight on the previous word at the probe's "the"s."""
    _check_square(weights, words)
    ax = fig.subplots()
    labels = _labels(words)
    title = (
        f'after {step} steps: weight on the word before "the" = {share:.2f}'
    )
    heatmap(
        ax,
        weights,
        xlabel="key (word, position)",
        ylabel="query (word, position)",
        title=title,
        yticklabels=labels,
        vmin=0,
        vmax=1,
        colorbar_label="attention weight",
        aspect="equal",
    )
    _word_labels(ax, words)
