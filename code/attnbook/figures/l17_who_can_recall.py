"""Figures for Lesson 17 (who can recall? the MQAR experiment). They only draw,
and the ``*_alt`` functions say in words what a figure shows.

The study figures take ``attnbook.recall_study.summarize``'s cells (one per mixer and N, at the
chosen learning rate, one accuracy per seed); the live-run figures take the rows of
``attnbook.recall_study.train_cell`` (``mixer``, ``n_pairs``, ``seed``, ``accuracy``,
``curve_steps``, ``curve_val``), so the sliders move over results computed once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from attnlab.i18n import tr
from attnlab.tasks import IGNORE, mqar_batch

from ..plotting import PALETTE, SMALL_TEXT_PT, style_axes
from ..recall_study import (
    HYBRID_NAMES,
    MIXER_ORDER,
    CellSummary,
    mixer_name,
    mixers_in,
    percent,
    tidy_spacing,
)

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

#: One marker per mixer, so the lines differ in shape as well as colour.
MIXER_MARKERS = {
    "attn": "o",
    "linear": "v",
    "deltanet": "s",
    "gdn": "D",
    "kda": "^",
    "kda→attn": "P",
    "attn→kda": "X",
}

ROLE_COLOURS = {
    "key": PALETTE[0],
    "value": PALETTE[1],
    "query": PALETTE[4],
    "answer": PALETTE[2],
}


def _check_rows(rows: object) -> list[dict]:
    if (
        not isinstance(rows, Sequence)
        or not rows
        or not all(
            isinstance(r, dict)
            and {"mixer", "n_pairs", "seed", "accuracy"} <= r.keys()
            for r in rows
        )
    ):
        raise ValueError(
            "rows: expected a non-empty list of train_cell rows "
            "(dicts with mixer, n_pairs, seed, accuracy)"
        )
    return list(rows)


def _pick_n(rows: list[dict], n_pairs: int | None) -> int:
    available = sorted({r["n_pairs"] for r in rows})
    if n_pairs is None:
        return (
            available[len(available) // 2]
            if len(available) > 1
            else available[0]
        )
    if n_pairs not in available:
        raise ValueError(
            f"n_pairs: expected one of the measured {available}, got {n_pairs!r}"
        )
    return n_pairs


def _colour(label: str, index: int) -> str:
    return MIXER_COLOURS.get(label, PALETTE[index % len(PALETTE)])


#: A hybrid's name on two lines, for a narrow tick label.
HYBRID_TICKS = {
    "kda→attn": "hybrid\nKDA→attention",
    "attn→kda": "hybrid\nattention→KDA",
    "linear→attn": "hybrid\nlinear→attention",
    "attn→linear": "hybrid\nattention→linear",
}
assert {k: v.replace("\n", " ") for k, v in HYBRID_TICKS.items()} == HYBRID_NAMES


def _tick_label(mixer: str) -> str:
    """A mixer's name for a tick label, in the reader's language (a hybrid's on two lines)."""
    return tr(HYBRID_TICKS[mixer]) if mixer in HYBRID_TICKS else mixer_name(mixer)


# ------------------------------------------------------------------------------ the task
def draw_mqar_sequence(
    fig: Figure, n_pairs: int = 4, seed: int = 0, vocab_size: int = 128
) -> None:
    """One MQAR sequence (``attnlab.tasks.mqar_batch``) as a row of token boxes.

    Top row: the input, coloured by role (keys and values of the context, query keys, and
    the values that follow the queries, which the model reads as it moves on). Bottom row: the
    target at each position; only the query positions are scored (the loss positions), the rest
    are ignored. Arcs join each query to its key in the context.
    """
    if (
        isinstance(n_pairs, bool)
        or not isinstance(n_pairs, int)
        or not 1 <= n_pairs <= 8
    ):
        raise ValueError(
            f"n_pairs: expected an integer in [1, 8] (to fit the figure), "
            f"got {n_pairs!r}"
        )
    generator = torch.Generator().manual_seed(seed)
    inputs, targets = mqar_batch(
        1, n_pairs, vocab_size=vocab_size, generator=generator
    )
    tokens, target = inputs[0].tolist(), targets[0].tolist()
    length = len(tokens)
    half = 2 * n_pairs
    roles = ["key" if t % 2 == 0 else "value" for t in range(half)]
    roles += ["query" if t % 2 == 0 else "value" for t in range(half)]

    ax = fig.subplots()
    ax.set_xlim(-2.4, length + 0.2)
    ax.set_ylim(-2.3, 2.5)
    ax.set_aspect("equal")
    ax.axis("off")
    y_in, y_out = 0.0, -1.5
    for t, (token, role) in enumerate(zip(tokens, roles, strict=True)):
        ax.add_patch(
            Rectangle(
                (t + 0.05, y_in),
                0.9,
                0.9,
                facecolor=ROLE_COLOURS[role],
                edgecolor="black",
                linewidth=0.6,
                alpha=0.85,
            )
        )
        ax.text(
            t + 0.5,
            y_in + 0.45,
            str(token),
            ha="center",
            va="center",
            fontsize=SMALL_TEXT_PT,
        )
        ax.text(
            t + 0.5,
            y_in - 0.22,
            str(t),
            ha="center",
            va="center",
            fontsize=SMALL_TEXT_PT,
            color="0.35",
        )
        scored = target[t] != IGNORE
        ax.add_patch(
            Rectangle(
                (t + 0.05, y_out),
                0.9,
                0.9,
                facecolor=ROLE_COLOURS["answer"] if scored else "white",
                edgecolor="black" if scored else "0.75",
                linewidth=0.6,
                hatch=None if scored else "//",
                alpha=0.85 if scored else 1.0,
            )
        )
        ax.text(
            t + 0.5,
            y_out + 0.45,
            str(target[t]) if scored else "·",
            ha="center",
            va="center",
            fontsize=SMALL_TEXT_PT,
            color="black" if scored else "0.55",
        )
    ax.text(
        -0.2,
        y_in + 0.45,
        tr("input"),
        ha="right",
        va="center",
        fontsize=SMALL_TEXT_PT,
    )
    ax.text(
        -0.2,
        y_out + 0.45,
        tr("target"),
        ha="right",
        va="center",
        fontsize=SMALL_TEXT_PT,
    )
    # arcs from each query key back to the same key in the context
    for t in range(half, length, 2):
        source = tokens[:half:2].index(tokens[t]) * 2
        mid, span = (source + t) / 2 + 0.5, (t - source) / 2
        heights = torch.linspace(0, torch.pi, 30)
        xs = mid - span * torch.cos(heights)
        ys = y_in + 0.95 + 0.9 * (span / n_pairs) * torch.sin(heights)
        ax.plot(xs.numpy(), ys.numpy(), color="0.45", linewidth=0.8)
    ax.plot(
        [half, half],
        [y_out - 0.3, y_in + 1.3],
        color="0.3",
        linewidth=1,
        linestyle="--",
    )
    ax.text(
        n_pairs,
        y_out - 0.45,
        tr("context: {n} key–value pairs", n=n_pairs),
        ha="center",
        va="top",
        fontsize=SMALL_TEXT_PT,
    )
    ax.text(
        half + n_pairs,
        y_out - 0.45,
        tr("queries: scored at the green targets"),
        ha="center",
        va="top",
        fontsize=SMALL_TEXT_PT,
    )
    handles = [
        Patch(facecolor=ROLE_COLOURS[r], edgecolor="black", label=label)
        for r, label in [
            ("key", tr("key")),
            ("value", tr("value")),
            ("query", tr("query key")),
            ("answer", tr("target: scored by the loss")),
        ]
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        ncol=2,
        bbox_to_anchor=(0.5, 0.02),
        fontsize=SMALL_TEXT_PT,
    )


# ------------------------------------------------------------------------------ the study
def _check_summary(summary: object) -> dict:
    if (
        not isinstance(summary, dict)
        or not summary
        or not all(isinstance(c, CellSummary) for c in summary.values())
    ):
        raise ValueError(
            "summary: expected recall_study.summarize's non-empty dict of cells"
        )
    return summary


def draw_study(fig: Figure, summary: dict, head_dim: int) -> None:
    """Test accuracy against N/head_dim: one line per mixer through the means over seeds, a dot
    per seed, and the dashed 1/N level of a model that copies a random value of the context."""
    summary = _check_summary(summary)
    ax = fig.subplots()
    ns = sorted({n for _, n in summary})
    mixers = [m for m in MIXER_ORDER if any(k[0] == m for k in summary)]
    for i, mixer in enumerate(mixers):
        cells = [summary[mixer, n] for n in ns if (mixer, n) in summary]
        colour, marker = _colour(mixer, i), MIXER_MARKERS.get(mixer, "o")
        x = [c.ratio for c in cells]
        ax.plot(
            x,
            [100 * c.mean for c in cells],
            color=colour,
            marker=marker,
            markersize=6,
            linewidth=1.8,
            label=mixer_name(mixer),
            zorder=3,
        )
        dots_x = [c.ratio for c in cells for _ in c.accuracies]
        dots_y = [100 * a for c in cells for a in c.accuracies]
        ax.scatter(
            dots_x,
            dots_y,
            color=colour,
            s=12,
            alpha=0.55,
            zorder=2,
            linewidths=0,
        )
    ratios = [n / head_dim for n in ns]
    ax.plot(
        ratios,
        [100 / n for n in ns],
        color="0.3",
        linestyle="--",
        linewidth=1,
        label=tr("1/N: a random value of the context"),
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(
        ratios, [f"{r:g}\n(N = {n})" for r, n in zip(ratios, ns, strict=True)]
    )
    ax.minorticks_off()
    ax.set_ylim(0, 104)
    style_axes(
        ax, f"N / head_dim   (head_dim = {head_dim})", tr("test accuracy (%)")
    )
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=2,
        fontsize=SMALL_TEXT_PT,
    )


#: The three kinds of answer: key, legend label (a function: written in the reader's language),
#: colour.
ANSWER_KINDS = (
    ("right", lambda: tr("right value"), PALETTE[2]),
    ("wrong_in_context", lambda: tr("another value of this context"), PALETTE[1]),
    ("other", lambda: tr("any other token"), "0.75"),
)


def study_alt(summary: dict, head_dim: int) -> str:
    """Alt text of :func:`draw_study`: its axis and each mixer's mean at the
    smallest and the largest N."""
    summary = _check_summary(summary)
    ns = sorted({n for _, n in summary})
    mixers = [m for m in MIXER_ORDER if any(k[0] == m for k in summary)]
    lines = tr("; ").join(
        tr(
            "{mixer} from {low} to {high}",
            mixer=mixer_name(m),
            low=percent(summary[m, ns[0]].mean),
            high=percent(summary[m, ns[-1]].mean),
        )
        for m in mixers
        if (m, ns[0]) in summary and (m, ns[-1]) in summary
    )
    return tidy_spacing(tr(
        "Line chart of the study's test accuracy against N/head_dim on a log axis "
        "({ratios}), one line per mixer through the mean over seeds with a small dot per "
        "seed, and a dashed line at 1/N. Means from the smallest to the largest N: {lines}.",
        ratios=", ".join(f"{n / head_dim:g}" for n in ns),
        lines=lines,
    ))


def _cells_at(summary: object, n_pairs: int) -> list[CellSummary]:
    """The cells of ``summary`` at ``n_pairs``, in ``MIXER_ORDER``."""
    summary = _check_summary(summary)
    cells = [
        summary[m, n_pairs] for m in MIXER_ORDER if (m, n_pairs) in summary
    ]
    if not cells:
        raise ValueError(
            f"n_pairs: expected one of the study's N "
            f"{sorted({n for _, n in summary})}, got {n_pairs!r}"
        )
    return cells


def draw_answer_analysis(fig: Figure, summary: dict, n_pairs: int) -> None:
    """What each mixer answered at N pairs (means over seeds, test set): the right value, a
    value of the same context that belongs to another key, or any other token."""
    cells = _cells_at(summary, n_pairs)
    ax = fig.subplots()
    for row, cell in enumerate(cells):
        right = cell.mean
        parts = {
            "right": right,
            "wrong_in_context": cell.wrong_in_context,
            "other": 1 - right - cell.wrong_in_context,
        }
        left = 0.0
        for key, label, colour in ANSWER_KINDS:
            ax.barh(
                row,
                100 * parts[key],
                left=100 * left,
                color=colour,
                label=label() if row == 0 else None,
                height=0.7,
            )
            left += parts[key]
    ax.set_yticks(range(len(cells)), [mixer_name(c.mixer) for c in cells])
    ax.invert_yaxis()
    ax.axvline(
        100 / n_pairs,
        color="0.2",
        linestyle="--",
        linewidth=1,
        label=tr("1/N: a random value of the context"),
    )
    ax.set_xlim(0, 100)
    style_axes(ax, tr("answers at the query positions (%)"), "")
    ax.grid(axis="y", visible=False)
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.35, -0.16),
        ncol=2,
        fontsize=SMALL_TEXT_PT,
    )


def answer_analysis_alt(summary: dict, n_pairs: int) -> str:
    """Alt text of :func:`draw_answer_analysis`: each mixer's right answers
    and copies of another context value at ``n_pairs``."""
    return tidy_spacing(tr(
        "Stacked horizontal bars, one per mixer, of what the models answered at N = {n} "
        "(means over seeds): right value, another value of the same context, any other "
        "token. {answers}. A dashed line marks 1/N = {chance}.",
        n=n_pairs,
        answers=tr("; ").join(
            tr(
                "{mixer} {right} right and {copied} another context value",
                mixer=mixer_name(c.mixer),
                right=percent(c.mean),
                copied=percent(c.wrong_in_context),
            )
            for c in _cells_at(summary, n_pairs)
        ),
        chance=percent(1 / n_pairs),
    ))


# ------------------------------------------------------------------------------ the live run
def draw_live_vs_study(
    fig: Figure, rows: Sequence[dict], summary: dict
) -> None:
    """The live run's test accuracy per mixer (bars) next to the study's at the same N: its
    mean over seeds (black dot) and the range of its seeds (bar)."""
    rows, summary = _check_rows(rows), _check_summary(summary)
    n = _pick_n(rows, None)
    live = {r["mixer"]: r["accuracy"] for r in rows if r["n_pairs"] == n}
    mixers = mixers_in(rows)
    ax = fig.subplots()
    for i, mixer in enumerate(mixers):
        ax.bar(
            i,
            100 * live[mixer],
            color=_colour(mixer, i),
            alpha=0.85,
            width=0.7,
        )
        cell = summary.get((mixer, n))
        if cell is not None:
            ax.errorbar(
                i,
                100 * cell.mean,
                yerr=[
                    [100 * (cell.mean - cell.low)],
                    [100 * (cell.high - cell.mean)],
                ],
                fmt="o",
                color="black",
                markersize=5,
                capsize=4,
                zorder=3,
                label=tr("study: mean, seed range") if i == 0 else None,
            )
    ax.axhline(100 / n, color="0.3", linestyle="--", linewidth=1, label="1/N")
    ax.set_xticks(
        range(len(mixers)),
        [_tick_label(m) for m in mixers],
        rotation=30,
        ha="right",
    )
    ax.set_ylim(0, 119)
    style_axes(ax, "", tr("test accuracy (%)"))
    ax.grid(axis="x", visible=False)
    handles, labels = ax.get_legend_handles_labels()
    bar = Patch(facecolor="0.6", label=tr("this run (bar)"))
    ax.legend(
        [bar, *handles],
        [bar.get_label(), *labels],
        loc="upper center",
        ncol=3,
        fontsize=SMALL_TEXT_PT,
        bbox_to_anchor=(0.5, 1.02),
    )


def live_vs_study_alt(rows: Sequence[dict]) -> str:
    """Alt text of :func:`draw_live_vs_study`: this run's accuracy per
    mixer."""
    rows = _check_rows(rows)
    return tidy_spacing(tr(
        "Bar chart of this run's test accuracy per mixer at N = {n}: {accuracies}. Over each "
        "bar a black dot with whiskers gives the study's mean and seed range at the same N; "
        "a dashed line marks 1/N.",
        n=rows[0]["n_pairs"],
        accuracies=tr("; ").join(
            f"{mixer_name(r['mixer'])} {percent(r['accuracy'])}" for r in rows
        ),
    ))


def training_curves_alt(mixer: str, n_pairs: int) -> str:
    """Alt text of a frame of :func:`draw_training_curves`: ``mixer`` in colour, a run at
    ``n_pairs``."""
    return tidy_spacing(tr(
        "Line plot of validation accuracy in percent against optimiser steps for {mixer} in "
        "this run at N = {n}, in colour, with the other mixers of the run in grey and a dashed "
        "line at the 1/N level.",
        mixer=mixer_name(mixer),
        n=n_pairs,
    ))


def draw_training_curves(
    fig: Figure, rows: Sequence[dict], mixer: str
) -> None:
    """The live run's validation accuracy against optimiser steps for one mixer (in colour),
    every other mixer in grey, and the dashed 1/N level."""
    rows = _check_rows(rows)
    mixers = mixers_in(rows)
    if mixer not in mixers:
        raise ValueError(
            f"mixer: expected one of the trained {mixers}, got {mixer!r}"
        )
    n = _pick_n(rows, None)
    ax = fig.subplots()
    grey_steps: list[float] = []
    grey_accuracy: list[float] = []
    for i, label in enumerate(mixers):
        run = next(r for r in rows if r["mixer"] == label)
        if (
            label != mixer
        ):  # gathered into one grey line (NaN gaps): one artist, not six
            grey_steps += [*run["curve_steps"], math.nan]
            grey_accuracy += [*(100 * a for a in run["curve_val"]), math.nan]
            continue
        ax.plot(
            run["curve_steps"],
            [100 * a for a in run["curve_val"]],
            color=_colour(label, i),
            linewidth=2.2,
            zorder=3,
        )
    ax.plot(grey_steps, grey_accuracy, color="0.75", linewidth=1.0, zorder=1)
    ax.axhline(100 / n, color="0.3", linestyle="--", linewidth=1)
    ax.set_ylim(0, 105)
    ax.set_yticks(range(0, 101, 25))
    ax.xaxis.set_major_locator(MaxNLocator(4, steps=[1, 2, 5, 10]))
    style_axes(ax, tr("optimiser steps"), tr("validation accuracy (%)"))
    # the title names the coloured line (no legend needed); y=1.0 fixes its place
    ax.set_title(
        tr(
            "{mixer} (colour), the others (grey), N = {n}",
            mixer=mixer_name(mixer),
            n=n,
        ),
        y=1.0,
    )
