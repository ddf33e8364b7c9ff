"""Figures of Lesson 3 (scaling and softmax): score spreads, scaled against unscaled,
temperature."""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure
from matplotlib.patches import StepPatch
from matplotlib.ticker import MaxNLocator

from attnlab.attention import attention_scores, stable_softmax
from attnlab.i18n import tr

from ..demos.toy_attention import (
    SCORE_EDGES,
    SENTENCE,
    SPREAD_RANGE,
    WEIGHT_EDGES,
    check_query,
    random_scores,
    score_spread,
    toy_attention,
)
from ..plotting import (
    PALETTE,
    fast_bars,
    fixed_axes,
    light_xticks,
    style_axes,
    text_legend,
    title_at_top,
)


def _histogram(
    ax, heights, edges, colour: str, baseline: float = 0.0
) -> None:
    """``ax.stairs(heights, edges, fill=True)``, half transparent, without updating the data
    limits (the caller sets both axis ranges): for a step outline of 80 bins, that update walks
    the outline segment by segment and costs more than drawing it."""
    ax.add_artist(
        StepPatch(
            heights,
            edges,
            baseline=baseline,
            fill=True,
            color=colour,
            alpha=0.6,
            linewidth=0,
        )
    )


def draw_score_spread(fig: Figure, dim: int = 96) -> None:
    """Histograms of raw and scaled scores for width ``dim``, and of the largest softmax weight
    per query over 64 keys (raw against scaled)."""
    data = score_spread(dim)
    ax_s, ax_w = fixed_axes(
        fig, 2, left=0.12, right=0.97, bottom=0.17, top=0.9, wspace=0.3
    )
    raw, scaled = PALETTE[5], PALETTE[0]
    # log10 of the counts on a linear axis with fixed ticks: looks like a log axis, draws faster
    edges = SCORE_EDGES.numpy()
    for counts, colour in (
        (data.raw_counts, raw),
        (data.scaled_counts, scaled),
    ):
        heights = torch.where(
            counts > 0, counts.clamp_min(1).log10(), torch.tensor(-0.1)
        )
        _histogram(ax_s, heights.numpy(), edges, colour, baseline=-0.1)
    ax_s.set_xlim(-SPREAD_RANGE, SPREAD_RANGE)
    n_pairs = data.n_queries * data.n_keys
    top = math.ceil(math.log10(n_pairs))
    ax_s.set_ylim(-0.1, top + 0.3)
    ax_s.set_yticks(
        range(top + 1),
        ["1", "10", "100", "1k", "10k", "100k", "1M"][: top + 1],
    )
    style_axes(
        ax_s, tr("score (dimensionless)"), tr("pairs per bin (log scale)")
    )
    title_at_top(
        ax_s, tr("{n:,} random scores at d = {dim}", n=n_pairs, dim=dim)
    )
    text_legend(
        ax_s,
        [
            (
                tr(
                    "■ q·k: std {std:.1f} (√d = {root:.1f})",
                    std=data.raw_std,
                    root=math.sqrt(dim),
                ),
                raw,
            ),
            (tr("■ q·k/√d: std {std:.2f}", std=data.scaled_std), scaled),
        ],
        x=0.02,
        y=0.98,
    )
    wedges = WEIGHT_EDGES.numpy()
    _histogram(ax_w, data.top_raw_counts.numpy(), wedges, raw)
    _histogram(ax_w, data.top_scaled_counts.numpy(), wedges, scaled)
    ax_w.axvline(
        1 / data.n_keys, color="#999999", linestyle="--", linewidth=1
    )
    ax_w.set_xlim(0, 1)
    ax_w.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
    ax_w.set_ylim(0, data.n_queries)
    ax_w.set_yticks([0, data.n_queries // 2, data.n_queries])
    style_axes(
        ax_w,
        tr("largest weight in a row of {n} keys", n=data.n_keys),
        tr("count (of {n} queries)", n=data.n_queries),
    )
    title_at_top(ax_w, tr("How peaked is the softmax?"))
    text_legend(
        ax_w,
        [
            (tr("■ unscaled: mean {mean:.2f}", mean=data.top_raw_mean), raw),
            (
                tr("■ scaled: mean {mean:.2f}", mean=data.top_scaled_mean),
                scaled,
            ),
        ],
        x=0.5,
        y=0.98,
        ha="center",
    )


def draw_scaled_vs_unscaled(
    fig: Figure, dim: int = 96, n_keys: int = 16, seed: int = 3
) -> None:
    """One random query against ``n_keys`` keys at width ``dim``: softmax weights of the raw
    scores (nearly one-hot) and of the scaled ones."""
    raw = random_scores(dim, n_queries=1, n_keys=n_keys, seed=seed)[0]
    axes = fig.subplots(1, 2, sharey=True)
    for ax, scores, colour, name in (
        (axes[0], raw, PALETTE[5], "softmax(q·k)"),
        (axes[1], raw / math.sqrt(dim), PALETTE[0], "softmax(q·k / √d)"),
    ):
        weights = stable_softmax(scores)
        ax.bar(range(n_keys), weights.tolist(), color=colour)
        style_axes(
            ax, tr("key j"), tr("attention weight"), f"{name}, d = {dim}"
        )
        ax.set_ylim(0, 1)
    axes[1].tick_params(axis="y", labelleft=True)


TEMPERATURES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0)


def draw_temperature(
    fig: Figure,
    temperature: float = 1.0,
    query: int = 4,
    sentence: str = SENTENCE,
) -> None:
    """The toy example's scaled scores of one query, and softmax(scores / τ) at temperature τ."""
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not temperature > 0
    ):
        raise ValueError(
            f"temperature: expected a positive number, got {temperature!r}"
        )
    tokens, q, k, _ = toy_attention().qkv(sentence)
    query = check_query(query, len(tokens))
    scores = attention_scores(q, k)[0, 0, query]
    weights = stable_softmax(scores / temperature)
    entropy = float(-(weights * weights.clamp_min(1e-300).log()).sum())
    ax_s, ax_w = fixed_axes(
        fig, 2, left=0.11, right=0.98, bottom=0.25, top=0.83, wspace=0.3
    )
    fast_bars(ax_s, scores.tolist(), PALETTE[2])
    ax_s.axhline(0, color="black", linewidth=0.8)
    light_xticks(
        ax_s, range(len(tokens)), tokens, grid=False, marks=False, rotation=45
    )
    ax_s.yaxis.set_major_locator(MaxNLocator(4))
    style_axes(ax_s, "", tr("score s·q·k (dimensionless)"))
    title_at_top(ax_s, tr("scores of “{token}”", token=tokens[query]))
    colours = [
        PALETTE[5] if j == int(weights.argmax()) else PALETTE[0]
        for j in range(len(tokens))
    ]
    fast_bars(ax_w, weights.tolist(), colours)
    ax_w.axhline(
        1 / len(tokens), color="#999999", linestyle="--", linewidth=1
    )
    light_xticks(
        ax_w, range(len(tokens)), tokens, grid=False, marks=False, rotation=45
    )
    ax_w.set_ylim(0, 1)
    ax_w.set_yticks([0, 0.5, 1], ["0", "0.5", "1"])
    style_axes(ax_w, "", tr("weight (sums to 1)"))
    title_at_top(
        ax_w,
        tr(
            "τ = {tau:g}: entropy {entropy:.2f} nats",
            tau=temperature,
            entropy=entropy,
        ),
    )
    fig.text(0.5, 0.01, tr("key token"), ha="center", va="bottom")
