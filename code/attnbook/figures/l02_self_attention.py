"""Figures of Lesson 2 (self-attention: Q, K and V) on the toy example of
:mod:`attnbook.demos.toy_attention`."""

from __future__ import annotations

import matplotlib
import torch
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.transforms import offset_copy

from attnlab.attention import softmax_attention
from attnlab.i18n import tr

from ..demos.attention_counts import attention_dot_products
from ..demos.toy_attention import (
    FEATURES,
    SENTENCE,
    check_query,
    sentence_weights,
    toy_attention,
)
from ..plotting import (
    PALETTE,
    SEQUENTIAL_CMAP,
    SMALL_TEXT_PT,
    fast_bars,
    fast_colour_bar,
    fixed_axes,
    heatmap,
    light_xticks,
    style_axes,
    title_at_top,
)


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return value


def _labels(tokens) -> list[str]:
    return [f"{i}·{t}" for i, t in enumerate(tokens)]


def _row_labels(ax, labels, header: str) -> None:
    """Name the rows 0, 1, … of ``ax`` with ``labels`` left of the axes, as y tick labels would,
    but as plain texts (see :func:`_token_axis`), under a ``header``: a y label is placed by
    measuring the tick labels, which these texts are not."""
    ax.set_yticks([])
    pad = matplotlib.rcParams["ytick.major.pad"]
    left = offset_copy(
        ax.get_yaxis_transform(), fig=ax.figure, x=-pad, units="points"
    )
    size = matplotlib.rcParams["ytick.labelsize"]
    for i, label in enumerate(labels):
        ax.text(
            0,
            i,
            label,
            transform=left,
            ha="right",
            va="center",
            fontsize=size,
        )
    above_left = offset_copy(
        ax.transAxes, fig=ax.figure, x=-pad, y=pad, units="points"
    )
    ax.text(
        0,
        1,
        header,
        transform=above_left,
        ha="right",
        va="bottom",
        fontsize=matplotlib.rcParams["axes.labelsize"],
    )


def draw_query_meets_keys(
    fig: Figure, query: int = 4, sentence: str = SENTENCE
) -> None:
    """One query against every key: the query vector, the keys ``[T, F]`` and the weights.

    Columns are the toy example's named key features, so a large q·k is visibly a match.
    """
    tokens, q, k, v = toy_attention().qkv(sentence)
    query = check_query(query, len(tokens))
    _, weights = softmax_attention(q, k, v, causal=False, return_weights=True)
    q_row, keys, w_row = (
        q[0, 0, query : query + 1],
        k[0, 0],
        weights[0, 0, query],
    )
    fig.set_layout_engine(None)
    grid = fig.add_gridspec(
        2,
        2,
        height_ratios=[1.4, len(tokens)],
        width_ratios=[3, 2],
        left=0.2,
        right=0.97,
        bottom=0.19,
        top=0.93,
        hspace=0.45,
        wspace=0.06,
    )
    ax_q = fig.add_subplot(grid[0, 0])
    ax_k = fig.add_subplot(grid[1, 0])
    ax_w = fig.add_subplot(grid[1, 1], sharey=ax_k)
    heatmap(
        ax_q,
        q_row,
        xlabel="",
        ylabel="",
        yticklabels=["q"],
        annotate=True,
        title=tr(
            "query of “{token}”, q = x W_Q: what it looks for",
            token=tokens[query],
        ),
    )
    ax_q.set_xticks([])
    heatmap(
        ax_k,
        keys,
        xlabel=tr("feature"),
        ylabel=tr("key token"),
        title=tr("keys k = x W_K: what each announces"),
        # staggered on two rows: side by side, "place" and "number" touch
        xticklabels=[
            tr(name) if j % 2 == 0 else "\n" + tr(name)
            for j, name in enumerate(FEATURES)
        ],
        yticklabels=_labels(tokens),
        vmin=-0.3,
        vmax=1.1,
        annotate=True,
    )
    ax_k.tick_params(axis="x", labelrotation=0)
    for label in ax_k.get_xticklabels():
        label.set_horizontalalignment("center")
    colours = [
        PALETTE[5] if j == int(w_row.argmax()) else PALETTE[0]
        for j in range(len(tokens))
    ]
    ax_w.barh(range(len(tokens)), w_row.tolist(), color=colours)
    for j, w in enumerate(w_row.tolist()):
        ax_w.text(
            w + 0.01, j, f"{w:.2f}", va="center", fontsize=SMALL_TEXT_PT
        )
    ax_w.set_xlim(0, 1)
    style_axes(ax_w, tr("attention weight (sums to 1)"), "", "softmax(s q·k)")
    ax_w.tick_params(axis="y", labelleft=False)


def draw_attention_row(
    fig: Figure,
    query: int = 4,
    causal: bool = False,
    sentence: str = SENTENCE,
) -> None:
    """The weights of one query (bars) and the whole ``[T, T]`` weight matrix with its row
    outlined; with ``causal`` the masked (future) cells are grey."""
    causal = _check_bool("causal", causal)
    tokens, weights = sentence_weights(sentence, causal)
    t = len(tokens)
    query = check_query(query, t)
    row = weights[query]
    ax_bar, ax_map = fixed_axes(
        fig, 2, left=0.11, right=0.88, bottom=0.25, top=0.9, wspace=0.42
    )
    colours = [
        PALETTE[5] if j == int(row.argmax()) else PALETTE[0] for j in range(t)
    ]
    fast_bars(ax_bar, row.tolist(), colours)
    light_xticks(
        ax_bar,
        range(len(tokens)),
        tokens,
        grid=False,
        marks=False,
        rotation=45,
    )
    ax_bar.set_ylim(0, 1)
    ax_bar.set_yticks([0, 0.5, 1], ["0", "0.5", "1"])
    style_axes(ax_bar, "", tr("weight of key j (row sums to 1)"))
    title_at_top(
        ax_bar, tr("query {i}, “{token}”", i=query, token=tokens[query])
    )
    shown = weights.clone()
    if causal:
        shown[torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)] = (
            float("nan")
        )
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP].with_extremes(bad="#d0d0d0")
    heatmap(ax_map, shown, xlabel="", ylabel="", cmap=cmap, vmin=0, vmax=1)
    light_xticks(
        ax_map,
        range(len(tokens)),
        tokens,
        grid=False,
        marks=False,
        rotation=45,
    )
    _row_labels(ax_map, _labels(tokens), tr("query i"))
    ax_map.add_patch(
        Rectangle(
            (-0.5, query - 0.5),
            t,
            1,
            fill=False,
            edgecolor=PALETTE[5],
            linewidth=2.5,
        )
    )
    count = attention_dot_products(t, causal=causal)
    formula = "T(T+1)/2" if causal else "T²"
    title_at_top(
        ax_map,
        tr("{formula} = {count} products", formula=formula, count=count),
    )
    fast_colour_bar(
        ax_map, SEQUENTIAL_CMAP, Normalize(0, 1), [0, 0.5, 1], tr("weight")
    )
    ax_map.set_xlim(-0.5, t - 0.5)
    ax_map.set_ylim(t - 0.5, -0.5)
    fig.text(
        0.5,
        0.01,
        tr("key token j   (grey: masked future)")
        if causal
        else tr("key token j"),
        ha="center",
        va="bottom",
        fontsize=SMALL_TEXT_PT,
    )


def draw_dot_product_growth(fig: Figure, context: int = 4096) -> None:
    """Dot products per head per layer against the context length T (log–log), full and
    causal, with ``context`` marked."""
    if (
        isinstance(context, bool)
        or not isinstance(context, int)
        or not 1 <= context <= 2**20
    ):
        raise ValueError(
            f"context: expected an integer in [1, 2**20], got {context!r}"
        )
    lengths = [2**i for i in range(4, 21)]
    ax = fig.subplots()
    for causal, colour, name in (
        (False, PALETTE[0], tr("full: T²")),
        (True, PALETTE[1], tr("causal: T(T+1)/2")),
    ):
        ax.plot(
            lengths,
            [attention_dot_products(n, causal=causal) for n in lengths],
            color=colour,
            marker="o",
            ms=3,
            label=name,
        )
        ax.plot(
            [context],
            [attention_dot_products(context, causal=causal)],
            marker="o",
            ms=9,
            color=colour,
            zorder=5,
        )
    ax.plot(
        lengths,
        lengths,
        color="#999999",
        linestyle="--",
        label=tr("T (linear, for comparison)"),
    )
    ax.axvline(context, color=PALETTE[5], linewidth=1, alpha=0.6)
    ax.annotate(
        f"T = {context:,}",
        (context, 10),
        xytext=(4, 0),
        textcoords="offset points",
        color=PALETTE[5],
        fontsize=SMALL_TEXT_PT,
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    style_axes(
        ax,
        tr("context length T (tokens, log scale)"),
        tr("dot products per head per layer (log)"),
        tr("Self-attention scores every pair of tokens"),
    )
    ax.legend(loc="upper left")
