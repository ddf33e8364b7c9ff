"""Figures for Lesson 4 (multi-head attention) and Lesson 5 (order and position).

The data behind them — small layers with hand-set or seeded weights — is built here too, so the
lessons and the tests read the same numbers.
"""

from __future__ import annotations

import math
from functools import cache

import matplotlib
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from ..attention import (
    MultiHeadAttention,
    apply_rope,
    attention_scores,
    causal_mask,
    head_attention_weights,
    mha_flops,
    mha_parameter_counts,
    rope_angles,
    softmax_attention,
    stable_softmax,
)
from ..plotting import PALETTE, SEQUENTIAL_CMAP, heatmap, style_axes

#: The sentence of Lesson 4: repeated words give a "same word" head something to find.
HEADS_SENTENCE: tuple[str, ...] = tuple("the cat saw the dog and the dog saw the cat".split())
#: The sentence of Lesson 5: the same words as "the man bit the dog", in another order.
ORDER_SENTENCE: tuple[str, ...] = tuple("the dog bit the man".split())
#: Lesson 4's slider layer width: divisible by every head count on its slider.
HEADS_D_MODEL = 48
HEAD_COUNTS: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)


def _check_choice(name: str, value: object, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")


def _check_number(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(f"{name}: expected a number in [{low}, {high}], got {value!r}")
    return float(value)


def _vocab(words: tuple[str, ...]) -> list[str]:
    """The distinct words in order of first appearance."""
    return list(dict.fromkeys(words))


# ------------------------------------------------------------------ Lesson 4: two built heads


def constructed_two_head_layer(
    words: tuple[str, ...] = HEADS_SENTENCE, sharpness: float = 8.0, n_heads: int = 2
) -> tuple[MultiHeadAttention, torch.Tensor]:
    """A two-head attention layer whose weights are SET BY HAND (not trained), and its input.

    Each token's input is [one-hot of its word (V) ; one-hot of its position (T) ; zeros], width
    d_model = 2·D with head width D = V + T (absolute positions, no RoPE). With c = sharpness·√D
    (the layer divides scores by √D):

    - head 0, "previous word": q_i = c·p_i, k_j = p_{j+1}, so the score is sharpness·[j = i − 1];
    - head 1, "same word": q_i = [2c·w_i ; c·p_i], k_j = [w_j ; −p_j], so the score is
      sharpness·(2·[word_j = word_i] − [j = i]): an earlier copy of the word wins, else itself.

    Values copy the word (head 0) and the position (head 1); W_O is the identity.
    ``n_heads=1`` returns the SAME four matrices read as one head of width 2·D.
    Returns (layer in float64, x ``[1, T, d_model]``).
    """
    _check_choice("n_heads", n_heads, (1, 2))
    sharpness = _check_number("sharpness", sharpness, 0.0, 100.0)
    vocab = _vocab(words)
    n_words, t = len(vocab), len(words)
    d = n_words + t
    layer = MultiHeadAttention(2 * d, n_heads, 2 * d // n_heads, rope=False).double()
    x = torch.zeros(1, t, 2 * d, dtype=torch.float64)
    for i, word in enumerate(words):
        x[0, i, vocab.index(word)] = 1.0
        x[0, i, n_words + i] = 1.0
    c = sharpness * math.sqrt(d)
    w_q, w_k, w_v = (torch.zeros(2 * d, 2 * d, dtype=torch.float64) for _ in range(3))
    pos = torch.arange(t)
    w_q[n_words + pos, n_words + pos] = c  # head 0: query = c · position
    w_k[n_words + pos[1:], n_words + pos[:-1]] = 1.0  # head 0: key = next position
    w_v[: n_words, : n_words] = torch.eye(n_words, dtype=torch.float64)  # head 0: copy word
    word = torch.arange(n_words)
    w_q[d + word, word] = 2 * c  # head 1: query = [2c · word ; c · position]
    w_q[d + n_words + pos, n_words + pos] = c
    w_k[d + word, word] = 1.0  # head 1: key = [word ; −position]
    w_k[d + n_words + pos, n_words + pos] = -1.0
    w_v[d + n_words + pos, n_words + pos] = 1.0  # head 1: copy position
    with torch.no_grad():
        layer.w_q.weight.copy_(w_q)
        layer.w_k.weight.copy_(w_k)
        layer.w_v.weight.copy_(w_v)
        layer.w_o.weight.copy_(torch.eye(2 * d, dtype=torch.float64))
    return layer, x


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
    titles = ["head 1: previous word", "head 2: same word earlier",
              "same weights, one wide head"]
    for ax, weights, title in zip(axes, [w2[0], w2[1], w1], titles, strict=True):
        heatmap(ax, weights, xlabel="key (word, position)", ylabel="", title=title,
                xticklabels=labels, yticklabels=labels, vmin=0, vmax=1)
        ax.tick_params(axis="x", labelsize=7)
    axes[0].set_ylabel("query (word, position)")
    image = axes[-1].images[0]
    fig.colorbar(image, ax=list(axes), label="attention weight", shrink=0.8)


# ------------------------------------------------------------------ Lesson 4: head-count slider


@cache
def _random_layer_weights(d_model: int = HEADS_D_MODEL, gain: float = 2.0, seed: int = 0):
    """Seeded W_Q, W_K (entries N(0, gain²/d_model)) and a word table for HEADS_SENTENCE."""
    g = torch.Generator().manual_seed(seed)
    std = gain / math.sqrt(d_model)
    w_q = torch.randn(d_model, d_model, generator=g, dtype=torch.float64) * std
    w_k = torch.randn(d_model, d_model, generator=g, dtype=torch.float64) * std
    vocab = _vocab(HEADS_SENTENCE)
    table = torch.randn(len(vocab), d_model, generator=g, dtype=torch.float64)
    x = table[[vocab.index(w) for w in HEADS_SENTENCE]][None]
    return w_q, w_k, x


def random_head_weights(n_heads: int, d_model: int = HEADS_D_MODEL) -> torch.Tensor:
    """Per-head attention weights ``[H, T, T]`` of an UNTRAINED layer on HEADS_SENTENCE.

    W_Q and W_K are the same seeded random matrices for every head count: only the way they are
    cut into heads (column blocks of width d_model / H) changes.
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1 \
            or d_model % n_heads:
        raise ValueError(f"n_heads: expected a positive divisor of d_model={d_model}, "
                         f"got {n_heads!r}")
    w_q, w_k, x = _random_layer_weights(d_model)
    layer = MultiHeadAttention(d_model, n_heads, d_model // n_heads, rope=False).double()
    with torch.no_grad():
        layer.w_q.weight.copy_(w_q)
        layer.w_k.weight.copy_(w_k)
        return head_attention_weights(layer, x)[0]


def draw_head_maps(fig: Figure, n_heads: int = 4) -> None:
    """Small multiples: one attention map per head of the untrained layer, for H heads.

    The maps are tiled into one image (one axes), which renders much faster than H axes.
    """
    _check_choice("n_heads", n_heads, HEAD_COUNTS)
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
                va="bottom", fontsize=8)
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
                 f"parameters · {flops:,} FLOPs at T = {t}", fontsize=9)
    fig.colorbar(image, ax=ax, location="bottom", shrink=0.5, aspect=40, pad=0.02,
                 label=f"attention weight (each map: query rows × key columns, T = {t})")


# ------------------------------------------------------------------ Lesson 5: order


@cache
def _order_setup(d: int = 6, seed: int = 1):
    """Seeded word vectors for ORDER_SENTENCE's words and random W_Q, W_K, W_V (d × d)."""
    g = torch.Generator().manual_seed(seed)
    vocab = _vocab(ORDER_SENTENCE)
    table = torch.randn(len(vocab), d, generator=g, dtype=torch.float64)
    w = torch.randn(3, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    return vocab, table, w


def order_attention(words: tuple[str, ...], causal: bool = False) -> torch.Tensor:
    """Single-head attention with NO position information on a sentence of ORDER_SENTENCE's words:
    x_i = table[word_i], q, k, v = x W_Q, x W_K, x W_V, o = softmax(s q kᵀ [+ log M]) v.
    Returns o ``[T, d]``."""
    vocab, table, w = _order_setup()
    unknown = [word for word in words if word not in vocab]
    if unknown:
        raise ValueError(f"words: expected words from {vocab}, got {unknown}")
    x = table[[vocab.index(word) for word in words]][None, None]  # [1, 1, T, d]
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    o, _ = softmax_attention(q, k, v, causal=causal)
    return o[0, 0]


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
    vocab, table, w = _order_setup()
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
    heatmap(axes[2], weights, xlabel="key j", ylabel="", title="weights: softmax per row",
            xticklabels=labels, vmin=0, vmax=1, annotate=True)
    for i in range(t):
        for j in range(t):
            if not allowed[i, j]:
                axes[0].text(j, i, "0", ha="center", va="center", fontsize=8, color="#444444")
                axes[1].text(j, i, "−∞", ha="center", va="center", fontsize=8, color="#444444")
                axes[1].add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#dddddd",
                                            edgecolor="white"))
            else:
                axes[0].text(j, i, "1", ha="center", va="center", fontsize=8, color="white")
                axes[1].text(j, i, f"{float(scores[i, j]) + 0.0:.1f}".replace("-0.0", "0.0"),
                             ha="center", va="center", fontsize=7)


# ------------------------------------------------------------------ Lesson 5: RoPE

ROPE_DIM = 16
ROPE_SHIFTS: tuple[int, ...] = (0, 10, 1000)
ROPE_OFFSETS: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64)


@cache
def _rope_vectors(dim: int = ROPE_DIM, seed: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded query and a key with the same content (k = q), each ``[dim]``, float64."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(dim, generator=g, dtype=torch.float64)
    return q, q.clone()


def rope_scores(q: torch.Tensor, k: torch.Tensor, query_positions: torch.Tensor,
                key_position: int, base: float = 10000.0) -> torch.Tensor:
    """⟨RoPE(q, m), RoPE(k, n)⟩ for each query position m and one key position n.

    q, k ``[D]`` -> scores ``[len(query_positions)]`` (float64 positions, unscaled dot product).
    """
    t = len(query_positions)
    q_rot = apply_rope(q.expand(1, 1, t, -1), query_positions.to(torch.float64), base)
    k_rot = apply_rope(k[None, None, None], torch.tensor([float(key_position)]), base)
    return (q_rot[0, 0] @ k_rot[0, 0, 0])


def draw_rope_offset(fig: Figure, shift: int = 0, offset: int = 4) -> None:
    """Left: pair 0 of q (at position m = shift + offset) and k (at n = shift), rotated.
    Right: the score against the offset m − n, computed at this shift; the chosen point marked."""
    _check_choice("shift", shift, ROPE_SHIFTS)
    _check_choice("offset", offset, ROPE_OFFSETS)
    q, k = _rope_vectors()
    m, n = shift + offset, shift
    offsets = torch.arange(0, ROPE_OFFSETS[-1] + 1)
    curve = rope_scores(q, k, shift + offsets, n)
    score = float(rope_scores(q, k, torch.tensor([m]), n)[0])
    ax_plane, ax_curve = fig.subplots(1, 2, width_ratios=[1, 1.6])
    theta = float(rope_angles(torch.tensor([1.0]), ROPE_DIM)[0, 0])  # pair 0: 1 rad per token
    circle = torch.linspace(0, 2 * math.pi, 100)
    ax_plane.plot(circle.cos().numpy(), circle.sin().numpy(), color="#bbbbbb", lw=0.8)
    tips, colours = [], (PALETTE[0], PALETTE[1])
    for vec, pos, colour, name in ((q, m, colours[0], "q"), (k, n, colours[1], "k")):
        angle = math.atan2(vec[1], vec[0]) + pos * theta  # direction of the rotated pair
        tips.append((math.cos(angle), math.sin(angle)))
        ax_plane.text(1.32 * math.cos(angle), 1.32 * math.sin(angle), f"{name}\n@{pos}",
                      color=colour, ha="center", va="center", fontsize=8)
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
    ax_plane.set_title(f"pair 0: {m} and {n} rad turned", y=1.0)
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
    _check_choice("base", base, ROPE_BASES)
    _check_choice("head_dim", head_dim, ROPE_HEAD_DIMS)
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
    ax_wave.text(0, 4096 * 1.4, "4,096 tokens", fontsize=8)
    ax_wave.set_ylim(1, 2e7)
    _log_ticks(ax_wave, [1, 1e2, 1e4, 1e6])
    ax_wave.set_xticks(pair_ticks)
    style_axes(ax_wave, "pair index i", "wavelength 2π/θ_i (tokens, log)")
    ax_wave.set_title(f"{head_dim // 2} pairs: one full turn every …", y=1.0)
    ax_wave.text(head_dim // 2 - 1, float(wavelength[-1]) * 2.5,
                 f"{float(wavelength[-1]):,.0f} tokens", ha="right", fontsize=8, color=PALETTE[5])
