"""One figure style for the whole course.

Figures are built on ``matplotlib.figure.Figure`` objects (not pyplot), so they are never shown
twice, never leak into pyplot's list of open figures, and can be redrawn in place by a slider.
The palette is Okabe & Ito's, which stays distinguishable with the common colour-vision
deficiencies; sequential maps use viridis/cividis for the same reason.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import html
import io
import logging
import math
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import torch
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.markers import TICKDOWN
from matplotlib.text import Text
from matplotlib.ticker import NullLocator
from matplotlib.transforms import (
    Bbox,
    ScaledTranslation,
    blended_transform_factory,
)

from attnlab.i18n import LocalText, current_language, language_blocks, text_of

#: Okabe–Ito colour-blind-safe palette, in the order lines are drawn.
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)
#: The neutral grey of reference curves and "other" categories.
GREY = "#999999"
#: Colours of the layer kinds, the same in every lesson that draws a stack (their names are the
#: registry's labels, ``attnlab.kinds.KINDS[kind].label``).
KIND_COLOURS: dict[str, str] = {
    "kda": PALETTE[0],
    "mla": PALETTE[1],
    "attn": PALETTE[5],
}
#: The smallest text of a figure (annotations, keys), in points: see the figure standard below.
SMALL_TEXT_PT = 10.5
#: Binary units of the byte axes.
KIB, MIB, GIB = 2**10, 2**20, 2**30
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "PuOr"

_RC = {
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    # sizes of the figure standard: in a figure at most 6.4 inches wide, 10.5-point text is at least
    # 8 CSS px on a 390-px phone and 11 CSS px at the desktop text column
    "axes.titlesize": 11.5,
    "axes.labelsize": 11,
    "xtick.labelsize": 10.5,
    "ytick.labelsize": 10.5,
    "legend.fontsize": 10.5,
    "legend.frameon": False,
    "font.size": 10.5,
    # unhinted glyphs look as sharp at these sizes and draw ~15% faster (slider frames are
    # mostly text: tick labels, titles, legends)
    "text.hinting": "none",
}


#: The font that draws Chinese (Debian's fonts-noto-cjk; ``make book`` installs it), after the
#: default font for Latin letters and digits: matplotlib takes each glyph from the first font
#: that has it.
CJK_FONT = "Noto Sans CJK SC"


@functools.cache
def _font_families(chinese: bool) -> list[str]:
    """The fonts of figure text: DejaVu Sans, and for Chinese a CJK font after it. Only then: a
    fallback font makes matplotlib lay out every text with both (English frames ~35% slower)."""
    if not chinese:
        return ["DejaVu Sans"]
    from matplotlib import font_manager

    manager = font_manager.fontManager
    if CJK_FONT not in {f.name for f in manager.ttflist}:
        # installed after matplotlib cached its font list: add it from where the system keeps it
        for path in font_manager.findSystemFonts():
            if Path(path).name.startswith("NotoSansCJK-Regular"):
                manager.addfont(path)
    names = {f.name for f in manager.ttflist}
    return ["DejaVu Sans", CJK_FONT] if CJK_FONT in names else ["DejaVu Sans"]


def course_style():
    """Context manager applying the course style to axes and text created inside it (in Chinese,
    ``attnlab.i18n.language("zh_CN")``, with a CJK font after the Latin one when one is
    installed)."""
    chinese = current_language() != "en"
    return matplotlib.rc_context({**_RC, "font.family": _font_families(chinese)})


def new_figure(
    width: float = 6.4, height: float = 3.6, ncols: int = 0, nrows: int = 1
) -> Figure:
    """A figure in the course style; with ``ncols >= 1`` it already holds ``nrows × ncols`` axes."""
    with course_style():
        fig = Figure(figsize=(width, height), layout="constrained")
        # its own Agg canvas: savefig then keeps one renderer, and with it matplotlib's caches of
        # text measurements, from frame to frame (a bare Figure gets a new one every time)
        FigureCanvasAgg(fig)
        if ncols:
            fig.subplots(nrows, ncols, squeeze=False)
    return fig


def fixed_axes(
    fig: Figure,
    layout: int | Sequence[tuple[float, float, float, float]],
    **margins: float,
) -> list[Axes]:
    """Axes at fixed places and no layout engine at all (not even the placeholder that
    ``set_layout_engine("none")`` leaves, which makes ``savefig`` draw twice): a slider frame then
    renders in about half the time of a constrained layout. ``layout`` is either a number of
    axes side by side in one row, placed by ``margins`` (``left``, ``right``, ``bottom``, ``top``,
    ``wspace`` as in ``GridSpec``), or a list of ``(left, bottom, width, height)`` rectangles in
    figure fractions. The labels of a panel's frames keep their sizes, so fixed margins fit
    them all (the figure-standard test checks every frame)."""
    fig.set_layout_engine(None)
    if isinstance(layout, int):
        return list(
            fig.subplots(1, layout, squeeze=False, gridspec_kw=margins)[0]
        )
    if margins:
        raise ValueError(
            f"margins: only with a number of axes, got rectangles and {margins}"
        )
    return [fig.add_axes(rect) for rect in layout]


def fast_bars(
    ax: Axes,
    heights: Sequence[float],
    colours: str | Sequence,
    *,
    bottoms: Sequence[float] | None = None,
    width: float = 0.8,
) -> None:
    """Vertical bars at x = 0, 1, … from ``bottoms`` (default 0) up by ``heights``, like
    ``ax.bar``, as ONE artist: ``ax.bar`` makes one rectangle per bar, which costs more to build
    than the rest of a slider frame. Stack bars by calling again with ``bottoms`` = the tops of
    the layer below. ``colours``: one colour or one per bar. Sets the x range to the bars."""
    n = len(heights)
    bottoms = [0.0] * n if bottoms is None else list(bottoms)
    if len(bottoms) != n:
        raise ValueError(
            f"bottoms: expected {n} values (one per bar), got {len(bottoms)}"
        )
    half = width / 2
    ax.add_collection(
        PolyCollection(
            [
                (
                    (j - half, b),
                    (j - half, b + h),
                    (j + half, b + h),
                    (j + half, b),
                )
                for j, (h, b) in enumerate(zip(heights, bottoms, strict=True))
            ],
            facecolors=colours,
            edgecolors="none",
        )
    )
    # like ax.bar: no margin below a baseline of 0
    ax.sticky_edges.y.append(0)
    ax.set_xlim(-0.5 - half / 2, n - 0.5 + half / 2)


def context_label(tokens: int) -> str:
    """A token count as contexts and vocabularies are named, in binary thousands and millions:
    4096 → "4k", 1048576 → "1M", 1000 → "1,000"."""
    if tokens and tokens % 2**20 == 0:
        return f"{tokens // 2**20}M"
    if tokens and tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    return f"{tokens:,}"


def place_labels(
    ax: Axes,
    xs: Sequence[float],
    ys: Sequence[float],
    labels: Sequence[str],
    fontsize: float | None = None,
    distances: Sequence[float] = (7, 14, 24, 36, 50),
    leader_beyond: float | None = None,
) -> None:
    """Label the points (``xs``, ``ys``) of ``ax`` so that no two labels collide: each label
    tries eight directions around its point at growing ``distances`` (points) and keeps the
    first place where its measured box stays inside the axes and at least ``TEXT_GAP_EM``
    from every label placed before, as :func:`overlapping_texts` asks (else the nearest
    place). A label placed farther than ``leader_beyond`` points from its point gets a thin
    grey leader line to it, so a crowded plot still says which label is whose. The axes must
    already have their final position and limits (use :func:`fixed_axes` and set the limits
    first)."""
    fontsize = SMALL_TEXT_PT if fontsize is None else fontsize
    leader = {
        "arrowstyle": "-",
        "color": GREY,
        "lw": 0.7,
        "shrinkA": 0,
        "shrinkB": 3,
    }
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    # boxes grown by half the gap each: grown boxes that do not overlap are a gap apart
    half_gap = TEXT_GAP_EM * fontsize / 2 * ax.figure.dpi / 72
    placed: list = []
    for x, y, label in zip(xs, ys, labels, strict=True):
        first = None
        for distance in distances:
            for k in range(8):
                angle = 2 * math.pi * k / 8 + math.pi / 2
                dx, dy = (
                    distance * math.cos(angle),
                    0.7 * distance * math.sin(angle),
                )
                ha = "left" if dx > 1 else ("right" if dx < -1 else "center")
                text = ax.annotate(
                    label,
                    (x, y),
                    xytext=(dx, dy),
                    textcoords="offset points",
                    ha=ha,
                    va="center",
                    fontsize=fontsize,
                )
                box = text.get_window_extent(renderer)
                fits = (
                    inside.x0 <= box.x0
                    and box.x1 <= inside.x1
                    and inside.y0 <= box.y0
                    and box.y1 <= inside.y1
                    and not any(
                        box.padded(half_gap).overlaps(p) for p in placed
                    )
                )
                if fits:
                    placed.append(box.padded(half_gap))
                    if leader_beyond is not None and distance > leader_beyond:
                        # the line is its own (text-less) artist: the label's box stays the text's
                        ax.annotate(
                            "",
                            (x, y),
                            xytext=(dx, dy),
                            textcoords="offset points",
                            arrowprops=leader,
                        )
                    break
                if first is None:
                    first = (dx, dy, ha)
                text.remove()
            else:
                continue
            break
        else:
            dx, dy, ha = first
            placed.append(
                ax.annotate(
                    label,
                    (x, y),
                    xytext=(dx, dy),
                    textcoords="offset points",
                    ha=ha,
                    va="center",
                    fontsize=fontsize,
                )
                .get_window_extent(renderer)
                .padded(half_gap)
            )


def plain_log_yaxis(
    ax: Axes,
    values: Sequence[float],
    mantissas: Sequence[int] = (1, 2, 5),
    max_ticks: int | None = None,
) -> None:
    """Log-scaled y axis over ``values`` with explicit ticks m·10^k (m in ``mantissas``) and
    plain labels ("200", not mathtext): cheaper to render than matplotlib's log locator, and
    easier to read. With ``max_ticks``, the last mantissas are dropped while there would be more
    ticks than that (each tick costs ~2 ms of a slider frame)."""
    lo, hi = min(values) / 1.4, max(values) * 1.4
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for n in range(len(mantissas), 0, -1):
        ticks = [
            m * 10.0**e
            for e in decades
            for m in mantissas[:n]
            if lo <= m * 10.0**e <= hi
        ]
        if max_ticks is None or len(ticks) <= max_ticks:
            break
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.set_yticks(ticks, [f"{t:,g}" for t in ticks])
    ax.yaxis.set_minor_locator(NullLocator())


def style_axes(
    ax: Axes, xlabel: str, ylabel: str, title: str | None = None
) -> Axes:
    """Apply the course style to ``ax`` and label it (labels carry units, e.g. "bytes (MiB)")."""
    for key in ("top", "right"):
        ax.spines[key].set_visible(False)
    ax.grid(True, alpha=0.3)
    ax.set_prop_cycle(color=PALETTE)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def title_at_top(ax, text: str) -> None:
    """``ax.set_title(text)`` at the default height, given explicitly: matplotlib then skips
    looking for tick labels above the axes (figures of this course have none there), which
    lays the y axis out once more on every draw. Saves a few ms per slider frame."""
    ax.set_title(text, y=1.0)


def text_legend(
    ax,
    entries: Sequence[tuple[str, str]],
    x: float = 0.03,
    y: float = 0.97,
    fontsize: float | None = None,
    ha: str = "left",
) -> None:
    """A legend made of coloured lines of text from (``x``, ``y``) in axes fractions down, each
    line aligned ``ha`` on x: each entry is (text, colour), the text starting with its own key
    (e.g. "■" for a bar colour, "– –" for a dashed line). Several times cheaper to draw than
    ``ax.legend`` (no handles, no box layout), which counts on a slider."""
    fontsize = SMALL_TEXT_PT if fontsize is None else fontsize
    step = 1.35 * fontsize / 72  # inches between baselines
    for i, (text, colour) in enumerate(entries):
        offset = ScaledTranslation(0, -i * step, ax.figure.dpi_scale_trans)
        ax.text(
            x,
            y,
            text,
            color=colour,
            fontsize=fontsize,
            ha=ha,
            va="top",
            transform=ax.transAxes + offset,
        )


def light_xticks(
    ax,
    positions: Sequence[float],
    labels: Sequence[str],
    grid: bool | None = None,
    *,
    marks: bool = True,
    rotation: float = 0,
) -> None:
    """x ticks as matplotlib would draw them in the current style (marks, vertical grid lines
    if ``grid``, by default as ``axes.grid`` says, labels), made of one line of marks, one
    collection of grid lines and one text per label instead of one ``Tick`` object (5 artists)
    per tick: a third of the cost, which counts on a slider frame. Works on any x scale
    (positions are data coordinates). The axis itself is left without ticks. With
    ``rotation`` (degrees) the labels turn about their right end, as rotated tick labels do;
    ``marks=False`` leaves out the tick marks (labels that name bars or columns)."""
    rc = matplotlib.rcParams
    if grid is None:
        grid = rc["axes.grid"] and rc["axes.grid.axis"] in ("both", "x")
    ax.set_xticks([])
    at_bottom = blended_transform_factory(ax.transData, ax.transAxes)
    if grid:
        ax.vlines(
            positions,
            0,
            1,
            transform=at_bottom,
            colors=rc["grid.color"],
            alpha=rc["grid.alpha"],
            linewidth=rc["grid.linewidth"],
            linestyles=rc["grid.linestyle"],
            zorder=1.5,
        )
    size, pad = (
        (rc["xtick.major.size"] if marks else 0),
        rc["xtick.major.pad"],
    )
    if marks:
        ax.plot(
            positions,
            [0] * len(positions),
            transform=at_bottom,
            linestyle="none",
            marker=TICKDOWN,
            markersize=size,
            markeredgewidth=rc["xtick.major.width"],
            color=rc["xtick.color"],
            clip_on=False,
        )
    below = at_bottom + ScaledTranslation(
        0, -(size + pad) / 72, ax.figure.dpi_scale_trans
    )
    for x, label in zip(positions, labels, strict=True):
        ax.text(
            x,
            0,
            label,
            transform=below,
            ha="right" if rotation else "center",
            va="top",
            rotation=rotation,
            fontsize=rc["xtick.labelsize"],
            color=rc["xtick.labelcolor"]
            if rc["xtick.labelcolor"] != "inherit"
            else rc["xtick.color"],
        )
    label_height = FontProperties(
        size=rc["xtick.labelsize"]
    ).get_size_in_points()
    ax.xaxis.labelpad = size + pad + 1.2 * label_height + rc["axes.labelpad"]


def heatmap(
    ax: Axes,
    matrix: torch.Tensor,
    *,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    colorbar_label: str | None = None,
    cmap: str = SEQUENTIAL_CMAP,
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = False,
    aspect: str = "auto",
    fmt: str = "{:.2f}",
) -> Axes:
    """Draw a 2-D tensor ``[rows, cols]`` as a heat map (e.g. attention weights, a state ``S``).

    ``colorbar_label`` adds a colour bar with that label. With ``annotate`` every cell shows its
    value (``fmt``), in black or white, whichever reads better on the cell's own colour (by its
    luminance, for any colour map). ``aspect="equal"`` gives square cells, so a 1 × V vector is
    drawn as a row."""
    data = torch.as_tensor(matrix).detach().to(torch.float64).cpu()
    if data.dim() != 2:
        raise ValueError(
            f"matrix: expected a 2-D tensor [rows, cols], got {tuple(data.shape)}"
        )
    image = ax.imshow(
        data.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect=aspect
    )
    ax.grid(False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if xticklabels is not None:
        ax.set_xticks(
            range(len(xticklabels)),
            list(xticklabels),
            rotation=45,
            ha="right",
        )
    if yticklabels is not None:
        ax.set_yticks(range(len(yticklabels)), list(yticklabels))
    if colorbar_label is not None:
        ax.figure.colorbar(image, ax=ax, label=colorbar_label, shrink=0.85)
    if annotate:
        for (i, j), value in _cells(data):
            if math.isfinite(value):
                ax.text(
                    j,
                    i,
                    fmt.format(value),
                    ha="center",
                    va="center",
                    fontsize=SMALL_TEXT_PT,
                    color=text_colour_on(image.cmap(image.norm(value))),
                )
    return ax


def text_colour_on(rgba: Sequence[float]) -> str:
    """ "black" or "white", whichever contrasts more with the colour ``rgba`` (components in
    [0, 1]): black on colours whose relative luminance (WCAG) is above 0.179."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(float(c)) for c in rgba[:3])
    return (
        "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.179 else "white"
    )


def fast_colour_bar(
    ax: Axes,
    cmap,
    norm,
    ticks: Sequence[float],
    label: str,
    left: float = 1.02,
    width: float = 0.03,
) -> None:
    """A colour bar drawn by ``ax`` itself just right of it (from ``left`` to ``left + width``,
    axes fractions): a gradient over ``norm``'s range, the ``ticks`` values beside it and its
    ``label`` along it. It reads like ``fig.colorbar`` but costs no extra axes, which is most
    of a colour bar's drawing time on a slider. Set ``ax``'s limits after calling this."""
    if isinstance(cmap, str):
        cmap = matplotlib.colormaps[cmap]
    image = ax.imshow(
        [[x / 127] for x in range(128)],
        cmap=cmap,
        vmin=0,
        vmax=1,
        origin="lower",
        aspect="auto",
        interpolation="bilinear",
        extent=(left, left + width, 0, 1),
        transform=ax.transAxes,
    )
    image.set_clip_on(False)
    size = FontProperties(
        size=matplotlib.rcParams["ytick.labelsize"]
    ).get_size_in_points()
    # 3 points
    right = ax.transAxes + ScaledTranslation(
        3 / 72, 0, ax.figure.dpi_scale_trans
    )
    widest = max(len(f"{value:g}") for value in ticks)
    for value in ticks:
        ax.text(
            left + width,
            float(norm(value)),
            f"{value:g}",
            transform=right,
            ha="left",
            va="center",
            fontsize=size,
        )
    beyond = ax.transAxes + ScaledTranslation(
        (6 + 0.62 * size * widest) / 72, 0, ax.figure.dpi_scale_trans
    )
    ax.text(
        left + width,
        0.5,
        label,
        transform=beyond,
        rotation=90,
        ha="left",
        va="center",
    )


def _cells(data: torch.Tensor):
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            yield (i, j), float(data[i, j])


#: The figure standard. A figure ``w`` inches wide is shown ``w × CSS_DPI`` CSS px wide (the CSS
#: inch), at most the text column, with its PNG at ``PIXEL_DENSITY`` pixels per CSS px (crisp on
#: 2× screens). The book's text column measured in a built page: 688 CSS px at a 1280-px desktop
#: window, 358 CSS px on a 390-px phone. No text may be smaller than MIN_TEXT_CSS_PX at the
#: column, nor than MIN_PHONE_TEXT_CSS_PX on the phone (``tests/test_figure_standard.py``).
CSS_DPI = 96
PIXEL_DENSITY = 2
COLUMN_CSS_PX = 688
PHONE_COLUMN_CSS_PX = 358
MIN_TEXT_CSS_PX = 11
MIN_PHONE_TEXT_CSS_PX = 8


def display_width_css(
    fig: Figure, column_css: float = COLUMN_CSS_PX
) -> float:
    """The width (CSS px) at which ``fig`` is shown in a text column ``column_css`` wide."""
    return min(fig.get_figwidth() * CSS_DPI, column_css)


def text_css_px(
    fig: Figure, fontsize_pt: float, column_css: float = COLUMN_CSS_PX
) -> float:
    """The size in CSS px of ``fontsize_pt``-point text of ``fig`` shown in a column
    ``column_css`` wide: fontsize × display width / figure width (inches) / 72."""
    return (
        fontsize_pt
        * display_width_css(fig, column_css)
        / fig.get_figwidth()
        / 72
    )


#: Two texts collide when they overlap by more than ``TEXT_OVERLAP_PT`` points both ways
#: (about a pixel at the figure's 100 dpi: boxes that merely touch, or are kerned, pass), or
#: when they stand on one line (the same orientation, overlapping across it by more than a
#: third of the smaller text) less than ``TEXT_GAP_EM`` of the smaller font size apart:
#: closer than that, "place" and "number" read as "placenumber". DejaVu Sans's word space is
#: 0.32 em.
TEXT_OVERLAP_PT = 0.75
TEXT_GAP_EM = 0.2


@contextlib.contextmanager
def _recording_drawn_texts(found: list):
    """Inside: every text artist that is really drawn (visible, non-empty, not skipped as an
    annotation whose point is outside its axes) is appended to ``found`` with its box."""
    original = Text.draw

    def draw(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            found.append((self, self.get_window_extent(renderer)))

    Text.draw = draw
    try:
        yield found
    finally:
        Text.draw = original


_MISSING_GLYPH = re.compile(r"Glyph \d+ \((.+?)\) missing from|does not have a glyph for '(.+?)'")


class _GlyphLog(logging.Handler):
    def __init__(self, found: list[str]):
        super().__init__(logging.WARNING)
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        match = _MISSING_GLYPH.search(record.getMessage())
        if match:
            self.found.append(match.group(1) or match.group(2))


@contextlib.contextmanager
def missing_glyphs() -> Iterator[list[str]]:
    """Collect the characters that text laid out inside the block has no glyph for (drawn as
    empty boxes, "tofu"): matplotlib warns of plain text, and logs of mathtext, whose fonts
    have no CJK glyphs (so a line mixing Chinese and ``$math$`` shows boxes)."""
    found: list[str] = []
    handler = _GlyphLog(found)
    mathtext_log = logging.getLogger("matplotlib.mathtext")
    mathtext_log.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield found
        found += [m.group(1) or m.group(2) for w in caught
                  if (m := _MISSING_GLYPH.search(str(w.message)))]
    finally:
        mathtext_log.removeHandler(handler)


def drawn_texts(fig: Figure) -> list[tuple[Text, Bbox]]:
    """Lay ``fig`` out and draw it (without rendering pixels) in the course style, returning
    every text that is drawn with its box in display pixels: tick labels, axis labels,
    titles, legend entries, annotations, ``ax.text``."""
    found: list = []
    with course_style(), _recording_drawn_texts(found):
        fig.draw_without_rendering()
    return found


@dataclass(frozen=True)
class _Placed:
    """A drawn text as a rectangle along its own direction: ``centre`` (points), ``size``
    (along, across its baseline, points) and ``angle`` (degrees modulo 180)."""

    centre: tuple[float, float]
    size: tuple[float, float]
    angle: float
    fontsize: float

    @classmethod
    def lines_of(
        cls, text: Text, box: Bbox, points_per_px: float
    ) -> list[_Placed]:
        """One rectangle per non-empty line of ``text`` drawn in ``box`` (display px): a
        staggered label ("\\nplace" under "number") is not on the line of its neighbour."""
        turned = text.get_rotation()
        angle = turned % 180
        if angle % 90 == 0:
            w, h = box.width, box.height
            w, h = (h, w) if angle == 90 else (w, h)
        else:  # the box of a turned text bounds it: measure it unturned
            text.set_rotation(0)
            try:
                upright = text.get_window_extent()
            finally:
                text.set_rotation(turned)
            w, h = upright.width, upright.height
        # a turned rectangle and the box bounding it share their centre
        x, y = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
        lines = text.get_text().split("\n")
        if len(lines) == 1:
            return [
                cls(
                    (x * points_per_px, y * points_per_px),
                    (w * points_per_px, h * points_per_px),
                    angle,
                    text.get_fontsize(),
                )
            ]
        # lines share the height (matplotlib's fixed line spacing) and align as the text's
        # multialignment says
        align = text._get_multialignment()
        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        found = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            width = Text(text=line, fontproperties=text.get_fontproperties())
            width.set_figure(text.get_figure(root=True))
            line_w = width.get_window_extent().width
            along = {"left": (line_w - w) / 2, "right": (w - line_w) / 2}
            u, v = along.get(align, 0.0), h / 2 - (i + 0.5) * h / len(lines)
            found.append(
                cls(
                    (
                        (x + c * u - s * v) * points_per_px,
                        (y + s * u + c * v) * points_per_px,
                    ),
                    (line_w * points_per_px, h / len(lines) * points_per_px),
                    angle,
                    text.get_fontsize(),
                )
            )
        return found

    def corners(self) -> list[tuple[float, float]]:
        c, s = (
            math.cos(math.radians(self.angle)),
            math.sin(math.radians(self.angle)),
        )
        half_w, half_h = self.size[0] / 2, self.size[1] / 2
        return [
            (
                self.centre[0] + c * u * half_w - s * v * half_h,
                self.centre[1] + s * u * half_w + c * v * half_h,
            )
            for u, v in ((-1, -1), (1, -1), (1, 1), (-1, 1))
        ]


def _depth(a: _Placed, b: _Placed) -> float:
    """How far two rectangles overlap (points): the least overlap of their shadows on the
    four directions of their sides (negative: the gap that separates them)."""
    ca, cb = a.corners(), b.corners()
    depth = math.inf
    for angle in (a.angle, a.angle + 90, b.angle, b.angle + 90):
        ux, uy = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        pa = [x * ux + y * uy for x, y in ca]
        pb = [x * ux + y * uy for x, y in cb]
        depth = min(depth, min(max(pa), max(pb)) - max(min(pa), min(pb)))
    return depth


def _collide(a: _Placed, b: _Placed) -> bool:
    if a.angle != b.angle:
        return _depth(a, b) > TEXT_OVERLAP_PT
    # the same direction: the gaps along and across the baseline
    c, s = math.cos(math.radians(a.angle)), math.sin(math.radians(a.angle))
    dx, dy = b.centre[0] - a.centre[0], b.centre[1] - a.centre[1]
    along = abs(c * dx + s * dy) - (a.size[0] + b.size[0]) / 2
    across = abs(-s * dx + c * dy) - (a.size[1] + b.size[1]) / 2
    if -across > min(a.size[1], b.size[1]) / 3:  # one line
        return along < TEXT_GAP_EM * min(a.fontsize, b.fontsize)
    return -across > TEXT_OVERLAP_PT and -along > TEXT_OVERLAP_PT


def overlapping_texts(
    fig: Figure, texts: Sequence[tuple[Text, Bbox]] | None = None
) -> list[tuple[Text, Text]]:
    """The pairs of drawn texts of ``fig`` that collide: overlap by more than
    ``TEXT_OVERLAP_PT`` (turned texts are measured as the turned rectangles they are, not
    their bounding boxes), or stand on one line closer than ``TEXT_GAP_EM``. ``texts``: the
    figure's :func:`drawn_texts` if already known."""
    texts = drawn_texts(fig) if texts is None else texts
    points_per_px = 72 / fig.dpi
    # boxes farther apart than the widest gap the rules ask for cannot collide
    largest = max((text.get_fontsize() for text, _ in texts), default=0)
    reach = max(TEXT_OVERLAP_PT, TEXT_GAP_EM * largest) / points_per_px
    order = sorted(range(len(texts)), key=lambda i: texts[i][1].x0)
    placed: dict[int, list[_Placed]] = {}
    found = []
    for k, i in enumerate(order):
        box_i = texts[i][1]
        for j in order[k + 1 :]:
            box_j = texts[j][1]
            if box_j.x0 > box_i.x1 + reach:
                break
            if box_j.y0 > box_i.y1 + reach or box_i.y0 > box_j.y1 + reach:
                continue
            for n in (i, j):
                if n not in placed:
                    placed[n] = _Placed.lines_of(*texts[n], points_per_px)
            if any(_collide(a, b) for a in placed[i] for b in placed[j]):
                found.append((texts[min(i, j)][0], texts[max(i, j)][0]))
    return found


def clipped_texts(
    fig: Figure, texts: Sequence[tuple[Text, Bbox]] | None = None
) -> list[Text]:
    """The drawn texts of ``fig`` that are cut: reaching more than ``TEXT_OVERLAP_PT`` beyond
    the figure's edge, or beyond the box they are clipped to (e.g. their axes)."""
    texts = drawn_texts(fig) if texts is None else texts
    tolerance = TEXT_OVERLAP_PT * fig.dpi / 72
    found = []
    for text, box in texts:
        frames = [fig.bbox]
        if text.get_clip_on() and text.get_clip_box() is not None:
            frames.append(text.get_clip_box())
        if any(
            box.x0 < frame.x0 - tolerance
            or box.y0 < frame.y0 - tolerance
            or box.x1 > frame.x1 + tolerance
            or box.y1 > frame.y1 + tolerance
            for frame in frames
        ):
            found.append(text)
    return found


#: Colours a palette PNG must keep exactly: the course palette, its grey, white and text greys.
#: Adaptive quantisation alone gives most entries to the largest areas (a heat map's gradient)
#: and can shift a thin line's or a legend's colour to a neighbour (blue drawn as teal).
EXACT_COLOURS: tuple[str, ...] = (
    *PALETTE,
    GREY,
    "#FFFFFF",
    "#262626",
    "#4D4D4D",
    "#CCCCCC",
)


def _palette_png(png: bytes) -> bytes:
    """``png`` as an 8-bit palette PNG: ``EXACT_COLOURS`` reserved, the rest of the 256 entries
    chosen from the image (median cut), every pixel mapped to its nearest entry, no dithering."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    exact = [
        tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in EXACT_COLOURS
    ]
    if (
        found := image.getcolors(256)
    ) is not None:  # few colours: keep every one of them
        chosen = [colour for _, colour in found]
    else:
        adaptive = image.quantize(
            colors=256 - len(exact),
            method=Image.Quantize.MEDIANCUT,
            dither=Image.Dither.NONE,
        ).getpalette()[: 3 * (256 - len(exact))]
        chosen = exact + [
            tuple(adaptive[i : i + 3]) for i in range(0, len(adaptive), 3)
        ]
    palette = Image.new("P", (1, 1))
    flat = [value for colour in chosen for value in colour]
    palette.putpalette(flat + flat[:3] * (256 - len(chosen)))
    small = image.quantize(palette=palette, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="png", optimize=True)
    return out.getvalue()


def figure_png(
    fig: Figure, density: float = PIXEL_DENSITY, palette: bool | None = None
) -> bytes:
    """Render ``fig`` to PNG bytes at ``density`` pixels per CSS px (``CSS_DPI × density`` dots
    per inch). With ``palette`` (default: when ``density`` ≥ 2, i.e. for the website) the PNG is
    8-bit, 256 colours: about a third of the bytes, with the course's colours kept exactly
    (``_palette_png``; lossless when the figure holds at most 256 colours). Rendering is the
    slow part of a slider update: live panels use density 1."""
    buffer = io.BytesIO()
    with course_style():  # text settings apply when the figure is drawn
        # zlib level 1: ~40% less encoding time than the default 6, for ~5% more bytes
        fig.savefig(
            buffer,
            format="png",
            dpi=CSS_DPI * density,
            pil_kwargs={"compress_level": 1},
        )
    if palette if palette is not None else density >= 2:
        buffer = io.BytesIO(_palette_png(buffer.getvalue()))
    return buffer.getvalue()


def figure_html(fig: Figure, alt: str, density: float = PIXEL_DENSITY) -> str:
    """An ``<img>`` tag holding the figure as a data URI, with its alt text, sized in CSS px
    (``width``/``height`` = inches × ``CSS_DPI``) and scaled down to narrower columns."""
    if not alt or not alt.strip():
        raise ValueError(
            "alt: every figure needs alt text describing what it shows"
        )
    data = base64.b64encode(figure_png(fig, density)).decode("ascii")
    width, height = (round(x * CSS_DPI) for x in fig.get_size_inches())
    return (
        f'<img class="attnlab-figure" src="data:image/png;base64,{data}" '
        f'width="{width}" height="{height}" alt="{html.escape(alt, quote=True)}" '
        'style="max-width:100%;height:auto">'
    )


class FigureDisplay:
    """A rendered figure with alt text, displayed as an ``<img>`` in notebooks and the book."""

    def __init__(self, html: str) -> None:
        self.html = html

    def _repr_html_(self) -> str:
        return self.html


def show_figure(
    fig: Figure | Callable[[Figure], None],
    alt: LocalText,
    density: float = PIXEL_DENSITY,
    *,
    size: tuple[float, float] = (6.4, 3.6),
) -> FigureDisplay:
    """Return a figure as a displayable image with ``alt`` text (make it a cell's last line).

    ``fig`` is a drawn figure, or a function ``draw(fig)`` that draws one onto a new figure of
    ``size`` inches; ``alt`` is text, or a function that writes it. Given functions, the figure
    is drawn in every language the book is built in (``attnlab.i18n.rendered_languages``), so a
    Chinese page shows a Chinese figure."""
    if isinstance(fig, Figure):
        return FigureDisplay(figure_html(fig, text_of(alt), density))
    if not callable(fig):
        raise TypeError(
            f"fig: expected a Figure or a function draw(fig), got {type(fig).__name__}"
        )

    def render() -> str:
        drawn = new_figure(*size)
        with course_style():
            fig(drawn)
        return figure_html(drawn, text_of(alt), density)

    return FigureDisplay(language_blocks(render))
