"""Figures for Lesson 18 (the cost of a token, measured). They only draw: the measurements
and the crossing come from ``attnbook.decode_cost``."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from attnlab.configs import SOPHIA_NANO
from attnlab.i18n import tr

from ..decode_cost import CostData, find_crossing
from ..demos.decoding import stack_cost
from ..plotting import PALETTE, SMALL_TEXT_PT, style_axes

ATTN_COLOUR, KDA_COLOUR, CROSS_COLOUR = PALETTE[1], PALETTE[0], PALETTE[7]

QUANTITIES = ("time", "memory")
SCOPES = ("one layer", "3:1 stack")

#: The lesson's two head configurations, as the notebook names its measurements (a measured
#: ``CostData.label`` starts with one of them).
HEAD_CONFIGS = ("Sophia-nano heads", "Sophia heads")


def option_name(value: str) -> str:
    """A slider value of the lesson (a head configuration, a quantity or a scope) in the
    reader's language."""
    names = {
        "Sophia-nano heads": lambda: tr("Sophia-nano heads"),
        "Sophia heads": lambda: tr("Sophia heads"),
        "time": lambda: tr("time"),
        "memory": lambda: tr("memory"),
        "one layer": lambda: tr("one layer"),
        "3:1 stack": lambda: tr("3:1 stack"),
    }
    return names[value]() if value in names else value


def heads_label(label: str) -> str:
    """A measurement's label ("Sophia heads (16 × 96)") in the reader's language."""
    for name in HEAD_CONFIGS:
        if label.startswith(name):
            return option_name(name) + label[len(name) :]
    return label


def one_layer_time_alt(data: CostData, rounds: int) -> str:
    """Alt text of the one-layer time figure of ``data`` (measured in ``rounds`` rounds)."""
    cross = find_crossing(data)
    if cross.status == "inside":
        return tr(
            "Log-log plot of measured time per token against context length for one layer "
            "with Sophia's heads: the attention read rises with the context, the KDA step is a "
            "flat line, each with a shaded band from the fastest to the slowest of {rounds} "
            "rounds; a grey span marks where they cross, between {low:,} and {high:,} tokens.",
            rounds=rounds,
            low=cross.low or data.contexts[0],
            high=cross.high,
        )
    return tr(
        "Log-log plot of measured time per token against context length for one layer with "
        "Sophia's heads: the attention read rises with the context, the KDA step is a flat "
        "line, each with a shaded band from the fastest to the slowest of {rounds} rounds; no "
        "crossing is marked, because the measurements do not place one inside the measured "
        "range.",
        rounds=rounds,
    )


def one_layer_memory_alt() -> str:
    """Alt text of the one-layer memory figure."""
    return tr(
        "Log-log plot of decoding memory against context length for one layer with Sophia's "
        "heads: the KV cache grows linearly, the KDA state is flat and far below it at every "
        "measured context."
    )


def costs_alt(heads: str, quantity: str, scope: str) -> str:
    """Alt text of a frame of the lesson's panel."""
    return tr(
        "Log-log plot of measured {quantity} per token against context for {heads}, {scope}: "
        "the attention side grows with the context, the fixed-state side stays flat or grows "
        "more slowly; for time, bands from the fastest to the slowest round and a grey span "
        "where the measurements place a crossing, if they do.",
        quantity=option_name(quantity),
        heads=option_name(heads),
        scope=option_name(scope),
    )


def context_label(tokens: float) -> str:
    """A context length for an axis: 32768 -> "32k", 512 -> "512"."""
    if tokens >= 1024 and tokens % 1024 == 0:
        return f"{int(tokens) // 1024}k"
    return f"{tokens:,.0f}"


def cost_curves(
    data: CostData, quantity: str, scope: str, pattern: Sequence[str]
) -> tuple[list[float], list[float], str]:
    """The two curves a panel draws: (growing, fixed-state) per context, and the unit label.

    quantity "time": milliseconds per token (medians over rounds); "memory": MiB. scope "one
    layer": the attention layer against the KDA layer; "3:1 stack": ``stack_cost`` over
    ``pattern`` for a stack of attention layers only against the hybrid (global layers = the
    measured attention layer).
    """
    if quantity not in QUANTITIES:
        raise ValueError(
            f"quantity: expected one of {list(QUANTITIES)}, got {quantity!r}"
        )
    if scope not in SCOPES:
        raise ValueError(
            f"scope: expected one of {list(SCOPES)}, got {scope!r}"
        )
    return _curves(
        data, quantity, scope, pattern, data.attn_seconds, data.kda_seconds
    )


def _curves(
    data: CostData,
    quantity: str,
    scope: str,
    pattern: Sequence[str],
    attn_seconds: Sequence[float],
    kda_seconds: float,
) -> tuple[list[float], list[float], str]:
    if quantity == "time":
        attn, fixed, unit, factor = (
            attn_seconds,
            kda_seconds,
            "ms per token",
            1e3,
        )
    else:
        attn, fixed, unit, factor = (
            data.attn_bytes,
            data.kda_bytes,
            "MiB",
            2.0**-20,
        )
    if scope == "one layer":
        return [a * factor for a in attn], [fixed * factor] * len(attn), unit
    pattern = tuple(pattern)
    all_global = ("attn",) * len(pattern)
    return (
        [stack_cost(all_global, a, fixed) * factor for a in attn],
        [stack_cost(pattern, a, fixed) * factor for a in attn],
        unit,
    )


def draw_costs(
    fig: Figure,
    data: CostData,
    *,
    quantity: str = "time",
    scope: str = "one layer",
    pattern: Sequence[str] = SOPHIA_NANO.layer_pattern,
) -> None:
    """Measured cost of one decoded token against the context (log-log): the attention layer
    (or an all-attention stack) against the KDA layer (or the 3:1 hybrid).

    For time, each line is the median over rounds with a band from the fastest to the slowest
    round, and a shaded span marks the crossing when ``find_crossing`` finds one inside the
    measured range (the stacks cross where the single layers do).
    """
    grow, flat, unit = cost_curves(data, quantity, scope, pattern)
    ax = fig.subplots()
    contexts = list(data.contexts)
    n_layers = len(tuple(pattern))
    if scope == "one layer":
        names = (tr("softmax attention (KV cache)"), tr("KDA (fixed state)"))
    else:
        n_rec = n_layers - sum(k in ("attn", "mla") for k in pattern)
        names = (
            tr("{n} attention layers", n=n_layers),
            tr(
                "hybrid: {n_rec} KDA + {n_global} attn",
                n_rec=n_rec,
                n_global=n_layers - n_rec,
            ),
        )
    ax.plot(
        contexts, grow, "o-", color=ATTN_COLOUR, label=names[0], markersize=4
    )
    ax.plot(
        contexts,
        flat,
        "s--" if scope == "3:1 stack" else "s-",
        color=KDA_COLOUR,
        label=names[1],
        markersize=4,
    )
    if quantity == "time":
        attn_low, attn_high = zip(*data.attn_range, strict=True)
        kda_low, kda_high = data.kda_range
        low_g, low_f, _ = _curves(
            data, quantity, scope, pattern, attn_low, kda_low
        )
        high_g, high_f, _ = _curves(
            data, quantity, scope, pattern, attn_high, kda_high
        )
        ax.fill_between(
            contexts,
            low_g,
            high_g,
            color=ATTN_COLOUR,
            alpha=0.25,
            linewidth=0,
        )
        ax.fill_between(
            contexts, low_f, high_f, color=KDA_COLOUR, alpha=0.25, linewidth=0
        )
        crossing = find_crossing(data)
        if crossing.status == "inside":
            start = crossing.low if crossing.low is not None else contexts[0]
            ax.axvspan(
                start,
                crossing.high,
                color=CROSS_COLOUR,
                alpha=0.12,
                linewidth=0,
                label=tr(
                    "crossing: {low}–{high}",
                    low=context_label(start),
                    high=context_label(crossing.high),
                ),
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(
        contexts,
        [
            context_label(c) if i % 2 == 0 else ""
            for i, c in enumerate(contexts)
        ],
    )
    ax.minorticks_off()  # minor log ticks cost most of a frame's rendering time
    ylabel = (
        tr("time per token ({unit}, log)", unit=tr(unit))
        if quantity == "time"
        else tr("decoding memory ({unit}, log)", unit=unit)
    )
    style_axes(ax, tr("context length T (tokens, log scale)"), ylabel)
    ratio = grow[-1] / flat[-1]
    ax.set_title(
        tr(
            "{label}: at {context} the cache side costs {ratio:,.1f}×",
            label=heads_label(data.label),
            context=context_label(contexts[-1]),
            ratio=ratio,
        )
    )
    ax.legend(loc="upper left", fontsize=SMALL_TEXT_PT)
