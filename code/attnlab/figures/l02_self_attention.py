"""Figures for Lessons 2 (self-attention: Q, K and V) and 3 (scaling and softmax).

The toy example: Lesson 1's co-occurrence embeddings of the toy corpus, with hand-made
projections (:func:`attnlab.attention.relation_projections`): each key announces its word's
group (animal, food, colour, place, number, or the verb "eats"), and each query asks for the
groups in :data:`RELATIONS`. A trained model learns its projections; these are built so that the
example is legible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import matplotlib
import torch
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle, StepPatch
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import offset_copy

from ..attention import (
    attention_dot_products,
    attention_scores,
    relation_projections,
    softmax_attention,
    stable_softmax,
)
from ..embedding import WORD_GROUPS, WordTokenizer, embedding_lookup, nearest_neighbours
from ..plotting import PALETTE, SEQUENTIAL_CMAP, heatmap, style_axes
from .embedding import toy_embeddings

#: The sentence of Lessons 1–3.
SENTENCE = "The red cat eats cheese in the kitchen."

#: The features a key announces: the five word groups of the toy corpus, and the verb "eats".
FEATURES: tuple[str, ...] = (*WORD_GROUPS, "eats")

#: Which features each feature's query looks for (the hand-written table R of the example).
RELATIONS: dict[str, tuple[str, ...]] = {
    "animal": ("colour",),          # what do I look like?
    "colour": ("animal",),          # whom do I describe?
    "food": ("animal",),            # who eats me?
    "place": ("animal",),           # who is here?
    "number": ("animal",),          # how many of what?
    "eats": ("animal", "food"),     # who eats, and what?
}

#: Width of the embeddings and strength of the queries in the toy example.
TOY_DIM = 32
TOY_STRENGTH = 8.0


@dataclass(frozen=True)
class ToyAttention:
    """The toy example's tokenizer, embedding table ``[V, d]`` and projections ``[d, F]``."""

    tokenizer: WordTokenizer
    table: torch.Tensor
    w_q: torch.Tensor
    w_k: torch.Tensor

    def qkv(self, sentence: str = SENTENCE) -> tuple[list[str], torch.Tensor, torch.Tensor,
                                                     torch.Tensor]:
        """Tokens and q, k, v ``[1, 1, T, ·]`` of a sentence (W_V is the identity: v = x)."""
        ids = torch.tensor(self.tokenizer.encode(sentence))
        tokens = [self.tokenizer.vocab[i] for i in ids.tolist()]
        x = embedding_lookup(ids, self.table)
        q, k, v = x @ self.w_q, x @ self.w_k, x
        return tokens, q[None, None], k[None, None], v[None, None]

    def nearest_words(self, vector: torch.Tensor, k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` vocabulary words whose embeddings are closest (cosine) to ``vector [d]``."""
        if not isinstance(vector, torch.Tensor) or vector.shape != (self.table.shape[1],):
            got = tuple(vector.shape) if isinstance(vector, torch.Tensor) else vector
            raise ValueError(f"vector: expected a tensor [{self.table.shape[1]}], got {got}")
        rows = torch.cat([self.table, vector.to(self.table.dtype)[None]])
        found = nearest_neighbours(rows, self.table.shape[0], k)
        return [(self.tokenizer.vocab[i], s) for i, s in found]


def feature_matrix(tokenizer: WordTokenizer) -> torch.Tensor:
    """``[V, F]`` float64: 1 where word v belongs to feature (group) f of :data:`FEATURES`."""
    features = torch.zeros(tokenizer.size, len(FEATURES), dtype=torch.float64)
    members = {**WORD_GROUPS, "eats": ("eats",)}
    for f, name in enumerate(FEATURES):
        for word in members[name]:
            features[tokenizer.vocab.index(word), f] = 1.0
    return features


def relation_matrix() -> torch.Tensor:
    """``[F, F]`` float64: R_fg = 1 if feature f's query looks for feature g (:data:`RELATIONS`)."""
    relations = torch.zeros(len(FEATURES), len(FEATURES), dtype=torch.float64)
    for f, targets in RELATIONS.items():
        for g in targets:
            relations[FEATURES.index(f), FEATURES.index(g)] = 1.0
    return relations


@cache
def toy_attention(dim: int = TOY_DIM, strength: float = TOY_STRENGTH) -> ToyAttention:
    """The toy example (cached): embeddings of width ``dim``, W_Q and W_K of
    :func:`~attnlab.attention.relation_projections`."""
    tokenizer, table = toy_embeddings(dim)
    w_q, w_k = relation_projections(table, feature_matrix(tokenizer), relation_matrix(),
                                    strength=strength)
    return ToyAttention(tokenizer, table, w_q, w_k)


@cache
def sentence_weights(sentence: str = SENTENCE, causal: bool = False
                     ) -> tuple[tuple[str, ...], torch.Tensor]:
    """Tokens and attention weights ``[T, T]`` of the toy example on ``sentence`` (cached)."""
    tokens, q, k, v = toy_attention().qkv(sentence)
    _, weights = softmax_attention(q, k, v, causal=causal, return_weights=True)
    return tuple(tokens), weights[0, 0]


def _check_query(query: object, n_tokens: int) -> int:
    if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < n_tokens:
        raise ValueError(f"query: expected a token position in [0, {n_tokens}), got {query!r}")
    return query


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    return value


def _labels(tokens) -> list[str]:
    return [f"{i}·{t}" for i, t in enumerate(tokens)]


def _fixed_axes(fig: Figure, ncols: int, **margins: float):
    """``ncols`` axes in one row with fixed margins and no layout engine (not even a
    placeholder, which makes ``savefig`` draw twice): a slider frame renders in about half the
    time of a constrained layout, which matters when every frame is pre-rendered."""
    fig.set_layout_engine(None)
    return fig.subplots(1, ncols, gridspec_kw=margins)


def _token_axis(ax, tokens) -> None:
    """Name the x positions 0, 1, … of ``ax`` after ``tokens``, under the axis as tick labels
    would be (45°, right-aligned), but as plain texts: 9 tick labels cost ~18 ms per frame to
    build and draw (each is a tick object too, and is measured twice more per draw), 9 texts ~7.
    No tick marks or vertical grid lines: the labels name the bars or columns. Nothing places an
    x label below the texts, so the figure carries it."""
    ax.set_xticks([])
    below = offset_copy(ax.get_xaxis_transform(), fig=ax.figure,
                        y=-matplotlib.rcParams["xtick.major.pad"], units="points")
    size = matplotlib.rcParams["xtick.labelsize"]
    for j, token in enumerate(tokens):
        ax.text(j, 0, token, transform=below, rotation=45, ha="right", va="top", fontsize=size)


def _row_labels(ax, labels, header: str) -> None:
    """Name the rows 0, 1, … of ``ax`` with ``labels`` left of the axes, as y tick labels would,
    but as plain texts (see :func:`_token_axis`), under a ``header``: a y label is placed by
    measuring the tick labels, which these texts are not."""
    ax.set_yticks([])
    pad = matplotlib.rcParams["ytick.major.pad"]
    left = offset_copy(ax.get_yaxis_transform(), fig=ax.figure, x=-pad, units="points")
    size = matplotlib.rcParams["ytick.labelsize"]
    for i, label in enumerate(labels):
        ax.text(0, i, label, transform=left, ha="right", va="center", fontsize=size)
    above_left = offset_copy(ax.transAxes, fig=ax.figure, x=-pad, y=pad, units="points")
    ax.text(0, 1, header, transform=above_left, ha="right", va="bottom",
            fontsize=matplotlib.rcParams["axes.labelsize"])


def _bars(ax, heights, colours, width: float = 0.8) -> None:
    """Vertical bars at x = 0, 1, … (like ``ax.bar``) as one artist: ``ax.bar`` makes one
    rectangle per bar, which costs more to build than the rest of the bar chart."""
    half = width / 2
    ax.add_collection(PolyCollection(
        [((j - half, 0), (j - half, h), (j + half, h), (j + half, 0))
         for j, h in enumerate(heights)], facecolors=colours, edgecolors="none"))
    ax.sticky_edges.y.append(0)  # like ax.bar: no margin below a baseline of 0


def _key(ax, entries, x: float, y: float, ha: str = "left", fontsize: float = 8) -> None:
    """A legend drawn as one text per entry, "■ text" in its entry's colour, stacked down from
    ``(x, y)`` (axes fraction): ``entries`` are ``(text, colour)``. A legend also packs handles
    into boxes, which costs several times more to draw."""
    for i, (text, colour) in enumerate(entries):
        at = offset_copy(ax.transAxes, fig=ax.figure, y=-1.3 * fontsize * i, units="points")
        ax.text(x, y, f"■ {text}", transform=at, ha=ha, va="top", color=colour,
                fontsize=fontsize)


def _title(ax, title: str) -> None:
    """``ax.set_title`` at the usual place, just above the axes. Given ``y``, matplotlib does
    not measure every y tick label at each draw to check whether the title must move up."""
    ax.set_title(title, y=1.0)


# --------------------------------------------------------------------------- Lesson 2


def draw_query_meets_keys(fig: Figure, query: int = 4, sentence: str = SENTENCE) -> None:
    """One query against every key: the query vector, the keys ``[T, F]`` and the weights.

    Columns are the toy example's named key features, so a large q·k is visibly a match.
    """
    tokens, q, k, v = toy_attention().qkv(sentence)
    query = _check_query(query, len(tokens))
    _, weights = softmax_attention(q, k, v, causal=False, return_weights=True)
    q_row, keys, w_row = q[0, 0, query : query + 1], k[0, 0], weights[0, 0, query]
    fig.set_layout_engine(None)
    grid = fig.add_gridspec(2, 2, height_ratios=[1.4, len(tokens)], width_ratios=[3, 2],
                            left=0.12, right=0.97, bottom=0.17, top=0.93, hspace=0.45,
                            wspace=0.06)
    ax_q = fig.add_subplot(grid[0, 0])
    ax_k = fig.add_subplot(grid[1, 0])
    ax_w = fig.add_subplot(grid[1, 1], sharey=ax_k)
    heatmap(ax_q, q_row, xlabel="", ylabel="", yticklabels=["q"], annotate=True,
            title=f"query of “{tokens[query]}”, q = x W_Q: what it looks for")
    ax_q.set_xticks([])
    heatmap(ax_k, keys, xlabel="feature", ylabel="key token",
            title="keys k = x W_K: what each token announces", xticklabels=list(FEATURES),
            yticklabels=_labels(tokens), vmin=-0.3, vmax=1.1, annotate=True)
    ax_k.tick_params(axis="x", labelrotation=0)
    for label in ax_k.get_xticklabels():
        label.set_horizontalalignment("center")
    colours = [PALETTE[5] if j == int(w_row.argmax()) else PALETTE[0] for j in range(len(tokens))]
    ax_w.barh(range(len(tokens)), w_row.tolist(), color=colours)
    for j, w in enumerate(w_row.tolist()):
        ax_w.text(w + 0.01, j, f"{w:.2f}", va="center", fontsize=7)
    ax_w.set_xlim(0, 1)
    style_axes(ax_w, "attention weight (sums to 1)", "", "weights softmax(s q·k)")
    ax_w.tick_params(axis="y", labelleft=False)


def draw_attention_row(fig: Figure, query: int = 4, causal: bool = False,
                       sentence: str = SENTENCE) -> None:
    """The weights of one query (bars) and the whole ``[T, T]`` weight matrix with its row
    outlined; with ``causal`` the masked (future) cells are grey."""
    causal = _check_bool("causal", causal)
    tokens, weights = sentence_weights(sentence, causal)
    t = len(tokens)
    query = _check_query(query, t)
    row = weights[query]
    ax_bar, ax_map = _fixed_axes(fig, 2, left=0.08, right=0.97, bottom=0.2, top=0.9, wspace=0.35)
    colours = [PALETTE[5] if j == int(row.argmax()) else PALETTE[0] for j in range(t)]
    _bars(ax_bar, row.tolist(), colours)
    _token_axis(ax_bar, tokens)
    ax_bar.set_ylim(0, 1)
    ax_bar.set_yticks([0, 0.5, 1], ["0", "0.5", "1"])
    style_axes(ax_bar, "", "weight of key j (row sums to 1)")
    _title(ax_bar, f"weights of query {query}, “{tokens[query]}”")
    shown = weights.clone()
    if causal:
        shown[torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)] = float("nan")
    cmap = matplotlib.colormaps[SEQUENTIAL_CMAP].with_extremes(bad="#d0d0d0")
    heatmap(ax_map, shown, xlabel="", ylabel="", cmap=cmap, vmin=0, vmax=1)
    _token_axis(ax_map, tokens)
    _row_labels(ax_map, _labels(tokens), "query i")
    ax_map.add_patch(Rectangle((-0.5, query - 0.5), t, 1, fill=False, edgecolor=PALETTE[5],
                               linewidth=2.5))
    count = attention_dot_products(t, causal=causal)
    formula = "T(T+1)/2" if causal else "T²"
    _title(ax_map, f"{'causal' if causal else 'full'}: {formula} = {count} dot products")
    fig.text(0.5, 0.01, "key token j   (heat map: weight from 0, dark, to 1, yellow; "
             + ("grey = masked future" if causal else "no mask") + ")",
             ha="center", va="bottom", fontsize=9)


def draw_dot_product_growth(fig: Figure, context: int = 4096) -> None:
    """Dot products per head per layer against the context length T (log–log), full and
    causal, with ``context`` marked."""
    if isinstance(context, bool) or not isinstance(context, int) or not 1 <= context <= 2**20:
        raise ValueError(f"context: expected an integer in [1, 2**20], got {context!r}")
    lengths = [2**i for i in range(4, 21)]
    ax = fig.subplots()
    for causal, colour, name in ((False, PALETTE[0], "full: T²"),
                                 (True, PALETTE[1], "causal: T(T+1)/2")):
        ax.plot(lengths, [attention_dot_products(n, causal=causal) for n in lengths],
                color=colour, marker="o", ms=3, label=name)
        ax.plot([context], [attention_dot_products(context, causal=causal)], marker="o", ms=9,
                color=colour, zorder=5)
    ax.plot(lengths, lengths, color="#999999", linestyle="--", label="T (linear, for comparison)")
    ax.axvline(context, color=PALETTE[5], linewidth=1, alpha=0.6)
    ax.annotate(f"T = {context:,}", (context, 10), xytext=(4, 0), textcoords="offset points",
                color=PALETTE[5], fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    style_axes(ax, "context length T (tokens, log scale)", "dot products per head per layer (log)",
               "Self-attention scores every pair of tokens")
    ax.legend(loc="upper left")


# --------------------------------------------------------------------------- Lesson 3


def random_scores(dim: int, n_queries: int = 256, n_keys: int = 64, seed: int = 0,
                  scale: float = 1.0) -> torch.Tensor:
    """Scores s · q_i · k_j ``[n_queries, n_keys]`` (float64) for q, k with i.i.d. N(0, 1)
    entries of width ``dim``; ``scale=1`` gives raw dot products, whose variance is ``dim``."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim: expected a positive integer, got {dim!r}")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, n_queries, dim, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, n_keys, dim, generator=g, dtype=torch.float64)
    return attention_scores(q, k, scale=scale)[0, 0]


SPREAD_DIMS = (1, 4, 16, 64, 96, 256, 1024)
_SPREAD_RANGE = 4 * math.sqrt(max(SPREAD_DIMS))


@dataclass(frozen=True)
class SpreadData:
    """Histograms behind :func:`draw_score_spread` for one width (counts per bin)."""

    raw_counts: torch.Tensor
    scaled_counts: torch.Tensor
    top_raw_counts: torch.Tensor
    top_scaled_counts: torch.Tensor
    raw_std: float
    scaled_std: float
    top_raw_mean: float
    top_scaled_mean: float
    n_queries: int
    n_keys: int


_SCORE_EDGES = torch.linspace(-_SPREAD_RANGE, _SPREAD_RANGE, 81, dtype=torch.float64)
_WEIGHT_EDGES = torch.linspace(0, 1, 41, dtype=torch.float64)


def _histogram(ax, heights, edges, colour: str, baseline: float = 0.0) -> None:
    """``ax.stairs(heights, edges, fill=True)``, half transparent, without updating the data
    limits (the caller sets both axis ranges): for a step outline of 80 bins, that update walks
    the outline segment by segment and costs more than drawing it."""
    ax.add_artist(StepPatch(heights, edges, baseline=baseline, fill=True, color=colour,
                            alpha=0.6, linewidth=0))


@cache
def score_spread(dim: int) -> SpreadData:
    """Raw and scaled scores of :func:`random_scores` at width ``dim``, and the largest softmax
    weight of each row, as histograms (cached: a slider frame only draws)."""
    raw = random_scores(dim)
    scaled = raw / math.sqrt(dim)
    top_raw, top_scaled = stable_softmax(raw).amax(-1), stable_softmax(scaled).amax(-1)

    def counts(values: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        return torch.histogram(values.flatten(), bins=edges).hist

    return SpreadData(counts(raw, _SCORE_EDGES), counts(scaled, _SCORE_EDGES),
                      counts(top_raw, _WEIGHT_EDGES), counts(top_scaled, _WEIGHT_EDGES),
                      float(raw.std()), float(scaled.std()), float(top_raw.mean()),
                      float(top_scaled.mean()), raw.shape[0], raw.shape[1])


def draw_score_spread(fig: Figure, dim: int = 96) -> None:
    """Histograms of raw and scaled scores for width ``dim``, and of the largest softmax weight
    per query over 64 keys (raw against scaled)."""
    data = score_spread(dim)
    ax_s, ax_w = _fixed_axes(fig, 2, left=0.08, right=0.98, bottom=0.15, top=0.9, wspace=0.22)
    raw, scaled = PALETTE[5], PALETTE[0]
    # log10 of the counts on a linear axis with fixed ticks: looks like a log axis, draws faster
    edges = _SCORE_EDGES.numpy()
    for counts, colour in ((data.raw_counts, raw), (data.scaled_counts, scaled)):
        heights = torch.where(counts > 0, counts.clamp_min(1).log10(), torch.tensor(-0.1))
        _histogram(ax_s, heights.numpy(), edges, colour, baseline=-0.1)
    ax_s.set_xlim(-_SPREAD_RANGE, _SPREAD_RANGE)
    n_pairs = data.n_queries * data.n_keys
    top = math.ceil(math.log10(n_pairs))
    ax_s.set_ylim(-0.1, top + 0.3)
    ax_s.set_yticks(range(top + 1), ["1", "10", "100", "1k", "10k", "100k", "1M"][: top + 1])
    style_axes(ax_s, "score (dimensionless)", "pairs per bin (log scale)")
    _title(ax_s, f"{n_pairs:,} random scores at d = {dim}")
    _key(ax_s, [(f"q·k: std {data.raw_std:.1f} (√d = {math.sqrt(dim):.1f})", raw),
                (f"q·k/√d: std {data.scaled_std:.2f}", scaled)], 0.02, 0.98)
    wedges = _WEIGHT_EDGES.numpy()
    _histogram(ax_w, data.top_raw_counts.numpy(), wedges, raw)
    _histogram(ax_w, data.top_scaled_counts.numpy(), wedges, scaled)
    ax_w.axvline(1 / data.n_keys, color="#999999", linestyle="--", linewidth=1)
    ax_w.set_xlim(0, 1)
    ax_w.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
    ax_w.set_ylim(0, data.n_queries)
    ax_w.set_yticks([0, data.n_queries // 2, data.n_queries])
    style_axes(ax_w, f"largest weight in a row of {data.n_keys} keys",
               f"count (of {data.n_queries} queries)")
    _title(ax_w, "How peaked is the softmax?")
    _key(ax_w, [(f"unscaled: mean {data.top_raw_mean:.2f}", raw),
                (f"scaled: mean {data.top_scaled_mean:.2f}", scaled)], 0.5, 0.98, ha="center")


def draw_scaled_vs_unscaled(fig: Figure, dim: int = 96, n_keys: int = 16, seed: int = 3) -> None:
    """One random query against ``n_keys`` keys at width ``dim``: softmax weights of the raw
    scores (nearly one-hot) and of the scaled ones."""
    raw = random_scores(dim, n_queries=1, n_keys=n_keys, seed=seed)[0]
    axes = fig.subplots(1, 2, sharey=True)
    for ax, scores, colour, name in ((axes[0], raw, PALETTE[5], "softmax(q·k)"),
                                     (axes[1], raw / math.sqrt(dim), PALETTE[0],
                                      "softmax(q·k / √d)")):
        weights = stable_softmax(scores)
        ax.bar(range(n_keys), weights.tolist(), color=colour)
        style_axes(ax, "key j", "attention weight", f"{name}, d = {dim}")
        ax.set_ylim(0, 1)
    axes[1].tick_params(axis="y", labelleft=True)


TEMPERATURES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0)


def draw_temperature(fig: Figure, temperature: float = 1.0, query: int = 4,
                     sentence: str = SENTENCE) -> None:
    """The toy example's scaled scores of one query, and softmax(scores / τ) at temperature τ."""
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or \
            not temperature > 0:
        raise ValueError(f"temperature: expected a positive number, got {temperature!r}")
    tokens, q, k, _ = toy_attention().qkv(sentence)
    query = _check_query(query, len(tokens))
    scores = attention_scores(q, k)[0, 0, query]
    weights = stable_softmax(scores / temperature)
    entropy = float(-(weights * weights.clamp_min(1e-300).log()).sum())
    ax_s, ax_w = _fixed_axes(fig, 2, left=0.08, right=0.98, bottom=0.2, top=0.9, wspace=0.25)
    _bars(ax_s, scores.tolist(), PALETTE[2])
    ax_s.axhline(0, color="black", linewidth=0.8)
    _token_axis(ax_s, tokens)
    ax_s.yaxis.set_major_locator(MaxNLocator(4))
    style_axes(ax_s, "", "score s·q·k (dimensionless)")
    _title(ax_s, f"scores of “{tokens[query]}”")
    colours = [PALETTE[5] if j == int(weights.argmax()) else PALETTE[0]
               for j in range(len(tokens))]
    _bars(ax_w, weights.tolist(), colours)
    ax_w.axhline(1 / len(tokens), color="#999999", linestyle="--", linewidth=1)
    _token_axis(ax_w, tokens)
    ax_w.set_ylim(0, 1)
    ax_w.set_yticks([0, 0.5, 1], ["0", "0.5", "1"])
    style_axes(ax_w, "", "weight (sums to 1)")
    _title(ax_w, f"softmax(scores / {temperature:g}): entropy {entropy:.2f} nats")
    fig.text(0.5, 0.01, "key token", ha="center", va="bottom")
