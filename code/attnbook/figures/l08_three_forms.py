"""Figures of Lesson 8 (three forms of linear attention): where each pair is handled, measured
times, and the chunk-size panel."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from attnlab.checks import check_int_in
from attnlab.i18n import tr

from ..costs import LINEAR_FORMS, linear_attention_cost
from ..plotting import (
    PALETTE,
    SMALL_TEXT_PT,
    light_xticks,
    plain_log_yaxis,
    style_axes,
    text_legend,
    title_at_top,
)

# masked, explicit, state
_CELL_COLOURS = ListedColormap(["#FFFFFF", PALETTE[1], PALETTE[4]])


def draw_three_forms(
    fig: Figure, length: int = 12, chunk_size: int = 4
) -> None:
    """Where each query–key pair (i, j ≤ i) is handled, in the three forms: as an explicit score
    of a T × T (parallel) or C × C (chunkwise, diagonal blocks) matrix, or through the state
    (recurrent: every pair; chunkwise: pairs in earlier chunks, via S_[n])."""
    t = check_int_in("length", length, 2, 64)
    c = check_int_in("chunk_size", chunk_size, 1, t)
    axes = fig.subplots(1, 3, sharey=True)
    titles = (
        tr("parallel:\none T × T product"),
        tr("recurrent:\n{t} steps via S_t", t=t),
        tr("chunkwise, C = {c}:\n{n} steps, blocks + S", c=c, n=-(-t // c)),
    )
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
        ax.set_title(title, fontsize=SMALL_TEXT_PT)
        ax.set_xlabel(tr("key position j"))
        ax.set_xticks([0, t - 1], ["1", str(t)])
        ax.set_yticks([0, t - 1], ["1", str(t)])
        ax.grid(False)
        if form == "chunk":
            for b in range(c, t, c):
                ax.axhline(b - 0.5, color="#555555", linewidth=0.8)
                ax.axvline(b - 0.5, color="#555555", linewidth=0.8)
    axes[0].set_ylabel(tr("query position i"))
    fig.legend(
        handles=[
            Patch(
                facecolor=PALETTE[1],
                label=tr("explicit score q_iᵀk_j in a matrix"),
            ),
            Patch(facecolor=PALETTE[4], label=tr("folded into the state S")),
            Patch(
                facecolor="#FFFFFF",
                edgecolor="#BBBBBB",
                label=tr("masked (j > i)"),
            ),
        ],
        loc="outside lower center",
        ncols=2,
    )


def _check_timings(
    lengths: Sequence[int], seconds: Mapping[str, Sequence[float]]
) -> None:
    if len(lengths) < 2:
        raise ValueError(
            f"lengths: expected at least 2 sequence lengths, got {len(lengths)}"
        )
    if set(seconds) != set(LINEAR_FORMS):
        raise ValueError(
            f"seconds: expected timings for {list(LINEAR_FORMS)}, got {list(seconds)}"
        )
    for form, values in seconds.items():
        if len(values) != len(lengths):
            raise ValueError(
                f"seconds: expected {len(lengths)} timings for {form!r} (one per "
                f"length), got {len(values)}"
            )
        if any(not s > 0 for s in values):
            raise ValueError(
                f"seconds: expected positive seconds for {form!r}, got {list(values)}"
            )


_FORM_STYLE = {
    "parallel": (PALETTE[5], "o"),
    "recurrent": (PALETTE[0], "s"),
    "chunk": (PALETTE[2], "^"),
}


def form_label(form: str) -> str:
    """The legend name of ``form`` (one of ``LINEAR_FORMS``), in the reader's language."""
    if form == "parallel":
        return tr("parallel")
    if form == "recurrent":
        return tr("recurrent")
    if form == "chunk":
        return tr("chunkwise")
    raise ValueError(
        f"form: expected one of {list(LINEAR_FORMS)}, got {form!r}"
    )


def three_forms_alt() -> str:
    """The alt text of the three-forms figure as the lesson draws it (T = 12, C = 4)."""
    return tr(
        "Three 12-by-12 lower-triangular grids of query position against key position. "
        "Parallel: the whole triangle is orange, explicit scores. Recurrent: the whole "
        "triangle is blue, folded into the state. Chunkwise with chunks of 4: the three "
        "triangles on the diagonal blocks are orange, the blocks below them blue."
    )


def form_times_alt() -> str:
    """The alt text of the measured-times figure (lengths 256 to 8,192)."""
    return tr(
        "Log-log plot of measured milliseconds against sequence length from 256 to 8,192 "
        "tokens for the three forms, each point the median of its runs with a bar from the "
        "fastest to the slowest run. The parallel form rises steeply, the recurrent form "
        "starts high and rises slowly, and the chunkwise form lies far below the recurrent "
        "one at every length."
    )


def chunk_size_alt(chunk_size: int, length: int) -> str:
    """The alt text of a frame of the chunk-size panel."""
    return tr(
        "Two log-log plots against chunk size from 1 to 1,024 for T = {length:,}: left, "
        "the FLOPs of the chunkwise form rising with C between the recurrent and parallel "
        "levels; right, its measured time, high at C = 1 and at large C; C = {chunk_size} "
        "is marked.",
        length=length,
        chunk_size=chunk_size,
    )


def draw_form_times(
    fig: Figure,
    lengths: Sequence[int],
    seconds: Mapping[str, Sequence[float]],
    chunk_size: int = 64,
    threads: int = 1,
    *,
    spread: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    crossing: float | None = None,
) -> None:
    """Measured milliseconds of the three forms against the sequence length (log–log): the
    median ``seconds`` of each form, with the fastest-to-slowest range of its runs as a bar
    when ``spread`` gives one (form -> one (low, high) per length), and, when ``crossing`` is
    given, the length where the fitted trends of the parallel and recurrent times meet."""
    _check_timings(lengths, seconds)
    ax = fig.subplots()
    for form in LINEAR_FORMS:
        colour, marker = _FORM_STYLE[form]
        label = (
            tr("chunkwise (C = {c})", c=chunk_size)
            if form == "chunk"
            else form_label(form)
        )
        ms = [s * 1e3 for s in seconds[form]]
        ax.plot(lengths, ms, marker=marker, color=colour, label=label)
        if spread is not None:
            low, high = zip(*spread[form], strict=True)
            ax.errorbar(
                lengths,
                ms,
                yerr=[
                    [m - lo * 1e3 for m, lo in zip(ms, low, strict=True)],
                    [hi * 1e3 - m for m, hi in zip(ms, high, strict=True)],
                ],
                fmt="none",
                ecolor=colour,
                capsize=3,
                linewidth=1,
            )
    if crossing is not None and lengths[0] <= crossing <= lengths[-1]:
        ax.axvline(crossing, color="#777777", linestyle=":", linewidth=1)
        ax.annotate(
            tr("trends cross\nnear T ≈ {t:,.0f}", t=float(f"{crossing:.2g}")),
            (crossing, 0),
            xycoords=ax.get_xaxis_transform(),  # x in data, y at the axes' bottom (any scale)
            textcoords="offset points",
            xytext=(-6, 8),
            ha="right",
            fontsize=SMALL_TEXT_PT,
            color="#555555",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(lengths), [f"{t:,}" for t in lengths])
    ax.minorticks_off()
    last = lengths[-1]
    speed = seconds["recurrent"][-1] / seconds["chunk"][-1]
    values = {
        "threads": threads,
        "last": last,
        "rec": speed,
        "par": seconds["parallel"][-1] / seconds["chunk"][-1],
    }
    title = (
        tr(
            "One head, d = 64, float32, {threads} CPU thread, medians. At T = {last:,}\n"
            "chunkwise is {rec:,.0f}× faster than recurrent, {par:,.0f}× faster than "
            "parallel",
            **values,
        )
        if spread
        else tr(
            "One head, d = 64, float32, {threads} CPU thread, measured. At T = {last:,}\n"
            "chunkwise is {rec:,.0f}× faster than recurrent, {par:,.0f}× faster than "
            "parallel",
            **values,
        )
    )
    style_axes(
        ax,
        tr("sequence length T (tokens)"),
        tr("time for the whole sequence (ms)"),
        title,
    )
    ax.legend(
        loc="upper left",
        title=tr("bars: fastest to slowest run") if spread else None,
        title_fontsize=SMALL_TEXT_PT,
    )


def draw_chunk_size(
    fig: Figure,
    chunk_size: int,
    length: int,
    chunk_seconds: Mapping[tuple[int, int], float],
    form_seconds: Mapping[tuple[int, str], float],
    head_dim: int = 64,
) -> None:
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
        raise ValueError(
            f"length: expected one of the measured lengths {lengths}, got {length!r}"
        )
    if chunk_size not in sizes:
        raise ValueError(
            f"chunk_size: expected one of the measured sizes {sizes} for "
            f"T = {length}, got {chunk_size!r}"
        )
    if chunk_size > length:
        raise ValueError(
            f"chunk_size: C = {chunk_size} is longer than the sequence T = {length}"
        )
    for form in ("parallel", "recurrent"):
        if (length, form) not in form_seconds:
            raise ValueError(
                f"form_seconds: no measurement of the {form} form at T = {length}"
            )
    d = head_dim
    ax_flops, ax_time = fig.subplots(1, 2)
    cost = {c: linear_attention_cost("chunk", length, d, c) for c in sizes}
    mflops = {c: cost[c].flops / 1e6 for c in sizes}
    forms = ("parallel", "recurrent")
    form_mflops = {
        f: linear_attention_cost(f, length, d).flops / 1e6 for f in forms
    }
    ms = {c: chunk_seconds[(length, c)] * 1e3 for c in sizes}
    form_ms = {f: form_seconds[(length, f)] * 1e3 for f in forms}
    # the log axis's margins, a third of an octave
    x_range = (sizes[0] / 1.4, sizes[-1] * 1.4)
    for ax, chunk, extremes in (
        (ax_flops, mflops, form_mflops),
        (ax_time, ms, form_ms),
    ):
        ax.plot(
            sizes, [chunk[c] for c in sizes], marker="^", color=PALETTE[2]
        )
        ax.hlines(
            [extremes[f] for f in forms],
            *x_range,
            linestyles="--",
            colors=[_FORM_STYLE[f][0] for f in forms],
            linewidth=1.2,
        )
        ax.plot(
            [chunk_size],
            [chunk[chunk_size]],
            marker="o",
            ms=10,
            color=PALETTE[1],
            zorder=5,
        )
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(*x_range)
        light_xticks(ax, sizes, [str(c) for c in sizes])
        plain_log_yaxis(
            ax,
            [*chunk.values(), *extremes.values()],
            mantissas=(1, 3),
            max_ticks=5,
        )
    chosen = cost[chunk_size]
    style_axes(
        ax_flops, tr("chunk size C (tokens)"), tr("work (MFLOP, model)")
    )
    title_at_top(
        ax_flops,
        tr(
            "T = {length:,}, C = {c}: {mflop:,.0f} MFLOP,\n"
            "{steps:,} sequential steps (one head, d = {d})",
            length=length,
            c=chunk_size,
            mflop=chosen.flops / 1e6,
            steps=chosen.sequential_steps,
            d=d,
        ),
    )
    best = min(sizes, key=lambda c: ms[c])
    style_axes(ax_time, tr("chunk size C (tokens)"), tr("measured time (ms)"))
    # T and C head the left panel's title: one line here
    title_at_top(
        ax_time,
        tr("{ms:.3g} ms (fastest: C = {best})", ms=ms[chunk_size], best=best),
    )
    text_legend(
        ax_flops,
        [
            (f"—▲— {form_label('chunk')}", PALETTE[2]),
            *((f"– – {form_label(f)}", _FORM_STYLE[f][0]) for f in forms),
        ],
        y=0.62,
    )


def chunk_size_panel(
    chunk_seconds: Mapping[tuple[int, int], float],
    form_seconds: Mapping[tuple[int, str], float],
    head_dim: int = 64,
) -> Callable[[Figure, int, int], None]:
    """Lesson 8's chunk-size slider: returns ``draw_chunk_panel(fig, chunk_size, length)``,
    which draws ``draw_chunk_size`` for those two slider values from the measurements made when
    the notebook ran: ``chunk_seconds[(T, C)]``, seconds of the chunkwise form for T tokens in
    chunks of C, and ``form_seconds[(T, form)]``, seconds of the "parallel" and "recurrent"
    forms, for one head of ``head_dim``. The figure: FLOPs (MFLOP, model) and measured time (ms)
    against C, log–log. The measurements are checked here, once, not at every slider move."""
    if not chunk_seconds:
        raise ValueError(
            "chunk_seconds: expected measurements {(T, C): seconds}, got none"
        )
    for key, seconds in chunk_seconds.items():
        if (
            not isinstance(key, tuple)
            or len(key) != 2
            or not all(isinstance(n, int) and n >= 1 for n in key)
        ):
            raise ValueError(
                f"chunk_seconds: expected keys (T, C) of positive integers, "
                f"got {key!r}"
            )
        if not seconds > 0:
            raise ValueError(
                f"chunk_seconds: expected positive seconds, got {seconds!r} at "
                f"{key}"
            )
    for t in sorted({t for t, _ in chunk_seconds}):
        for form in ("parallel", "recurrent"):
            if not form_seconds.get((t, form), 0) > 0:
                raise ValueError(
                    f"form_seconds: expected positive seconds of the {form} form "
                    f"at T = {t}, got {form_seconds.get((t, form))!r}"
                )
    d = check_int_in("head_dim", head_dim, 1, 4096)
    chunk_seconds, form_seconds = dict(chunk_seconds), dict(form_seconds)

    def draw_chunk_panel(fig: Figure, chunk_size: int, length: int) -> None:
        """``draw_chunk_size`` at this chunk size and length, from the bound measurements."""
        draw_chunk_size(
            fig, chunk_size, length, chunk_seconds, form_seconds, head_dim=d
        )

    return draw_chunk_panel
