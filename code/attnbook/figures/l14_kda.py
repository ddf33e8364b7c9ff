"""Figures of Lesson 14 (KDA, Kimi Delta Attention): decay then correct, per-channel retention
(the data from :func:`attnbook.demos.chunk_kda.retention_demo`)."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from attnlab.checks import check_int_in
from attnlab.kda import kda_step

from ..demos.chunk_kda import retention_demo
from ..plotting import (
    DIVERGING_CMAP,
    PALETTE,
    SEQUENTIAL_CMAP,
    SMALL_TEXT_PT,
    fast_colour_bar,
    fixed_axes,
    heatmap,
    light_xticks,
    style_axes,
    text_legend,
    title_at_top,
)


def draw_decay_then_correct(
    fig: Figure, head_dim: int = 8, seed: int = 3
) -> None:
    """One KDA step on a toy state, in its two halves: S_{t−1}; Diag(α_t) S_{t−1} (each key
    channel, a row, fades by its own α); then the delta-rule write, which replaces what the
    decayed state held under k_t by v_t."""
    d = check_int_in("head_dim", head_dim, 2, 16)
    gen = torch.Generator().manual_seed(seed)
    state = torch.randn(1, 1, 1, d, d, generator=gen, dtype=torch.float64)[
        :, :, 0
    ]
    k = F.normalize(
        torch.randn(1, 1, 1, d, generator=gen, dtype=torch.float64), dim=-1
    )[:, :, 0]
    v = torch.randn(1, 1, 1, d, generator=gen, dtype=torch.float64)[:, :, 0]
    alpha = torch.linspace(0.2, 1.0, d, dtype=torch.float64)
    g = alpha.log().view(1, 1, d)
    beta = torch.ones(1, 1, dtype=torch.float64)
    decayed = alpha[:, None] * state[0, 0]
    _, new = kda_step(k, k, v, g=g, beta=beta, state=state)
    new = new[0, 0]
    limit = max(state.abs().max().item(), new.abs().max().item())
    axes = fig.subplots(1, 3)
    titles = (
        r"before: $S_{t-1}$",
        r"decay: Diag($\alpha_t$) $S_{t-1}$",
        r"correct: $S_t$ ($\beta_t = 1$)",
    )
    ylabels = ("key channel", r"key channel ($\alpha_t$)", "")
    for i, (ax, matrix, title) in enumerate(
        zip(axes, (state[0, 0], decayed, new), titles, strict=True)
    ):
        heatmap(
            ax,
            matrix,
            xlabel="value channel",
            ylabel=ylabels[i],
            title=title,
            cmap=DIVERGING_CMAP,
            vmin=-limit,
            vmax=limit,
            colorbar_label="entry" if i == 2 else None,
        )
        ax.set_xticks([0, d - 1], ["1", str(d)])
        ax.set_aspect("equal")
    axes[0].set_yticks([0, d - 1], ["1", str(d)])
    axes[1].set_yticks(
        range(d), [f"{a:.2f}" for a in alpha.tolist()], fontsize=SMALL_TEXT_PT
    )
    axes[2].set_yticks([0, d - 1], ["1", str(d)])


#: Lesson 14's slider grid: spread of the channels' half-lives (octaves either side of the
#: mean) and the write strength β of the tokens that follow the old association.
SPREADS = (0.0, 1.0, 2.0, 3.0, 4.0)


WRITE_STRENGTHS = (0.0, 0.1, 0.3)


# a slider revisits the same few settings
_cached_retention_demo = cache(retention_demo)


#: The colour range of the retention heat map (a little beyond [0, 1]: writes can overshoot).
_RETENTION_RANGE = (-0.2, 1.2)


def draw_channel_retention(
    fig: Figure, spread: float = 2.0, write_strength: float = 0.1
) -> None:
    """Per-channel survival of an old association under KDA (``retention_demo``): a heat map
    of channel × time (channels sorted by half-life, four of them labelled with their half-life
    in tokens), and what the old key still recalls, with per-channel gates and with one shared
    gate of the same mean log-decay. Laid out for a figure of about 6.4 × 6 inches, the two
    panels one above the other."""
    demo = _cached_retention_demo(spread, write_strength)
    retention, t = demo["retention"], demo["retention"].shape[0] - 1
    half_lives = (-math.log(2) / demo["log_gates"]).tolist()
    ax_map, ax_recall = fixed_axes(
        fig, [(0.13, 0.60, 0.66, 0.32), (0.13, 0.09, 0.82, 0.30)]
    )
    # colour-mapped here, once: an 8-bit RGBA image draws several times faster than floats
    norm, cmap = Normalize(*_RETENTION_RANGE), colormaps[SEQUENTIAL_CMAP]
    ax_map.imshow(
        cmap(norm(retention.T.numpy()), bytes=True),
        aspect="auto",
        interpolation="nearest",
    )
    ax_map.grid(False)
    ax_map.set_xlabel("tokens since the association was written")
    ax_map.set_ylabel("channel half-life")
    title_at_top(
        ax_map,
        f"spread ±{spread:g} octaves, later writes β = {write_strength:g}",
    )
    fast_colour_bar(
        ax_map, cmap, norm, [0, 0.5, 1], "share of k₀v₀ᵀ left in the channel"
    )
    rows = np.linspace(0, len(half_lives) - 1, 4).round().astype(int).tolist()
    ax_map.set_yticks(
        rows,
        [
            f"{half_lives[i]:.0f}"
            if half_lives[i] >= 10
            else f"{half_lives[i]:.1f}"
            for i in rows
        ],
    )
    light_xticks(
        ax_map, [0, t // 2, t], ["0", str(t // 2), str(t)], grid=False
    )
    steps = np.arange(t + 1)
    ax_map.set_xlim(-0.5, t + 0.5)
    ax_map.set_ylim(len(half_lives) - 0.5, -0.5)
    ax_recall.plot(
        steps, demo["recall"].numpy(), color=PALETTE[0], linewidth=2
    )
    ax_recall.plot(
        steps,
        demo["recall_shared"].numpy(),
        color=PALETTE[5],
        linestyle="--",
        linewidth=1.6,
    )
    ax_recall.set_ylim(-0.05, 1.05)
    ax_recall.set_xlim(0, t)
    ax_recall.set_yticks([0, 0.5, 1])
    light_xticks(ax_recall, [0, t // 2, t], ["0", str(t // 2), str(t)])
    late = t // 2
    style_axes(
        ax_recall,
        "tokens since the association was written",
        "recall of v₀ by k₀",
    )
    title_at_top(
        ax_recall,
        f"after {late} tokens: {demo['recall'][late]:.2f} against "
        f"{demo['recall_shared'][late]:.2f} shared",
    )
    text_legend(
        ax_recall,
        [
            ("—— KDA: one gate per channel", PALETTE[0]),
            ("– – one shared gate, same mean log α", PALETTE[5]),
        ],
        x=0.97,
        ha="right",
    )


def draw_channel_lifetimes(fig: Figure, result: dict) -> None:
    """Lesson 14's lifetime experiment (:func:`attnbook.demos.channel_lifetimes.
    lifetime_experiment`): the score of one constant decay per head over its grid, mean and
    range over the seeds, against the best per-channel decays (dashed, with their range)."""
    rows, grid = result["rows"], result["grid"]
    curves = torch.stack([row["head_curve"] for row in rows])  # [seeds, G]
    channel = torch.tensor([row["channel_score"] for row in rows])
    x = np.arange(len(grid))
    ax = fig.subplots()
    ax.fill_between(
        x,
        curves.min(0).values,
        curves.max(0).values,
        color=PALETTE[0],
        alpha=0.25,
        linewidth=0,
    )
    ax.plot(
        x,
        curves.mean(0),
        marker="o",
        color=PALETTE[0],
        label="one decay per head, at each value",
    )
    ax.axhspan(channel.min(), channel.max(), color=PALETTE[1], alpha=0.25)
    ax.axhline(
        channel.mean(),
        color=PALETTE[1],
        linestyle="--",
        label="best per-channel decays (one for each group)",
    )
    ax.set_xticks(x, [f"{a:g}" for a in grid])
    style_axes(
        ax,
        "the decay α of one decay per head",
        "read error (mean of the two groups)",
    )
    ax.legend(
        loc="lower left", bbox_to_anchor=(0.0, 0.18), fontsize=SMALL_TEXT_PT
    )


def channel_lifetimes_alt(result: dict) -> str:
    """The alt text of :func:`draw_channel_lifetimes`, read from the same result."""
    rows, grid = result["rows"], result["grid"]
    curve = torch.stack([row["head_curve"] for row in rows]).mean(0)
    channel = sum(row["channel_score"] for row in rows) / len(rows)
    where = "below" if channel < curve.min() else "not below"
    return (
        "Line chart of the read error against the value of one constant "
        f"decay per head, from {grid[0]:g} to {grid[-1]:g}, with a shaded "
        f"range over {len(rows)} seeds; its lowest point is at "
        f"{grid[int(curve.argmin())]:g}. A dashed line with its own shaded "
        f"range marks the best per-channel decays, {where} the whole curve."
    )
