"""Figures for Lesson 17 (who can recall? the MQAR experiment).

The result figures take the tidy rows of ``attnlab.train.run_recall_experiment`` (one dict per
trained model: ``mixer``, ``n_pairs``, ``seed``, ``accuracy``, ``steps``, ``history``), so the
sliders of the lesson move over results that were computed once, never over training.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from ..plotting import PALETTE, style_axes
from ..tasks import IGNORE, mqar_batch

#: Display names of the experiment's mixer labels (``attnlab.train.pattern_label``).
MIXER_NAMES = {
    "attn": "softmax attention",
    "linear": "linear attention",
    "deltanet": "DeltaNet",
    "gdn": "Gated DeltaNet",
    "kda": "KDA",
    "kda→attn": "hybrid KDA→attention",
    "attn→kda": "hybrid attention→KDA",
    "linear→attn": "hybrid linear→attention",
    "attn→linear": "hybrid attention→linear",
}

#: One fixed colour per mixer (Okabe–Ito), so every figure of the lesson agrees.
MIXER_COLOURS = {
    "attn": PALETTE[5],
    "linear": PALETTE[7],
    "deltanet": PALETTE[2],
    "gdn": PALETTE[4],
    "kda": PALETTE[0],
    "kda→attn": PALETTE[3],
    "attn→kda": PALETTE[1],
    "linear→attn": PALETTE[1],
    "attn→linear": PALETTE[1],
}

#: The order mixers are listed in: attention, the delta-rule family, linear attention, hybrids.
MIXER_ORDER = ("attn", "kda", "gdn", "deltanet", "linear", "kda→attn", "attn→kda",
               "linear→attn", "attn→linear")

ROLE_COLOURS = {"key": PALETTE[0], "value": PALETTE[1], "query": PALETTE[4],
                "answer": PALETTE[2]}


def mixer_name(label: str) -> str:
    """The display name of a mixer label ("kda→attn" → "hybrid KDA→attention")."""
    return MIXER_NAMES.get(label, label)


def mixers_in(rows: Sequence[dict]) -> list[str]:
    """The mixer labels present in ``rows``, in ``MIXER_ORDER``."""
    present = {row["mixer"] for row in rows}
    ordered = [m for m in MIXER_ORDER if m in present]
    return ordered + sorted(present - set(ordered))


def _check_rows(rows: object) -> list[dict]:
    if not isinstance(rows, Sequence) or not rows or not all(
            isinstance(r, dict) and {"mixer", "n_pairs", "seed", "accuracy"} <= r.keys()
            for r in rows):
        raise ValueError("rows: expected a non-empty list of run_recall_experiment rows "
                         "(dicts with mixer, n_pairs, seed, accuracy)")
    return list(rows)


def _pick_n(rows: list[dict], n_pairs: int | None) -> int:
    available = sorted({r["n_pairs"] for r in rows})
    if n_pairs is None:
        return available[len(available) // 2] if len(available) > 1 else available[0]
    if n_pairs not in available:
        raise ValueError(f"n_pairs: expected one of the measured {available}, got {n_pairs!r}")
    return n_pairs


def _colour(label: str, index: int) -> str:
    return MIXER_COLOURS.get(label, PALETTE[index % len(PALETTE)])


# ------------------------------------------------------------------------------ the task
def draw_mqar_sequence(fig: Figure, n_pairs: int = 4, seed: int = 0, vocab_size: int = 128) -> None:
    """One MQAR sequence (``attnlab.tasks.mqar_batch``) as a row of token boxes.

    Top row: the input, coloured by role (keys and values of the context, query keys, and
    the values that follow the queries, which the model reads as it moves on). Bottom row: the
    target at each position; only the query positions are scored (the loss positions), the rest
    are ignored. Arcs join each query to its key in the context.
    """
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or not 1 <= n_pairs <= 8:
        raise ValueError(f"n_pairs: expected an integer in [1, 8] (to fit the figure), "
                         f"got {n_pairs!r}")
    generator = torch.Generator().manual_seed(seed)
    inputs, targets = mqar_batch(1, n_pairs, vocab_size=vocab_size, generator=generator)
    tokens, target = inputs[0].tolist(), targets[0].tolist()
    length = len(tokens)
    half = 2 * n_pairs
    roles = ["key" if t % 2 == 0 else "value" for t in range(half)]
    roles += ["query" if t % 2 == 0 else "value" for t in range(half)]

    ax = fig.subplots()
    ax.set_xlim(-1.6, length + 0.2)
    ax.set_ylim(-2.3, 2.5)
    ax.set_aspect("equal")
    ax.axis("off")
    y_in, y_out = 0.0, -1.5
    for t, (token, role) in enumerate(zip(tokens, roles, strict=True)):
        ax.add_patch(Rectangle((t + 0.05, y_in), 0.9, 0.9, facecolor=ROLE_COLOURS[role],
                               edgecolor="black", linewidth=0.6, alpha=0.85))
        ax.text(t + 0.5, y_in + 0.45, str(token), ha="center", va="center", fontsize=8)
        ax.text(t + 0.5, y_in - 0.22, str(t), ha="center", va="center", fontsize=6,
                color="0.35")
        scored = target[t] != IGNORE
        ax.add_patch(Rectangle((t + 0.05, y_out), 0.9, 0.9,
                               facecolor=ROLE_COLOURS["answer"] if scored else "white",
                               edgecolor="black" if scored else "0.75", linewidth=0.6,
                               hatch=None if scored else "//", alpha=0.85 if scored else 1.0))
        ax.text(t + 0.5, y_out + 0.45, str(target[t]) if scored else "·", ha="center",
                va="center", fontsize=8, color="black" if scored else "0.55")
    ax.text(-0.2, y_in + 0.45, "input", ha="right", va="center", fontsize=9)
    ax.text(-0.2, y_out + 0.45, "target", ha="right", va="center", fontsize=9)
    # arcs from each query key back to the same key in the context
    for t in range(half, length, 2):
        source = tokens[:half:2].index(tokens[t]) * 2
        mid, span = (source + t) / 2 + 0.5, (t - source) / 2
        heights = torch.linspace(0, torch.pi, 30)
        xs = mid - span * torch.cos(heights)
        ys = y_in + 0.95 + 0.9 * (span / n_pairs) * torch.sin(heights)
        ax.plot(xs.numpy(), ys.numpy(), color="0.45", linewidth=0.8)
    ax.plot([half, half], [y_out - 0.3, y_in + 1.3], color="0.3", linewidth=1, linestyle="--")
    ax.text(n_pairs, y_out - 0.45, f"context: {n_pairs} key–value pairs", ha="center",
            va="top", fontsize=9)
    ax.text(half + n_pairs, y_out - 0.45, "queries: loss only at the green targets",
            ha="center", va="top", fontsize=9)
    handles = [Patch(facecolor=ROLE_COLOURS[r], edgecolor="black", label=label)
               for r, label in [("key", "key"), ("value", "value"), ("query", "query key"),
                                ("answer", "target: scored by the loss")]]
    ax.legend(handles=handles, loc="upper center", ncol=4, bbox_to_anchor=(0.5, 1.02),
              fontsize=8)


# ------------------------------------------------------------------------------ results
def draw_recall_accuracy(fig: Figure, rows: Sequence[dict], n_pairs: int | None = None,
                         head_dim: int = 32) -> None:
    """Accuracy per mixer at one N: a bar for the mean over seeds, a dot per seed.

    The dashed line is 1/N, what a model scores that copies a random value of the context.
    """
    rows = _check_rows(rows)
    n = _pick_n(rows, n_pairs)
    selected = [r for r in rows if r["n_pairs"] == n]
    mixers = mixers_in(selected)
    ax = fig.subplots()
    for i, mixer in enumerate(mixers):
        accs = [r["accuracy"] for r in selected if r["mixer"] == mixer]
        mean = sum(accs) / len(accs)
        ax.bar(i, 100 * mean, color=_colour(mixer, i), alpha=0.85, width=0.7)
        ax.text(i, 100 * mean + 2, f"{100 * mean:.0f}%", ha="center", va="bottom", fontsize=9)
        if len(accs) > 1:
            ax.scatter([i] * len(accs), [100 * a for a in accs], color="black", s=10, zorder=3)
    ax.axhline(100 / n, color="0.3", linestyle="--", linewidth=1)
    ax.text(-0.45, 100 / n + 1.5, "1/N: copy a random value", ha="left", va="bottom",
            fontsize=8, color="0.2", zorder=4,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    ax.set_xticks(range(len(mixers)), [mixer_name(m).replace("hybrid ", "hybrid\n")
                                       for m in mixers], rotation=20, ha="right")
    ax.set_ylim(0, 112)
    seeds = len({r["seed"] for r in selected})
    style_axes(ax, "", "recall accuracy on held-out queries (%)",
               f"N = {n} pairs, head_dim {head_dim} (N/head_dim = {n / head_dim:g}), "
               f"{seeds} seed{'s' if seeds > 1 else ''}")
    ax.grid(axis="x", visible=False)


def draw_accuracy_vs_pairs(fig: Figure, rows: Sequence[dict], head_dim: int = 32) -> None:
    """Mean accuracy against the number of pairs N, one line per mixer, a dot per seed."""
    rows = _check_rows(rows)
    ns = sorted({r["n_pairs"] for r in rows})
    ax = fig.subplots()
    for i, mixer in enumerate(mixers_in(rows)):
        colour = _colour(mixer, i)
        means = []
        for n in ns:
            accs = [r["accuracy"] for r in rows if r["mixer"] == mixer and r["n_pairs"] == n]
            means.append(100 * sum(accs) / len(accs) if accs else float("nan"))
            ax.scatter([n] * len(accs), [100 * a for a in accs], color=colour, s=9, alpha=0.6)
        ax.plot(ns, means, marker="o", color=colour, label=mixer_name(mixer))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [f"{n}\n({n / head_dim:g})" for n in ns])
    ax.minorticks_off()
    ax.set_ylim(0, 105)
    style_axes(ax, f"pairs N  (N/head_dim, head_dim = {head_dim})",
               "recall accuracy (%)", "Accuracy against the number of pairs")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)


def draw_training_curves(fig: Figure, rows: Sequence[dict], mixer: str,
                         n_pairs: int | None = None) -> None:
    """The held-out accuracy against optimiser steps for one mixer (bold, one line per seed),
    with every other mixer's first seed in grey for comparison."""
    rows = _check_rows(rows)
    n = _pick_n(rows, n_pairs)
    selected = [r for r in rows if r["n_pairs"] == n]
    mixers = mixers_in(selected)
    if mixer not in mixers:
        raise ValueError(f"mixer: expected one of the trained {mixers}, got {mixer!r}")
    ax = fig.subplots()
    grey_steps: list[float] = []
    grey_accuracy: list[float] = []
    for i, label in enumerate(mixers):
        runs = [r for r in selected if r["mixer"] == label]
        if label != mixer:  # first seed only, in grey, gathered into one line (NaN gaps)
            grey_steps += [*runs[0]["history"].step, math.nan]
            grey_accuracy += [*(100 * a for a in runs[0]["history"].accuracy), math.nan]
            continue
        for run in runs:
            history = run["history"]
            ax.plot(history.step, [100 * a for a in history.accuracy], color=_colour(label, i),
                    linewidth=2.2, zorder=3)
    ax.plot(grey_steps, grey_accuracy, color="0.75", linewidth=1.0, zorder=1)
    ax.axhline(100 / n, color="0.3", linestyle="--", linewidth=1)
    ax.set_ylim(0, 105)
    ax.set_yticks(range(0, 101, 25))
    ax.xaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10]))
    style_axes(ax, "optimiser steps", "held-out recall accuracy (%)")
    # the title names the coloured line (no legend needed); y=1.0 fixes its place, which
    # matplotlib otherwise finds by measuring the tick labels
    ax.set_title(f"{mixer_name(mixer)} (colour) against the others (grey), N = {n}", y=1.0)
