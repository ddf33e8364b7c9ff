"""Figures for Lessons 7 and 8: linear attention's state, its memory, and its three forms."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence

import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import NullLocator

from .._checks import check_int_in
from ..linear import LINEAR_FORMS, elu_plus_one, linear_attention_cost, linear_attention_recurrent
from ..memory import BYTES_PER_ELEMENT, as_all_attention, cache_breakdown, format_bytes
from ..model import SOPHIA, ModelConfig
from ..plotting import (
    DIVERGING_CMAP,
    PALETTE,
    heatmap,
    light_xticks,
    style_axes,
    text_legend,
    title_at_top,
)

# --------------------------------------------------------------------------- Lesson 7

#: The toy stream of the "cache against state" panel: tokens shown and width of k and v.
DEMO_STEPS = 16
DEMO_DIM = 8


def as_all_linear(config: ModelConfig) -> ModelConfig:
    """The same model with every layer as (normalised) linear attention: the fixed-state
    counterpart of :func:`attnlab.memory.as_all_attention`."""
    return dataclasses.replace(
        config,
        name=f"{config.name} (all linear attention)",
        layer_pattern=("linear",) * config.n_layers,
        mla=None,
        notes=(f"Every one of the {config.n_layers} layers of {config.name} as linear attention "
               f"with {config.n_heads} heads, state {config.head_dim} x {config.head_dim}."),
    )


#: The memory panel's three models, by their legend labels.
ALL_ATTENTION = f"all {SOPHIA.n_layers} layers softmax attention (KV cache)"
ALL_LINEAR = f"all {SOPHIA.n_layers} layers linear attention (state)"
AS_BUILT = f"Sophia as built: {SOPHIA.count('kda')} KDA + {SOPHIA.count('mla')} MLA"
MEMORY_MODELS: dict[str, ModelConfig] = {
    ALL_ATTENTION: as_all_attention(SOPHIA),
    ALL_LINEAR: as_all_linear(SOPHIA),
    AS_BUILT: SOPHIA,
}

_MEMORY_T_MIN, _MEMORY_T_MAX = 16, 2**20


def demo_stream(steps: int = DEMO_STEPS, dim: int = DEMO_DIM, seed: int = 0):
    """The toy stream: feature-mapped keys φ(k) ``[1, 1, steps, dim]`` (φ = elu + 1) and values
    v ``[1, 1, steps, dim]``, float64, from a fixed seed."""
    g = torch.Generator().manual_seed(seed)
    k = elu_plus_one(torch.randn(1, 1, steps, dim, generator=g, dtype=torch.float64))
    v = torch.randn(1, 1, steps, dim, generator=g, dtype=torch.float64)
    return k, v



def _log_axis(ax, values: Sequence[float], mantissas: Sequence[int] = (1, 2, 5),
              max_ticks: int | None = None) -> None:
    """Log-scaled y axis over ``values`` with explicit ticks m·10^k (m in ``mantissas``) and
    plain labels: cheaper to render than matplotlib's log locator, and easier to read. With
    ``max_ticks``, the last mantissas are dropped while there would be more ticks than that
    (each tick costs ~2 ms of a slider frame)."""
    lo, hi = min(values) / 1.4, max(values) * 1.4
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for n in range(len(mantissas), 0, -1):
        ticks = [m * 10.0**e for e in decades for m in mantissas[:n] if lo <= m * 10.0**e <= hi]
        if max_ticks is None or len(ticks) <= max_ticks:
            break
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.set_yticks(ticks, [f"{t:,g}" for t in ticks])
    ax.yaxis.set_minor_locator(NullLocator())


def draw_cache_and_state(fig: Figure, t: int = 6) -> None:
    """After t tokens of a toy stream: the KV cache (t rows of [φ(k) | v], growing) next to the
    linear-attention state S_t = Σ_{i≤t} φ(k_i) v_iᵀ (``dim × dim``, fixed), on one colour scale
    per panel for every t so that the reader sees the state fill up."""
    t = check_int_in("t", t, 1, DEMO_STEPS)
    k, v = demo_stream()
    _, state = linear_attention_recurrent(k[:, :, :t], k[:, :, :t], v[:, :, :t], scale=1.0,
                                          output_final_state=True)
    _, full = linear_attention_recurrent(k, k, v, scale=1.0, output_final_state=True)
    d = DEMO_DIM
    ax_cache, ax_state = fig.subplots(1, 2, width_ratios=[1.15, 1])
    rows = torch.full((DEMO_STEPS, 2 * d), float("nan"), dtype=torch.float64)
    rows[:t, :d], rows[:t, d:] = k[0, 0, :t], v[0, 0, :t]
    limit = float(torch.cat([k, v], -1).abs().max())
    heatmap(ax_cache, rows, xlabel="cached numbers: φ(k_i) (left) | v_i (right)",
            ylabel="token i", cmap=DIVERGING_CMAP, vmin=-limit, vmax=limit)
    title_at_top(ax_cache, f"KV cache after t = {t} tokens:\n2 × {t} × {d} = {2 * t * d} numbers "
                           "(grows)")
    ax_cache.axvline(d - 0.5, color="black", linewidth=1)
    ax_cache.add_patch(Rectangle((-0.5, -0.5), 2 * d, DEMO_STEPS, fill=False, linestyle=":",
                                 edgecolor="#999999"))
    ax_cache.set_yticks(range(0, DEMO_STEPS, 3), [str(i + 1) for i in range(0, DEMO_STEPS, 3)])
    ax_cache.set_xticks([])
    s_limit = float(full.abs().max())
    heatmap(ax_state, state[0, 0], xlabel="value channel (column of S)",
            ylabel="key channel (row of S)", cmap=DIVERGING_CMAP, vmin=-s_limit, vmax=s_limit)
    title_at_top(ax_state, f"state S_{t} = Σ φ(k_i) v_iᵀ (i ≤ {t}):\n{d} × {d} = {d * d} numbers "
                           "(fixed)")
    ax_state.set_xticks([])
    ax_state.set_yticks([])


def _check_dtype(dtype: object) -> str:
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"dtype: expected one of {list(BYTES_PER_ELEMENT)}, got {dtype!r}")
    return dtype


def memory_at(name: str, context: int, dtype: str) -> int:
    """Total bytes kept while decoding (cache + state + conv inputs), batch 1, of the memory
    panel's model ``name`` after ``context`` tokens, everything in ``dtype``."""
    if name not in MEMORY_MODELS:
        raise ValueError(f"name: expected one of {list(MEMORY_MODELS)}, got {name!r}")
    return cache_breakdown(MEMORY_MODELS[name], context, dtype=_check_dtype(dtype)).total_bytes


def context_label(tokens: int) -> str:
    """1024 → "1k", 1048576 → "1M", 100 → "100"."""
    if tokens >= 2**20 and tokens % 2**20 == 0:
        return f"{tokens // 2**20}M"
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else f"{tokens}"


@functools.cache
def _memory_curve(name: str, dtype: str, contexts: tuple[int, ...]) -> tuple[int, ...]:
    """``memory_at(name, T, dtype)`` for each T of ``contexts``, computed once per argument set
    (the memory panel redraws the same curves at every slider move)."""
    return tuple(memory_at(name, c, dtype) for c in contexts)


def draw_memory_vs_context(fig: Figure, context: int = 4096, dtype: str = "bf16") -> None:
    """What Sophia keeps while decoding one sequence, against the context (log–log): with all 28
    layers as softmax attention (the KV cache grows), as linear attention (a fixed state), and
    as built (21 KDA states plus 7 MLA caches). The dots mark ``context``; the legend gives the
    bytes there in MB and MiB. Everything in ``dtype``, batch 1."""
    context = check_int_in("context", context, 1, _MEMORY_T_MAX)
    dtype = _check_dtype(dtype)
    ax = fig.subplots()
    contexts = tuple(2**e for e in range(4, 21))
    mib = 2**20
    plotted, dots = [], []
    for i, name in enumerate(MEMORY_MODELS):
        values = [b / mib for b in _memory_curve(name, dtype, contexts)]
        plotted += values
        chosen = memory_at(name, context, dtype)
        style = dict(color=PALETTE[i], linewidth=2.5 if i < 2 else 1.5,
                     linestyle="-" if i < 2 else "--")
        ax.plot(contexts, values, **style, label=f"{name}: {format_bytes(chosen)}")
        dots.append(chosen / mib)
    # the three dots as one artist: a scatter with one colour per model
    ax.scatter([context] * len(dots), dots, s=64, c=PALETTE[:len(dots)], zorder=5)
    ax.axvline(context, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xscale("log", base=2)
    ticks = [16, 256, 4096, 65536, 2**20]
    ax.set_xticks(ticks, [context_label(c) for c in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    _log_axis(ax, plotted, mantissas=(1,))
    ax.set_xlim(_MEMORY_T_MIN, _MEMORY_T_MAX)
    style_axes(ax, "context T (tokens in the sequence)", "memory kept, batch 1 (MiB, log scale)")
    title_at_top(ax, f"Sophia while decoding, T = {context:,} tokens, {dtype} "
                     f"({BYTES_PER_ELEMENT[dtype]} B per number)")
    ax.legend(loc="upper left", fontsize=8)


# --------------------------------------------------------------------------- Lesson 8

_CELL_COLOURS = ListedColormap(["#FFFFFF", PALETTE[1], PALETTE[4]])  # masked, explicit, state


def draw_three_forms(fig: Figure, length: int = 12, chunk_size: int = 4) -> None:
    """Where each query–key pair (i, j ≤ i) is handled, in the three forms: as an explicit score
    of a T × T (parallel) or C × C (chunkwise, diagonal blocks) matrix, or through the state
    (recurrent: every pair; chunkwise: pairs in earlier chunks, via S_[n])."""
    t = check_int_in("length", length, 2, 64)
    c = check_int_in("chunk_size", chunk_size, 1, t)
    axes = fig.subplots(1, 3, sharey=True)
    titles = ("parallel: one masked\nT × T product, 1 step",
              f"recurrent: T = {t} steps,\neach through S_t",
              f"chunkwise (C = {c}): N = {-(-t // c)} steps,\nC × C blocks + S_[n]")
    for form, ax, title in zip(LINEAR_FORMS, axes, titles, strict=True):
        grid = [[0] * t for _ in range(t)]
        for i in range(t):
            for j in range(i + 1):
                if form == "parallel":
                    grid[i][j] = 1
                elif form == "recurrent":
                    grid[i][j] = 2
                else:
                    grid[i][j] = 1 if i // c == j // c else 2
        ax.imshow(grid, cmap=_CELL_COLOURS, vmin=0, vmax=2, aspect="equal")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key position j")
        ax.set_xticks([0, t - 1], ["1", str(t)])
        ax.set_yticks([0, t - 1], ["1", str(t)])
        ax.grid(False)
        if form == "chunk":
            for b in range(c, t, c):
                ax.axhline(b - 0.5, color="#555555", linewidth=0.8)
                ax.axvline(b - 0.5, color="#555555", linewidth=0.8)
    axes[0].set_ylabel("query position i")
    fig.legend(handles=[Patch(facecolor=PALETTE[1], label="explicit score q_iᵀk_j in a matrix"),
                        Patch(facecolor=PALETTE[4], label="folded into the state S"),
                        Patch(facecolor="#FFFFFF", edgecolor="#BBBBBB", label="masked (j > i)")],
               loc="outside lower center", ncols=3)


def _check_timings(lengths: Sequence[int], seconds: Mapping[str, Sequence[float]]) -> None:
    if len(lengths) < 2:
        raise ValueError(f"lengths: expected at least 2 sequence lengths, got {len(lengths)}")
    if set(seconds) != set(LINEAR_FORMS):
        raise ValueError(f"seconds: expected timings for {list(LINEAR_FORMS)}, got {list(seconds)}")
    for form, values in seconds.items():
        if len(values) != len(lengths):
            raise ValueError(f"seconds: expected {len(lengths)} timings for {form!r} (one per "
                             f"length), got {len(values)}")
        if any(not s > 0 for s in values):
            raise ValueError(f"seconds: expected positive seconds for {form!r}, got {list(values)}")


def crossing(lengths: Sequence[int], slower_first: Sequence[float],
             slower_later: Sequence[float]) -> float | None:
    """The length at which the curve ``slower_later`` (faster at the shortest length) becomes
    slower than ``slower_first``, interpolated on log–log axes; None if it never does, and the
    first length if it already is from the start. Used for "where the measured curves cross"."""
    for i, (a, b) in enumerate(zip(slower_first, slower_later, strict=True)):
        if b >= a:
            if i == 0:
                return float(lengths[0])
            r0 = math.log(slower_later[i - 1] / slower_first[i - 1])
            r1 = math.log(b / a)
            x0, x1 = math.log(lengths[i - 1]), math.log(lengths[i])
            return math.exp(x0 + (x1 - x0) * (0 - r0) / (r1 - r0)) if r1 != r0 else lengths[i]
    return None


_FORM_STYLE = {"parallel": (PALETTE[5], "o"), "recurrent": (PALETTE[0], "s"),
               "chunk": (PALETTE[2], "^")}
_FORM_LABEL = {"parallel": "parallel", "recurrent": "recurrent", "chunk": "chunkwise"}


def draw_form_times(fig: Figure, lengths: Sequence[int], seconds: Mapping[str, Sequence[float]],
                    chunk_size: int = 64, threads: int = 1) -> None:
    """Measured milliseconds of the three forms against the sequence length (log–log), with the
    point where the parallel form becomes slower than the recurrent one marked, if it does."""
    _check_timings(lengths, seconds)
    ax = fig.subplots()
    for form in LINEAR_FORMS:
        colour, marker = _FORM_STYLE[form]
        label = _FORM_LABEL[form] + (f" (C = {chunk_size})" if form == "chunk" else "")
        ax.plot(lengths, [s * 1e3 for s in seconds[form]], marker=marker, color=colour,
                label=label)
    cross = crossing(lengths, seconds["recurrent"], seconds["parallel"])
    if cross is not None:
        ax.axvline(cross, color="#777777", linestyle=":", linewidth=1)
        ax.annotate(f"parallel = recurrent\nnear T ≈ {cross:,.0f}", (cross, ax.get_ylim()[0]),
                    textcoords="offset points", xytext=(-6, 8), ha="right", fontsize=8,
                    color="#555555")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(lengths), [f"{t:,}" for t in lengths])
    ax.minorticks_off()
    last = lengths[-1]
    speed = seconds["recurrent"][-1] / seconds["chunk"][-1]
    style_axes(ax, "sequence length T (tokens)", "time for the whole sequence (ms)",
               f"One head, d = 64, float32, {threads} CPU thread, measured. At T = {last:,}\n"
               f"chunkwise is {speed:,.0f}× faster than recurrent, "
               f"{seconds['parallel'][-1] / seconds['chunk'][-1]:,.0f}× faster than parallel")
    ax.legend(loc="upper left")


def draw_chunk_size(fig: Figure, chunk_size: int, length: int,
                    chunk_seconds: Mapping[tuple[int, int], float],
                    form_seconds: Mapping[tuple[int, str], float], head_dim: int = 64) -> None:
    """The chunk size C between the two extremes, for a sequence of ``length`` tokens: the FLOP
    model of ``linear_attention_cost`` (left, MFLOP for one head of ``head_dim``) and the
    measured time (right, ms) against C, log–log, with the parallel and recurrent forms as
    dashed horizontal lines and the chosen C marked.

    ``chunk_seconds[(T, C)]`` and ``form_seconds[(T, form)]`` are measurements in seconds taken
    when the notebook ran (a static page cannot measure); ``chunk_size`` and ``length`` must be
    among them.
    """
    sizes = sorted(c for (t, c) in chunk_seconds if t == length)
    if not sizes:
        lengths = sorted({t for t, _ in chunk_seconds})
        raise ValueError(f"length: expected one of the measured lengths {lengths}, got {length!r}")
    if chunk_size not in sizes:
        raise ValueError(f"chunk_size: expected one of the measured sizes {sizes} for "
                         f"T = {length}, got {chunk_size!r}")
    if chunk_size > length:
        raise ValueError(f"chunk_size: C = {chunk_size} is longer than the sequence T = {length}")
    for form in ("parallel", "recurrent"):
        if (length, form) not in form_seconds:
            raise ValueError(f"form_seconds: no measurement of the {form} form at T = {length}")
    d = head_dim
    ax_flops, ax_time = fig.subplots(1, 2)
    cost = {c: linear_attention_cost("chunk", length, d, c) for c in sizes}
    mflops = {c: cost[c].flops / 1e6 for c in sizes}
    forms = ("parallel", "recurrent")
    form_mflops = {f: linear_attention_cost(f, length, d).flops / 1e6 for f in forms}
    ms = {c: chunk_seconds[(length, c)] * 1e3 for c in sizes}
    form_ms = {f: form_seconds[(length, f)] * 1e3 for f in forms}
    x_range = (sizes[0] / 1.4, sizes[-1] * 1.4)  # the log axis's margins, a third of an octave
    for ax, chunk, extremes in ((ax_flops, mflops, form_mflops), (ax_time, ms, form_ms)):
        ax.plot(sizes, [chunk[c] for c in sizes], marker="^", color=PALETTE[2])
        ax.hlines([extremes[f] for f in forms], *x_range, linestyles="--",
                  colors=[_FORM_STYLE[f][0] for f in forms], linewidth=1.2)
        ax.plot([chunk_size], [chunk[chunk_size]], marker="o", ms=10, color=PALETTE[1],
                zorder=5)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(*x_range)
        light_xticks(ax, sizes, [str(c) for c in sizes])
        _log_axis(ax, [*chunk.values(), *extremes.values()], mantissas=(1, 3), max_ticks=5)
    chosen = cost[chunk_size]
    style_axes(ax_flops, "chunk size C (tokens)", "work (MFLOP, model)")
    title_at_top(ax_flops, f"T = {length:,}, C = {chunk_size}: {chosen.flops / 1e6:,.0f} MFLOP,\n"
                           f"{chosen.sequential_steps:,} sequential steps (one head, d = {d})")
    best = min(sizes, key=lambda c: ms[c])
    style_axes(ax_time, "chunk size C (tokens)", "measured time (ms)")
    # T and C head the left panel's title: one line here
    title_at_top(ax_time, f"{ms[chunk_size]:.3g} ms measured (fastest: C = {best})")
    text_legend(ax_flops, [(f"—▲— {_FORM_LABEL['chunk']}", PALETTE[2]),
                           *((f"– – {_FORM_LABEL[f]}", _FORM_STYLE[f][0]) for f in forms)],
                y=0.62)


def chunk_size_panel(chunk_seconds: Mapping[tuple[int, int], float],
                     form_seconds: Mapping[tuple[int, str], float],
                     head_dim: int = 64) -> Callable[[Figure, int, int], None]:
    """Lesson 8's chunk-size slider: returns ``draw_chunk_panel(fig, chunk_size, length)``,
    which draws ``draw_chunk_size`` for those two slider values from the measurements made when
    the notebook ran: ``chunk_seconds[(T, C)]``, seconds of the chunkwise form for T tokens in
    chunks of C, and ``form_seconds[(T, form)]``, seconds of the "parallel" and "recurrent"
    forms, for one head of ``head_dim``. The figure: FLOPs (MFLOP, model) and measured time (ms)
    against C, log–log. The measurements are checked here, once, not at every slider move."""
    if not chunk_seconds:
        raise ValueError("chunk_seconds: expected measurements {(T, C): seconds}, got none")
    for key, seconds in chunk_seconds.items():
        if (not isinstance(key, tuple) or len(key) != 2
                or not all(isinstance(n, int) and n >= 1 for n in key)):
            raise ValueError(f"chunk_seconds: expected keys (T, C) of positive integers, "
                             f"got {key!r}")
        if not seconds > 0:
            raise ValueError(f"chunk_seconds: expected positive seconds, got {seconds!r} at "
                             f"{key}")
    for t in sorted({t for t, _ in chunk_seconds}):
        for form in ("parallel", "recurrent"):
            if not form_seconds.get((t, form), 0) > 0:
                raise ValueError(f"form_seconds: expected positive seconds of the {form} form "
                                 f"at T = {t}, got {form_seconds.get((t, form))!r}")
    d = check_int_in("head_dim", head_dim, 1, 4096)
    chunk_seconds, form_seconds = dict(chunk_seconds), dict(form_seconds)

    def draw_chunk_panel(fig: Figure, chunk_size: int, length: int) -> None:
        """``draw_chunk_size`` at this chunk size and length, from the bound measurements."""
        draw_chunk_size(fig, chunk_size, length, chunk_seconds, form_seconds, head_dim=d)

    return draw_chunk_panel
