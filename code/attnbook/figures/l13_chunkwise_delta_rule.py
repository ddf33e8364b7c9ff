"""Figures of Lesson 13 (the chunkwise delta rule): the WY identity, the chunk split, measured
times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullLocator,
)

from attnlab.checks import check_int_in
from attnlab.delta import ut_transform
from attnlab.i18n import current_language, tr

from ..costs import delta_rule_cost
from ..demos.chunk_kda import CHUNK_PICTURE_LENGTH, toy_chunk
from ..demos.transitions import transition_product
from ..plotting import (
    DIVERGING_CMAP,
    PALETTE,
    SEQUENTIAL_CMAP,
    SMALL_TEXT_PT,
    fast_bars,
    fixed_axes,
    heatmap,
    light_xticks,
    style_axes,
    text_legend,
    title_at_top,
)


def _log2_axis(ax, ticks: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    # many ticks: every other one labelled (from the last), so neighbours never touch
    step = 1 if len(ticks) <= 6 else 2
    last = len(ticks) - 1
    labels = [
        str(c) if (last - i) % step == 0 else "" for i, c in enumerate(ticks)
    ]
    ax.set_xticks(list(ticks), labels)
    ax.xaxis.set_minor_locator(NullLocator())


def draw_wy_identity(
    fig: Figure, n_factors: int = 4, head_dim: int = 8
) -> None:
    """The WY identity on one toy chunk: the C factors (I − β_i k_i k_iᵀ) multiplied out one by
    one (``transition_product``), the same matrix as I − Kᵀ W from the UT transform
    (``ut_transform``), and W itself: C rows instead of C matrix products."""
    c = check_int_in("n_factors", n_factors, 1, 16)
    d = check_int_in("head_dim", head_dim, 2, 16)
    k, v, beta = toy_chunk(c, d)
    product = transition_product(k, beta=beta)[0, 0]
    w, _ = ut_transform(k, v, beta=beta)
    low_rank = torch.eye(d, dtype=k.dtype) - k[0, 0].T @ w[0, 0]
    error = (product - low_rank).abs().max().item()
    axes = fig.subplots(1, 3, width_ratios=[d, d, d])
    limit = max(1.0, product.abs().max().item())
    heatmap(
        axes[0],
        product,
        xlabel=tr("column"),
        ylabel=tr("row (key channel)"),
        title=tr("{c} factors\n(I − β k kᵀ) multiplied", c=c),
        cmap=DIVERGING_CMAP,
        vmin=-limit,
        vmax=limit,
    )
    heatmap(
        axes[1],
        low_rank,
        xlabel=tr("column"),
        ylabel="",
        title=tr("I − Kᵀ W, one solve\nmax |diff| {error:.0e}", error=error),
        cmap=DIVERGING_CMAP,
        vmin=-limit,
        vmax=limit,
    )
    heatmap(
        axes[2],
        w[0, 0],
        xlabel=tr("key channel"),
        ylabel=tr("row i (token)"),
        title=tr("W: {c} × {d},\nall it needs", c=c, d=d),
        cmap=DIVERGING_CMAP,
        vmin=-limit,
        vmax=limit,
    )
    fig.colorbar(
        axes[2].images[0],
        ax=list(axes),
        label=tr("matrix entry (unitless)"),
        shrink=0.8,
    )
    axes[2].set_aspect("equal")
    for ax in axes[:2]:
        ax.set_aspect("equal")
    for ax in axes:
        ax.set_xticks([0, d - 1], ["1", str(d)])
    for ax in axes[:2]:
        ax.set_yticks([0, d - 1], ["1", str(d)])
    axes[2].set_yticks(range(c), [str(i + 1) for i in range(c)])


#: Chunk sizes of Lesson 13's slider; the matrix picture has CHUNK_PICTURE_LENGTH tokens.
CHUNK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


_STATE_GREY = "#DDDDDD"


#: Where the colour scale of the matrix picture sits in its empty upper triangle: columns
#: (left, right) and rows (top, bottom) of the CHUNK_PICTURE_LENGTH × CHUNK_PICTURE_LENGTH grid.
_SCALE_COLUMNS = (0.5 * CHUNK_PICTURE_LENGTH, 0.93 * CHUNK_PICTURE_LENGTH)


_SCALE_ROWS = (0.14 * CHUNK_PICTURE_LENGTH, 0.19 * CHUNK_PICTURE_LENGTH)


_SCALE_MAX = 0.5


@cache
def _chunk_picture_rgba(chunk_size: int) -> np.ndarray:
    """The matrix picture of ``draw_chunk_split`` as one RGBA image ``[T, T, 4]`` (uint8) (T =
    ``CHUNK_PICTURE_LENGTH``): |β_i k_iᵀ k_j| in the sequential colour map (0 to _SCALE_MAX)
    inside the C × C diagonal blocks, strictly below the diagonal; grey below the blocks (token i
    meets token j through the state); transparent on and above the diagonal."""
    t_pic = CHUNK_PICTURE_LENGTH
    k, _, beta = toy_chunk(t_pic, 16, seed=1)
    inner = (beta[0, 0, :, None] * (k[0, 0] @ k[0, 0].T)).abs().numpy()
    block = np.arange(t_pic) // chunk_size
    same = block[:, None] == block[None, :]
    lower = np.tril(np.ones((t_pic, t_pic), dtype=bool), -1)
    rgba = np.zeros((t_pic, t_pic, 4))
    rgba[lower & ~same] = to_rgba(_STATE_GREY)
    inside = lower & same
    rgba[inside] = colormaps[SEQUENTIAL_CMAP](
        np.clip(inner[inside] / _SCALE_MAX, 0, 1)
    )
    # 8-bit RGBA draws 3× faster than floats
    return (rgba * 255).round().astype(np.uint8)


def _scale_in_upper_triangle(ax) -> None:
    """The colour scale of the chunk picture, drawn in its empty upper-right triangle: a
    gradient from 0 to _SCALE_MAX with its two ends under it and its name above."""
    (left, right), (top, bottom) = _SCALE_COLUMNS, _SCALE_ROWS
    gap = 0.01 * CHUNK_PICTURE_LENGTH  # between the gradient and its texts
    ax.imshow(
        np.linspace(0, 1, 64)[None, :],
        cmap=SEQUENTIAL_CMAP,
        vmin=0,
        vmax=1,
        extent=(left, right, bottom, top),
        aspect="auto",
        interpolation="bilinear",
    )
    for value in (0, _SCALE_MAX):
        ax.text(
            left + (right - left) * value / _SCALE_MAX,
            bottom + gap,
            f"{value:g}",
            ha="center",
            va="top",
            fontsize=SMALL_TEXT_PT,
        )
    ax.text(
        (left + right) / 2,
        top - gap,
        tr("|β_i k_iᵀ k_j| inside a chunk"),
        ha="center",
        va="bottom",
        fontsize=SMALL_TEXT_PT,
    )


def chunk_split_alt(chunk_size: int) -> str:
    """The alt text of a frame of the chunk-size panel (``draw_chunk_split``) at ``chunk_size``."""
    c = check_int_in("chunk_size", chunk_size, 1, 4096)
    return tr(
        "Top: a {t}-by-{t} lower triangle with {n} diagonal block(s) of size {c} "
        "coloured by the size of beta k_i^T k_j and the rest grey. Bottom: stacked bars of "
        "kFLOP per token for chunk sizes {first} to {last}: constant work with the state at "
        "the bottom, intra-chunk work on top growing with the chunk size, the recurrent "
        "total as a dashed line at the height of the state work, and the bar for chunk "
        "size {c} highlighted.",
        t=CHUNK_PICTURE_LENGTH,
        n=-(-CHUNK_PICTURE_LENGTH // c),
        c=c,
        first=CHUNK_SIZES[0],
        last=CHUNK_SIZES[-1],
    )


def draw_chunk_split(
    fig: Figure, chunk_size: int = 16, head_dim: int = 64, length: int = 4096
) -> None:
    """What the chunk size C changes, in two panels.

    Left: the strictly lower triangle of diag(β) K Kᵀ for a toy sequence of
    ``CHUNK_PICTURE_LENGTH`` tokens. Inside the C × C diagonal blocks it is formed and solved
    (coloured by |entry|, scale in the empty upper triangle); below the blocks, token i meets
    token j only through the state (grey). Right: FLOPs per token and head from
    ``delta_rule_cost`` (d = ``head_dim``), split into intra-chunk (C × C) and inter-chunk (state)
    work, against C, with the recurrent form's for reference and the number of sequential steps
    for ``length`` tokens in the title.
    """
    c = check_int_in("chunk_size", chunk_size, 1, 4096)
    d = check_int_in("head_dim", head_dim, 1, 4096)
    t = check_int_in("length", length, 1, 2**24)
    t_pic = CHUNK_PICTURE_LENGTH
    ax_mat, ax_flops = fixed_axes(
        fig, [(0.14, 0.50, 0.84, 0.44), (0.14, 0.08, 0.84, 0.25)]
    )
    ax_mat.set_anchor("C")  # the square picture in the middle of its box

    ax_mat.imshow(
        _chunk_picture_rgba(c), aspect="equal", interpolation="nearest"
    )
    _scale_in_upper_triangle(ax_mat)
    # a square picture (the scale's imshow would make it "auto")
    ax_mat.set_aspect("equal")
    ax_mat.set_xlim(-0.5, t_pic - 0.5)
    ax_mat.set_ylim(t_pic - 0.5, -0.5)
    ax_mat.grid(False)
    # the range in the labels, not as ticks: four ticks would cost a tenth of the frame
    ax_mat.set_xticks([])
    ax_mat.set_yticks([])
    ax_mat.set_xlabel(
        tr("earlier token j = 1…{t} (grey: via the state)", t=t_pic), loc="left"
    )
    ax_mat.set_ylabel(tr("token i = 1…{t}", t=t_pic))
    if c >= t_pic:
        title_at_top(ax_mat, tr("C = {c}: one {t} × {t} solve", c=c, t=t_pic))
    else:
        title_at_top(
            ax_mat,
            tr("C = {c}: {n} solves of {c} × {c}", c=c, n=-(-t_pic // c)),
        )

    sizes = sorted({*CHUNK_SIZES, c})
    cost = {s: delta_rule_cost("chunk", t, d, s) for s in sizes}
    intra = [cost[s].intra_flops / t / 1e3 for s in sizes]
    inter = [cost[s].inter_flops / t / 1e3 for s in sizes]
    recurrent = delta_rule_cost("recurrent", t, d).flops / t / 1e3
    alphas = [1.0 if s == c else 0.35 for s in sizes]
    fast_bars(
        ax_flops, inter, [to_rgba(PALETTE[0], a) for a in alphas], width=0.7
    )
    fast_bars(
        ax_flops,
        intra,
        [to_rgba(PALETTE[2], a) for a in alphas],
        bottoms=inter,
        width=0.7,
    )
    ax_flops.axhline(
        recurrent, color=PALETTE[5], linestyle="--", linewidth=1.2
    )
    ax_flops.set_ylim(
        0,
        1.05
        * max(recurrent, *(a + b for a, b in zip(inter, intra, strict=True))),
    )
    light_xticks(
        ax_flops, range(len(sizes)), [str(s) for s in sizes], grid=False
    )
    ax_flops.yaxis.set_major_locator(MaxNLocator(nbins=4))
    text_legend(
        ax_flops,
        [
            (tr("■ inside chunks (intra)"), PALETTE[2]),
            (tr("■ with the state (inter)"), PALETTE[0]),
            (tr("– – recurrent form, all work"), PALETTE[5]),
        ],
    )
    chosen = cost[c]
    ratio = chosen.intra_flops / chosen.inter_flops
    style_axes(ax_flops, tr("chunk size C (tokens)"), tr("kFLOP per token, head"))
    if current_language() != "en":
        # Chinese glyphs reach lower than Latin ones: lift the label to keep it in the frame
        ax_flops.xaxis.labelpad -= 1.5
    title_at_top(
        ax_flops,
        tr(
            "d = {d}: intra / inter = {ratio:.2f}; T = {t:,} takes\n"
            "{steps:,} sequential steps (recurrent: {t:,})",
            d=d,
            ratio=ratio,
            t=t,
            steps=chosen.sequential_steps,
        ),
    )


def measured_times_alt(
    lengths: Sequence[int],
    recurrent_seconds: Sequence[float],
    chunk_seconds: Sequence[float],
    size_seconds: Mapping[int, float],
    size_length: int,
) -> str:
    """The alt text of ``draw_measured_times`` with the same arguments, with its numbers."""
    return tr(
        "Two log-scale plots of measured time. Left: time per sequence against sequence "
        "length {lengths} for the recurrent and the chunkwise delta rule; the speed-ups "
        "written at each length are {speedups}. Right: chunkwise time at {t:,} tokens "
        "against chunk size from 1 to 256, slowest at chunk size {slowest} and fastest at "
        "{fastest}, with the recurrent time dashed.",
        lengths=", ".join(f"{t:,}" for t in lengths),
        speedups=", ".join(
            f"{r / c:.1f}x"
            for r, c in zip(recurrent_seconds, chunk_seconds, strict=True)
        ),
        t=size_length,
        slowest=max(size_seconds, key=size_seconds.get),
        fastest=min(size_seconds, key=size_seconds.get),
    )


def draw_measured_times(
    fig: Figure,
    lengths: Sequence[int],
    recurrent_seconds: Sequence[float],
    chunk_seconds: Sequence[float],
    size_seconds: Mapping[int, float],
    size_length: int,
    chunk_size: int = 64,
    n_heads: int = 4,
    head_dim: int = 64,
    threads: int = 1,
) -> None:
    """Measured times of the delta rule. Left: recurrent and chunkwise (C = ``chunk_size``)
    against T (log–log), the speed-up written at each T. Right: the chunkwise time against C
    (``size_seconds[C]``, T = ``size_length``), with the recurrent time at that T dashed."""
    if len(lengths) < 2:
        raise ValueError(
            f"lengths: expected at least 2 sequence lengths, got {len(lengths)}"
        )
    for name, values in (
        ("recurrent_seconds", recurrent_seconds),
        ("chunk_seconds", chunk_seconds),
    ):
        if len(values) != len(lengths):
            raise ValueError(
                f"{name}: expected {len(lengths)} timings (one per length), "
                f"got {len(values)}"
            )
        if any(not s > 0 for s in values):
            raise ValueError(
                f"{name}: expected positive seconds, got {list(values)}"
            )
    if size_length not in lengths:
        raise ValueError(
            f"size_length: expected one of the lengths {list(lengths)}, "
            f"got {size_length!r}"
        )
    sizes = sorted(size_seconds)
    if len(sizes) < 2 or any(not size_seconds[s] > 0 for s in sizes):
        raise ValueError(
            f"size_seconds: expected positive seconds for at least 2 chunk sizes, "
            f"got {dict(size_seconds)}"
        )
    ax_t, ax_c = fig.subplots(1, 2)
    ax_t.plot(
        lengths,
        [s * 1e3 for s in recurrent_seconds],
        marker="s",
        color=PALETTE[5],
        label=tr("recurrent"),
    )
    ax_t.plot(
        lengths,
        [s * 1e3 for s in chunk_seconds],
        marker="^",
        color=PALETTE[2],
        label=tr("chunkwise, C = {c}", c=chunk_size),
    )
    for t, r, c in zip(
        lengths, recurrent_seconds, chunk_seconds, strict=True
    ):
        ax_t.annotate(
            f"{r / c:.1f}×",
            (t, r * 1e3),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            va="bottom",
            fontsize=SMALL_TEXT_PT,
            color="#333333",
        )
    ax_t.margins(x=0.12, y=0.15)
    ax_t.set_xscale("log", base=2)
    ax_t.set_xticks(list(lengths), [f"{t:,}" for t in lengths])
    style_axes(
        ax_t,
        tr("sequence length T (tokens)"),
        tr("time per sequence (ms)"),
        tr("speed-up of chunkwise over recurrent"),
    )
    ax_c.plot(
        sizes,
        [size_seconds[s] * 1e3 for s in sizes],
        marker="^",
        color=PALETTE[2],
        label=tr("chunkwise"),
    )
    recurrent_here = recurrent_seconds[list(lengths).index(size_length)]
    ax_c.axhline(
        recurrent_here * 1e3,
        color=PALETTE[5],
        linestyle="--",
        linewidth=1.2,
        label=tr("recurrent"),
    )
    _log2_axis(ax_c, sizes)
    best = min(sizes, key=lambda s: size_seconds[s])
    style_axes(
        ax_c,
        tr("chunk size C (tokens)"),
        tr("time per sequence (ms)"),
        tr("T = {t:,}: fastest at C = {c}", t=size_length, c=best),
    )
    for ax in (ax_t, ax_c):
        ax.set_yscale("log")
        ax.minorticks_off()
        if (
            ax is ax_c
        ):  # a narrow range: label 1-2-5 steps, not only powers of ten
            ax.yaxis.set_major_locator(
                LogLocator(base=10, subs=(1.0, 2.0, 5.0))
            )
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
        # Chinese labels are narrower: "best" would put them in the upper left, over the
        # speed-ups written above the recurrent line; the lower right stays clear of both lines
        chinese_times = ax is ax_t and current_language() != "en"
        ax.legend(
            loc="lower right" if chinese_times else "best", fontsize=SMALL_TEXT_PT
        )
    fig.suptitle(
        tr(
            "Delta rule, {n} heads of d = {d}, float32, {threads} CPU "
            "thread,\nmeasured when this page was built",
            n=n_heads,
            d=head_dim,
            threads=threads,
        ),
        fontsize=SMALL_TEXT_PT,
    )
