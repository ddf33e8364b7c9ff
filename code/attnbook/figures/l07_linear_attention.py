"""Figures of Lesson 7 (linear attention): the cache against the state, memory against context."""

from __future__ import annotations

import functools

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullLocator

from attnlab.checks import check_choice, check_int_in
from attnlab.configs import SOPHIA
from attnlab.i18n import tr
from attnlab.linear import linear_attention_recurrent
from attnlab.memory import BYTES_PER_ELEMENT, format_bytes

from ..demos.calculators import (
    ALL_ATTENTION,
    ALL_LINEAR,
    AS_BUILT,
    MEMORY_MODELS,
    memory_at,
)
from ..demos.linear_state import DEMO_DIM, DEMO_STEPS, demo_stream
from ..plotting import (
    DIVERGING_CMAP,
    PALETTE,
    SMALL_TEXT_PT,
    context_label,
    heatmap,
    plain_log_yaxis,
    style_axes,
    title_at_top,
)

_MEMORY_T_MIN, _MEMORY_T_MAX = 16, 2**20


def legend_label(name: str, size: str) -> str:
    """The memory panel's legend entry ``"{name}: {size}"`` of the model ``name`` (a key of
    ``MEMORY_MODELS``), in the reader's language."""
    if name == ALL_ATTENTION:
        return tr(
            "all {n} layers softmax attention (KV cache): {size}",
            n=SOPHIA.n_layers,
            size=size,
        )
    if name == ALL_LINEAR:
        return tr(
            "all {n} layers linear attention (state): {size}",
            n=SOPHIA.n_layers,
            size=size,
        )
    if name == AS_BUILT:
        return tr(
            "Sophia as built: {kda} KDA + {mla} MLA: {size}",
            kda=SOPHIA.count("kda"),
            mla=SOPHIA.count("mla"),
            size=size,
        )
    raise ValueError(f"name: expected one of {list(MEMORY_MODELS)}, got {name!r}")


def cache_and_state_alt(t: int) -> str:
    """The alt text of a frame of the cache-and-state panel after ``t`` tokens."""
    return tr(
        "Left: a KV cache with {t} filled rows of keys and values in a frame of "
        "{rows} rows. Right: an {d}-by-{d} heat map of the state S after {t} tokens, "
        "the same size at every t.",
        t=t,
        rows=DEMO_STEPS,
        d=DEMO_DIM,
    )


def memory_vs_context_alt(context: int) -> str:
    """The alt text of a frame of the memory panel at ``context`` tokens (bf16)."""
    return tr(
        "Log-log plot of memory kept while decoding against context length from 16 "
        "to 1M tokens, bf16: the all-attention KV cache rises steeply, the "
        "all-linear-attention state is a flat line, Sophia as built rises slowly; "
        "dots at {context:,} tokens: all {n} layers softmax attention (KV cache) "
        "{attn}, all {n} layers linear attention (state) {linear}.",
        context=context,
        n=SOPHIA.n_layers,
        attn=format_bytes(memory_at(ALL_ATTENTION, context, "bf16")),
        linear=format_bytes(memory_at(ALL_LINEAR, context, "bf16")),
    )


def draw_cache_and_state(fig: Figure, t: int = 6) -> None:
    """After t tokens of a toy stream: the KV cache (t rows of [φ(k) | v], growing) next to the
    linear-attention state S_t = Σ_{i≤t} φ(k_i) v_iᵀ (``dim × dim``, fixed), on one colour scale
    per panel for every t so that the reader sees the state fill up."""
    t = check_int_in("t", t, 1, DEMO_STEPS)
    k, v = demo_stream()
    _, state = linear_attention_recurrent(
        k[:, :, :t],
        k[:, :, :t],
        v[:, :, :t],
        scale=1.0,
        output_final_state=True,
    )
    _, full = linear_attention_recurrent(
        k, k, v, scale=1.0, output_final_state=True
    )
    d = DEMO_DIM
    ax_cache, ax_state = fig.subplots(1, 2, width_ratios=[1.15, 1])
    rows = torch.full((DEMO_STEPS, 2 * d), float("nan"), dtype=torch.float64)
    rows[:t, :d], rows[:t, d:] = k[0, 0, :t], v[0, 0, :t]
    limit = float(torch.cat([k, v], -1).abs().max())
    heatmap(
        ax_cache,
        rows,
        xlabel=tr("cached numbers: φ(k_i) (left) | v_i (right)"),
        ylabel=tr("token i"),
        cmap=DIVERGING_CMAP,
        vmin=-limit,
        vmax=limit,
        colorbar_label=tr("cached number"),
    )
    title_at_top(
        ax_cache,
        tr(
            "KV cache after t = {t} tokens:\n2 × {t} × {d} = {n} numbers (grows)",
            t=t,
            d=d,
            n=2 * t * d,
        ),
    )
    ax_cache.axvline(d - 0.5, color="black", linewidth=1)
    ax_cache.add_patch(
        Rectangle(
            (-0.5, -0.5),
            2 * d,
            DEMO_STEPS,
            fill=False,
            linestyle=":",
            edgecolor="#999999",
        )
    )
    ax_cache.set_yticks(
        range(0, DEMO_STEPS, 3), [str(i + 1) for i in range(0, DEMO_STEPS, 3)]
    )
    ax_cache.set_xticks([])
    s_limit = float(full.abs().max())
    heatmap(
        ax_state,
        state[0, 0],
        xlabel=tr("value channel (column of S)"),
        ylabel=tr("key channel (row of S)"),
        cmap=DIVERGING_CMAP,
        vmin=-s_limit,
        vmax=s_limit,
        colorbar_label=tr("entry of S"),
    )
    title_at_top(
        ax_state,
        tr(
            "state S_{t}, sums i ≤ {t}:\n{d} × {d} = {n} numbers (fixed)",
            t=t,
            d=d,
            n=d * d,
        ),
    )
    ax_state.set_xticks([])
    ax_state.set_yticks([])


@functools.cache
def _memory_curve(
    name: str, dtype: str, contexts: tuple[int, ...]
) -> tuple[int, ...]:
    """``memory_at(name, T, dtype)`` for each T of ``contexts``, computed once per argument set
    (the memory panel redraws the same curves at every slider move)."""
    return tuple(memory_at(name, c, dtype) for c in contexts)


def draw_memory_vs_context(
    fig: Figure, context: int = 4096, dtype: str = "bf16"
) -> None:
    """What Sophia keeps while decoding one sequence, against the context (log–log): with all 28
    layers as softmax attention (the KV cache grows), as linear attention (a fixed state), and
    as built (21 KDA states plus 7 MLA caches). The dots mark ``context``; the legend gives the
    bytes there in MB and MiB. Everything in ``dtype``, batch 1."""
    context = check_int_in("context", context, 1, _MEMORY_T_MAX)
    dtype = check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    ax = fig.subplots()
    contexts = tuple(2**e for e in range(4, 21))
    mib = 2**20
    plotted, dots = [], []
    for i, name in enumerate(MEMORY_MODELS):
        values = [b / mib for b in _memory_curve(name, dtype, contexts)]
        plotted += values
        chosen = memory_at(name, context, dtype)
        style = dict(
            color=PALETTE[i],
            linewidth=2.5 if i < 2 else 1.5,
            linestyle="-" if i < 2 else "--",
        )
        ax.plot(
            contexts,
            values,
            **style,
            label=legend_label(name, format_bytes(chosen)),
        )
        dots.append(chosen / mib)
    # the three dots as one artist: a scatter with one colour per model
    ax.scatter(
        [context] * len(dots), dots, s=64, c=PALETTE[: len(dots)], zorder=5
    )
    ax.axvline(context, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xscale("log", base=2)
    ticks = [16, 256, 4096, 65536, 2**20]
    ax.set_xticks(ticks, [context_label(c) for c in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    plain_log_yaxis(ax, plotted, mantissas=(1,))
    ax.set_xlim(_MEMORY_T_MIN, _MEMORY_T_MAX)
    style_axes(
        ax,
        tr("context T (tokens in the sequence)"),
        tr("memory kept, batch 1 (MiB, log scale)"),
    )
    title_at_top(
        ax,
        tr(
            "Sophia while decoding, T = {context:,} tokens, {dtype} "
            "({width} B per number)",
            context=context,
            dtype=dtype,
            width=BYTES_PER_ELEMENT[dtype],
        ),
    )
    ax.legend(loc="upper left", fontsize=SMALL_TEXT_PT)
