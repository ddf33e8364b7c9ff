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
from attnlab.i18n import tr
from attnlab.kda import kda_step

from ..demos.chunk_kda import (
    RETENTION_CHANNELS,
    RETENTION_HALF_LIFE,
    RETENTION_STEPS,
    retention_demo,
)
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


def _with_state(template: str) -> str:
    """``template`` with ``{state}`` as S_{t−1}: in mathtext if the template is in Latin
    letters, in Unicode otherwise (matplotlib's mathtext has no CJK glyphs, so a Chinese
    title cannot hold a formula)."""
    plain = template.isascii()
    return template.format(state=r"$S_{t-1}$" if plain else "Sₜ₋₁")


#: The toy step's decays, one per key channel, evenly from the first to the last row.
_DECAY_RANGE = (0.2, 1.0)


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
    alpha = torch.linspace(*_DECAY_RANGE, d, dtype=torch.float64)
    g = alpha.log().view(1, 1, d)
    beta = torch.ones(1, 1, dtype=torch.float64)
    decayed = alpha[:, None] * state[0, 0]
    _, new = kda_step(k, k, v, g=g, beta=beta, state=state)
    new = new[0, 0]
    limit = max(state.abs().max().item(), new.abs().max().item())
    axes = fig.subplots(1, 3)
    titles = (
        _with_state(tr("before: {state}")),
        _with_state(tr(r"decay: Diag($\alpha_t$) {state}")),
        tr(r"correct: $S_t$ ($\beta_t = 1$)"),
    )
    ylabels = (tr("key channel"), tr(r"key channel ($\alpha_t$)"), "")
    for i, (ax, matrix, title) in enumerate(
        zip(axes, (state[0, 0], decayed, new), titles, strict=True)
    ):
        heatmap(
            ax,
            matrix,
            xlabel=tr("value channel"),
            ylabel=ylabels[i],
            title=title,
            cmap=DIVERGING_CMAP,
            vmin=-limit,
            vmax=limit,
            colorbar_label=tr("entry") if i == 2 else None,
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
    ax_map.set_xlabel(tr("tokens since the association was written"))
    ax_map.set_ylabel(tr("channel half-life"))
    title_at_top(
        ax_map,
        tr(
            "spread ±{spread:g} octaves, later writes β = {beta:g}",
            spread=spread,
            beta=write_strength,
        ),
    )
    fast_colour_bar(
        ax_map,
        cmap,
        norm,
        [0, 0.5, 1],
        tr("share of k₀v₀ᵀ left in the channel"),
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
        tr("tokens since the association was written"),
        tr("recall of v₀ by k₀"),
    )
    title_at_top(
        ax_recall,
        tr(
            "after {t} tokens: {kda:.2f} against {shared:.2f} shared",
            t=late,
            kda=float(demo["recall"][late]),
            shared=float(demo["recall_shared"][late]),
        ),
    )
    text_legend(
        ax_recall,
        [
            ("—— " + tr("KDA: one gate per channel"), PALETTE[0]),
            ("– – " + tr("one shared gate, same mean log α"), PALETTE[5]),
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
        label=tr("one decay per head, at each value"),
    )
    ax.axhspan(channel.min(), channel.max(), color=PALETTE[1], alpha=0.25)
    ax.axhline(
        channel.mean(),
        color=PALETTE[1],
        linestyle="--",
        label=tr("best per-channel decays (one for each group)"),
    )
    ax.set_xticks(x, [f"{a:g}" for a in grid])
    style_axes(
        ax,
        tr("the decay α of one decay per head"),
        tr("read error (mean of the two groups)"),
    )
    ax.legend(
        loc="lower left", bbox_to_anchor=(0.0, 0.18), fontsize=SMALL_TEXT_PT
    )


def channel_lifetimes_alt(result: dict) -> str:
    """The alt text of :func:`draw_channel_lifetimes`, read from the same result."""
    rows, grid = result["rows"], result["grid"]
    curve = torch.stack([row["head_curve"] for row in rows]).mean(0)
    channel = sum(row["channel_score"] for row in rows) / len(rows)
    values = dict(
        lo=grid[0],
        hi=grid[-1],
        seeds=len(rows),
        best=grid[int(curve.argmin())],
    )
    if channel < curve.min():
        return tr(
            "Line chart of the read error against the value of one constant decay "
            "per head, from {lo:g} to {hi:g}, with a shaded range over {seeds} seeds; "
            "its lowest point is at {best:g}. A dashed line with its own shaded range "
            "marks the best per-channel decays, below the whole curve.",
            **values,
        )
    return tr(
        "Line chart of the read error against the value of one constant decay "
        "per head, from {lo:g} to {hi:g}, with a shaded range over {seeds} seeds; "
        "its lowest point is at {best:g}. A dashed line with its own shaded range "
        "marks the best per-channel decays, not below the whole curve.",
        **values,
    )


def decay_then_correct_alt(head_dim: int = 8) -> str:
    """The alt text of :func:`draw_decay_then_correct`."""
    d = check_int_in("head_dim", head_dim, 2, 16)
    return tr(
        "Three {d}-by-{d} heat maps of a toy state. Left: the state before the step. "
        "Middle: after the per-channel decay; each row is scaled by its own alpha, from "
        "{lo:.2f} at the top to {hi:.2f} at the bottom, so the top rows fade most. Right: "
        "after the delta-rule write with beta 1, a rank-one change that spreads over all "
        "rows.",
        d=d,
        lo=_DECAY_RANGE[0],
        hi=_DECAY_RANGE[1],
    )


def channel_retention_alt(spread: float, write_strength: float) -> str:
    """The alt text of a frame of :func:`draw_channel_retention`."""
    return tr(
        "Top: heat map of {channels} key channels against {steps} tokens showing the "
        "share of an old association left in each channel, with half-lives spread plus "
        "or minus {spread:g} octaves around {half_life:g} tokens and later writes of "
        "strength {beta:g}; slow channels keep it longer. Bottom: recall of the old value "
        "by its key over time, with per-channel gates and with one shared gate of the "
        "same mean log-decay.",
        channels=RETENTION_CHANNELS,
        steps=RETENTION_STEPS,
        spread=spread,
        half_life=RETENTION_HALF_LIFE,
        beta=write_strength,
    )
