"""Figures of Lesson 12 (Gated DeltaNet): the document-switch stream and its errors."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attnlab.i18n import tr

from ..demos.delta_rule import SWITCH_NAMES, SWITCH_SETUP, switch_errors
from ..plotting import GREY, PALETTE, SMALL_TEXT_PT, style_axes


def mixer_label(mixer: str) -> str:
    """The name of a mixer of the switch experiment (a key of ``SWITCH_NAMES``), in the
    reader's language."""
    if mixer == "gla":
        return tr("scalar-gated linear attention")
    return SWITCH_NAMES[mixer]


def switch_stream_alt() -> str:
    """The alt text of the stream's strip."""
    setup = SWITCH_SETUP
    return tr(
        "A strip of four blocks in time order: an old document of {n_old} key-value pairs "
        "with random keys; a boundary where a gate alpha_b can close; a new document of "
        "{n_new} pairs with orthonormal keys; {n_over} of those keys written again with new "
        "values; then the latest value of all {n_new} new keys is read.",
        n_old=setup["n_old"],
        n_new=setup["n_new"],
        n_over=setup["n_overwrite"],
    )


def switch_errors_alt(alpha_boundary: float, beta: float, query_noise: float) -> str:
    """The alt text of a frame of the error panel."""
    return tr(
        "Bar chart of mean relative read errors for scalar-gated linear attention, DeltaNet "
        "and Gated DeltaNet on the overwritten and the unchanged keys, with gate "
        "{alpha_boundary:g} at the boundary, beta {beta:g} and query noise {query_noise:g}; "
        "a dashed line marks a perfect memory of the new document.",
        alpha_boundary=alpha_boundary,
        beta=beta,
        query_noise=query_noise,
    )


def draw_switch_stream(fig: Figure) -> None:
    """The stream as a strip: old document, the boundary where the gate may close, the new
    document's writes and overwrites, and the reads."""
    setup = SWITCH_SETUP
    n_old, n_new, n_over = (
        setup["n_old"],
        setup["n_new"],
        setup["n_overwrite"],
    )
    ax = fig.subplots()
    # the old document is drawn compressed: its 128 writes take 40 % of the strip
    old_w, new_w, over_w, read_w = 4.0, 2.4, 1.2, 1.6
    x = 0.0
    parts = [
        (
            old_w,
            GREY,
            tr(
                "old document\n{n_old} pairs, random keys\n({ratio}× the {dim} pairs a "
                "{dim}×{dim} state\ncan hold exactly)",
                n_old=n_old,
                ratio=n_old // setup["dim"],
                dim=setup["dim"],
            ),
        ),
        (
            new_w,
            PALETTE[0],
            tr("new document\n{n_new} pairs\n(orthonormal keys)", n_new=n_new),
        ),
        (
            over_w,
            PALETTE[1],
            tr("{n_over} of those\nkeys get\nnew values", n_over=n_over),
        ),
        (
            read_w,
            PALETTE[2],
            tr("read the latest\nvalue of all {n_new}\nnew keys", n_new=n_new),
        ),
    ]
    for width, colour, text in parts:
        ax.add_patch(
            Rectangle(
                (x, 0),
                width,
                1,
                facecolor=colour,
                alpha=0.35,
                edgecolor=colour,
            )
        )
        ax.text(
            x + width / 2,
            0.5,
            text,
            ha="center",
            va="center",
            fontsize=SMALL_TEXT_PT,
        )
        x += width
    ax.annotate(
        tr("gate α_b at the\ndocument boundary"),
        xy=(old_w, 1.0),
        xytext=(old_w, 1.45),
        ha="center",
        fontsize=SMALL_TEXT_PT,
        arrowprops={"arrowstyle": "->", "color": PALETTE[5]},
        color=PALETTE[5],
    )
    ax.plot([old_w, old_w], [0, 1], color=PALETTE[5], linewidth=2.5)
    ax.set_xlim(-0.1, x + 0.1)
    ax.set_ylim(-0.15, 1.9)
    ax.axis("off")
    ax.set_title(tr("The constructed stream (time runs left to right)"))


def draw_switch_errors(
    fig: Figure,
    alpha_boundary: float = 0.01,
    beta: float = 1.0,
    query_noise: float = 0.5,
) -> None:
    """Bars: each mixer's mean relative error on the overwritten and on the unchanged keys;
    dashed: a perfect memory of the new document read with the same queries."""
    errors = switch_errors(alpha_boundary, beta, query_noise)
    ax = fig.subplots()
    top = 1.3
    width = 0.36
    for i, mixer in enumerate(SWITCH_NAMES):
        for j, (label, colour) in enumerate(
            ((tr("overwritten keys"), PALETTE[1]), (tr("unchanged keys"), PALETTE[0]))
        ):
            value = errors[mixer][j]
            xpos = i + (j - 0.5) * width
            ax.bar(
                xpos,
                min(value, top),
                width=width,
                color=colour,
                label=label if i == 0 else None,
            )
            ax.text(
                xpos,
                min(value, top) + 0.02,
                f"{value:.2f}" + (" ↑" if value > top else ""),
                ha="center",
                va="bottom",
                fontsize=SMALL_TEXT_PT,
            )
    floor = sum(errors["latest_only"]) / 2
    ax.axhline(
        floor,
        color="black",
        linestyle="--",
        linewidth=1,
        label=tr("perfect memory of the new document: {floor:.2f}", floor=floor),
    )
    ax.set_xticks(range(len(SWITCH_NAMES)), [mixer_label(m) for m in SWITCH_NAMES])
    ax.set_ylim(0, top + 0.15)
    style_axes(
        ax,
        "",
        tr("relative error of the read ‖Sᵀq − v‖ / ‖v‖"),
        tr(
            "α_b = {alpha_boundary:g}, β = {beta:g}, query noise {query_noise:g}",
            alpha_boundary=alpha_boundary,
            beta=beta,
            query_noise=query_noise,
        ),
    )
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper right", fontsize=SMALL_TEXT_PT)
