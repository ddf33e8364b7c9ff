"""Figures of Lesson 9 (a fixed-size state as memory): read-out, Gram matrices, capacity.
The measured curves come from :mod:`attnbook.demos.state_memory`."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from attnlab.checks import check_int_in
from attnlab.i18n import tr

from ..demos.associative_memory import (
    associative_pairs,
    expected_crosstalk,
    write_state,
)
from ..demos.state_memory import (
    CAPACITY_DIMS,
    CAPACITY_PAIRS,
    capacity_curve,
    seeded_generator,
)
from ..plotting import (
    DIVERGING_CMAP,
    PALETTE,
    SMALL_TEXT_PT,
    fixed_axes,
    style_axes,
)


def readout_alt() -> str:
    """The alt text of the read-out figure as the lesson draws it (8 pairs, d = 16, seed 0)."""
    return tr(
        "Two bar charts of the 16 coordinates of a stored value vector, with dots for what "
        "the state returns. Left, orthonormal keys: every dot sits on top of its bar. Right, "
        "random unit keys: the dots miss the bars, some by more than the bar's height; the "
        "relative error is 0.69."
    )


def gram_alt() -> str:
    """The alt text of the Gram-matrix figure as the lesson draws it (32 keys, d = 32 and 96)."""
    return tr(
        "Three 32-by-32 heat maps of key dot products on a purple-orange scale from -1 to 1. "
        "Orthonormal keys in 32 dimensions: a dark diagonal on a blank background. Random "
        "unit keys in 32 dimensions: the same diagonal over a clearly visible speckle. Random "
        "unit keys in 96 dimensions: a fainter speckle."
    )


def capacity_alt(n_pairs: int, dim: int) -> str:
    """The alt text of a frame of the capacity panel (``draw_capacity``)."""
    at = dict(capacity_curve(dim, False))
    return tr(
        "Mean relative recall error against N from 4 to 256 on a log axis for key dimension "
        "d = {dim}: the measured random-key curve follows the dashed prediction and reaches "
        "{at_d:.2f} at the dotted line N = d = {dim}; orthonormal keys stay at zero up to "
        "N = d; a circle marks N = {n_pairs}, error {error:.2f}.",
        dim=dim,
        at_d=at[dim],
        n_pairs=n_pairs,
        error=at[n_pairs],
    )


def draw_readout(
    fig: Figure, n_pairs: int = 8, dim: int = 16, seed: int = 0
) -> None:
    """Write ``n_pairs`` pairs into a ``dim × dim`` state, read the first one back.

    Two panels, orthonormal keys and random unit keys: the stored value v_1 (bars) and what
    the state returns, Sᵀ k_1 (dots), coordinate by coordinate. With orthonormal keys they agree;
    with random keys the gap is the crosstalk Σ_{i≠1} (k_i·k_1) v_i.
    """
    n = check_int_in("n_pairs", n_pairs, 1, 64)
    d = check_int_in("dim", dim, 2, 64)
    if n > d:
        raise ValueError(
            f"n_pairs: at most dim={d} pairs so that orthonormal keys exist, got {n}"
        )
    axes = fig.subplots(1, 2, sharey=True)
    for ax, orthogonal in zip(axes, (True, False), strict=True):
        keys, values = associative_pairs(
            n, d, orthogonal=orthogonal, generator=seeded_generator(seed)
        )
        state = write_state(keys, values, write="add")
        read = state.T @ keys[0]
        error = ((read - values[0]).norm() / values[0].norm()).item()
        x = list(range(d))
        ax.bar(
            x,
            values[0].tolist(),
            color=PALETTE[4],
            width=0.75,
            label=tr("stored value $v_1$"),
        )
        ax.plot(
            x,
            read.tolist(),
            "o",
            color=PALETTE[5],
            markersize=5,
            label=tr("read-out $S^\\top k_1$"),
        )
        ax.axhline(0, color="#555555", linewidth=0.8)
        style_axes(
            ax,
            tr("coordinate of the value"),
            tr("value (dimensionless)") if orthogonal else "",
            tr("orthonormal keys:\nrelative error {error:.2f}", error=error)
            if orthogonal
            else tr(
                "random unit keys:\nrelative error {error:.2f}", error=error
            ),
        )
        ax.set_xticks(range(0, d, max(1, d // 8)))
    axes[0].legend(loc="lower left", ncols=2)
    fig.suptitle(
        tr(
            "{n} pairs written into one {d} × {d} state, pair 1 read back",
            n=n,
            d=d,
        ),
        fontsize=11,
    )


def draw_gram(
    fig: Figure, n_pairs: int = 32, dims: tuple[int, ...] = (32, 96)
) -> None:
    """Gram matrices K Kᵀ of ``n_pairs`` keys: orthonormal keys in ``dims[0]`` dimensions (the
    identity), then random unit keys in each of ``dims``. The off-diagonal entries are the
    crosstalk weights k_i·k_j; their root mean square is about 1/√d."""
    n = check_int_in("n_pairs", n_pairs, 2, 256)
    if not dims:
        raise ValueError("dims: expected at least one dimension, got none")
    for d in dims:
        check_int_in("dims", d, 2, 4096)
    if dims[0] < n:
        raise ValueError(
            f"dims: the first must be at least n_pairs={n} for orthonormal keys, "
            f"got {dims[0]}"
        )
    panels = [(dims[0], True)] + [(d, False) for d in dims]
    axes = fig.subplots(1, len(panels), sharey=True)
    mask = ~torch.eye(n, dtype=torch.bool)
    for ax, (d, orthogonal) in zip(axes, panels, strict=True):
        keys, _ = associative_pairs(
            n, d, orthogonal=orthogonal, generator=seeded_generator(0)
        )
        gram = keys @ keys.T
        rms = gram[mask].pow(2).mean().sqrt().item()
        image = ax.imshow(
            gram.numpy(),
            cmap=DIVERGING_CMAP,
            vmin=-1,
            vmax=1,
            interpolation="nearest",
        )
        ax.grid(False)
        title = (
            tr("orthonormal,\nd = {d}: rms {rms:.2f}", d=d, rms=rms)
            if orthogonal
            else tr("random unit,\nd = {d}: rms {rms:.2f}", d=d, rms=rms)
        )
        ax.set_title(title, fontsize=SMALL_TEXT_PT)
        ax.set_xlabel(tr("key i (pair index)"))
    axes[0].set_ylabel(tr("key j (pair index)"))
    fig.colorbar(
        image,
        ax=list(axes),
        label=tr("$k_i \\cdot k_j$ (cosine, no unit)"),
        shrink=0.9,
    )


def draw_capacity(fig: Figure, n_pairs: int = 48, dim: int = 96) -> None:
    """Mean relative recall error against the number of pairs N for the chosen key dimension d:
    random keys (measured), the prediction sqrt((N−1)/d) (dashed) and orthonormal keys (zero up
    to N = d), with N = d marked and the chosen (N, d) circled. The axes are the same for every
    d, so moving d slides the curve along N. One axes, fixed margins: a fast frame."""
    if n_pairs not in CAPACITY_PAIRS:
        raise ValueError(
            f"n_pairs: expected one of {list(CAPACITY_PAIRS)}, got {n_pairs!r}"
        )
    if dim not in CAPACITY_DIMS:
        raise ValueError(
            f"dim: expected one of {list(CAPACITY_DIMS)}, got {dim!r}"
        )
    (ax,) = fixed_axes(fig, 1, left=0.11, right=0.98, bottom=0.15, top=0.9)
    curve = capacity_curve(dim, False)
    ax.plot(
        [n for n, _ in curve],
        [e for _, e in curve],
        marker="o",
        markersize=4,
        color=PALETTE[0],
        linewidth=2,
        label=tr("random keys, d = {dim} (measured)", dim=dim),
    )
    ns = range(1, CAPACITY_PAIRS[-1] + 1)
    ax.plot(
        list(ns),
        [expected_crosstalk(n, dim) for n in ns],
        linestyle="--",
        color="#444444",
        linewidth=1,
        label=tr("prediction √((N−1)/d), d = {dim}", dim=dim),
    )
    orth = capacity_curve(dim, True)
    ax.plot(
        [n for n, _ in orth],
        [e for _, e in orth],
        marker="s",
        markersize=4,
        color=PALETTE[7],
        linewidth=1.5,
        label=tr("orthonormal keys, d = {dim} (only N ≤ d)", dim=dim),
    )
    ax.axvline(dim, color="#888888", linestyle=":", linewidth=1)
    ax.text(
        dim * 1.06,
        2.6,
        f"N = d = {dim}",
        fontsize=SMALL_TEXT_PT,
        color="#555555",
    )
    error = dict(curve)[n_pairs]
    ax.plot(
        [n_pairs],
        [error],
        "o",
        markersize=13,
        markerfacecolor="none",
        markeredgecolor=PALETTE[5],
        markeredgewidth=2.5,
    )
    ax.set_xscale("log", base=2)
    ticks = [2**e for e in range(2, 9)]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlim(2.0**1.7, 2.0**8.3)
    ax.set_ylim(-0.1, 4.4)
    style_axes(
        ax,
        tr("N: stored pairs (log scale)"),
        tr("mean relative error ‖Sᵀk − v‖ / ‖v‖"),
        tr(
            "N = {n_pairs} pairs in d = {dim}: error {error:.2f} with random keys",
            n_pairs=n_pairs,
            dim=dim,
            error=error,
        ),
    )
    ax.legend(loc="upper left", fontsize=SMALL_TEXT_PT)
