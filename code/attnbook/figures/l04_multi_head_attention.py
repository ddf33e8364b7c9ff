"""Figures of Lesson 4 (multi-head attention): the hand-built heads and GQA's key/value heads.
The layers behind them are built in :mod:`attnbook.demos.heads_position`."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attnlab.attention import head_attention_weights
from attnlab.checks import check_choice
from attnlab.configs import SOPHIA
from attnlab.i18n import tr
from attnlab.kv_cache import kv_cache_bytes

from ..demos.heads_position import HEADS_SENTENCE, constructed_two_head_layer
from ..plotting import (
    GREY,
    PALETTE,
    SMALL_TEXT_PT,
    fast_bars,
    heatmap,
    style_axes,
)


def draw_constructed_heads(fig: Figure, sharpness: float = 8.0) -> None:
    """Weights of the two hand-built heads, and of the same matrices read as one wide head.

    Rows are labelled with their word and position ("dog 4"); the key axis with the position
    alone, which the row labels name: eleven words side by side would overlap in a panel a
    third of the column wide."""
    words = HEADS_SENTENCE
    labels = [f"{w} {i}" for i, w in enumerate(words)]
    two, x = constructed_two_head_layer(words, sharpness, n_heads=2)
    one, _ = constructed_two_head_layer(words, sharpness, n_heads=1)
    with torch.no_grad():
        w2 = head_attention_weights(two, x)[0]
        w1 = head_attention_weights(one, x)[0, 0]
    axes = fig.subplots(1, 3, sharey=True)
    titles = [
        tr("head 1:\nprevious word"),
        tr("head 2:\nsame word earlier"),
        tr("same weights,\none wide head"),
    ]
    for ax, weights, title in zip(
        axes, [w2[0], w2[1], w1], titles, strict=True
    ):
        heatmap(
            ax,
            weights,
            xlabel=tr("key position"),
            ylabel="",
            title=title,
            yticklabels=labels,
            vmin=0,
            vmax=1,
        )
        ax.set_xticks(range(0, len(words), 2))
        ax.set_xticks(range(len(words)), minor=True)
    axes[0].set_ylabel(tr("query (word, position)"))
    image = axes[-1].images[0]
    bar = fig.colorbar(
        image,
        ax=list(axes),
        label=tr("weight"),
        shrink=0.8,
        ticks=[0, 0.5, 1],
    )
    bar.ax.set_yticklabels(["0", "0.5", "1"])


#: Sophia's head layout: the query heads that GQA lets share key/value heads.
GQA_HEADS = SOPHIA.n_heads
GQA_HEAD_DIM = SOPHIA.head_dim

#: The slider's key/value head counts: every divisor of the query heads (1 = MQA, all = MHA).
KV_HEAD_COUNTS: tuple[int, ...] = tuple(
    h for h in range(1, GQA_HEADS + 1) if GQA_HEADS % h == 0
)


def gqa_bytes_per_token(n_kv_heads: int) -> int:
    """Bytes of keys and values one token leaves in ONE layer's cache, in bf16, for Sophia's
    head width with ``n_kv_heads`` key/value heads: 2 · H_kv · d_h · 2 bytes."""
    return kv_cache_bytes(1, n_kv_heads, GQA_HEAD_DIM, 1, 2)


def kv_heads_alt(n_kv_heads: int) -> str:
    """The alt text of the key/value-heads panel at ``n_kv_heads``, with its numbers."""
    check_choice("n_kv_heads", n_kv_heads, KV_HEAD_COUNTS)
    return tr(
        "Left: {heads} query heads drawn as small boxes above {kv} wider "
        "key/value boxes; each group of {group} query heads sits over "
        "the key/value head it shares. Right: bars of the cache bytes per token per layer "
        "in bf16 for 1 to {heads} key/value heads, growing in proportion; the bar for "
        "{kv} is highlighted at {nbytes:,} bytes.",
        heads=GQA_HEADS,
        kv=n_kv_heads,
        group=GQA_HEADS // n_kv_heads,
        nbytes=gqa_bytes_per_token(n_kv_heads),
    )


def draw_kv_heads(fig: Figure, n_kv_heads: int = 4) -> None:
    """Left: which key/value head each of Sophia's query heads reads with H_kv shared K/V heads
    (groups of H / H_kv). Right: the cache bytes per token per layer for every H_kv, chosen bold.
    """
    check_choice("n_kv_heads", n_kv_heads, KV_HEAD_COUNTS)
    group = GQA_HEADS // n_kv_heads
    ax_groups, ax_bytes = fig.subplots(1, 2, width_ratios=[1.3, 1])
    shades = (PALETTE[0], PALETTE[4])  # neighbouring groups alternate
    for h in range(GQA_HEADS):
        ax_groups.add_patch(
            Rectangle(
                (h + 0.08, 1.2),
                0.84,
                0.8,
                facecolor=shades[(h // group) % 2],
                edgecolor="none",
            )
        )
    for g in range(n_kv_heads):
        ax_groups.add_patch(
            Rectangle(
                (g * group + 0.08, 0),
                group - 0.16,
                0.8,
                facecolor=shades[g % 2],
                edgecolor="black",
                lw=0.6,
            )
        )
    ax_groups.text(
        GQA_HEADS / 2,
        2.15,
        tr("{n} query heads", n=GQA_HEADS),
        ha="center",
        va="bottom",
    )
    ax_groups.text(
        GQA_HEADS / 2,
        -0.15,
        tr("{n} key/value heads, cached", n=n_kv_heads)
        if n_kv_heads > 1
        else tr("{n} key/value head, cached", n=n_kv_heads),
        ha="center",
        va="top",
    )
    ax_groups.set_xlim(0, GQA_HEADS)
    ax_groups.set_ylim(-1.0, 3.0)
    ax_groups.set_axis_off()
    name = {1: "MQA", GQA_HEADS: tr("multi-head")}.get(n_kv_heads, "GQA")
    ax_groups.set_title(
        tr("{name}: {group} query heads per K/V head", name=name, group=group)
        if group > 1
        else tr(
            "{name}: {group} query head per K/V head", name=name, group=group
        ),
        y=1.0,
    )
    sizes = [gqa_bytes_per_token(h) for h in KV_HEAD_COUNTS]
    chosen = KV_HEAD_COUNTS.index(n_kv_heads)
    fast_bars(
        ax_bytes,
        sizes,
        [PALETTE[0] if i == chosen else GREY for i in range(len(sizes))],
    )
    ax_bytes.set_ylim(0, max(sizes) * 1.18)
    ax_bytes.text(
        chosen,
        sizes[chosen] + max(sizes) * 0.03,
        f"{sizes[chosen]:,}",
        ha="center",
        va="bottom",
        fontsize=SMALL_TEXT_PT,
    )
    ax_bytes.set_xticks(range(len(sizes)), [str(h) for h in KV_HEAD_COUNTS])
    style_axes(
        ax_bytes, tr("key/value heads H_kv"), tr("bytes per token per layer")
    )
    ax_bytes.set_title(f"bf16, d_h = {GQA_HEAD_DIM}", y=1.0)
