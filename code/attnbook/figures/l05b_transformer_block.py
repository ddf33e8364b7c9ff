"""Figures of Lesson 5b (from attention to a language model): a head built by
hand next to a head a tiny model learned, and the learned head as it forms.
They draw weights measured in the lesson; the layers behind them are built in
:mod:`attnbook.demos.heads_position` and :mod:`attnbook.learned_head`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from matplotlib.figure import Figure

from attnlab.attention import head_attention_weights
from attnlab.i18n import tr

from ..demos.heads_position import constructed_two_head_layer
from ..plotting import (
    GREY,
    PALETTE,
    SMALL_TEXT_PT,
    fixed_axes,
    heatmap,
    style_axes,
)


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
    titles = [
        tr("built by hand (Lesson 4):\nprevious word"),
        tr("learned: {name}", name=name),
    ]
    for ax, weights, title in zip(
        axes, [built, learned], titles, strict=True
    ):
        heatmap(
            ax,
            weights,
            xlabel=tr("key"),
            ylabel="",
            title=title,
            yticklabels=labels,
            vmin=0,
            vmax=1,
        )
        _word_labels(ax, words)
    axes[0].set_ylabel(tr("query (word, position)"))
    fig.colorbar(
        axes[-1].images[0],
        ax=list(axes),
        label=tr("attention weight"),
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
    losses: Mapping[int, Sequence[float]] | None = None,
    floor: float | None = None,
) -> None:
    """One learned head's weights on ``words`` after ``step`` training steps.

    ``share``: its mean weight on the previous word at the probe's "the"s.
    ``losses`` (seed → the loss of every step; the first seed is the run
    whose head is drawn): the loss curves under the map, the first run's
    bold and the others faint, a dot at ``step``, and the corpus's entropy
    ``floor`` dashed."""
    _check_square(weights, words)
    if losses is None:
        ax = fig.subplots()
    else:
        fig.set_layout_engine(None)
        ax, ax_loss = fixed_axes(
            fig, [(0.22, 0.46, 0.6, 0.48), (0.16, 0.1, 0.8, 0.14)]
        )
    labels = _labels(words)
    title = tr(
        'after {step} steps: weight on the word before "the" = {share:.2f}',
        step=step,
        share=share,
    )
    heatmap(
        ax,
        weights,
        xlabel=tr("key (word, position)"),
        ylabel=tr("query (word, position)"),
        title=title,
        yticklabels=labels,
        vmin=0,
        vmax=1,
        colorbar_label=tr("attention weight"),
        aspect="equal",
    )
    _word_labels(ax, words)
    if losses is None:
        return
    runs = list(losses.values())
    for curve in runs[1:]:
        ax_loss.plot(curve, color=GREY, linewidth=0.8, alpha=0.6)
    ax_loss.plot(runs[0], color=PALETTE[0], linewidth=1.2)
    shown = min(step, len(runs[0])) - 1  # the loss of the step just taken
    if shown >= 0:
        ax_loss.plot([shown], [runs[0][shown]], "o", ms=8, color=PALETTE[5])
    ax_loss.axvline(max(shown, 0), color=PALETTE[5], linewidth=0.8)
    if floor is not None:
        ax_loss.axhline(floor, color="black", linestyle="--", linewidth=0.8)
        ax_loss.text(
            len(runs[0]) - 1,
            floor,
            tr("entropy floor"),
            ha="right",
            va="top",
            fontsize=SMALL_TEXT_PT,
        )
    ax_loss.set_ylim(0, max(max(c) for c in runs) * 1.05)
    style_axes(ax_loss, tr("training step"), tr("loss (nats)"))


def draw_next_word(
    fig: Figure,
    vocab: Sequence[str],
    logits: torch.Tensor,
    tau: float,
    marked: Sequence[str],
    marked_name: str = "places",
    top: int = 10,
) -> None:
    """p = softmax(z / τ) over the vocabulary: the ``top`` words with the
    largest logits (in that order, the same at every τ) and one bar for all
    the others; the ``marked`` words (``marked_name``) coloured, their total
    in the title."""
    if logits.dim() != 1 or logits.numel() != len(vocab):
        raise ValueError(
            f"logits: expected a tensor [{len(vocab)}] (one per word), got "
            f"{tuple(logits.shape)}"
        )
    p = torch.softmax(logits.double() / tau, dim=-1)
    order = logits.argsort(descending=True)[:top].tolist()
    names = [vocab[i] for i in order] + [tr("other {n}", n=len(vocab) - top)]
    values = [float(p[i]) for i in order] + [1.0 - float(p[order].sum())]
    colours = [PALETTE[0] if vocab[i] in marked else GREY for i in order]
    (ax,) = fixed_axes(fig, 1, left=0.2, right=0.97, bottom=0.16, top=0.88)
    rows = range(len(names))[::-1]
    ax.barh(rows, values, color=[*colours, "#cccccc"])
    ax.set_yticks(rows, names)
    for y, v in zip(rows, values, strict=True):
        ax.text(v + 0.01, y, f"{v:.2f}", va="center", fontsize=SMALL_TEXT_PT)
    ax.set_xlim(0, 1.12)
    mass = float(p[[vocab.index(w) for w in marked]].sum())
    style_axes(
        ax,
        tr("probability of the next word"),
        "",
        tr(
            "τ = {tau:g}: the {n} {name} hold {mass:.2f}",
            tau=tau,
            n=len(marked),
            name=tr(marked_name),
            mass=mass,
        ),
    )
