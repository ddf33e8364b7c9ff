"""Figures of Lesson 4 (multi-head attention): the hand-built heads and the head-count slider.
The layers behind them are built in :mod:`attnlab.demos.heads_position`."""

from __future__ import annotations

import math

import matplotlib
import torch
from matplotlib.figure import Figure

from .._checks import check_choice
from ..attention import (
    head_attention_weights,
    mha_flops,
    mha_parameter_counts,
)
from ..demos.heads_position import (
    HEADS_D_MODEL,
    HEADS_SENTENCE,
    constructed_two_head_layer,
    random_head_weights,
)
from ..plotting import SEQUENTIAL_CMAP, SMALL_TEXT_PT, heatmap

HEAD_COUNTS: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)


def draw_constructed_heads(fig: Figure, sharpness: float = 8.0) -> None:
    """Weights of the two hand-built heads, and of the same matrices read as one wide head."""
    words = HEADS_SENTENCE
    labels = [f"{w} {i}" for i, w in enumerate(words)]
    two, x = constructed_two_head_layer(words, sharpness, n_heads=2)
    one, _ = constructed_two_head_layer(words, sharpness, n_heads=1)
    with torch.no_grad():
        w2 = head_attention_weights(two, x)[0]
        w1 = head_attention_weights(one, x)[0, 0]
    axes = fig.subplots(1, 3, sharey=True)
    titles = ["head 1:\nprevious word", "head 2:\nsame word earlier",
              "same weights,\none wide head"]
    for ax, weights, title in zip(axes, [w2[0], w2[1], w1], titles, strict=True):
        heatmap(ax, weights, xlabel="key (word, position)", ylabel="", title=title,
                xticklabels=labels, yticklabels=labels, vmin=0, vmax=1)
    axes[0].set_ylabel("query (word, position)")
    image = axes[-1].images[0]
    fig.colorbar(image, ax=list(axes), label="attention weight", shrink=0.8)


def draw_head_maps(fig: Figure, n_heads: int = 4) -> None:
    """Small multiples: one attention map per head of the untrained layer, for H heads.

    The maps are tiled into one image (one axes), which renders much faster than H axes.
    """
    check_choice("n_heads", n_heads, HEAD_COUNTS)
    d_model, t = HEADS_D_MODEL, len(HEADS_SENTENCE)
    weights = random_head_weights(n_heads, d_model)
    ncols = {1: 1, 2: 2, 3: 3, 4: 2, 6: 3, 8: 4, 12: 4, 16: 4}[n_heads]  # near-square tiling
    nrows = math.ceil(n_heads / ncols)
    gap = 2
    mosaic = torch.full((nrows * (t + gap) - gap, ncols * (t + gap) - gap), float("nan"),
                        dtype=torch.float64)
    ax = fig.subplots()
    for h in range(n_heads):
        r, c = divmod(h, ncols)
        mosaic[r * (t + gap): r * (t + gap) + t, c * (t + gap): c * (t + gap) + t] = weights[h]
        label = f"head {h + 1}" if n_heads <= 8 else f"{h + 1}"
        ax.text(c * (t + gap) + (t - 1) / 2, r * (t + gap) - 0.7, label, ha="center",
                va="bottom", fontsize=SMALL_TEXT_PT)
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP].with_extremes(bad="white")
    image = ax.imshow(mosaic.numpy(), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_ylim(mosaic.shape[0] - 0.5, -1.8)
    params = mha_parameter_counts(d_model, n_heads)["total"]
    flops = mha_flops(t, d_model, n_heads)["total"]
    ax.set_title(f"H = {n_heads} head{'s' if n_heads > 1 else ''} of width d_h = "
                 f"{d_model // n_heads} (d_model = {d_model})\nW_Q, W_K, W_V, W_O: {params:,} "
                 f"parameters · {flops:,} FLOPs at T = {t}", fontsize=SMALL_TEXT_PT, pad=16)
    fig.colorbar(image, ax=ax, location="bottom", shrink=0.5, aspect=40, pad=0.02,
                 label=f"attention weight (each map: query rows × key columns, T = {t})")
