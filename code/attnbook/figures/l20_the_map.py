"""Figures for Lesson 20 (the map of the family). They only draw: the facts come from
``attnbook.architectures_map``."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from attnlab.configs import SOPHIA, ModelConfig
from attnlab.i18n import tr
from attnlab.kinds import KINDS
from attnlab.memory import BYTES_PER_ELEMENT, format_bytes

from ..architectures_map import (
    MAP_CONTEXTS,
    MECHANISMS,
    decoding_numbers,
    map_mib,
    memory_picture,
)
from ..plotting import SMALL_TEXT_PT, heatmap, style_axes, text_colour_on
from .l18_cost_of_a_token import ATTN_COLOUR, KDA_COLOUR, context_label

_SUBSCRIPT = str.maketrans(
    "0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"
)
_SUPERSCRIPT = str.maketrans("0123456789+-=()KRTVn", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ᴷᴿᵀⱽⁿ")
_TEX_SYMBOLS = {
    r"\alpha": "α",
    r"\beta": "β",
    r"\gamma": "γ",
    r"\top": "T",
    r"\,": "\u2009",
    r"\ ": " ",
}


def plain_rule(rule: str) -> str:
    """An update rule of ``MECHANISMS`` (TeX) as plain Unicode text, e.g.
    ``$S_t=\\gamma\\,S_{t-1}+k_tv_t^\\top$`` → "Sₜ = γ Sₜ₋₁ + kₜvₜᵀ": a figure title drawn
    without mathtext, whose parsing costs more than the rest of the title."""
    text = re.sub(r"\\mathrm\{(\w+)\}", r"\1", rule.strip("$"))
    for command, symbol in _TEX_SYMBOLS.items():
        text = text.replace(command, symbol)

    def script(match: re.Match) -> str:
        body = match.group(2).strip("{}")
        return body.translate(
            _SUBSCRIPT if match.group(1) == "_" else _SUPERSCRIPT
        )

    text = re.sub(r"([_^])(\{[^{}]*\}|.)", script, text)
    text = re.sub(r"([;,])(?=\S)", r"\1 ", text)
    return text.replace("-", " − ").replace("=", " = ").replace("+", " + ")


def words(text: str) -> str:
    """A mechanism's name, or a trait or cost of ``MECHANISMS`` (the map's tables), in the
    reader's language. Names such as "KDA" and formulas such as "O(d²)" have no translation
    and come back as they are."""
    return tr(text)


def architecture_alt(arch: str) -> str:
    """The alt text of a frame of the mechanism panel (``draw_architecture``)."""
    return tr(
        "Top: a heat map of what one head of {arch} holds after 16 random tokens. Below: "
        "log-log plot of one layer's memory against context length with Sophia's head "
        "dims, {arch} highlighted among the nine mechanisms.",
        arch=words(arch),
    )


def memory_by_architecture_alt(context: int) -> str:
    """The alt text of a frame of the memory-by-mechanism panel at ``context`` tokens."""
    return tr(
        "Horizontal bars of one layer's memory for the nine mechanisms at {context} "
        "tokens, log scale.",
        context=context,
    )


def _log_ticks(
    ax: Axes,
    lo: float,
    hi: float,
    axis: str = "y",
    fmt: Callable[[float], str] = "{:,g}".format,
) -> None:
    """Log scale from ``lo`` to ``hi`` on ``axis`` ("x" or "y"), ticks at the powers of ten in
    that range labelled by ``fmt``: plain text, cheaper to draw than the default mathtext 10^k,
    and no minor ticks."""
    ticks = [
        10.0**e
        for e in range(
            math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1
        )
    ]
    set_scale, set_lim, set_ticks = (
        (ax.set_xscale, ax.set_xlim, ax.set_xticks)
        if axis == "x"
        else (ax.set_yscale, ax.set_ylim, ax.set_yticks)
    )
    set_scale("log")
    set_lim(lo, hi)
    set_ticks(ticks, [fmt(t) for t in ticks])
    ax.minorticks_off()


def _decimal_bytes(n: float) -> str:
    """A round number of bytes in decimal units: 1e5 → "100 kB", 1e9 → "1 GB"."""
    units = ("B", "kB", "MB", "GB", "TB", "PB")
    order = min(max(0, int(math.log10(n) + 1e-9) // 3), len(units) - 1)
    return f"{n / 1000**order:g} {units[order]}"


def draw_architecture(
    fig: Figure, arch: str = "KDA", config: ModelConfig = SOPHIA
) -> None:
    """Top: what one head of ``arch`` holds after 16 random tokens (state or cache rows).
    Below: the numbers one layer keeps against the context with ``config``'s head dims, in bf16
    (2 bytes each), ``arch`` in colour and the other eight in grey. Stacked, so both read on a
    phone."""
    if arch not in MECHANISMS:
        raise ValueError(
            f"arch: expected one of {list(MECHANISMS)}, got {arch!r}"
        )
    info = MECHANISMS[arch]
    left, right = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1, 1.2]})
    picture = memory_picture(arch)
    grows = KINDS[info.kind].grows
    lim = float(picture.abs().max())
    heatmap(
        left,
        picture,
        vmin=-lim,
        vmax=lim,
        xlabel=tr("cached numbers per token") if grows else tr("value channel"),
        ylabel=tr("token") if grows else tr("key channel"),
        cmap="PuOr",
        colorbar_label=tr("entry (random inputs)"),
    )
    # y=1.0 fixes the title's place: matplotlib otherwise measures the tick labels to place it
    left.set_title(
        tr("cache after 16 tokens (grows)")
        if grows
        else tr("state after 16 tokens (fixed)"),
        y=1.0,
    )
    contexts = list(MAP_CONTEXTS)
    curves = map_mib(config)
    others = [mib for name, mib in curves.items() if name != arch]
    # the eight grey curves as one Line2D (NaN breaks between them): one artist, not eight
    grey_x = [t for _ in others for t in [*contexts, math.nan]]
    grey_y = [m for mib in others for m in [*mib, math.nan]]
    right.plot(grey_x, grey_y, "-", color="0.8", lw=1, zorder=1)
    right.plot(
        contexts,
        curves[arch],
        "o-",
        color=ATTN_COLOUR,
        lw=2,
        zorder=3,
        label=words(arch),
    )
    right.set_xscale("log", base=2)
    right.set_xticks(contexts, [context_label(c) for c in contexts])
    every = [m for mib in curves.values() for m in mib]
    _log_ticks(right, min(every) / 1.5, max(every) * 1.5)
    left.set_xticks([0, picture.shape[1] - 1])
    left.set_yticks([0, picture.shape[0] - 1])
    style_axes(
        right, tr("context T (tokens)"), tr("one layer's memory (MiB, bf16, log)")
    )
    right.legend(loc="upper left")
    fig.suptitle(f"{words(arch)}:  {plain_rule(info.rule)}", fontsize=12)


def draw_memory_by_architecture(
    fig: Figure, context: int = 4096, config: ModelConfig = SOPHIA
) -> None:
    """One layer's decoding memory for each of the nine mechanisms at ``context`` tokens, with
    ``config``'s head dims, in bf16: horizontal bars on a log axis, labelled in bytes."""
    if (
        isinstance(context, bool)
        or not isinstance(context, int)
        or not 1 <= context <= 2**24
    ):
        raise ValueError(
            f"context: expected an integer in [1, {2**24}], got {context!r}"
        )
    ax = fig.subplots()
    names = list(MECHANISMS)
    n_bytes = [
        decoding_numbers(n, config, context) * BYTES_PER_ELEMENT["bf16"]
        for n in names
    ]
    colours = [
        ATTN_COLOUR if KINDS[MECHANISMS[n].kind].grows else KDA_COLOUR
        for n in names
    ]
    ax.barh(range(len(names)), n_bytes, color=colours)
    ax.set_yticks(range(len(names)), [words(n) for n in names])
    ax.tick_params(axis="y", length=0)
    ax.invert_yaxis()
    _log_ticks(
        ax, min(n_bytes) / 2, max(n_bytes) * 12, axis="x", fmt=_decimal_bytes
    )
    # a label right of its bar, or inside it where it would run past the axes
    renderer = fig.canvas.get_renderer()
    right_end = ax.get_window_extent(renderer).x1
    for i, (b, colour) in enumerate(zip(n_bytes, colours, strict=True)):
        label = ax.text(
            b * 1.15, i, format_bytes(b), va="center", fontsize=SMALL_TEXT_PT
        )
        if label.get_window_extent(renderer).x1 > right_end:
            label.set(
                x=b / 1.15, ha="right", color=text_colour_on(to_rgba(colour))
            )
    style_axes(ax, tr("bytes one layer keeps (bf16, log scale)"), "")
    # the bars are categories: only the byte scale needs lines
    ax.grid(axis="y", visible=False)
    # a fixed place: matplotlib otherwise measures the ticks to place it
    ax.set_title(
        tr(
            "T = {context:,} tokens, {name}'s head dims ({heads} × {dim}):\n"
            "orange grows with T, blue is fixed",
            context=context,
            name=config.name,
            heads=config.n_heads,
            dim=config.head_dim,
        ),
        y=1.0,
    )
