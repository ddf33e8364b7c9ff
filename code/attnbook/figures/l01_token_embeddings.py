"""Figures of Lesson 1 (token embeddings): the lookup as a product, table memory, the toy
clusters emerging as the table reads more of the corpus, nearest neighbours.
The toy data come from :mod:`attnbook.demos.toy_attention`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from attnlab.i18n import tr

from ..demos.token_embeddings import (
    embedding_bytes,
    nearest_neighbours,
    project_2d,
)
from ..demos.toy_attention import (
    group_of,
    group_words,
    same_group_neighbour_fraction,
    seen_words,
    toy_embeddings,
    toy_embeddings_after,
)
from ..demos.toy_corpus import WORD_GROUPS
from ..plotting import (
    MIB,
    PALETTE,
    SMALL_TEXT_PT,
    fixed_axes,
    heatmap,
    place_labels,
    style_axes,
)


def _group_colour(word: str) -> str:
    groups = list(WORD_GROUPS)
    group = group_of(word)
    return PALETTE[groups.index(group)] if group in groups else "#999999"


def draw_one_hot_lookup(
    fig: Figure, token_id: int = 2, vocab_size: int = 6, d_model: int = 4
) -> None:
    """One-hot row vector × table = the table's row: the lookup drawn as a product, every cell
    square (so the 1 × V and 1 × d vectors are rows) and annotated with its value."""
    g = torch.Generator().manual_seed(1)
    table = torch.randn(vocab_size, d_model, generator=g).round(decimals=1)
    one_hot = torch.zeros(1, vocab_size)
    one_hot[0, token_id] = 1.0
    ax_hot, ax_table, ax_row = fig.subplots(
        1, 3, width_ratios=[vocab_size, d_model, d_model]
    )
    heatmap(
        ax_hot,
        one_hot,
        xlabel=tr("token id"),
        ylabel="",
        title=tr("one-hot e (1 × V)"),
        xticklabels=[str(i) for i in range(vocab_size)],
        yticklabels=[""],
        cmap="Greys",
        vmin=0,
        vmax=1.6,
        annotate=True,
        aspect="equal",
        fmt="{:.0f}",
    )
    ax_hot.tick_params(axis="x", labelrotation=0)
    heatmap(
        ax_table,
        table,
        xlabel=tr("feature"),
        ylabel=tr("token id"),
        title=tr("table E (V × d)"),
        cmap="PuOr",
        vmin=-2.5,
        vmax=2.5,
        annotate=True,
        aspect="equal",
        fmt="{:.1f}",
    )
    ax_table.add_patch(_row_box(token_id, d_model))
    heatmap(
        ax_row,
        table[token_id : token_id + 1],
        xlabel=tr("feature"),
        ylabel="",
        title=tr("eᵀE = row {row}", row=token_id),
        yticklabels=[""],
        cmap="PuOr",
        vmin=-2.5,
        vmax=2.5,
        annotate=True,
        aspect="equal",
        fmt="{:.1f}",
    )


def _row_box(row: int, width: int):
    from matplotlib.patches import Rectangle

    return Rectangle(
        (-0.5, row - 0.5),
        width,
        1,
        fill=False,
        edgecolor=PALETTE[5],
        linewidth=2.5,
    )


#: The vocabularies (tokens) and widths :func:`draw_table_memory` has room for.
MEMORY_VOCABS = tuple(2**k for k in range(12, 19))


MEMORY_WIDTHS = (512, 1024, 1536, 4096)


def _kilo(tokens: int) -> str:
    """A token count in binary thousands, as vocabularies are named: 32768 → "32k" (counts that
    are not a multiple of 1024 stay as they are)."""
    return (
        f"{tokens // 1024}k"
        if tokens and tokens % 1024 == 0
        else f"{tokens:,}"
    )


def draw_table_memory(
    fig: Figure,
    vocab_size: int,
    d_model: int,
    marker: tuple[str, int, int] | None = None,
) -> None:
    """The embedding table drawn to scale: a rectangle V tall and d wide, so
    its area is its parameter count V·d, on axes that hold the largest
    choice (:data:`MEMORY_VOCABS`, :data:`MEMORY_WIDTHS`). The title gives
    V × d and the bytes in bf16 in MB and MiB.

    ``marker`` = (name, vocab_size, d_model) of a real model: its table as a
    dashed outline on the same scale, named."""
    (ax,) = fixed_axes(fig, 1, left=0.13, right=0.97, bottom=0.16, top=0.86)
    ax.add_patch(
        Rectangle(
            (0, 0), d_model, vocab_size, color=PALETTE[0], alpha=0.55, lw=0
        )
    )
    if marker is not None:
        name, v, d = marker
        ax.add_patch(
            Rectangle(
                (0, 0),
                d,
                v,
                fill=False,
                edgecolor="black",
                linestyle="--",
                linewidth=1.5,
            )
        )
        ax.text(
            d,
            v,
            f" {name}: {v:,} × {d:,}",
            ha="left",
            va="bottom",
            fontsize=SMALL_TEXT_PT,
        )
    ax.set_xlim(0, max(MEMORY_WIDTHS) * 1.05)
    ax.set_ylim(0, max(MEMORY_VOCABS) * 1.05)
    ax.set_xticks(MEMORY_WIDTHS, [f"{w:,}" for w in MEMORY_WIDTHS])
    vticks = MEMORY_VOCABS[-3:]
    ax.set_yticks([0, *vticks], ["0", *(_kilo(v) for v in vticks)])
    style_axes(ax, tr("width d (numbers per row)"), tr("vocabulary V (rows)"))
    n_bytes = embedding_bytes(vocab_size, d_model, "bf16")
    ax.set_title(
        tr(
            "V × d = {vocab_size:,} × {d_model:,} = {params:,} parameters\n"
            "= {mb:,.1f} MB = {mib:,.1f} MiB in bf16 (2 bytes each)",
            vocab_size=vocab_size,
            d_model=d_model,
            params=vocab_size * d_model,
            mb=n_bytes / 1e6,
            mib=n_bytes / MIB,
        ),
        y=1.0,
    )


def draw_clusters_emerging(fig: Figure, n_sentences: int) -> None:
    """The group words of the co-occurrence table built from the first ``n_sentences`` of the
    toy corpus, on its two principal axes, by group; words not yet seen are left out. The title
    gives how many words the table has seen and how many sit next to a word of their own group
    (:func:`~attnbook.demos.toy_attention.same_group_neighbour_fraction`)."""
    tokenizer, table = toy_embeddings_after(n_sentences)
    words = seen_words(tokenizer, table)
    points = project_2d(table)
    (ax,) = fixed_axes(fig, 1, left=0.06, right=0.98, bottom=0.16, top=0.86)
    xy = points[[tokenizer.vocab.index(w) for w in words]]
    ax.scatter(
        xy[:, 0], xy[:, 1], color=[_group_colour(w) for w in words], s=25
    )
    span = (xy.max(0).values - xy.min(0).values).clamp_min(1e-6)
    low, high = xy.min(0).values - 0.25 * span, xy.max(0).values + 0.25 * span
    ax.set_xlim(float(low[0]), float(high[0]))
    ax.set_ylim(float(low[1]), float(high[1]))
    # early tables crowd words together
    place_labels(
        ax,
        xy[:, 0].tolist(),
        xy[:, 1].tolist(),
        words,
        distances=(7, 14, 24, 36, 50, 66, 84, 104),
        leader_beyond=7,
    )
    # lighter than empty scatters
    handles = [
        Line2D(
            [],
            [],
            color=PALETTE[i],
            marker="o",
            ms=5,
            linestyle="none",
            label=tr(group),
        )
        for i, group in enumerate(WORD_GROUPS)
    ]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncols=5,
        fontsize=SMALL_TEXT_PT,
        handletextpad=0.2,
        columnspacing=1.0,
    )
    fraction = same_group_neighbour_fraction(tokenizer, table)
    style_axes(
        ax,
        tr("principal axis 1"),
        tr("principal axis 2"),
        tr(
            "After {n:,} sentences: {seen} of {total} words seen,\n"
            "{fraction:.0%} have a nearest neighbour of their own group",
            n=n_sentences,
            seen=len(words),
            total=len(group_words()),
            fraction=fraction,
        ),
    )
    # the coordinates themselves mean nothing
    (ax.set_xticks([]), ax.set_yticks([]))


def draw_neighbours(fig: Figure, word: str, k: int = 8) -> None:
    """The ``k`` nearest neighbours of ``word`` in the toy table, as the angle
    between their rows (degrees: 0 = same direction, 90 = unrelated); each bar
    is labelled with its cosine similarity. Near 1 cosines differ in their
    third decimal, angles in whole degrees, so the bars show the differences."""
    tokenizer, table = toy_embeddings()
    if word not in tokenizer.vocab:
        raise ValueError(f"word: {word!r} is not in the toy vocabulary")
    neighbours = nearest_neighbours(table, tokenizer.vocab.index(word), k)
    words = [tokenizer.vocab[i] for i, _ in neighbours][::-1]
    sims = [s for _, s in neighbours][::-1]
    angles = [math.degrees(math.acos(max(-1.0, min(1.0, s)))) for s in sims]
    (ax,) = fixed_axes(fig, 1, left=0.17, right=0.97, bottom=0.16, top=0.88)
    ax.barh(words, angles, color=[_group_colour(w) for w in words])
    for y, (angle, sim) in enumerate(zip(angles, sims, strict=True)):
        ax.text(
            angle + 2,
            y,
            f"{angle:.0f}°  (cos {sim:.3f})",
            va="center",
            fontsize=SMALL_TEXT_PT,
        )
    ax.set_xlim(0, 150)
    ax.set_xticks([0, 30, 60, 90, 120])
    style_axes(
        ax,
        tr("angle to the chosen word's row (degrees)"),
        "",
        tr(
            "Nearest neighbours of “{word}” ({group})",
            word=word,
            group=tr(group_of(word)),
        ),
    )


def _shown(piece: bytes) -> str:
    """A token's bytes as text, a space shown as ␣ and a cut-off UTF-8
    character as its hex bytes."""
    try:
        return piece.decode("utf-8").replace(" ", "␣")
    except UnicodeDecodeError:
        return "".join(f"\\x{b:02x}" for b in piece)


def draw_bpe_pieces(
    fig: Figure,
    vocab_size: int,
    pieces: Sequence[bytes],
    tokens_per_sentence: Mapping[int, float],
    table_bytes: Mapping[int, int],
    width: int,
) -> None:
    """What a vocabulary size buys and costs. Top: a sentence cut into the
    ``pieces`` of the BPE tokenizer of ``vocab_size`` tokens, one box each.
    Bottom left: tokens per held-out sentence against V
    (``tokens_per_sentence``); bottom right: the embedding table's bytes at
    width ``width`` (``table_bytes``, MB on the axis, MB and MiB in the
    title). The chosen V is the large dot."""
    top, left, right = fixed_axes(
        fig,
        [
            (0.02, 0.56, 0.96, 0.34),
            (0.1, 0.12, 0.36, 0.3),
            (0.6, 0.12, 0.36, 0.3),
        ],
    )
    top.set_axis_off()
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    # monospace: every character is 0.6 em wide; place boxes by characters
    char = 0.6 * SMALL_TEXT_PT / (0.96 * fig.get_figwidth() * 72)
    x, line = 0.01, 0
    for i, piece in enumerate(pieces):
        text = _shown(piece)
        if x + len(text) * char > 0.99:
            x, line = 0.01, line + 1
        top.text(
            x,
            0.85 - 0.33 * line,
            text,
            family="monospace",
            fontsize=SMALL_TEXT_PT,
            va="center",
            bbox={
                "boxstyle": "round,pad=0.2",
                "facecolor": PALETTE[i % 2],
                "alpha": 0.3,
                "edgecolor": "none",
            },
        )
        x += (len(text) + 1.2) * char
    fig.text(
        0.5,
        0.96,
        tr(
            "V = {vocab_size}: {n} tokens ({n_bytes} bytes)",
            vocab_size=vocab_size,
            n=len(pieces),
            n_bytes=sum(map(len, pieces)),
        ),
        ha="center",
        va="top",
    )
    vocabs = sorted(tokens_per_sentence)
    left.plot(
        vocabs,
        [tokens_per_sentence[v] for v in vocabs],
        marker="o",
        ms=3,
        color=PALETTE[0],
    )
    left.plot(
        [vocab_size],
        [tokens_per_sentence[vocab_size]],
        marker="o",
        ms=10,
        color=PALETTE[5],
    )
    left.set_ylim(0, 1.1 * max(tokens_per_sentence.values()))
    style_axes(left, tr("vocabulary V"), tr("tokens per sentence"))
    left.set_title(tr("held-out sentences"), fontsize=SMALL_TEXT_PT)
    mb = {v: table_bytes[v] / 1e6 for v in vocabs}
    right.plot(
        vocabs, [mb[v] for v in vocabs], marker="o", ms=3, color=PALETTE[1]
    )
    right.plot(
        [vocab_size], [mb[vocab_size]], marker="o", ms=10, color=PALETTE[5]
    )
    right.set_ylim(0, 1.1 * max(mb.values()))
    style_axes(right, tr("vocabulary V"), tr("table, bf16 (MB)"))
    right.set_title(
        tr(
            "d = {width}: {mb:.2f} MB = {mib:.2f} MiB",
            width=width,
            mb=mb[vocab_size],
            mib=table_bytes[vocab_size] / MIB,
        ),
        fontsize=SMALL_TEXT_PT,
    )


def draw_sinusoidal_positions(fig: Figure, positions: torch.Tensor) -> None:
    """The sinusoidal table P ``[T, d]`` as a heat map: one row per position,
    one column per coordinate; the left columns turn fast, the right ones
    slowly (Vaswani et al. §3.5)."""
    (ax,) = fixed_axes(fig, 1, left=0.1, right=0.86, bottom=0.16, top=0.9)
    n, d = positions.shape
    heatmap(
        ax,
        positions,
        xlabel=tr("coordinate (sin, cos pairs)"),
        ylabel=tr("position p"),
        colorbar_label="P[p, j]",
        cmap="PuOr",
        vmin=-1,
        vmax=1,
        xticklabels=[str(j) if j % 4 == 0 else "" for j in range(d)],
    )
    ax.tick_params(axis="x", labelrotation=0)
    ax.set_title(tr("Sinusoidal positions: T = {n}, d = {d}", n=n, d=d))
