"""Figures of Lesson 10 (gates): forgetting against recency and the three kinds of gate."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from attnlab.checks import check_int_in
from attnlab.gated import (
    GLA_GATE_NORMALIZER,
    retnet_gate,
    softplus_decay_gate,
)
from attnlab.i18n import tr

from ..demos.associative_memory import expected_crosstalk
from ..demos.state_memory import (
    FORGET_ALPHAS,
    FORGET_DIM,
    FORGET_LENGTHS,
    RECALL_THRESHOLD,
    effective_horizon,
    forgetting_errors,
    pair_weights,
    recalled_pairs,
    seeded_generator,
)
from ..plotting import (
    PALETTE,
    SEQUENTIAL_CMAP,
    SMALL_TEXT_PT,
    fixed_axes,
    style_axes,
)


def alpha_label(alpha: float) -> str:
    """0.9375 → "0.9375 (horizon 16)", 1.0 → "1 (no decay)"."""
    if alpha == 1.0:
        return tr("1 (no decay)")
    return tr(
        "{alpha:g} (horizon {horizon:.0f})",
        alpha=alpha,
        horizon=effective_horizon(math.log(alpha)).item(),
    )


def forgetting_alt(alpha: float, length: int) -> str:
    """The alt text of a frame of the forgetting panel (decay ``alpha``, ``length`` pairs)."""
    return tr(
        "Relative recall error of each of {length} pairs against recency on a log axis, "
        "for decay {decay}, with the fading-only curve and the no-decay curve in grey near "
        "{additive:.1f}; {recalled} pairs stay below {threshold}.",
        length=length,
        decay=alpha_label(alpha),
        additive=expected_crosstalk(length, FORGET_DIM),
        recalled=recalled_pairs(alpha, length),
        threshold=RECALL_THRESHOLD,
    )


def gate_kinds_alt() -> str:
    """The alt text of the three-gates figure (``draw_gate_kinds`` at its defaults)."""
    return tr(
        "Three heat maps of memory horizon over 48 time steps (x) and 16 key channels (y), "
        "on a log colour scale from 1 to 1000 tokens. RetNet: one uniform colour, the same "
        "horizon everywhere. Mamba-2: vertical stripes, every channel shares the horizon of "
        "its step, with one dark column at step 30 where the gate nearly resets the state. "
        "GLA: a patchwork that varies along both axes, short horizons in the top rows (low "
        "channel index) and long ones in the bottom rows."
    )


def draw_forgetting(
    fig: Figure, alpha: float = 1 - 2.0**-4, length: int = 384
) -> None:
    """A stream of ``length`` random pairs written into one 96 × 96 state with decay ``alpha``;
    every pair's relative recall error at the end, against how recently it was written (1 = the
    newest). Dashed: the part due to fading alone, 1 − α^(age) (what orthonormal keys would
    give), with the horizon 1/(1−α) marked; grey: the same stream written without decay. One
    axes, fixed margins: a fast frame."""
    if alpha not in FORGET_ALPHAS:
        raise ValueError(
            f"alpha: expected one of {list(FORGET_ALPHAS)}, got {alpha!r}"
        )
    if length not in FORGET_LENGTHS:
        raise ValueError(
            f"length: expected one of {list(FORGET_LENGTHS)}, got {length!r}"
        )
    (ax,) = fixed_axes(fig, 1, left=0.11, right=0.98, bottom=0.15, top=0.9)
    rank = torch.arange(1, length + 1).numpy()  # 1 = newest
    errors = forgetting_errors(length)
    additive = errors[FORGET_ALPHAS.index(1.0)].flip(0).numpy()
    ax.plot(
        rank,
        additive,
        color="#999999",
        linewidth=1.2,
        label=tr("no decay (α = 1)"),
    )
    if alpha != 1.0:
        fading = (1 - pair_weights(alpha, length).flip(0)).numpy()
        ax.plot(
            rank,
            fading,
            color=PALETTE[1],
            linestyle="--",
            linewidth=1.5,
            label=tr("fading alone: 1 − α^(age)"),
        )
        ax.plot(
            rank,
            errors[FORGET_ALPHAS.index(alpha)].flip(0).numpy(),
            color=PALETTE[0],
            linewidth=2.2,
            label=tr("decay α = {alpha:g}", alpha=alpha),
        )
        horizon = effective_horizon(math.log(alpha)).item()
    if (
        alpha != 1.0 and horizon <= length
    ):  # a horizon beyond the stream is not drawn
        ax.axvline(horizon, color=PALETTE[1], linestyle=":", linewidth=1.2)
        # near the right end: the label goes left of the line
        right = horizon * 3 > length
        ax.text(
            horizon / 1.06 if right else horizon * 1.06,
            0.06,
            tr("horizon\n1/(1−α) = {horizon:.0f}", horizon=horizon),
            fontsize=SMALL_TEXT_PT,
            ha="right" if right else "left",
            color=PALETTE[1],
        )
    ax.axhline(
        RECALL_THRESHOLD, color=PALETTE[2], linestyle=":", linewidth=1.2
    )
    ax.set_xscale("log")
    ticks = [
        t for t in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if t <= length
    ]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlim(0.9, length * 1.1)
    ax.set_ylim(0, max(2.6, float(additive.max()) * 1.05))
    style_axes(
        ax,
        tr("recency: 1 = the newest pair (log scale)"),
        tr("relative error ‖Sᵀk − v‖ / ‖v‖"),
        tr(
            "{length} pairs into one {d} × {d} state: {recalled} read back with "
            "error < {threshold}",
            length=length,
            d=FORGET_DIM,
            recalled=recalled_pairs(alpha, length),
            threshold=RECALL_THRESHOLD,
        ),
    )
    ax.legend(loc="upper left", fontsize=SMALL_TEXT_PT)


def draw_gate_kinds(
    fig: Figure, length: int = 48, channels: int = 16, seed: int = 0
) -> None:
    """The memory horizon 1/(1−α_t) of every key channel at every step, for the three kinds of
    gate, on made-up gate inputs: RetNet (fixed per head: ``retnet_gate``, head 2), Mamba-2
    (one data-dependent decay per step: ``softplus_decay_gate`` with A = 1 and Δ ≈ 0.05 at
    x = 0, a large input at step 30) and GLA (one per channel and step:
    logsigmoid(z) / 16, channel logits centred from −4 to 4)."""
    t = check_int_in("length", length, 8, 256)
    c = check_int_in("channels", channels, 2, 128)
    gen = seeded_generator(seed)
    retnet = retnet_gate(1, 3, t, dtype=torch.float64)[0, 2]  # [T]
    x = torch.randn(t, generator=gen, dtype=torch.float64)
    x[min(30, t - 1)] = 5.0  # an input that tells the gate to forget
    # softplus⁻¹(0.05)
    dt_bias = torch.log(torch.expm1(torch.tensor(0.05, dtype=torch.float64)))
    # [T]
    mamba = softplus_decay_gate(
        x, torch.zeros((), dtype=torch.float64), dt_bias
    )
    logits = torch.linspace(-4, 4, c, dtype=torch.float64)[
        :, None
    ] + torch.randn(c, t, generator=gen, dtype=torch.float64)
    gla = F.logsigmoid(logits) / GLA_GATE_NORMALIZER  # [C, T]
    panels = [
        (tr("RetNet:\nfixed, per head"), retnet.expand(c, t)),
        (tr("Mamba-2:\nper step"), mamba.expand(c, t)),
        (tr("GLA: per step\nand channel"), gla),
    ]
    axes = fig.subplots(1, 3, sharey=True)
    norm = LogNorm(vmin=1, vmax=1000)
    for ax, (title, g) in zip(axes, panels, strict=True):
        horizon = effective_horizon(g).clamp(max=1000)
        image = ax.imshow(
            horizon.numpy(),
            cmap=SEQUENTIAL_CMAP,
            norm=norm,
            aspect="auto",
            interpolation="nearest",
        )
        ax.grid(False)
        ax.set_title(title)
        ax.set_xlabel(tr("time step t (token)"))
    axes[0].set_ylabel(tr("key channel (index)"))
    axes[0].yaxis.set_major_locator(
        MaxNLocator(integer=True)
    )  # whole channels
    fig.colorbar(
        image,
        ax=list(axes),
        label=tr("horizon 1/(1−α) (tokens, log scale)"),
        shrink=0.9,
    )
