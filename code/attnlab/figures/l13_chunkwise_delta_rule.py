"""Figures for Lessons 13 (the chunkwise delta rule) and 14 (KDA, Kimi Delta Attention)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import colormaps
from matplotlib.collections import PolyCollection
from matplotlib.colors import Normalize, to_rgba
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator
from matplotlib.transforms import ScaledTranslation

from .._checks import check_float_in, check_int_in
from ..delta import delta_rule_cost, transition_product, ut_transform
from ..kda import association_retention, kda_states
from ..plotting import (
    DIVERGING_CMAP,
    PALETTE,
    SEQUENTIAL_CMAP,
    heatmap,
    light_xticks,
    style_axes,
    text_legend,
    title_at_top,
)


def _log2_axis(ax, ticks: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ticks), [str(c) for c in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def _fixed_axes(fig: Figure, rects: Sequence[tuple[float, float, float, float]]) -> list:
    """Axes at fixed positions (figure fractions), with the layout engine off: constrained
    layout costs a second full pass over every label, and slider frames must render fast."""
    fig.set_layout_engine("none")
    return [fig.add_axes(rect) for rect in rects]



# =========================================================================== Lesson 13


def toy_chunk(length: int, head_dim: int, value_dim: int | None = None, seed: int = 0):
    """A chunk of toy inputs, float64: unit-norm keys k ``[1, 1, length, head_dim]``, values
    ``[1, 1, length, value_dim]`` (default head_dim) and β uniform in (0, 1) ``[1, 1, length]``."""
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(torch.randn(1, 1, length, head_dim, generator=gen, dtype=torch.float64),
                    dim=-1)
    v = torch.randn(1, 1, length, value_dim or head_dim, generator=gen, dtype=torch.float64)
    beta = torch.rand(1, 1, length, generator=gen, dtype=torch.float64)
    return k, v, beta


def draw_wy_identity(fig: Figure, n_factors: int = 4, head_dim: int = 8) -> None:
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
    heatmap(axes[0], product, xlabel="column (key channel)", ylabel="row (key channel)",
            title=f"{c} factors (I − β k kᵀ)\nmultiplied one by one", cmap=DIVERGING_CMAP,
            vmin=-limit, vmax=limit)
    heatmap(axes[1], low_rank, xlabel="column (key channel)", ylabel="",
            title=f"I − Kᵀ W from one solve\nmax |difference| = {error:.1e}",
            cmap=DIVERGING_CMAP, vmin=-limit, vmax=limit)
    heatmap(axes[2], w[0, 0], xlabel="key channel", ylabel="row i (token)",
            title=f"W: {c} × {d}, all the\nproduct needs", cmap=DIVERGING_CMAP,
            vmin=-limit, vmax=limit)
    fig.colorbar(axes[2].images[0], ax=list(axes), label="matrix entry (unitless)", shrink=0.8)
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
CHUNK_PICTURE_LENGTH = 64

_STATE_GREY = "#DDDDDD"

#: Where the colour scale of the matrix picture sits in its empty upper triangle: columns
#: (left, right) and rows (top, bottom) of the CHUNK_PICTURE_LENGTH × CHUNK_PICTURE_LENGTH grid.
_SCALE_COLUMNS = (0.5 * CHUNK_PICTURE_LENGTH, CHUNK_PICTURE_LENGTH - 2.5)
_SCALE_ROWS = (0.14 * CHUNK_PICTURE_LENGTH, 0.19 * CHUNK_PICTURE_LENGTH)
_SCALE_MAX = 0.5


def _stacked_bars(ax, stacks: Sequence[Sequence[float]], colours: Sequence[Sequence],
                  width: float = 0.7) -> None:
    """Stacked bars at x = 0, 1, 2, ...: ``stacks[k][i]`` is the height of layer k (bottom
    first) of bar i, ``colours[k][i]`` its colour. One collection instead of one patch per bar
    (what ``ax.bar`` makes), which matters on a slider. Sets the x limits, not the y limits."""
    heights = np.asarray(stacks, dtype=float)
    tops = heights.cumsum(axis=0)
    half = width / 2
    boxes = [[(i - half, top - h), (i + half, top - h), (i + half, top), (i - half, top)]
             for h_row, top_row in zip(heights, tops, strict=True)
             for i, (h, top) in enumerate(zip(h_row, top_row, strict=True))]
    ax.add_collection(PolyCollection(boxes, facecolors=[c for row in colours for c in row],
                                     edgecolors="none"), autolim=False)
    ax.set_xlim(-0.6, heights.shape[1] - 0.4)


def _colour_scale(ax, cmap, norm: Normalize, ticks: Sequence[float], label: str,
                  left: float = 1.02, width: float = 0.03) -> None:
    """A colour bar drawn by ``ax`` itself just right of it (from ``left`` to ``left + width``,
    axes fractions): a gradient over ``norm``'s range, the ``ticks`` values beside it and its
    ``label`` along it. It reads like ``fig.colorbar`` but costs no extra axes, which is most
    of a colour bar's drawing time on a slider. Set ``ax``'s limits after calling this."""
    image = ax.imshow(np.linspace(0, 1, 128)[:, None], cmap=cmap, vmin=0, vmax=1,
                      origin="lower", aspect="auto", interpolation="bilinear",
                      extent=(left, left + width, 0, 1), transform=ax.transAxes)
    image.set_clip_on(False)
    right = ax.transAxes + ScaledTranslation(3 / 72, 0, ax.figure.dpi_scale_trans)  # 3 points
    for value in ticks:
        ax.text(left + width, float(norm(value)), f"{value:g}", transform=right, ha="left",
                va="center", fontsize=9)
    beyond_labels = ax.transAxes + ScaledTranslation(24 / 72, 0, ax.figure.dpi_scale_trans)
    ax.text(left + width, 0.5, label, transform=beyond_labels, rotation=90, ha="left",
            va="center")


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
    rgba[inside] = colormaps[SEQUENTIAL_CMAP](np.clip(inner[inside] / _SCALE_MAX, 0, 1))
    return (rgba * 255).round().astype(np.uint8)  # 8-bit RGBA draws 3× faster than floats


def _scale_in_upper_triangle(ax) -> None:
    """The colour scale of the chunk picture, drawn in its empty upper-right triangle: a
    gradient from 0 to _SCALE_MAX with its two ends under it and its name above."""
    (left, right), (top, bottom) = _SCALE_COLUMNS, _SCALE_ROWS
    ax.imshow(np.linspace(0, 1, 64)[None, :], cmap=SEQUENTIAL_CMAP, vmin=0, vmax=1,
              extent=(left, right, bottom, top), aspect="auto", interpolation="bilinear")
    for value in (0, _SCALE_MAX):
        ax.text(left + (right - left) * value / _SCALE_MAX, bottom + 0.5, f"{value:g}",
                ha="center", va="top", fontsize=8)
    ax.text((left + right) / 2, top - 0.7, "|β_i k_iᵀ k_j| inside a chunk", ha="center",
            va="bottom", fontsize=8)


def draw_chunk_split(fig: Figure, chunk_size: int = 16, head_dim: int = 64,
                     length: int = 4096) -> None:
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
    ax_mat, ax_flops = _fixed_axes(fig, [(0.07, 0.15, 0.36, 0.68), (0.54, 0.15, 0.44, 0.68)])
    ax_mat.set_anchor("W")  # the square picture at the left of its box, next to its y label

    ax_mat.imshow(_chunk_picture_rgba(c), aspect="equal", interpolation="nearest")
    _scale_in_upper_triangle(ax_mat)
    ax_mat.set_xlim(-0.5, t_pic - 0.5)
    ax_mat.set_ylim(t_pic - 0.5, -0.5)
    ax_mat.grid(False)
    # the range in the labels, not as ticks: four ticks would cost a tenth of the frame
    ax_mat.set_xticks([])
    ax_mat.set_yticks([])
    ax_mat.set_xlabel(f"earlier token j = 1…{t_pic} (grey: via the state)")
    ax_mat.set_ylabel(f"token i = 1…{t_pic}")
    if c >= t_pic:
        title_at_top(ax_mat, f"C = {c}: one {t_pic} × {t_pic} solve")
    else:
        title_at_top(ax_mat, f"C = {c}: {-(-t_pic // c)} solves of {c} × {c}")

    sizes = sorted({*CHUNK_SIZES, c})
    cost = {s: delta_rule_cost("chunk", t, d, s) for s in sizes}
    intra = [cost[s].intra_flops / t / 1e3 for s in sizes]
    inter = [cost[s].inter_flops / t / 1e3 for s in sizes]
    recurrent = delta_rule_cost("recurrent", t, d).flops / t / 1e3
    alphas = [1.0 if s == c else 0.35 for s in sizes]
    _stacked_bars(ax_flops, [inter, intra],
                  [[to_rgba(PALETTE[0], a) for a in alphas],
                   [to_rgba(PALETTE[2], a) for a in alphas]])
    ax_flops.axhline(recurrent, color=PALETTE[5], linestyle="--", linewidth=1.2)
    ax_flops.set_ylim(0, 1.05 * max(recurrent, *(a + b for a, b in zip(inter, intra, strict=True))))
    light_xticks(ax_flops, range(len(sizes)), [str(s) for s in sizes], grid=False)
    ax_flops.yaxis.set_major_locator(MaxNLocator(nbins=4))
    text_legend(ax_flops, [("■ inside chunks (intra)", PALETTE[2]),
                            ("■ with the state (inter)", PALETTE[0]),
                            ("– – recurrent form, all work", PALETTE[5])])
    chosen = cost[c]
    ratio = chosen.intra_flops / chosen.inter_flops
    style_axes(ax_flops, "chunk size C (tokens)", "kFLOP per token and head (model)")
    title_at_top(ax_flops, f"d = {d}: intra / inter = {ratio:.2f}; T = {t:,} takes\n"
                           f"{chosen.sequential_steps:,} sequential steps (recurrent: {t:,})")


def draw_measured_times(fig: Figure, lengths: Sequence[int], recurrent_seconds: Sequence[float],
                        chunk_seconds: Sequence[float], size_seconds: Mapping[int, float],
                        size_length: int, chunk_size: int = 64, n_heads: int = 4,
                        head_dim: int = 64, threads: int = 1) -> None:
    """Measured times of the delta rule. Left: recurrent and chunkwise (C = ``chunk_size``)
    against T (log–log), the speed-up written at each T. Right: the chunkwise time against C
    (``size_seconds[C]``, T = ``size_length``), with the recurrent time at that T dashed."""
    if len(lengths) < 2:
        raise ValueError(f"lengths: expected at least 2 sequence lengths, got {len(lengths)}")
    for name, values in (("recurrent_seconds", recurrent_seconds),
                         ("chunk_seconds", chunk_seconds)):
        if len(values) != len(lengths):
            raise ValueError(f"{name}: expected {len(lengths)} timings (one per length), "
                             f"got {len(values)}")
        if any(not s > 0 for s in values):
            raise ValueError(f"{name}: expected positive seconds, got {list(values)}")
    if size_length not in lengths:
        raise ValueError(f"size_length: expected one of the lengths {list(lengths)}, "
                         f"got {size_length!r}")
    sizes = sorted(size_seconds)
    if len(sizes) < 2 or any(not size_seconds[s] > 0 for s in sizes):
        raise ValueError(f"size_seconds: expected positive seconds for at least 2 chunk sizes, "
                         f"got {dict(size_seconds)}")
    ax_t, ax_c = fig.subplots(1, 2)
    ax_t.plot(lengths, [s * 1e3 for s in recurrent_seconds], marker="s", color=PALETTE[5],
              label="recurrent")
    ax_t.plot(lengths, [s * 1e3 for s in chunk_seconds], marker="^", color=PALETTE[2],
              label=f"chunkwise, C = {chunk_size}")
    for t, r, c in zip(lengths, recurrent_seconds, chunk_seconds, strict=True):
        ax_t.annotate(f"{r / c:.1f}×", (t, r * 1e3), textcoords="offset points", xytext=(0, 7),
                      ha="center", va="bottom", fontsize=9, color="#333333")
    ax_t.margins(x=0.12, y=0.15)
    ax_t.set_xscale("log", base=2)
    ax_t.set_xticks(list(lengths), [f"{t:,}" for t in lengths])
    style_axes(ax_t, "sequence length T (tokens)", "time per sequence (ms)",
               "speed-up of chunkwise over recurrent")
    ax_c.plot(sizes, [size_seconds[s] * 1e3 for s in sizes], marker="^", color=PALETTE[2],
              label="chunkwise")
    recurrent_here = recurrent_seconds[list(lengths).index(size_length)]
    ax_c.axhline(recurrent_here * 1e3, color=PALETTE[5], linestyle="--", linewidth=1.2,
                 label="recurrent")
    _log2_axis(ax_c, sizes)
    best = min(sizes, key=lambda s: size_seconds[s])
    style_axes(ax_c, "chunk size C (tokens)", "time per sequence (ms)",
               f"T = {size_length:,}: fastest at C = {best}")
    for ax in (ax_t, ax_c):
        ax.set_yscale("log")
        ax.minorticks_off()
        if ax is ax_c:  # a narrow range: label 1-2-5 steps, not only powers of ten
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
        ax.legend(loc="best", fontsize=8)
    fig.suptitle(f"Delta rule, {n_heads} heads of d = {head_dim}, float32, {threads} CPU "
                 "thread, measured when this page was built", fontsize=10)


# =========================================================================== Lesson 14


def draw_decay_then_correct(fig: Figure, head_dim: int = 8, seed: int = 3) -> None:
    """One KDA step on a toy state, in its two halves: S_{t−1}; Diag(α_t) S_{t−1} (each key
    channel, a row, fades by its own α); then the delta-rule write, which replaces what the
    decayed state held under k_t by v_t."""
    d = check_int_in("head_dim", head_dim, 2, 16)
    gen = torch.Generator().manual_seed(seed)
    state = torch.randn(1, 1, 1, d, d, generator=gen, dtype=torch.float64)[:, :, 0]
    k = F.normalize(torch.randn(1, 1, 1, d, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(1, 1, 1, d, generator=gen, dtype=torch.float64)
    alpha = torch.linspace(0.2, 1.0, d, dtype=torch.float64)
    g = alpha.log().view(1, 1, 1, d)
    beta = torch.ones(1, 1, 1, dtype=torch.float64)
    decayed = alpha[:, None] * state[0, 0]
    new = kda_states(k, v, g=g, beta=beta, initial_state=state)[0, 0, 0]
    limit = max(state.abs().max().item(), new.abs().max().item())
    axes = fig.subplots(1, 3)
    titles = (r"before: $S_{t-1}$", r"decay: Diag($\alpha_t$) $S_{t-1}$",
              r"correct: $S_t$ ($\beta_t = 1$)")
    ylabels = ("key channel", r"key channel ($\alpha_t$)", "")
    for i, (ax, matrix, title) in enumerate(zip(axes, (state[0, 0], decayed, new), titles,
                                                strict=True)):
        heatmap(ax, matrix, xlabel="value channel", ylabel=ylabels[i], title=title,
                cmap=DIVERGING_CMAP, vmin=-limit, vmax=limit,
                colorbar_label="entry" if i == 2 else None)
        ax.set_xticks([0, d - 1], ["1", str(d)])
        ax.set_aspect("equal")
    axes[0].set_yticks([0, d - 1], ["1", str(d)])
    axes[1].set_yticks(range(d), [f"{a:.2f}" for a in alpha.tolist()], fontsize=7)
    axes[2].set_yticks([0, d - 1], ["1", str(d)])


#: Lesson 14's slider grid: spread of the channels' half-lives (octaves either side of the
#: mean) and the write strength β of the tokens that follow the old association.
SPREADS = (0.0, 1.0, 2.0, 3.0, 4.0)
WRITE_STRENGTHS = (0.0, 0.1, 0.3)
RETENTION_STEPS = 64
RETENTION_CHANNELS = 16
RETENTION_HALF_LIFE = 16.0


def channel_log_gates(n_channels: int, half_life: float, spread: float) -> torch.Tensor:
    """Per-channel log-decays g_d = log α_d = −ln 2 / h_d, float64 ``[n_channels]``, with
    half-lives h_d = half_life · 2^(spread · z_d) for z_d evenly spaced in [−1, 1]: spread 0
    gives every channel the same decay, spread s spans s octaves either side of ``half_life``.
    Channel 0 forgets fastest."""
    n = check_int_in("n_channels", n_channels, 1, 1024)
    h = check_float_in("half_life", half_life, 1e-3, 1e6)
    s = check_float_in("spread", spread, 0.0, 10.0)
    z = torch.linspace(-1.0, 1.0, n, dtype=torch.float64) if n > 1 else torch.zeros(
        1, dtype=torch.float64)
    return -math.log(2) / (h * torch.exp2(s * z))


def retention_demo(spread: float, write_strength: float, steps: int = RETENTION_STEPS,
                   n_channels: int = RETENTION_CHANNELS, half_life: float = RETENTION_HALF_LIFE,
                   seed: int = 0) -> dict[str, torch.Tensor]:
    """An old association k₀v₀ᵀ (k₀ spread evenly over the channels) in S_0, then ``steps``
    tokens with random unit keys, values orthogonal to v₀ and β = ``write_strength``, under
    constant per-channel gates (``channel_log_gates``). Returns float64 tensors:

    - ``retention`` [steps + 1, Dk]: ``association_retention`` per channel, row 0 = S_0;
    - ``recall`` [steps + 1]: v₀ᵀ S_tᵀ k₀ / ‖v₀‖², what the old key still reads of v₀;
    - ``recall_shared`` [steps + 1]: the same with one gate for all channels, the mean of the
      per-channel log-gates (Gated DeltaNet's scalar gate with the same average decay);
    - ``log_gates`` [Dk].
    """
    t = check_int_in("steps", steps, 1, 4096)
    dk = n_channels
    log_gates = channel_log_gates(dk, half_life, spread)
    beta_value = check_float_in("write_strength", write_strength, 0.0, 1.0)
    gen = torch.Generator().manual_seed(seed)
    dv = dk
    key = torch.full((1, 1, dk), dk ** -0.5, dtype=torch.float64)
    value = F.normalize(torch.randn(1, 1, dv, generator=gen, dtype=torch.float64), dim=-1)
    k = F.normalize(torch.randn(1, 1, t, dk, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(1, 1, t, dv, generator=gen, dtype=torch.float64)
    v = v - (v @ value[0, 0])[..., None] * value[0, 0]  # orthogonal to v₀
    beta = torch.full((1, 1, t), beta_value, dtype=torch.float64)
    s0 = key[..., :, None] * value[..., None, :]
    out = {"log_gates": log_gates}
    for name, gates in (("", log_gates), ("_shared", log_gates.mean().expand(dk))):
        g = gates.view(1, 1, 1, dk).expand(1, 1, t, dk)
        states = torch.cat([s0[:, :, None], kda_states(k, v, g=g, beta=beta, initial_state=s0)],
                           dim=2)
        retention = association_retention(states, key, value)[0, 0]  # [T + 1, Dk]
        if not name:
            out["retention"] = retention
        out["recall" + name] = (retention * key[0, 0] ** 2).sum(-1)
    return out


_cached_retention_demo = cache(retention_demo)  # a slider revisits the same few settings


#: The colour range of the retention heat map (a little beyond [0, 1]: writes can overshoot).
_RETENTION_RANGE = (-0.2, 1.2)


def draw_channel_retention(fig: Figure, spread: float = 2.0, write_strength: float = 0.1) -> None:
    """Per-channel survival of an old association under KDA (``retention_demo``): a heat map
    of channel × time (channels sorted by half-life, four of them labelled with their half-life
    in tokens), and what the old key still recalls, with per-channel gates and with one shared
    gate of the same mean log-decay. Laid out for a figure of about 10 × 4 inches."""
    demo = _cached_retention_demo(spread, write_strength)
    retention, t = demo["retention"], demo["retention"].shape[0] - 1
    half_lives = (-math.log(2) / demo["log_gates"]).tolist()
    ax_map, ax_recall = _fixed_axes(fig, [(0.075, 0.13, 0.40, 0.76), (0.63, 0.13, 0.355, 0.76)])
    # colour-mapped here, once: an 8-bit RGBA image draws several times faster than floats
    norm, cmap = Normalize(*_RETENTION_RANGE), colormaps[SEQUENTIAL_CMAP]
    ax_map.imshow(cmap(norm(retention.T.numpy()), bytes=True), aspect="auto",
                  interpolation="nearest")
    ax_map.grid(False)
    ax_map.set_xlabel("tokens since the association was written")
    ax_map.set_ylabel("key channel: its half-life (tokens)")
    title_at_top(ax_map, f"spread ±{spread:g} octaves, later writes β = {write_strength:g}")
    _colour_scale(ax_map, cmap, norm, [0, 0.5, 1], "share of k₀v₀ᵀ left in the channel")
    rows = np.linspace(0, len(half_lives) - 1, 4).round().astype(int).tolist()
    ax_map.set_yticks(rows, [f"{half_lives[i]:.0f}" if half_lives[i] >= 10 else
                             f"{half_lives[i]:.1f}" for i in rows])
    light_xticks(ax_map, [0, t // 2, t], ["0", str(t // 2), str(t)], grid=False)
    steps = np.arange(t + 1)
    ax_map.set_xlim(-0.5, t + 0.5)
    ax_map.set_ylim(len(half_lives) - 0.5, -0.5)
    ax_recall.plot(steps, demo["recall"].numpy(), color=PALETTE[0], linewidth=2)
    ax_recall.plot(steps, demo["recall_shared"].numpy(), color=PALETTE[5], linestyle="--",
                   linewidth=1.6)
    ax_recall.set_ylim(-0.05, 1.05)
    ax_recall.set_xlim(0, t)
    ax_recall.set_yticks([0, 0.5, 1])
    light_xticks(ax_recall, [0, t // 2, t], ["0", str(t // 2), str(t)])
    late = t // 2
    style_axes(ax_recall, "tokens since the association was written",
               "recall of v₀ by k₀ (1 = intact)")
    title_at_top(ax_recall, f"after {late} tokens: {demo['recall'][late]:.2f} against "
                            f"{demo['recall_shared'][late]:.2f} shared")
    text_legend(ax_recall, [("—— KDA: one gate per channel", PALETTE[0]),
                             ("– – one shared gate, same mean log α", PALETTE[5])],
                 x=0.97, ha="right")
