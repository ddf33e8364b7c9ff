"""Figures of Lesson 5 (order and position): permutation, the causal mask, RoPE."""

from __future__ import annotations

import math

import torch
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from attnlab.attention import (
    attention_scores,
    causal_mask,
    rope_angles,
    stable_softmax,
)
from attnlab.checks import check_choice
from attnlab.configs import SOPHIA
from attnlab.i18n import tr

from ..demos.heads_position import (
    ORDER_SENTENCE,
    ROPE_DIM,
    order_attention,
    order_setup,
    rope_cos_map,
    rope_demo_vectors,
    rope_log_offsets,
    rope_reach,
    rope_scores,
    rope_self_score_curve,
    smoothed_self_score,
)
from ..plotting import (
    GREY,
    PALETTE,
    SMALL_TEXT_PT,
    fast_colour_bar,
    heatmap,
    style_axes,
)


def draw_permutation(fig: Figure, causal: bool = False) -> None:
    """Outputs for "the dog bit the man" and "the man bit the dog", row by row, no positions."""
    original = ORDER_SENTENCE
    swapped = tuple("the man bit the dog".split())
    o1, o2 = (
        order_attention(original, causal),
        order_attention(swapped, causal),
    )
    lim = float(max(o1.abs().max(), o2.abs().max()))
    axes = fig.subplots(1, 2, sharex=True)
    for ax, o, words in zip(axes, (o1, o2), (original, swapped), strict=True):
        heatmap(
            ax,
            o,
            xlabel=tr("output feature"),
            ylabel=tr("token"),
            title=(
                tr("“{sentence}” (causal)", sentence=" ".join(words))
                if causal
                else f"“{' '.join(words)}”"
            ),
            yticklabels=[f"{w} {i}" for i, w in enumerate(words)],
            cmap="PuOr",
            vmin=-lim,
            vmax=lim,
            annotate=True,
        )
        ax.set_xticks(range(o.shape[1]))
    axes[1].set_ylabel("")


def draw_causal_mask(fig: Figure) -> None:
    """The causal mask M, the masked scores (−∞ above the diagonal) and the softmax weights in
    percent (whole numbers, so that neighbouring cells never run into each other)."""
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
    heatmap(
        axes[0],
        allowed.to(torch.float64),
        xlabel=tr("key j"),
        ylabel=tr("query i"),
        title=tr("mask M: may i see j?"),
        xticklabels=labels,
        yticklabels=labels,
        cmap="Greys",
        vmin=0,
        vmax=1.4,
    )
    lim = float(scores.abs().max())
    heatmap(
        axes[1],
        masked.masked_fill(~allowed, float("nan")),
        xlabel=tr("key j"),
        ylabel="",
        title=tr("scores + log M"),
        xticklabels=labels,
        cmap="PuOr",
        vmin=-lim,
        vmax=lim,
    )
    heatmap(
        axes[2],
        weights,
        xlabel=tr("key j"),
        ylabel="",
        title=tr("weights per row (%)"),
        xticklabels=labels,
        vmin=0,
        vmax=1,
    )
    for i in range(t):
        for j in range(t):
            if not allowed[i, j]:
                axes[0].text(
                    j,
                    i,
                    "0",
                    ha="center",
                    va="center",
                    fontsize=SMALL_TEXT_PT,
                    color="#444444",
                )
                axes[1].text(
                    j,
                    i,
                    "−∞",
                    ha="center",
                    va="center",
                    fontsize=SMALL_TEXT_PT,
                    color="#444444",
                )
                axes[2].text(
                    j,
                    i,
                    "0",
                    ha="center",
                    va="center",
                    fontsize=SMALL_TEXT_PT,
                    color="white",
                )
                axes[1].add_patch(
                    Rectangle(
                        (j - 0.5, i - 0.5),
                        1,
                        1,
                        facecolor="#dddddd",
                        edgecolor="white",
                    )
                )
            else:
                axes[0].text(
                    j,
                    i,
                    "1",
                    ha="center",
                    va="center",
                    fontsize=SMALL_TEXT_PT,
                    color="white",
                )
                axes[1].text(
                    j,
                    i,
                    f"{float(scores[i, j]) + 0.0:.1f}".replace("-0.0", "0.0"),
                    ha="center",
                    va="center",
                    fontsize=SMALL_TEXT_PT,
                )
                share = float(weights[i, j])
                axes[2].text(
                    j,
                    i,
                    f"{100 * share:.0f}",
                    ha="center",
                    va="center",
                    fontsize=SMALL_TEXT_PT,
                    color="black" if share > 0.6 else "white",
                )


ROPE_SHIFTS: tuple[int, ...] = (0, 10, 1000)


ROPE_OFFSETS: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64)


def rope_offset_alt(shift: int, offset: int) -> str:
    """The alt text of the offset panel at (``shift``, ``offset``)."""
    return tr(
        "Left: two unit arrows for the rotated pair 0 of a query at position "
        "{query_position} and a key at position {key_position}. Right: the RoPE score against "
        "the offset from 0 to {max_offset}, the same curve at every shift, with the point at "
        "offset {offset} marked.",
        query_position=shift + offset,
        key_position=shift,
        max_offset=max(ROPE_OFFSETS),
        offset=offset,
    )


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
    # pair 0: 1 rad per token
    theta = float(rope_angles(torch.tensor([1.0]), ROPE_DIM)[0, 0])
    circle = torch.linspace(0, 2 * math.pi, 100)
    ax_plane.plot(
        circle.cos().numpy(), circle.sin().numpy(), color="#bbbbbb", lw=0.8
    )
    tips, colours = [], (PALETTE[0], PALETTE[1])
    angles = [
        math.atan2(vec[1], vec[0]) + pos * theta
        for vec, pos in ((q, m), (k, n))
    ]
    # labels of arrows closer than 0.8 rad are pushed apart along the circle
    gap = math.remainder(angles[0] - angles[1], 2 * math.pi)
    push = max(0.0, 0.8 - abs(gap)) / 2 * (1 if gap >= 0 else -1)
    for angle, shift, pos, colour, name in (
        (angles[0], push, m, colours[0], "q"),
        (angles[1], -push, n, colours[1], "k"),
    ):
        tips.append((math.cos(angle), math.sin(angle)))
        ax_plane.text(
            1.32 * math.cos(angle + shift),
            1.32 * math.sin(angle + shift),
            f"{name}\n@{pos}",
            color=colour,
            ha="center",
            va="center",
            fontsize=SMALL_TEXT_PT,
        )
    # both unit arrows in one artist (one quiver, not two annotations)
    ax_plane.quiver(
        [0, 0],
        [0, 0],
        [x for x, _ in tips],
        [y for _, y in tips],
        color=colours,
        angles="xy",
        scale_units="xy",
        scale=1,
        width=0.014,
        headwidth=4,
        headlength=5,
        headaxislength=4.5,
        zorder=3,
    )
    ax_plane.set_xlim(-1.85, 1.85)
    ax_plane.set_ylim(-1.85, 1.85)
    # the unit circle's extent: three ticks suffice
    ax_plane.set_xticks([-1, 0, 1])
    ax_plane.set_yticks([-1, 0, 1])
    ax_plane.set_aspect("equal")
    style_axes(ax_plane, tr("coordinate 0 (direction)"), tr("coordinate 1"))
    # y=1.0 fixes each title's place: matplotlib otherwise measures the tick labels to place it
    ax_plane.set_title(
        tr("pair 0 turned by\n{m} and {n} rad", m=m, n=n), y=1.0
    )
    ax_curve.plot(offsets.numpy(), curve.numpy(), color=PALETTE[2], lw=1.5)
    ax_curve.plot([offset], [score], "o", color=PALETTE[5], ms=9, zorder=5)
    ax_curve.axhline(0, color="black", lw=0.6)
    ax_curve.set_xticks(range(0, ROPE_OFFSETS[-1] + 1, ROPE_OFFSETS[-1] // 4))
    ax_curve.yaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10]))
    style_axes(
        ax_curve,
        tr("offset m − n (tokens), key at n = {n}", n=n),
        tr("score ⟨R_m q, R_n k⟩"),
    )
    ax_curve.set_title(
        tr("m = {m}, n = {n}: score {score:.4f}", m=m, n=n, score=score), y=1.0
    )


ROPE_BASES: tuple[float, ...] = (100.0, 1000.0, 10000.0, 100000.0, 500000.0)


#: The map's head width: Sophia's (Lesson 5's "Sophia's numbers").
ROPE_MAP_DIM = SOPHIA.head_dim


#: The right panel's reference level: "still looks like itself" above it.
ROPE_REACH_LEVEL = 0.5


def rope_frequencies_alt(base: float) -> str:
    """The alt text of the base panel at ``base``, with its numbers."""
    pairs = ROPE_MAP_DIM // 2
    reaches = ", ".join(
        f"{other:,.0f}: {rope_reach(ROPE_MAP_DIM, other, ROPE_REACH_LEVEL):,}"
        for other in ROPE_BASES
    )
    return tr(
        "Left: a heat map of cos((m − n)θ_i) for the {pairs} pairs of a "
        "width-{dim} head with base {base:,.0f}, offsets on a log axis: each "
        "pair stays near 1 until a dashed diagonal where it has turned one radian, then "
        "flickers between −1 and 1; slower pairs reach the diagonal later. Right: the "
        "score of a vector with itself against the offset for this base, exact (a thin "
        "flickering grey line) and smoothed (bold), falling from 1 to about 0; dots on "
        "the dashed one-half line mark where each base first drops below one half "
        "(base: offset), {reaches}; the dot of base {base:,.0f} is filled.",
        pairs=pairs,
        dim=ROPE_MAP_DIM,
        base=base,
        reaches=reaches,
    )


def draw_rope_frequencies(fig: Figure, base: float = 10000.0) -> None:
    """Left: cos((m − n)·θ_i) over offsets (log axis) × pairs i, θ_i = base^(−2i/d), d = 96.
    Right: its column mean, the RoPE score of one content vector with itself at offset m − n,
    for the chosen base: exact (thin grey, it flickers) and averaged over nearby offsets
    (``smoothed_self_score``, bold); dots on the ½ line mark where each base first drops below
    ½ (the chosen one filled), so moving the base moves its dot along the row."""
    check_choice("base", base, ROPE_BASES)
    offsets = rope_log_offsets()
    pairs = ROPE_MAP_DIM // 2
    ax_map, ax_score = fig.subplots(1, 2, sharex=True)
    # the offsets are evenly spaced in log10, so the map is one image on a log10 axis (an image
    # draws in a fraction of the time of a mesh of quads)
    x = offsets.log10()
    half_step = float(x[1] - x[0]) / 2
    ax_map.imshow(
        rope_cos_map(offsets, ROPE_MAP_DIM, base).numpy(),
        cmap="PuOr",
        vmin=-1,
        vmax=1,
        origin="lower",
        aspect="auto",
        interpolation="nearest",
        extent=(
            float(x[0]) - half_step,
            float(x[-1]) + half_step,
            -0.5,
            pairs - 0.5,
        ),
    )
    # offset 1/θ_i: one radian
    turn = rope_angles(torch.tensor([1.0]), ROPE_MAP_DIM, base)[0]
    ax_map.plot(
        (1 / turn).log10().numpy(),
        torch.arange(pairs).numpy(),
        color="black",
        lw=1.2,
        ls="--",
    )
    ax_map.set_xlim(float(x[0]) - half_step, float(x[-1]) + half_step)
    ax_map.set_ylim(-0.5, pairs - 0.5)
    ax_map.set_yticks(range(0, pairs + 1, 16))
    _log10_ticks(ax_map.xaxis, [0, 2, 4])
    style_axes(ax_map, tr("offset m − n (tokens)"), tr("pair i (slower ↑)"))
    ax_map.grid(False)
    fast_colour_bar(ax_map, "PuOr", Normalize(-1, 1), [-1, 0, 1], "cos")
    ax_map.set_title(f"cos((m − n)θ_i), b = {base:,.0f}", y=1.0)
    ax_score.plot(
        x.numpy(),
        rope_self_score_curve(ROPE_MAP_DIM, base).numpy(),
        color=GREY,
        lw=0.8,
        label=tr("exact"),
    )
    colour = PALETTE[ROPE_BASES.index(base)]
    ax_score.plot(
        x.numpy(),
        smoothed_self_score(offsets, ROPE_MAP_DIM, base).numpy(),
        color=colour,
        lw=2.4,
        label=tr("smoothed"),
    )
    reach = rope_reach(ROPE_MAP_DIM, base, ROPE_REACH_LEVEL)
    ax_score.axhline(ROPE_REACH_LEVEL, color="black", lw=0.6, ls="--")
    # where every base drops below ½: the chosen one filled, the others open
    for index, other in enumerate(ROPE_BASES):
        chosen = other == base
        ax_score.plot(
            [math.log10(rope_reach(ROPE_MAP_DIM, other, ROPE_REACH_LEVEL))],
            [ROPE_REACH_LEVEL],
            "o",
            color=PALETTE[index],
            mfc=PALETTE[index] if chosen else "white",
            mew=1.5,
            ms=9 if chosen else 6,
            zorder=5,
        )
    ax_score.set_ylim(-0.3, 1.05)
    ax_score.yaxis.set_major_locator(FixedLocator([0, 0.5, 1]))
    style_axes(
        ax_score, tr("offset m − n (tokens)"), tr("score with itself / d")
    )
    ax_score.set_title(tr("below ½ from offset {reach:,}", reach=reach), y=1.0)
    ax_score.legend(loc="lower left", fontsize=SMALL_TEXT_PT, frameon=False)


def _log10_ticks(axis, exponents: list[int]) -> None:
    """Ticks at 10^e on an axis whose coordinate is log10 of the value, labelled 1, 10², 10⁴."""
    axis.set_major_locator(FixedLocator(exponents))
    axis.set_minor_locator(NullLocator())
    superscript = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    axis.set_ticklabels(
        [
            "1" if e == 0 else f"10{str(e).translate(superscript)}"
            for e in exponents
        ]
    )


def _power_of_ten(value: float) -> str:
    """500000 → "5·10⁵", 1000 → "10³": a short plain-text label (no mathtext to parse)."""
    exponent = math.floor(math.log10(value))
    mantissa = round(value / 10**exponent)
    power = f"10{_SUPERSCRIPT_DIGITS[exponent]}"
    return power if mantissa == 1 else f"{mantissa}·{power}"


_SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
