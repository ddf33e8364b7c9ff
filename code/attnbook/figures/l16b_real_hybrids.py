"""Figures for Lesson 16b (real hybrids side by side): memory per sequence, the what-if
calculator, and the batch sweep of bytes read per decode step.

Every number drawn comes from :mod:`attnlab.serving` over the published models of
:mod:`attnlab.configs`; these functions only draw. Text is 11 pt or more at figure widths up
to 7 in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from attnlab.configs import PUBLISHED, ModelConfig
from attnlab.i18n import tr
from attnlab.serving import (
    Deployment,
    capacity,
    decode_step_bytes,
    sequence_bytes,
)

from ..plotting import PALETTE, style_axes, title_at_top

FONT = 11
"""Smallest text size (pt) of these figures."""

CONTEXT_COLOURS = (PALETTE[4], PALETTE[0], PALETTE[5])
PART_COLOURS = {
    "weights": PALETTE[7],
    "cache": PALETTE[1],
    "state": PALETTE[0],
}
CACHE_DTYPES = ("bf16", "fp8", "int4")
# yellow is too pale for lines
LINE_COLOURS = tuple(c for c in PALETTE if c != "#F0E442")


def size_label(arch: ModelConfig) -> str:
    """``"48B, 3B active"`` or ``"8B"``: the model's size in billions of parameters."""
    total = f"{arch.params_total / 1e9:.0f}B"
    if arch.params_active == arch.params_total:
        return total
    return tr(
        "{total}, {active:.3g}B active",
        total=total,
        active=arch.params_active / 1e9,
    )


def context_label(tokens: int) -> str:
    """4096 → "4k", 131072 → "128k", 1048576 → "1M"."""
    if tokens >= 2**20 and tokens % 2**20 == 0:
        return f"{tokens // 2**20}M"
    if tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    return f"{tokens:,}"


def placement_label(placement: str) -> str:
    """What the calculator's placement control shows, in the reader's language: ``"TP 8"`` as
    it is, ``"TP 8 + DP attention"`` with its last words translated."""
    tp, sep, tail = placement.rpartition(" + DP attention")
    if sep and not tail:
        return tr("{tp} + DP attention", tp=tp)
    return placement


def calculator_alt(model: str, context: int, placement: str) -> str:
    """The alt text of a frame of the what-if calculator (``placement``: the control's value)."""
    return tr(
        "Three stacked bars for one GPU serving {model} at {context:,} tokens ({placement}), "
        "one per cache format (bf16, fp8, 4-bit): its share of the weights, caches and states "
        "at the largest batch that fits, with that batch per GPU and per node written above "
        "each bar and the usable memory dashed.",
        model=model,
        context=context,
        placement=placement_label(placement),
    )


def _check_names(names: Sequence[str]) -> None:
    unknown = [n for n in names if n not in PUBLISHED]
    if unknown or not names:
        raise ValueError(
            f"names: expected published model names from {list(PUBLISHED)}, got {list(names)}"
        )


def draw_memory_per_sequence(
    fig: Figure, names: Sequence[str], contexts: Sequence[int]
) -> None:
    """Horizontal bars (log scale): bytes one sequence keeps (cache + state + conv; bf16 cache,
    states in vLLM's default dtypes) at each context, one group per model, its size beside its
    name."""
    _check_names(names)
    if not contexts:
        raise ValueError("contexts: expected at least one context length")
    ax = fig.subplots()
    height = 0.8 / len(contexts)
    for j, tokens in enumerate(contexts):
        values = [
            sequence_bytes(PUBLISHED[n], tokens).total_bytes / 2**30
            for n in names
        ]
        ys = [
            i + (j - (len(contexts) - 1) / 2) * height
            for i in range(len(names))
        ]
        ax.barh(
            ys,
            values,
            height=height * 0.92,
            color=CONTEXT_COLOURS[j % 3],
            label=tr("{context} tokens", context=context_label(tokens)),
        )
    ax.set_yticks(
        range(len(names)),
        [f"{n}\n({size_label(PUBLISHED[n])})" for n in names],
        fontsize=FONT,
    )
    ax.invert_yaxis()
    ax.set_xscale("log")
    style_axes(ax, tr("memory of one sequence (GiB, log scale)"), "")
    ax.xaxis.label.set_size(FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.legend(
        fontsize=FONT,
        loc="lower center",
        ncols=len(contexts),
        bbox_to_anchor=(0.4, 1.0),
        frameon=False,
        handlelength=1.2,
        columnspacing=1.0,
    )


def draw_calculator(
    fig: Figure, model: str, context: int, deployment: Deployment
) -> None:
    """What fits on each GPU of ``deployment``: for each cache dtype, a stacked bar of one GPU's
    weights + caches + states at the largest batch that fits, against the GPU's usable memory
    (dashed), labelled with that batch per GPU and per node."""
    _check_names([model])
    if not isinstance(deployment, Deployment):
        raise ValueError(
            f"deployment: expected a Deployment, got {type(deployment).__name__}"
        )
    arch = PUBLISHED[model]
    ax = fig.subplots()
    rows = []
    for dtype in CACHE_DTYPES:
        placed = dataclasses.replace(deployment, cache_dtype=dtype)
        fit = capacity(arch, context, placed)
        seq = sequence_bytes(
            arch,
            context,
            cache_dtype=dtype,
            state_dtype=placed.state_dtype,
            tp=1 if placed.dp_attention else placed.tp,
            block_tokens=placed.block_tokens,
        )
        rows.append((dtype, fit, seq))
    usable_gb = deployment.usable_bytes / 1e9
    ys = range(len(rows))
    weights = [fit.weights / 1e9 for _, fit, _ in rows]
    caches = [
        fit.per_gpu * (seq.cache_bytes + seq.conv_bytes) / 1e9
        for _, fit, seq in rows
    ]
    states = [fit.per_gpu * seq.state_bytes / 1e9 for _, fit, seq in rows]
    ax.barh(ys, weights, color=PART_COLOURS["weights"], height=0.6)
    ax.barh(ys, caches, left=weights, color=PART_COLOURS["cache"], height=0.6)
    ax.barh(
        ys,
        states,
        left=[w + c for w, c in zip(weights, caches, strict=True)],
        color=PART_COLOURS["state"],
        height=0.6,
    )
    for i, (_, fit, _) in enumerate(rows):
        text = (
            tr(
                "{per_gpu:,} held by each GPU, {per_node:,} served by the node",
                per_gpu=fit.per_gpu,
                per_node=fit.per_node,
            )
            if fit.per_gpu
            else tr("no sequence fits")
        )
        ax.text(usable_gb * 0.02, i - 0.36, text, fontsize=FONT, va="bottom")
    ax.axvline(usable_gb, color=PALETTE[5], linestyle="--", linewidth=1.5)
    ax.set_yticks(
        list(ys),
        [tr("{dtype} cache", dtype=d) for d, _, _ in rows],
        fontsize=FONT,
    )
    ax.set_ylim(len(rows) - 0.5, -1.6)
    ax.set_xlim(0, usable_gb * 1.08)
    style_axes(
        ax,
        tr(
            "GB on one GPU (dashed: {usable:.1f} GB usable)", usable=usable_gb
        ),
        "",
    )
    ax.xaxis.label.set_size(FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    key = blended_transform_factory(ax.transAxes, ax.transData)
    for x, (label, part) in zip(
        (0.0, 0.28, 0.66),
        (
            (tr("■ weights"), "weights"),
            (tr("■ cache + conv"), "cache"),
            (tr("■ states"), "state"),
        ),
        strict=True,
    ):
        ax.text(
            x,
            -1.25,
            label,
            color=PART_COLOURS[part],
            fontsize=FONT,
            va="center",
            transform=key,
        )
    title_at_top(
        ax,
        tr(
            "{model}, {context} tokens, per GPU of {gpus} × {gpu}",
            model=model,
            context=context_label(context),
            gpus=deployment.gpus,
            gpu=deployment.hardware.name,
        ),
    )
    ax.title.set_size(FONT)


def draw_batch_sweep(
    fig: Figure,
    names: Sequence[str],
    context: int,
    batches: Sequence[int],
    deployment: Deployment,
) -> None:
    """Share of one GPU's decode-step bytes that are caches and states (the rest: weights),
    against the batch each GPU holds (log scale), one line per model, drawn only over the
    batches that fit on ``deployment``; above 50 % a step is cache-bound."""
    _check_names(names)
    if not batches or any(b < 1 for b in batches):
        raise ValueError(
            f"batches: expected batch sizes >= 1, got {list(batches)}"
        )
    ax = fig.subplots()
    styles = ("-", "--", "-.", ":")
    for i, name in enumerate(names):
        arch = PUBLISHED[name]
        most = capacity(arch, context, deployment).per_gpu
        fitting = [b for b in batches if b <= most]
        shares = []
        for b in fitting:
            step = decode_step_bytes(arch, context, b, deployment=deployment)
            shares.append(100 * step.per_sequence / step.total)
        ax.plot(
            fitting,
            shares,
            color=LINE_COLOURS[i % len(LINE_COLOURS)],
            linewidth=2,
            linestyle=styles[i % len(styles)],
            marker="o" if len(fitting) == 1 else None,
            label=name if fitting else tr("{model} (none fits)", model=name),
        )
    ax.axhline(50, color="0.4", linewidth=1)
    ax.text(
        batches[-1],
        52,
        tr("cache-bound above"),
        fontsize=FONT,
        color="0.3",
        va="bottom",
        ha="right",
    )
    ax.set_xscale("log", base=2)
    ticks = [b for b in batches if math.log2(b) % 2 == 0]  # 1, 4, 16, ...
    ax.set_xticks(ticks, [f"{b}" for b in ticks])
    ax.set_xlim(batches[0] / 1.2, batches[-1] * 1.2)
    ax.set_ylim(0, 100)
    style_axes(
        ax,
        tr("sequences on each GPU (only batches that fit)"),
        tr("cache share of bytes read (%)"),
    )
    for axis_label in (ax.xaxis.label, ax.yaxis.label):
        axis_label.set_size(FONT)
    ax.tick_params(labelsize=FONT)
    fig.legend(
        *ax.get_legend_handles_labels(),
        fontsize=FONT,
        loc="outside lower center",
        ncols=2,
        frameon=False,
        handlelength=2.2,
    )
    title_at_top(
        ax,
        tr(
            "one GPU's decode step, {context} tokens a sequence",
            context=context_label(context),
        ),
    )
    ax.title.set_size(FONT)
