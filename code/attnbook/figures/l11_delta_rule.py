"""Figures of Lesson 11 (the delta rule): overwriting, key-norm stability, recall against pairs.
The numbers come from :mod:`attnbook.demos.delta_rule`."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from attnlab.i18n import tr

from ..demos.delta_rule import (
    OLD_VALUE,
    RECALL_DIM,
    STABILITY_LENGTH,
    output_norms,
    overwrite_example,
    recall_curves,
)
from ..plotting import GREY, PALETTE, SMALL_TEXT_PT, style_axes


def overwrite_alt(beta: float) -> str:
    """The alt text of a frame of the overwrite panel (second write of k₁ with strength
    ``beta``)."""
    return tr(
        "Grouped bars over four value features: old value, new value, the linear-attention "
        "read (old plus new) and the delta-rule read with beta {beta:g}, which equals "
        "{keep:.2f} times old plus {beta:.2f} times new.",
        beta=beta,
        keep=1 - beta,
    )


def overwrite_static_alt() -> str:
    """The alt text of the overwrite figure drawn once, at β = 1."""
    return tr(
        "Grouped bars over four value features: the old value of key k1 (grey), its new value "
        "(blue), what linear attention reads back under k1 (orange: old plus new) and what the "
        "delta rule with beta 1 reads back (green: exactly the new value)."
    )


def key_norm_alt(key_norm: float, beta: float) -> str:
    """The alt text of a frame of the key-norm panel."""
    eigen = 1 - beta * key_norm**2
    if abs(eigen) <= 1:
        return tr(
            "Output size over {steps} tokens on a log scale for keys of length {key_norm:g} "
            "and beta {beta:g}; the eigenvalue along k is {eigen:.2f}, so the outputs stay "
            "bounded; a grey dashed line shows unit keys.",
            steps=STABILITY_LENGTH,
            key_norm=key_norm,
            beta=beta,
            eigen=eigen,
        )
    return tr(
        "Output size over {steps} tokens on a log scale for keys of length {key_norm:g} "
        "and beta {beta:g}; the eigenvalue along k is {eigen:.2f}, so the outputs grow "
        "geometrically; a grey dashed line shows unit keys.",
        steps=STABILITY_LENGTH,
        key_norm=key_norm,
        beta=beta,
        eigen=eigen,
    )


def recall_vs_pairs_alt() -> str:
    """The alt text of the recall-against-pairs figure."""
    return tr(
        "Left: mean relative recall error against the number of stored pairs in a 16 by 16 "
        "state; linear attention with random keys rises fastest, the delta rule with random "
        "keys stays below it, orthonormal keys give zero error up to 16 pairs. Right: for 32 "
        "pairs, the error of each pair by write position; linear attention is flat around "
        "1.4, the delta rule falls from about 1.3 for the oldest pairs to 0 for the newest."
    )


def draw_overwrite(fig: Figure, beta: float = 1.0) -> None:
    """Bars of the four features: the old and the new value of k₁, and what each state returns
    when k₁'s second write has strength ``beta``: linear attention old + new, the delta rule
    (1 − β)·old + β·new (see :func:`overwrite_example`)."""
    reads = overwrite_example(beta)
    ax = fig.subplots()
    series = [
        (tr("old value"), reads["old"], GREY),
        (tr("new value"), reads["new"], PALETTE[0]),
        (tr("linear attention reads"), reads["additive"], PALETTE[1]),
        (
            tr("delta rule (β = {beta:g}) reads", beta=beta),
            reads["delta"],
            PALETTE[2],
        ),
    ]
    width = 0.2
    for i, (label, vector, colour) in enumerate(series):
        positions = [j + (i - 1.5) * width for j in range(len(vector))]
        ax.bar(
            positions, vector.tolist(), width=width, color=colour, label=label
        )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(
        range(len(OLD_VALUE)),
        [tr("feature {j}", j=j + 1) for j in range(len(OLD_VALUE))],
    )
    ax.set_ylim(-2.9, 3.6)
    style_axes(
        ax,
        "",
        tr("value (arbitrary units)"),
        tr(
            "Read under k₁ after k₁ got a new value: delta rule = "
            "{keep:.2f}·old + {beta:.2f}·new",
            keep=1 - beta,
            beta=beta,
        ),
    )
    ax.grid(axis="x", visible=False)
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1),
        ncols=2,
        fontsize=SMALL_TEXT_PT,
    )


def _power_label(y: float, _position: object) -> str:
    return f"{y:g}" if 0.01 <= y < 1000 else f"{y:.0e}"


def draw_key_norm_stability(
    fig: Figure, key_norm: float = 1.0, beta: float = 1.0
) -> None:
    """‖o_t‖ over time (log scale) for keys of length ``key_norm``, against unit keys (grey).

    Along k a write multiplies what the state holds by 1 − β‖k‖²; beyond |1 − β‖k‖²| > 1 the
    state, and with it every output, grows geometrically.
    """
    norms = output_norms(key_norm, beta)
    reference = output_norms(1.0, beta)
    ax = fig.subplots()
    steps = range(1, len(norms) + 1)
    ax.plot(
        steps,
        reference.tolist(),
        color=GREY,
        linestyle="--",
        label=f"‖k‖ = 1, β = {beta:g}",
    )
    ax.plot(
        steps,
        norms.tolist(),
        color=PALETTE[5] if key_norm**2 * beta > 2 else PALETTE[0],
        linewidth=2,
        label=f"‖k‖ = {key_norm:g}, β = {beta:g}",
    )
    ax.set_yscale("log")
    top = max(100.0, float(norms.max()) * 10)
    ax.set_ylim(0.05, top)
    # plain "1e+05" labels: the default 10^5 labels go through mathtext, three times slower
    ax.yaxis.set_major_formatter(FuncFormatter(_power_label))
    ax.yaxis.set_minor_locator(NullLocator())
    eigen = 1 - beta * key_norm**2
    if abs(eigen) <= 1:
        title = tr(
            "Eigenvalue along k: 1 − β‖k‖² = {eigen:.2f}  →  stable",
            eigen=eigen,
        )
    else:
        title = tr(
            "Eigenvalue along k: 1 − β‖k‖² = {eigen:.2f}  →  grows",
            eigen=eigen,
        )
    style_axes(ax, tr("token t"), tr("‖o_t‖ (log scale)"), title)
    ax.legend(loc="upper left")


def draw_recall_vs_pairs(fig: Figure) -> None:
    """Left: mean recall error against N pairs stored in a 16 × 16 state. Right: at N = 32,
    each pair's error by when it was written — the delta rule keeps the recent ones."""
    curves = recall_curves()
    left, right = fig.subplots(1, 2, width_ratios=[1.15, 1])
    n = curves["n_pairs"]
    left.plot(
        n,
        curves["add"],
        marker="o",
        ms=4,
        color=PALETTE[1],
        label=tr("linear attention, random keys"),
    )
    left.plot(
        n,
        curves["delta"],
        marker="s",
        ms=4,
        color=PALETTE[2],
        label=tr("delta rule (β = 1), random keys"),
    )
    left.plot(
        curves["orth_n"],
        curves["orth_add"],
        marker="^",
        ms=4,
        color=PALETTE[0],
        label=tr("either, orthonormal keys"),
    )
    left.axvline(RECALL_DIM, color=GREY, linestyle=":", linewidth=1)
    left.text(
        RECALL_DIM + 1,
        0.05,
        f"N = d = {RECALL_DIM}",
        color="#555555",
        fontsize=SMALL_TEXT_PT,
    )
    # headroom above the curves for the legend, so that it hides none of them
    left.set_ylim(0, max(curves["add"]) * 1.75)
    style_axes(
        left,
        tr("pairs stored N"),
        tr("mean relative recall error"),
        tr("Recall from a {d} × {d} state", d=RECALL_DIM),
    )
    left.legend(loc="upper left")
    pos = curves["by_position"]
    steps = range(1, pos["n"] + 1)
    right.plot(
        steps, pos["add"], color=PALETTE[1], label=tr("linear attention")
    )
    right.plot(
        steps, pos["delta"], color=PALETTE[2], label=tr("delta rule (β = 1)")
    )
    right.set_ylim(0, max(max(pos["add"]), max(pos["delta"])) * 1.1)
    style_axes(
        right,
        tr("pair written at step i"),
        tr("relative error of pair i"),
        tr("N = {n}: who is remembered", n=pos["n"]),
    )
    right.legend(loc="lower left")
