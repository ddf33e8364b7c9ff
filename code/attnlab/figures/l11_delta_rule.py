"""Figures for Lessons 11 (the delta rule) and 12 (Gated DeltaNet).

Every number drawn here comes from the package's kernels: ``linear_attention_recurrent`` and
``delta_rule_recurrent`` directly, and the recall and document-switch functions of
:mod:`attnlab.tasks` (which call ``gla_chunk``, ``delta_rule_chunk`` and
``gated_delta_rule_chunk``).
"""

from __future__ import annotations

from functools import cache

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, NullLocator

from ..delta import delta_rule_recurrent
from ..linear import linear_attention_recurrent
from ..plotting import PALETTE, style_axes
from ..tasks import (
    associative_pairs,
    delta_recall_errors_by_pair,
    document_switch_stream,
    latest_value_errors,
    recall_errors_by_pair,
    switch_stream_state,
)

GREY = "#999999"


def _check_number(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            low <= value <= high):
        raise ValueError(f"{name}: expected a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


# ----------------------------------------------------------------------------------------------
# Lesson 11: one key, a new value
# ----------------------------------------------------------------------------------------------

#: The value first stored under key k₁, and the value that replaces it (4 features).
OLD_VALUE = (1.0, 2.0, -1.0, 0.5)
NEW_VALUE = (-1.0, 0.5, 1.5, 1.0)


@cache
def _overwrite_pairs() -> tuple[torch.Tensor, torch.Tensor]:
    """Keys k₁, k₂, k₃, k₁ (orthonormal, 4-D) and values: old, two others, new: ``[4, 4]``."""
    generator = torch.Generator().manual_seed(11)
    keys, others = associative_pairs(3, 4, orthogonal=True, generator=generator)
    keys = torch.cat([keys, keys[:1]])  # k₁ comes back as the fourth key
    values = torch.stack([torch.tensor(OLD_VALUE, dtype=keys.dtype), others[1], others[2],
                          torch.tensor(NEW_VALUE, dtype=keys.dtype)])
    return keys, values


def overwrite_example(beta: float = 1.0) -> dict[str, torch.Tensor]:
    """Write (k₁, old), (k₂, v₂), (k₃, v₃) and then (k₁, new); read back under k₁, both ways.

    The first three writes store their pairs completely (β = 1); the fourth, which gives k₁ its
    new value, uses ``beta``. Returns the four 4-vectors ``old``, ``new``, ``additive`` (the
    last output of ``linear_attention_recurrent`` with query k₁, i.e. Sᵀk₁ for S = Σ k_i v_iᵀ)
    and ``delta`` (the same output of ``delta_rule_recurrent``). The keys are orthonormal, so
    the other pairs do not interfere and ``delta`` is exactly (1 − β)·old + β·new.
    """
    beta = _check_number("beta", beta, 0.0, 2.0)
    keys, values = _overwrite_pairs()
    k, v = keys[None, None], values[None, None]  # [1, 1, 4, 4]; the last query is k₁
    betas = torch.tensor([1.0, 1.0, 1.0, beta], dtype=keys.dtype)[None, None]
    additive, _ = linear_attention_recurrent(k, k, v, scale=1.0)
    delta, _ = delta_rule_recurrent(k, k, v, beta=betas, scale=1.0)
    return {"old": values[0], "new": values[3], "additive": additive[0, 0, -1],
            "delta": delta[0, 0, -1]}


def draw_overwrite(fig: Figure, beta: float = 1.0) -> None:
    """Bars of the four features: the old and the new value of k₁, and what each state returns
    when k₁'s second write has strength ``beta``: linear attention old + new, the delta rule
    (1 − β)·old + β·new (see :func:`overwrite_example`)."""
    reads = overwrite_example(beta)
    ax = fig.subplots()
    series = [("old value", reads["old"], GREY),
              ("new value", reads["new"], PALETTE[0]),
              ("linear attention reads", reads["additive"], PALETTE[1]),
              (f"delta rule (β = {beta:g}) reads", reads["delta"], PALETTE[2])]
    width = 0.2
    for i, (label, vector, colour) in enumerate(series):
        positions = [j + (i - 1.5) * width for j in range(len(vector))]
        ax.bar(positions, vector.tolist(), width=width, color=colour, label=label)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(OLD_VALUE)), [f"feature {j + 1}" for j in range(len(OLD_VALUE))])
    ax.set_ylim(-2.9, 3.6)
    style_axes(ax, "", "value (arbitrary units)",
               f"Read under k₁ after k₁ got a new value: delta rule = "
               f"{1 - beta:.2f}·old + {beta:.2f}·new")
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=4, fontsize=8)


# ----------------------------------------------------------------------------------------------
# Lesson 11: why keys are L2-normalised
# ----------------------------------------------------------------------------------------------

STABILITY_LENGTH = 48
STABILITY_DIM = 16


@cache
def _stability_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit query and key directions and N(0, 1) values, ``[1, 1, 48, 16]`` each, float64."""
    generator = torch.Generator().manual_seed(7)
    shape = (1, 1, STABILITY_LENGTH, STABILITY_DIM)
    q, k, v = (torch.randn(*shape, generator=generator, dtype=torch.float64) for _ in range(3))
    return q / q.norm(dim=-1, keepdim=True), k / k.norm(dim=-1, keepdim=True), v


@cache
def output_norms(key_norm: float, beta: float) -> torch.Tensor:
    """‖o_t‖ for t = 1…48 of ``delta_rule_recurrent`` (scale 1) with every key of length
    ``key_norm`` and a constant ``beta``, on fixed random unit queries and N(0, 1) values."""
    key_norm = _check_number("key_norm", key_norm, 0.0, 100.0)
    beta = _check_number("beta", beta, 0.0, 2.0)
    q, k, v = _stability_inputs()
    betas = torch.full(k.shape[:3], beta, dtype=k.dtype)
    o, _ = delta_rule_recurrent(q, key_norm * k, v, beta=betas, scale=1.0)
    return o[0, 0].norm(dim=-1)


def _power_label(y: float, _position: object) -> str:
    return f"{y:g}" if 0.01 <= y < 1000 else f"{y:.0e}"


def draw_key_norm_stability(fig: Figure, key_norm: float = 1.0, beta: float = 1.0) -> None:
    """‖o_t‖ over time (log scale) for keys of length ``key_norm``, against unit keys (grey).

    Along k a write multiplies what the state holds by 1 − β‖k‖²; beyond |1 − β‖k‖²| > 1 the
    state, and with it every output, grows geometrically.
    """
    norms = output_norms(key_norm, beta)
    reference = output_norms(1.0, beta)
    ax = fig.subplots()
    steps = range(1, len(norms) + 1)
    ax.plot(steps, reference.tolist(), color=GREY, linestyle="--", label=f"‖k‖ = 1, β = {beta:g}")
    ax.plot(steps, norms.tolist(), color=PALETTE[5] if key_norm**2 * beta > 2 else PALETTE[0],
            linewidth=2, label=f"‖k‖ = {key_norm:g}, β = {beta:g}")
    ax.set_yscale("log")
    top = max(100.0, float(norms.max()) * 10)
    ax.set_ylim(0.05, top)
    # plain "1e+05" labels: the default 10^5 labels go through mathtext, three times slower
    ax.yaxis.set_major_formatter(FuncFormatter(_power_label))
    ax.yaxis.set_minor_locator(NullLocator())
    eigen = 1 - beta * key_norm**2
    verdict = "stable" if abs(eigen) <= 1 else "grows"
    style_axes(ax, "token t", "output size ‖o_t‖ (log scale)",
               f"Eigenvalue along k: 1 − β‖k‖² = {eigen:.2f}  →  {verdict}")
    ax.legend(loc="upper left")


# ----------------------------------------------------------------------------------------------
# Lesson 11: Lesson 9's recall test, with the delta rule
# ----------------------------------------------------------------------------------------------

RECALL_DIM = 16
RECALL_PAIRS = (2, 4, 8, 12, 16, 24, 32, 48, 64)
RECALL_TRIALS = 64


@cache
def recall_curves(dim: int = RECALL_DIM, trials: int = RECALL_TRIALS, seed: int = 0) -> dict:
    """Mean relative recall error against the number of stored pairs N, for random unit keys
    (additive and delta rule with β = 1) and orthonormal keys (additive, N ≤ dim); and, at
    N = 2·dim, the error of each pair by its write position. ``trials`` draws per N."""
    generator = torch.Generator().manual_seed(seed)
    curves: dict = {"n_pairs": list(RECALL_PAIRS), "add": [], "delta": [], "orth_n": [],
                    "orth_add": []}
    by_position = {}
    for n in RECALL_PAIRS:
        draws = [associative_pairs(n, dim, orthogonal=False, generator=generator)
                 for _ in range(trials)]
        keys = torch.stack([k for k, _ in draws])
        values = torch.stack([v for _, v in draws])
        add = recall_errors_by_pair(keys, values)[:, 0]  # [trials, N]
        delta = delta_recall_errors_by_pair(keys, values, beta=1.0)
        curves["add"].append(add.mean().item())
        curves["delta"].append(delta.mean().item())
        if n == 2 * dim:
            by_position = {"n": n, "add": add.mean(0).tolist(), "delta": delta.mean(0).tolist()}
        if n <= dim:
            draws = [associative_pairs(n, dim, orthogonal=True, generator=generator)
                     for _ in range(trials)]
            keys = torch.stack([k for k, _ in draws])
            values = torch.stack([v for _, v in draws])
            curves["orth_n"].append(n)
            curves["orth_add"].append(recall_errors_by_pair(keys, values).mean().item())
    curves["by_position"] = by_position
    return curves


def draw_recall_vs_pairs(fig: Figure) -> None:
    """Left: mean recall error against N pairs stored in a 16 × 16 state. Right: at N = 32,
    each pair's error by when it was written — the delta rule keeps the recent ones."""
    curves = recall_curves()
    left, right = fig.subplots(1, 2, width_ratios=[1.15, 1])
    n = curves["n_pairs"]
    left.plot(n, curves["add"], marker="o", ms=4, color=PALETTE[1],
              label="linear attention, random keys")
    left.plot(n, curves["delta"], marker="s", ms=4, color=PALETTE[2],
              label="delta rule (β = 1), random keys")
    left.plot(curves["orth_n"], curves["orth_add"], marker="^", ms=4, color=PALETTE[0],
              label="either, orthonormal keys")
    left.axvline(RECALL_DIM, color=GREY, linestyle=":", linewidth=1)
    left.text(RECALL_DIM + 1, 0.05, f"N = d = {RECALL_DIM}", color="#555555", fontsize=8)
    left.set_ylim(0, max(curves["add"]) * 1.08)
    style_axes(left, "pairs stored N", "mean relative recall error",
               f"Recall from a {RECALL_DIM} × {RECALL_DIM} state")
    left.legend(loc="upper left")
    pos = curves["by_position"]
    steps = range(1, pos["n"] + 1)
    right.plot(steps, pos["add"], color=PALETTE[1], label="linear attention")
    right.plot(steps, pos["delta"], color=PALETTE[2], label="delta rule (β = 1)")
    right.set_ylim(0, max(max(pos["add"]), max(pos["delta"])) * 1.1)
    style_axes(right, "pair written at step i", "relative error of pair i",
               f"N = {pos['n']} pairs: who is remembered")
    right.legend(loc="lower left")


# ----------------------------------------------------------------------------------------------
# Lesson 12: the document switch
# ----------------------------------------------------------------------------------------------

#: Lesson 12's stream: 128 old pairs, 8 new ones, 4 of them overwritten, in a 32 × 32 state.
SWITCH_SETUP = {"n_old": 128, "n_new": 8, "n_overwrite": 4, "dim": 32, "n_sequences": 32}
SWITCH_SEED = 12
SWITCH_NAMES = {"gla": "GLA (scalar gate)", "deltanet": "DeltaNet", "gdn": "Gated DeltaNet"}


@cache
def switch_stream():
    """Lesson 12's fixed stream (``document_switch_stream`` with ``SWITCH_SETUP``)."""
    generator = torch.Generator().manual_seed(SWITCH_SEED)
    return document_switch_stream(**SWITCH_SETUP, generator=generator)


def _switch_state(mixer: str, alpha_boundary: float, beta: float) -> torch.Tensor:
    """The final state of ``mixer`` on the stream, computed once per setting it depends on."""
    if mixer in ("deltanet", "latest_only"):
        alpha_boundary = 1.0  # no gate
    if mixer in ("gla", "latest_only"):
        beta = 1.0  # no write strength
    return _cached_state(mixer, alpha_boundary, beta)


@cache
def _cached_state(mixer: str, alpha_boundary: float, beta: float) -> torch.Tensor:
    return switch_stream_state(switch_stream(), mixer, alpha_boundary=alpha_boundary, beta=beta)


def switch_errors(alpha_boundary: float, beta: float, query_noise: float) -> dict:
    """(overwritten, unchanged) mean errors of each mixer and of ``latest_only`` on the stream,
    with the gate ``alpha_boundary`` at the document boundary (1 inside documents)."""
    alpha_boundary = _check_number("alpha_boundary", alpha_boundary, 1e-12, 1.0)
    beta = _check_number("beta", beta, 0.0, 2.0)
    query_noise = _check_number("query_noise", query_noise, 0.0, 10.0)
    stream = switch_stream()
    return {mixer: latest_value_errors(stream, _switch_state(mixer, alpha_boundary, beta),
                                       query_noise=query_noise)
            for mixer in (*SWITCH_NAMES, "latest_only")}


def draw_switch_stream(fig: Figure) -> None:
    """The stream as a strip: old document, the boundary where the gate may close, the new
    document's writes and overwrites, and the reads."""
    setup = SWITCH_SETUP
    n_old, n_new, n_over = setup["n_old"], setup["n_new"], setup["n_overwrite"]
    ax = fig.subplots()
    # the old document is drawn compressed: its 128 writes take 40 % of the strip
    old_w, new_w, over_w, read_w = 4.0, 2.4, 1.2, 1.6
    x = 0.0
    parts = [
        (old_w, GREY, f"old document\n{n_old} pairs, random keys\n({n_old // setup['dim']}× the "
                      f"{setup['dim']} pairs a {setup['dim']}×{setup['dim']} state\n"
                      f"can hold exactly)"),
        (new_w, PALETTE[0], f"new document\n{n_new} pairs\n(orthonormal keys)"),
        (over_w, PALETTE[1], f"{n_over} of those\nkeys get\nnew values"),
        (read_w, PALETTE[2], f"read the latest\nvalue of all {n_new}\nnew keys"),
    ]
    for width, colour, text in parts:
        ax.add_patch(Rectangle((x, 0), width, 1, facecolor=colour, alpha=0.35, edgecolor=colour))
        ax.text(x + width / 2, 0.5, text, ha="center", va="center", fontsize=9)
        x += width
    ax.annotate("gate α_b at the\ndocument boundary", xy=(old_w, 1.0), xytext=(old_w, 1.45),
                ha="center", fontsize=9, arrowprops={"arrowstyle": "->", "color": PALETTE[5]},
                color=PALETTE[5])
    ax.plot([old_w, old_w], [0, 1], color=PALETTE[5], linewidth=2.5)
    ax.set_xlim(-0.1, x + 0.1)
    ax.set_ylim(-0.15, 1.9)
    ax.axis("off")
    ax.set_title("The constructed stream (time runs left to right)")


def draw_switch_errors(fig: Figure, alpha_boundary: float = 0.01, beta: float = 1.0,
                       query_noise: float = 0.5) -> None:
    """Bars: each mixer's mean relative error on the overwritten and on the unchanged keys;
    dashed: a perfect memory of the new document read with the same queries."""
    errors = switch_errors(alpha_boundary, beta, query_noise)
    ax = fig.subplots()
    top = 1.3
    width = 0.36
    for i, mixer in enumerate(SWITCH_NAMES):
        for j, (label, colour) in enumerate((("overwritten keys", PALETTE[1]),
                                              ("unchanged keys", PALETTE[0]))):
            value = errors[mixer][j]
            xpos = i + (j - 0.5) * width
            ax.bar(xpos, min(value, top), width=width, color=colour,
                   label=label if i == 0 else None)
            ax.text(xpos, min(value, top) + 0.02, f"{value:.2f}" + (" ↑" if value > top else ""),
                    ha="center", va="bottom", fontsize=8)
    floor = sum(errors["latest_only"]) / 2
    ax.axhline(floor, color="black", linestyle="--", linewidth=1,
               label=f"perfect memory of the new document: {floor:.2f}")
    ax.set_xticks(range(len(SWITCH_NAMES)), list(SWITCH_NAMES.values()))
    ax.set_ylim(0, top + 0.15)
    style_axes(ax, "", "relative error of the read ‖Sᵀq − v‖ / ‖v‖",
               f"α_b = {alpha_boundary:g}, β = {beta:g}, query noise {query_noise:g}")
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper right", fontsize=8)


def switch_error_table(alpha_boundary: float = 0.01, beta: float = 1.0,
                       query_noise: float = 0.5) -> dict[str, float]:
    """The mean error over all eight new keys, per mixer (and ``latest_only``)."""
    errors = switch_errors(alpha_boundary, beta, query_noise)
    n_over, n_new = SWITCH_SETUP["n_overwrite"], SWITCH_SETUP["n_new"]
    return {m: (e[0] * n_over + e[1] * (n_new - n_over)) / n_new for m, e in errors.items()}


__all__ = [
    "NEW_VALUE", "OLD_VALUE", "RECALL_DIM", "SWITCH_NAMES", "SWITCH_SETUP",
    "draw_key_norm_stability", "draw_overwrite", "draw_recall_vs_pairs", "draw_switch_errors",
    "draw_switch_stream", "output_norms", "overwrite_example", "recall_curves",
    "switch_error_table", "switch_errors", "switch_stream",
]
