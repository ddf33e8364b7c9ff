"""Figures of Lesson 5 (order and position): permutation, the causal mask, RoPE."""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from .._checks import check_choice
from ..attention import (
    attention_scores,
    causal_mask,
    rope_angles,
    stable_softmax,
)
from ..demos.heads_position import (
    ORDER_SENTENCE,
    ROPE_DIM,
    order_attention,
    order_setup,
    rope_demo_vectors,
    rope_scores,
)
from ..plotting import PALETTE, SMALL_TEXT_PT, heatmap, style_axes


def draw_permutation(fig: Figure, causal: bool = False) -> None:
    """Outputs for "the dog bit the man" and "the man bit the dog", row by row, no positions."""
    original = ORDER_SENTENCE
    swapped = tuple("the man bit the dog".split())
    o1, o2 = order_attention(original, causal), order_attention(swapped, causal)
    lim = float(max(o1.abs().max(), o2.abs().max()))
    axes = fig.subplots(1, 2, sharex=True)
    for ax, o, words in zip(axes, (o1, o2), (original, swapped), strict=True):
        heatmap(ax, o, xlabel="output feature", ylabel="token",
                title=f"“{' '.join(words)}”" + (" (causal)" if causal else ""),
                yticklabels=[f"{w} {i}" for i, w in enumerate(words)], cmap="PuOr",
                vmin=-lim, vmax=lim, annotate=True)
        ax.set_xticks(range(o.shape[1]))
    axes[1].set_ylabel("")


def draw_causal_mask(fig: Figure) -> None:
    """The causal mask M, the masked scores (−∞ above the diagonal) and the softmax weights."""
    vocab, table, w = order_setup()
    words = ORDER_SENTENCE
    t = len(words)
    x = table[[vocab.index(word) for word in words]][None, None]
    scores = attention_scores(x @ w[0], x @ w[1])[0, 0]
    allowed = causal_mask(t, t)
    masked = scores.masked_fill(~allowed, float("-inf"))
    weights = stable_softmax(masked, dim=-1)
    labels = [f"{word} {i}" for i, word in enumerate(words)]
    axes = fig.subplots(1, 3, sharey=True)
    heatmap(axes[0], allowed.to(torch.float64), xlabel="key j", ylabel="query i",
            title="mask M: may i see j?", xticklabels=labels, yticklabels=labels, cmap="Greys",
            vmin=0, vmax=1.4)
    lim = float(scores.abs().max())
    heatmap(axes[1], masked.masked_fill(~allowed, float("nan")), xlabel="key j", ylabel="",
            title="scores + log M", xticklabels=labels, cmap="PuOr", vmin=-lim, vmax=lim)
    heatmap(axes[2], weights, xlabel="key j", ylabel="", title="softmax per row",
            xticklabels=labels, vmin=0, vmax=1, annotate=True)
    for i in range(t):
        for j in range(t):
            if not allowed[i, j]:
                axes[0].text(j, i, "0", ha="center", va="center",
                             fontsize=SMALL_TEXT_PT, color="#444444")
                axes[1].text(j, i, "−∞", ha="center", va="center",
                             fontsize=SMALL_TEXT_PT, color="#444444")
                axes[1].add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#dddddd",
                                            edgecolor="white"))
            else:
                axes[0].text(j, i, "1", ha="center", va="center",
                             fontsize=SMALL_TEXT_PT, color="white")
                axes[1].text(j, i, f"{float(scores[i, j]) + 0.0:.1f}".replace("-0.0", "0.0"),
                             ha="center", va="center", fontsize=SMALL_TEXT_PT)


ROPE_SHIFTS: tuple[int, ...] = (0, 10, 1000)


ROPE_OFFSETS: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64)


def draw_rope_offset(fig: Figure, shift: int = 0, offset: int = 4) -> None:
    """Left: pair 0 of q (at position m = shift + offset) and k (at n = shift), rotated.
    Right: the score against the offset m − n, computed at this shift; the chosen point marked."""
    check_choice("shift", shift, ROPE_SHIFTS)
    check_choice("offset", offset, ROPE_OFFSETS)
    q, k = rope_demo_vectors()
    m, n = shift + offset, shift
    offsets = torch.arange(0, ROPE_OFFSETS[-1] + 1)
    curve = rope_scores(q, k, shift + offsets, n)
    score = float(rope_scores(q, k, torch.tensor([m]), n)[0])
    ax_plane, ax_curve = fig.subplots(1, 2, width_ratios=[1, 1.6])
    theta = float(rope_angles(torch.tensor([1.0]), ROPE_DIM)[0, 0])  # pair 0: 1 rad per token
    circle = torch.linspace(0, 2 * math.pi, 100)
    ax_plane.plot(circle.cos().numpy(), circle.sin().numpy(), color="#bbbbbb", lw=0.8)
    tips, colours = [], (PALETTE[0], PALETTE[1])
    angles = [math.atan2(vec[1], vec[0]) + pos * theta for vec, pos in ((q, m), (k, n))]
    # labels of arrows closer than 0.8 rad are pushed apart along the circle
    gap = math.remainder(angles[0] - angles[1], 2 * math.pi)
    push = max(0.0, 0.8 - abs(gap)) / 2 * (1 if gap >= 0 else -1)
    for angle, shift, pos, colour, name in ((angles[0], push, m, colours[0], "q"),
                                            (angles[1], -push, n, colours[1], "k")):
        tips.append((math.cos(angle), math.sin(angle)))
        ax_plane.text(1.32 * math.cos(angle + shift), 1.32 * math.sin(angle + shift),
                      f"{name}\n@{pos}", color=colour, ha="center", va="center",
                      fontsize=SMALL_TEXT_PT)
    # both unit arrows in one artist (one quiver, not two annotations)
    ax_plane.quiver([0, 0], [0, 0], [x for x, _ in tips], [y for _, y in tips], color=colours,
                    angles="xy", scale_units="xy", scale=1, width=0.014, headwidth=4,
                    headlength=5, headaxislength=4.5, zorder=3)
    ax_plane.set_xlim(-1.6, 1.6)
    ax_plane.set_ylim(-1.6, 1.6)
    ax_plane.set_xticks([-1, 0, 1])  # the unit circle's extent: three ticks suffice
    ax_plane.set_yticks([-1, 0, 1])
    ax_plane.set_aspect("equal")
    style_axes(ax_plane, "coordinate 0 (direction)", "coordinate 1")
    # y=1.0 fixes each title's place: matplotlib otherwise measures the tick labels to place it
    ax_plane.set_title(f"pair 0 turned by\n{m} and {n} rad", y=1.0)
    ax_curve.plot(offsets.numpy(), curve.numpy(), color=PALETTE[2], lw=1.5)
    ax_curve.plot([offset], [score], "o", color=PALETTE[5], ms=9, zorder=5)
    ax_curve.axhline(0, color="black", lw=0.6)
    ax_curve.set_xticks(range(0, ROPE_OFFSETS[-1] + 1, ROPE_OFFSETS[-1] // 4))
    ax_curve.yaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10]))
    style_axes(ax_curve, f"offset m − n (tokens), key at n = {n}", "score ⟨R_m q, R_n k⟩")
    ax_curve.set_title(f"m = {m}, n = {n}: score {score:.4f}", y=1.0)


def _log_ticks(ax, ticks: list[float]) -> None:
    """A few fixed major ticks and no minor ticks on a log y axis (cheap to lay out)."""
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    superscript = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")  # plain text: no mathtext to parse
    ax.set_yticklabels([f"10{str(round(math.log10(v))).translate(superscript)}" for v in ticks])


ROPE_BASES: tuple[float, ...] = (100.0, 10000.0, 500000.0)


ROPE_HEAD_DIMS: tuple[int, ...] = (64, 96, 128)


def draw_rope_frequencies(fig: Figure, base: float = 10000.0, head_dim: int = 96) -> None:
    """θ_i = base^(−2i/d) by pair index (left) and the wavelength 2π/θ_i in tokens (right)."""
    check_choice("base", base, ROPE_BASES)
    check_choice("head_dim", head_dim, ROPE_HEAD_DIMS)
    theta = rope_angles(torch.tensor([1.0]), head_dim, base)[0]
    pairs = torch.arange(head_dim // 2)
    wavelength = 2 * math.pi / theta
    ax_theta, ax_wave = fig.subplots(1, 2)
    pair_ticks = range(0, head_dim // 2 + 1, 16)  # a tick every 16 pairs: 3 to 5 per axis
    ax_theta.semilogy(pairs.numpy(), theta.numpy(), ".", color=PALETTE[0])
    ax_theta.set_ylim(1e-7, 2)
    _log_ticks(ax_theta, [1e-6, 1e-4, 1e-2, 1])
    ax_theta.set_xticks(pair_ticks)
    style_axes(ax_theta, "pair index i", "angle per token θ_i (rad, log)")
    # y=1.0 fixes each title's place: matplotlib otherwise measures the tick labels to place it
    ax_theta.set_title(f"θ_i = base^(−2i/d), base {base:,.0f}, d = {head_dim}", y=1.0)
    ax_wave.semilogy(pairs.numpy(), wavelength.numpy(), ".", color=PALETTE[5])
    ax_wave.axhline(4096, color="black", lw=0.8, ls="--")
    ax_wave.text(0, 4096 * 1.4, "4,096 tokens", fontsize=SMALL_TEXT_PT)
    ax_wave.set_ylim(1, 2e7)
    _log_ticks(ax_wave, [1, 1e2, 1e4, 1e6])
    ax_wave.set_xticks(pair_ticks)
    style_axes(ax_wave, "pair index i", "wavelength 2π/θ_i (tokens, log)")
    ax_wave.set_title(f"{head_dim // 2} pairs: one full turn every …", y=1.0)
    ax_wave.text(head_dim // 2 - 1, float(wavelength[-1]) * 2.5,
                 f"{float(wavelength[-1]):,.0f} tokens", ha="right",
                 fontsize=SMALL_TEXT_PT, color=PALETTE[5])
