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
        return "1 (no decay)"
    return (
        f"{alpha:g} (horizon {effective_horizon(math.log(alpha)).item():.0f})"
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
        label="no decay (α = 1)",
    )
    if alpha != 1.0:
        fading = (1 - pair_weights(alpha, length).flip(0)).numpy()
        ax.plot(
            rank,
            fading,
            color=PALETTE[1],
            linestyle="--",
            linewidth=1.5,
            label="fading alone: 1 − α^(age)",
        )
        ax.plot(
            rank,
            errors[FORGET_ALPHAS.index(alpha)].flip(0).numpy(),
            color=PALETTE[0],
            linewidth=2.2,
            label=f"decay α = {alpha:g}",
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
            f"horizon\n1/(1−α) = {horizon:.0f}",
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
        "recency: 1 = the newest pair (log scale)",
        "relative error ‖Sᵀk − v‖ / ‖v‖",
        f"{length} pairs into one {FORGET_DIM} × {FORGET_DIM} state: "
        f"{recalled_pairs(alpha, length)} read back with error < {RECALL_THRESHOLD}",
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
        ("RetNet:\nfixed, per head", retnet.expand(c, t)),
        ("Mamba-2:\nper step", mamba.expand(c, t)),
        ("GLA: per step\nand channel", gla),
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
        ax.set_xlabel("time step t (token)")
    axes[0].set_ylabel("key channel (index)")
    axes[0].yaxis.set_major_locator(
        MaxNLocator(integer=True)
    )  # whole channels
    fig.colorbar(
        image,
        ax=list(axes),
        label="horizon 1/(1−α) (tokens, log scale)",
        shrink=0.9,
    )
