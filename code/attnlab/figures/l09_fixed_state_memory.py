"""Figures for Lessons 9 (what a fixed state can remember) and 10 (forgetting on purpose: gates).

Lesson 9 stores N key→value pairs in one d × d state, ``S = Σ k_i v_iᵀ``, and reads them back
with ``Sᵀ k_j``; Lesson 10 multiplies the state by a decay before every write. The numbers come
from ``attnlab.tasks`` (``associative_pairs``, ``write_state``, ``recall_errors_by_pair``,
``mean_recall_error``, ``expected_crosstalk``) and ``attnlab.gated`` (the gates and
``effective_horizon``); these functions only choose what to compute and draw it.
"""

from __future__ import annotations

import math
from functools import cache

import torch
import torch.nn.functional as F
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from .._checks import check_int_in
from ..gated import (
    GLA_GATE_NORMALIZER,
    effective_horizon,
    retnet_gate,
    segment_decay,
    softplus_decay_gate,
)
from ..plotting import DIVERGING_CMAP, PALETTE, SEQUENTIAL_CMAP, style_axes
from ..tasks import (
    associative_pairs,
    expected_crosstalk,
    mean_recall_error,
    recall_errors_by_pair,
    write_state,
)

# ------------------------------------------------------------------------------ Lesson 9

#: The capacity panel's grids: number of stored pairs N and head dimension d (96 is Sophia's).
CAPACITY_PAIRS: tuple[int, ...] = (4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
CAPACITY_DIMS: tuple[int, ...] = (16, 32, 64, 96)

#: Independent draws of keys and values averaged in every point of the capacity curves.
CAPACITY_TRIALS = 16



def _fixed_axes(fig: Figure, ncols: int, **grid: float) -> list:
    """``ncols`` axes side by side at fixed margins (fractions of the figure), with no layout
    engine: constrained layout re-measures every label on every frame, which doubles the time
    a slider frame takes to render. The labels of a panel's frames do not change size much, so
    fixed margins fit them all."""
    fig.set_layout_engine("none")
    return list(fig.subplots(1, ncols, squeeze=False, gridspec_kw=grid)[0])


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(check_int_in("seed", seed, 0, 2**31 - 1))


def draw_readout(fig: Figure, n_pairs: int = 8, dim: int = 16, seed: int = 0) -> None:
    """Write ``n_pairs`` pairs into a ``dim × dim`` state, read the first one back.

    Two panels, orthonormal keys and random unit keys: the stored value v_1 (bars) and what
    the state returns, Sᵀ k_1 (dots), coordinate by coordinate. With orthonormal keys they agree;
    with random keys the gap is the crosstalk Σ_{i≠1} (k_i·k_1) v_i.
    """
    n = check_int_in("n_pairs", n_pairs, 1, 64)
    d = check_int_in("dim", dim, 2, 64)
    if n > d:
        raise ValueError(f"n_pairs: at most dim={d} pairs so that orthonormal keys exist, got {n}")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, orthogonal in zip(axes, (True, False), strict=True):
        keys, values = associative_pairs(n, d, orthogonal=orthogonal, generator=_generator(seed))
        state = write_state(keys, values, write="add")
        read = state.T @ keys[0]
        error = ((read - values[0]).norm() / values[0].norm()).item()
        x = list(range(d))
        ax.bar(x, values[0].tolist(), color=PALETTE[4], width=0.75, label="stored value $v_1$")
        ax.plot(x, read.tolist(), "o", color=PALETTE[5], markersize=5,
                label="read-out $S^\\top k_1$")
        ax.axhline(0, color="#555555", linewidth=0.8)
        kind = "orthonormal keys" if orthogonal else "random unit keys"
        style_axes(ax, "coordinate of the value vector (index)", "value (dimensionless)" if
                   orthogonal else "", f"{kind}: relative error {error:.2f}")
        ax.set_xticks(range(0, d, max(1, d // 8)))
    axes[0].legend(loc="lower left", ncols=2)
    fig.suptitle(f"{n} pairs written into one {d} × {d} state, pair 1 read back", fontsize=11)


@cache
def capacity_curve(dim: int, orthogonal: bool) -> tuple[tuple[int, float], ...]:
    """(N, mean relative recall error) over ``CAPACITY_PAIRS`` for one ``dim``, additive writes,
    ``CAPACITY_TRIALS`` draws each (``tasks.mean_recall_error``). Orthonormal keys stop at N = dim.
    Cached: the capacity panel draws from it."""
    return tuple(
        (n, mean_recall_error(n, dim, orthogonal=orthogonal, n_trials=CAPACITY_TRIALS, seed=n))
        for n in CAPACITY_PAIRS if not (orthogonal and n > dim)
    )


def draw_gram(fig: Figure, n_pairs: int = 32, dims: tuple[int, ...] = (32, 96)) -> None:
    """Gram matrices K Kᵀ of ``n_pairs`` keys: orthonormal keys in ``dims[0]`` dimensions (the
    identity), then random unit keys in each of ``dims``. The off-diagonal entries are the
    crosstalk weights k_i·k_j; their root mean square is about 1/√d."""
    n = check_int_in("n_pairs", n_pairs, 2, 256)
    if not dims:
        raise ValueError("dims: expected at least one dimension, got none")
    for d in dims:
        check_int_in("dims", d, 2, 4096)
    if dims[0] < n:
        raise ValueError(f"dims: the first must be at least n_pairs={n} for orthonormal keys, "
                         f"got {dims[0]}")
    panels = [(dims[0], True)] + [(d, False) for d in dims]
    axes = fig.subplots(1, len(panels), sharey=True)
    mask = ~torch.eye(n, dtype=torch.bool)
    for ax, (d, orthogonal) in zip(axes, panels, strict=True):
        keys, _ = associative_pairs(n, d, orthogonal=orthogonal, generator=_generator(0))
        gram = keys @ keys.T
        rms = gram[mask].pow(2).mean().sqrt().item()
        image = ax.imshow(gram.numpy(), cmap=DIVERGING_CMAP, vmin=-1, vmax=1,
                          interpolation="nearest")
        ax.grid(False)
        kind = "orthonormal" if orthogonal else "random unit"
        ax.set_title(f"{kind} keys, d = {d}\noff-diagonal rms {rms:.2f}", fontsize=10)
        ax.set_xlabel("key i (pair index)")
    axes[0].set_ylabel("key j (pair index)")
    fig.colorbar(image, ax=list(axes), label="$k_i \\cdot k_j$ (cosine, no unit)", shrink=0.9)


def draw_capacity(fig: Figure, n_pairs: int = 48, dim: int = 96) -> None:
    """Mean relative recall error against N / d for every d of the grid: random keys (measured,
    one line per d), the prediction sqrt((N−1)/d) (dashed, for the chosen d) and orthonormal
    keys (zero up to N = d); the chosen (N, d) circled. One axes, fixed margins: a fast frame."""
    if n_pairs not in CAPACITY_PAIRS:
        raise ValueError(f"n_pairs: expected one of {list(CAPACITY_PAIRS)}, got {n_pairs!r}")
    if dim not in CAPACITY_DIMS:
        raise ValueError(f"dim: expected one of {list(CAPACITY_DIMS)}, got {dim!r}")
    (ax,) = _fixed_axes(fig, 1, left=0.08, right=0.98, bottom=0.14, top=0.9)
    for i, d in enumerate(CAPACITY_DIMS):
        curve = capacity_curve(d, False)
        chosen = d == dim
        ax.plot([n / d for n, _ in curve], [e for _, e in curve], marker="o",
                markersize=4 if chosen else 3, color=PALETTE[i],
                alpha=1.0 if chosen else 0.35, linewidth=2 if chosen else 1,
                label=f"random keys, d = {d}" if chosen else
                ("random keys, other d (faint)" if i == (0 if dim != CAPACITY_DIMS[0] else 1)
                 else None))
    ns = range(1, CAPACITY_PAIRS[-1] + 1)
    ax.plot([n / dim for n in ns], [expected_crosstalk(n, dim) for n in ns], linestyle="--",
            color="#444444", linewidth=1, label=f"prediction √((N−1)/d), d = {dim}")
    orth = capacity_curve(dim, True)
    ax.plot([n / dim for n, _ in orth], [e for _, e in orth], marker="s", markersize=4,
            color=PALETTE[7], linewidth=1.5, label=f"orthonormal keys, d = {dim} (only N ≤ d)")
    ax.axvline(1.0, color="#888888", linestyle=":", linewidth=1)
    ax.text(1.06, 4.0, "N = d", fontsize=8, color="#555555")
    error = dict(capacity_curve(dim, False))[n_pairs]
    ax.plot([n_pairs / dim], [error], "o", markersize=13, markerfacecolor="none",
            markeredgecolor=PALETTE[5], markeredgewidth=2.5)
    ax.set_xscale("log", base=2)
    ticks = [2.0**e for e in range(-6, 5, 2)]
    ax.set_xticks(ticks, [f"1/{1 / x:.0f}" if x < 1 else f"{x:.0f}" for x in ticks])
    ax.minorticks_off()
    ax.set_xlim(2.0**-6.3, 2.0**4.4)
    ax.set_ylim(-0.1, 4.4)
    style_axes(ax, "N / d: stored pairs per key dimension (log scale)",
               "mean relative error ‖Sᵀk − v‖ / ‖v‖",
               f"N = {n_pairs} pairs in d = {dim}: error {error:.2f} with random keys")
    ax.legend(loc="upper left", fontsize=8)


# ------------------------------------------------------------------------------ Lesson 10

#: The forgetting panel's grids: decays α = 1 − 2^(−k) (horizons 4 … 512 tokens, and α = 1:
#: no forgetting) and stream lengths (1, 2, 4 and 8 times the head dimension).
FORGET_DIM = 96
FORGET_ALPHAS: tuple[float, ...] = tuple(1 - 2.0 ** -k for k in range(2, 10)) + (1.0,)
FORGET_LENGTHS: tuple[int, ...] = (96, 192, 384, 768)
FORGET_TRIALS = 8

#: A pair counts as recalled when its relative error is below this.
RECALL_THRESHOLD = 0.5


def alpha_label(alpha: float) -> str:
    """0.9375 → "0.9375 (horizon 16)", 1.0 → "1 (no decay)"."""
    if alpha == 1.0:
        return "1 (no decay)"
    return f"{alpha:g} (horizon {effective_horizon(math.log(alpha)).item():.0f})"


@cache
def forgetting_errors(length: int) -> torch.Tensor:
    """Mean relative error ``[len(FORGET_ALPHAS), length]`` of reading back each of ``length``
    random pairs (d = ``FORGET_DIM``) after writing them all with a constant decay α, one α per
    row, pair order as written (last column = the newest), averaged over ``FORGET_TRIALS``
    draws. One ``recall_errors_by_pair`` call per draw, the decays as its heads. Cached."""
    n = check_int_in("length", length, 1, 4096)
    generator = _generator(length)
    log_alpha = torch.log(torch.tensor(FORGET_ALPHAS, dtype=torch.float64))  # [H]
    g = log_alpha[None, :, None].expand(1, len(FORGET_ALPHAS), n)  # [1, H, N]
    total = torch.zeros(len(FORGET_ALPHAS), n, dtype=torch.float64)
    for _ in range(FORGET_TRIALS):
        keys, values = associative_pairs(n, FORGET_DIM, orthogonal=False, generator=generator)
        total += recall_errors_by_pair(keys[None], values[None], g=g)[0]
    return total / FORGET_TRIALS


def pair_weights(alpha: float, length: int) -> torch.Tensor:
    """The weight α^(length − i) with which pair i (1-based) is still in the state after
    ``length`` writes with a constant decay: the last row of ``gated.segment_decay``."""
    g = torch.full((length,), math.log(alpha), dtype=torch.float64)
    return segment_decay(g.cumsum(0))[-1]


def recalled_pairs(alpha: float, length: int) -> int:
    """How many of the ``length`` pairs are read back with relative error below
    ``RECALL_THRESHOLD``, each pair's error averaged over the draws (``forgetting_errors``)."""
    if alpha not in FORGET_ALPHAS:
        raise ValueError(f"alpha: expected one of {list(FORGET_ALPHAS)}, got {alpha!r}")
    errors = forgetting_errors(length)[FORGET_ALPHAS.index(alpha)]
    return int((errors < RECALL_THRESHOLD).sum())


def draw_forgetting(fig: Figure, alpha: float = 1 - 2.0**-4, length: int = 384) -> None:
    """A stream of ``length`` random pairs written into one 96 × 96 state with decay ``alpha``;
    every pair's relative recall error at the end, against how recently it was written (1 = the
    newest). Dashed: the part due to fading alone, 1 − α^(age) (what orthonormal keys would
    give), with the horizon 1/(1−α) marked; grey: the same stream written without decay. One
    axes, fixed margins: a fast frame."""
    if alpha not in FORGET_ALPHAS:
        raise ValueError(f"alpha: expected one of {list(FORGET_ALPHAS)}, got {alpha!r}")
    if length not in FORGET_LENGTHS:
        raise ValueError(f"length: expected one of {list(FORGET_LENGTHS)}, got {length!r}")
    (ax,) = _fixed_axes(fig, 1, left=0.08, right=0.98, bottom=0.14, top=0.9)
    rank = torch.arange(1, length + 1).numpy()  # 1 = newest
    errors = forgetting_errors(length)
    additive = errors[FORGET_ALPHAS.index(1.0)].flip(0).numpy()
    ax.plot(rank, additive, color="#999999", linewidth=1.2, label="no decay (α = 1)")
    if alpha != 1.0:
        fading = (1 - pair_weights(alpha, length).flip(0)).numpy()
        ax.plot(rank, fading, color=PALETTE[1], linestyle="--", linewidth=1.5,
                label="fading alone: 1 − α^(age)")
        ax.plot(rank, errors[FORGET_ALPHAS.index(alpha)].flip(0).numpy(), color=PALETTE[0],
                linewidth=2.2, label=f"decay α = {alpha:g}")
        horizon = effective_horizon(math.log(alpha)).item()
        ax.axvline(horizon, color=PALETTE[1], linestyle=":", linewidth=1.2)
        ax.text(horizon * 1.06, 0.06, f"horizon\n1/(1−α) = {horizon:.0f}", fontsize=8,
                color=PALETTE[1])
    ax.axhline(RECALL_THRESHOLD, color=PALETTE[2], linestyle=":", linewidth=1.2)
    ax.set_xscale("log")
    ticks = [t for t in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if t <= length]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlim(0.9, length * 1.1)
    ax.set_ylim(0, max(2.6, float(additive.max()) * 1.05))
    style_axes(ax, "recency: 1 = the newest pair (log scale)",
               "relative error ‖Sᵀk − v‖ / ‖v‖",
               f"{length} pairs into one {FORGET_DIM} × {FORGET_DIM} state: "
               f"{recalled_pairs(alpha, length)} read back with error < {RECALL_THRESHOLD}")
    ax.legend(loc="upper left", fontsize=8)


def draw_gate_kinds(fig: Figure, length: int = 48, channels: int = 16, seed: int = 0) -> None:
    """The memory horizon 1/(1−α_t) of every key channel at every step, for the three kinds of
    gate, on made-up gate inputs: RetNet (fixed per head: ``retnet_gate``, head 2), Mamba-2
    (one data-dependent decay per step: ``softplus_decay_gate`` with A = 1 and Δ ≈ 0.05 at
    x = 0, a large input at step 30) and GLA (one per channel and step:
    logsigmoid(z) / 16, channel logits centred from −4 to 4)."""
    t = check_int_in("length", length, 8, 256)
    c = check_int_in("channels", channels, 2, 128)
    gen = _generator(seed)
    retnet = retnet_gate(1, 3, t, dtype=torch.float64)[0, 2]  # [T]
    x = torch.randn(t, generator=gen, dtype=torch.float64)
    x[min(30, t - 1)] = 5.0  # an input that tells the gate to forget
    dt_bias = torch.log(torch.expm1(torch.tensor(0.05, dtype=torch.float64)))  # softplus⁻¹(0.05)
    mamba = softplus_decay_gate(x, torch.zeros((), dtype=torch.float64), dt_bias)  # [T]
    logits = (torch.linspace(-4, 4, c, dtype=torch.float64)[:, None]
              + torch.randn(c, t, generator=gen, dtype=torch.float64))
    gla = F.logsigmoid(logits) / GLA_GATE_NORMALIZER  # [C, T]
    panels = [
        ("RetNet: fixed, per head", retnet.expand(c, t)),
        ("Mamba-2: per step (scalar)", mamba.expand(c, t)),
        ("GLA: per step and channel", gla),
    ]
    axes = fig.subplots(1, 3, sharey=True)
    norm = LogNorm(vmin=1, vmax=1000)
    for ax, (title, g) in zip(axes, panels, strict=True):
        horizon = effective_horizon(g).clamp(max=1000)
        image = ax.imshow(horizon.numpy(), cmap=SEQUENTIAL_CMAP, norm=norm, aspect="auto",
                          interpolation="nearest")
        ax.grid(False)
        ax.set_title(title)
        ax.set_xlabel("time step t (token)")
    axes[0].set_ylabel("key channel (index)")
    fig.colorbar(image, ax=list(axes), label="horizon 1/(1−α) (tokens, log scale)", shrink=0.9)
