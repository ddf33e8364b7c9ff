"""Figures of Lesson 6 (the KV cache): recomputation, the cache filling step by step, measured
step times, the cache calculator."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from attnlab.checks import check_int_in
from attnlab.configs import LLAMA3_8B, SOPHIA, ModelConfig
from attnlab.i18n import tr
from attnlab.memory import (
    BYTES_PER_ELEMENT,
    as_all_attention,
    cache_breakdown,
    format_bytes,
)

from ..demos.calculators import BUDGET_BYTES
from ..demos.decoding import decode_total_work
from ..plotting import GIB, PALETTE, SMALL_TEXT_PT, context_label, style_axes

#: The calculator's models: Sophia with all 28 layers as multi-head attention, Llama-3-8B, and
#: Sophia as built (21 KDA layers with fixed states, 7 MLA layers with a latent cache).
CALCULATOR_MODELS: dict[str, ModelConfig] = {
    "Sophia as all-attention": as_all_attention(SOPHIA),
    "Llama-3-8B (GQA)": LLAMA3_8B,
    "Sophia as built": SOPHIA,
}


#: One colour per calculator model, the same in every frame.
_MODEL_COLOURS = (PALETTE[0], PALETTE[3], PALETTE[2])

_CONTEXT_TICKS = (0, 16384, 32768, 65536, 98304, 131072)

#: The calculator's context stops: every power of two from 1k to 128k tokens.
CALCULATOR_CONTEXTS = tuple(2**i for i in range(10, 18))

#: The model whose exact size the calculator's title gives.
CALCULATOR_TITLE_MODEL = "Sophia as all-attention"

#: The toy decoding of the generation-step panel: one head, keys and values of width 4.
DECODE_STEPS, DECODE_WIDTH = 8, 4


def draw_recompute(fig: Figure, n_steps: int = 8) -> None:
    """Which key/value rows each generation step computes, without and with a KV cache.

    Row t (generation step) × column j (token position): computed at this step, read from the
    cache, or not generated yet. Titles give the totals of ``decode_total_work``.
    """
    n = check_int_in("n_steps", n_steps, 1, 64)
    colours = ListedColormap(["#FFFFFF", PALETTE[4], PALETTE[1]])
    axes = fig.subplots(1, 2, sharey=True)
    for ax, cached in zip(axes, (False, True), strict=True):
        grid = [[0] * n for _ in range(n)]
        for t in range(n):
            for j in range(t + 1):
                grid[t][j] = 2 if (j == t or not cached) else 1
        ax.imshow(grid, cmap=colours, vmin=0, vmax=2, aspect="equal")
        ax.set_xticks(
            range(n), [str(j + 1) for j in range(n)] if n <= 16 else None
        )
        ax.set_yticks(
            range(n), [str(t + 1) for t in range(n)] if n <= 16 else None
        )
        if n > 16:
            ax.set_xticks([0, n - 1], ["1", str(n)])
            ax.set_yticks([0, n - 1], ["1", str(n)])
        ax.set_xticks([x - 0.5 for x in range(1, n)], minor=True)
        ax.set_yticks([y - 0.5 for y in range(1, n)], minor=True)
        ax.grid(which="minor", color="#BBBBBB", linewidth=0.5)
        ax.grid(which="major", visible=False)
        ax.tick_params(which="minor", length=0)
        rows, _ = decode_total_work(n, cached=cached)
        if cached:
            reads = decode_total_work(n, cached=False)[0] - rows
            ax.set_title(
                tr(
                    "with a KV cache:\n{rows} K/V rows computed, {reads} read",
                    rows=rows,
                    reads=reads,
                )
            )
        else:
            ax.set_title(
                tr("without a cache:\n{rows} K/V rows computed", rows=rows)
            )
        ax.set_xlabel(tr("token position j of the key/value row"))
    axes[0].set_ylabel(tr("generation step t (token being generated)"))
    fig.legend(
        handles=[
            Patch(facecolor=PALETTE[1], label=tr("computed at this step")),
            Patch(facecolor=PALETTE[4], label=tr("read from the cache")),
            Patch(
                facecolor="#FFFFFF",
                edgecolor="#BBBBBB",
                label=tr("not generated yet"),
            ),
        ],
        loc="outside lower center",
        ncols=3,
    )


def decode_toy(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """q, k, v ``[DECODE_STEPS, DECODE_WIDTH]`` of the generation-step panel (float64)."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(
            DECODE_STEPS, DECODE_WIDTH, generator=gen, dtype=torch.float64
        )
        for _ in range(3)
    )


def draw_decode_step(fig: Figure, step: int) -> None:
    """Generation step ``step`` of a toy head: the K and V caches after the step appended row
    t (outlined), and the new query's weights softmax(K_{1:t} q_t / √d) over the t cached rows.
    The title gives the bytes held in float32, 2 · t · d · 4."""
    t = check_int_in("step", step, 1, DECODE_STEPS)
    q, k, v = decode_toy()
    weights = torch.softmax(k[:t] @ q[t - 1] / DECODE_WIDTH**0.5, dim=0)
    axes = fig.subplots(
        1, 3, sharey=True, gridspec_kw={"width_ratios": (1, 1, 1.6)}
    )
    limit = float(torch.cat([k, v]).abs().max())
    for ax, cache, name in zip(axes[:2], (k, v), ("K", "V"), strict=True):
        shown = cache.clone()
        shown[t:] = float("nan")  # rows not generated yet: blank
        ax.imshow(
            shown.numpy(), cmap="PuOr", vmin=-limit, vmax=limit, aspect="auto"
        )
        ax.add_patch(
            Rectangle(
                (-0.5, t - 1.5),
                DECODE_WIDTH,
                1,
                fill=False,
                edgecolor=PALETTE[5],
                linewidth=2.5,
            )
        )
        ax.set_xticks([])
        ax.grid(False)
        ax.set_xlabel(
            tr(
                "{name} cache\n({width} numbers a row)",
                name=name,
                width=DECODE_WIDTH,
            )
        )
    axes[0].set_yticks(
        range(DECODE_STEPS), [str(j + 1) for j in range(DECODE_STEPS)]
    )
    axes[0].set_ylabel(tr("token j"))
    bars = axes[2]
    bars.barh(range(t), weights.numpy(), color=PALETTE[0], height=0.7)
    bars.set_xlim(0, 1)
    bars.set_ylim(DECODE_STEPS - 0.5, -0.5)
    bars.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
    bars.set_xlabel(tr("weight of token j\nfor query q_{t}", t=t))
    bars.grid(True, axis="x", alpha=0.3)
    held = 2 * t * DECODE_WIDTH * BYTES_PER_ELEMENT["fp32"]
    fig.suptitle(
        tr(
            "Step {t}: row {t} appended (outlined), {t} rows read;\n"
            "the cache holds {held:,} bytes (fp32)",
            t=t,
            held=held,
        )
        if t > 1
        else tr(
            "Step {t}: row {t} appended (outlined), {t} row read;\n"
            "the cache holds {held:,} bytes (fp32)",
            t=t,
            held=held,
        )
    )


def decode_step_alt(step: int) -> str:
    """The alt text of the generation-step panel at ``step``, with its numbers."""
    t = check_int_in("step", step, 1, DECODE_STEPS)
    q, k, _ = decode_toy()
    weights = torch.softmax(k[:t] @ q[t - 1] / DECODE_WIDTH**0.5, dim=0)
    held = 2 * t * DECODE_WIDTH * BYTES_PER_ELEMENT["fp32"]
    listed = ", ".join(f"{w:.2f}" for w in weights.tolist())
    return tr(
        "Generation step {t} of {steps}: two colour grids, the K and V caches, "
        "with {t} filled rows of {width} numbers and row {t} outlined as just "
        "appended; the rows below are empty. Beside them, bars of the new query's "
        "weights over tokens 1 to {t}: {listed}. Title: the cache holds {held:,} bytes.",
        t=t,
        steps=DECODE_STEPS,
        width=DECODE_WIDTH,
        listed=listed,
        held=held,
    )


def draw_step_times(
    fig: Figure,
    contexts: Sequence[int],
    cached_seconds: Sequence[float],
    uncached_seconds: Sequence[float],
    threads: int = 1,
) -> None:
    """Measured milliseconds per generated token against the context length (log–log), with and
    without a cache, and faint guides of slope 1 (∝ T) and 2 (∝ T²) through the last points."""
    if len(contexts) < 2:
        raise ValueError(
            f"contexts: expected at least 2 context lengths, got {len(contexts)}"
        )
    for name, values in [
        ("cached_seconds", cached_seconds),
        ("uncached_seconds", uncached_seconds),
    ]:
        if len(values) != len(contexts):
            raise ValueError(
                f"{name}: expected {len(contexts)} timings (one per context), "
                f"got {len(values)}"
            )
        if any(not s > 0 for s in values):
            raise ValueError(
                f"{name}: expected positive seconds, got {list(values)}"
            )
    ax = fig.subplots()
    ms_cached = [s * 1e3 for s in cached_seconds]
    ms_uncached = [s * 1e3 for s in uncached_seconds]
    ax.plot(
        contexts,
        ms_uncached,
        marker="o",
        color=PALETTE[5],
        label=tr("without a cache (measured)"),
    )
    ax.plot(
        contexts,
        ms_cached,
        marker="s",
        color=PALETTE[0],
        label=tr("with a KV cache (measured)"),
    )
    last, first = contexts[-1], contexts[0]
    middle = (first * last) ** 0.5
    for values, power, label in [
        (ms_uncached, 2, tr("slope 2: ∝ T²")),
        (ms_cached, 1, tr("slope 1: ∝ T")),
    ]:
        guide = [values[-1] * (c / last) ** power for c in (first, last)]
        ax.plot(
            (first, last), guide, linestyle=":", color="#777777", linewidth=1
        )
        ax.annotate(
            label,
            (middle, values[-1] * (middle / last) ** power),
            textcoords="offset points",
            xytext=(6, -10),
            color="#555555",
            fontsize=SMALL_TEXT_PT,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(contexts), [f"{c:,}" for c in contexts])
    ax.minorticks_off()
    ratio = uncached_seconds[-1] / cached_seconds[-1]
    style_axes(
        ax,
        tr("context T (tokens in the sequence)"),
        tr("time per generated token (ms)"),
        tr(
            "One attention layer, measured on this CPU ({threads} thread). "
            "At T = {last:,}:\n{cached:.2f} ms with a cache, {uncached:,.1f} ms "
            "without ({ratio:,.0f}×)",
            threads=threads,
            last=last,
            cached=ms_cached[-1],
            uncached=ms_uncached[-1],
            ratio=ratio,
        ),
    )
    ax.legend(loc="upper left")


def _calculator_label(name: str, model: ModelConfig, dtype: str) -> str:
    """The legend entry of one model: its bytes per token as a product, plus its fixed state."""
    width = BYTES_PER_ELEMENT[dtype]
    one = cache_breakdown(model, 1, dtype=dtype)
    per_token = (
        cache_breakdown(model, 2, dtype=dtype).cache_bytes - one.cache_bytes
    )
    if not model.count("mla") and one.total_bytes == one.cache_bytes:
        return tr(
            "{name}: 2 × {layers} × {kv_heads} × {head_dim} × {width} B = "
            "{per_token:,} B per token",
            name=tr(name),
            layers=model.n_layers,
            kv_heads=model.n_kv_heads,
            head_dim=model.head_dim,
            width=width,
            per_token=per_token,
        )
    fixed = one.total_bytes - one.cache_bytes
    fixed_text = format_bytes(fixed).split(" (")[0]
    return tr(
        "{name}: {per_token:,} B per token + {fixed} fixed (states, conv inputs)",
        name=tr(name),
        per_token=per_token,
        fixed=fixed_text,
    )


def _calculator_config(preset: object) -> ModelConfig:
    if preset not in CALCULATOR_MODELS:
        raise ValueError(
            f"preset: expected one of {list(CALCULATOR_MODELS)}, got {preset!r}"
        )
    return CALCULATOR_MODELS[preset]


def cache_calculator_alt(context: int, dtype: str) -> str:
    """The alt text of a calculator frame, with its numbers."""
    # the names of the models and the separator between them, each in the reader's language
    sizes = tr("; ").join(
        f"{tr(name)} {format_bytes(cache_breakdown(m, context, dtype=dtype).total_bytes)}"
        for name, m in CALCULATOR_MODELS.items()
    )
    return tr(
        "Straight lines of the memory one sequence keeps, in GiB, against context "
        "length up to 128k tokens for three models in {dtype}; Sophia as built "
        "starts above zero (its fixed states) and rises slowly. Dots mark "
        "{context:,} tokens: {sizes}. A dashed line marks 24 GiB; the legend "
        "gives each model's bytes per token.",
        dtype=dtype,
        context=context,
        sizes=sizes,
    )


def draw_cache_calculator(
    fig: Figure,
    context: int,
    dtype: str,
    preset: str = CALCULATOR_TITLE_MODEL,
) -> None:
    """Bytes one sequence (batch 1) keeps against the context, for a model and a dtype.

    Each model's line is ``memory.cache_breakdown``'s total: for all-attention models the KV
    cache, 2 · L · H_kv · D · T · bytes per element; for Sophia as built the MLA layers' latent
    cache, which grows with T, on top of the KDA layers' fixed states and convolution inputs.
    Every model keeps its colour in every frame (``preset`` bold), its per-token product in
    the legend; a dot on every line marks ``context``, and the title gives ``preset``'s size
    there in MB and MiB; the dashed line is 24 GiB.
    """
    config = _calculator_config(preset)
    if (
        isinstance(context, bool)
        or not isinstance(context, int)
        or context < 1
    ):
        raise ValueError(
            f"context: expected a positive number of tokens, got {context!r}"
        )
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(
            f"dtype: expected one of {list(BYTES_PER_ELEMENT)}, got {dtype!r}"
        )
    chosen = cache_breakdown(config, context, dtype=dtype).total_bytes
    t_max = max(_CONTEXT_TICKS[-1], context)
    ax = fig.subplots()
    top = BUDGET_BYTES
    for i, (name, model) in enumerate(CALCULATOR_MODELS.items()):
        at_max = cache_breakdown(model, t_max, dtype=dtype).total_bytes
        fixed = (
            at_max - cache_breakdown(model, t_max, dtype=dtype).cache_bytes
        )
        top = max(top, at_max)
        # one colour per model in every frame; the chosen one bold
        mine = name == preset
        ax.plot(
            (0, t_max),
            (fixed / GIB, at_max / GIB),
            color=_MODEL_COLOURS[i],
            alpha=1.0 if mine else 0.45,
            linewidth=2.5 if mine else 1.5,
            label=_calculator_label(name, model, dtype),
        )
    ax.axhline(
        BUDGET_BYTES / GIB, color=PALETTE[5], linestyle="--", linewidth=1
    )
    ax.annotate(
        tr("{gib:g} GiB: a large consumer GPU", gib=BUDGET_BYTES / GIB),
        (t_max, BUDGET_BYTES / GIB),
        textcoords="offset points",
        xytext=(-4, 4),
        ha="right",
        color=PALETTE[5],
        fontsize=SMALL_TEXT_PT,
    )
    for i, model in enumerate(CALCULATOR_MODELS.values()):
        here = cache_breakdown(model, context, dtype=dtype).total_bytes
        ax.plot(
            [context],
            [here / GIB],
            marker="o",
            ms=8,
            color=_MODEL_COLOURS[i],
            markeredgecolor="black",
            zorder=5,
        )
    ax.set_xticks(
        list(_CONTEXT_TICKS), [context_label(t) for t in _CONTEXT_TICKS]
    )
    ax.set_xlim(0, t_max * 1.02)
    ax.set_ylim(0, top / GIB * 1.12)
    style_axes(
        ax,
        tr("context T (tokens)"),
        tr("one sequence keeps (GiB)"),
        tr(
            "{model}, T = {context:,}, {dtype}:\n{size}",
            model=tr(preset),
            context=context,
            dtype=dtype,
            size=format_bytes(chosen),
        ),
    )
    fig.legend(loc="outside lower center", ncols=1)
