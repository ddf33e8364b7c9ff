"""One figure style for the whole course.

Figures are built on ``matplotlib.figure.Figure`` objects (not pyplot), so they are never shown
twice, never leak into pyplot's list of open figures, and can be redrawn in place by a slider.
The palette is Okabe & Ito's, which stays distinguishable with the common colour-vision
deficiencies; sequential maps use viridis/cividis for the same reason.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence

import matplotlib
import torch
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.markers import TICKDOWN
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

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
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "PuOr"

_RC = {
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "font.size": 10,
    # unhinted glyphs look as sharp at these sizes and draw ~15% faster (slider frames are
    # mostly text: tick labels, titles, legends)
    "text.hinting": "none",
}


def course_style():
    """Context manager applying the course style to axes and text created inside it."""
    return matplotlib.rc_context(_RC)


def new_figure(width: float = 6.4, height: float = 3.6, ncols: int = 0, nrows: int = 1) -> Figure:
    """A figure in the course style; with ``ncols >= 1`` it already holds ``nrows × ncols`` axes."""
    with course_style():
        fig = Figure(figsize=(width, height), layout="constrained")
        # its own Agg canvas: savefig then keeps one renderer, and with it matplotlib's caches of
        # text measurements, from frame to frame (a bare Figure gets a new one every time)
        FigureCanvasAgg(fig)
        if ncols:
            fig.subplots(nrows, ncols, squeeze=False)
    return fig


def style_axes(ax: Axes, xlabel: str, ylabel: str, title: str | None = None) -> Axes:
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


def text_legend(ax, entries: Sequence[tuple[str, str]], x: float = 0.03, y: float = 0.97,
                fontsize: float = 8, ha: str = "left") -> None:
    """A legend made of coloured lines of text from (``x``, ``y``) in axes fractions down, each
    line aligned ``ha`` on x: each entry is (text, colour), the text starting with its own key
    (e.g. "■" for a bar colour, "– –" for a dashed line). Several times cheaper to draw than
    ``ax.legend`` (no handles, no box layout), which counts on a slider."""
    step = 1.35 * fontsize / 72  # inches between baselines
    for i, (text, colour) in enumerate(entries):
        offset = ScaledTranslation(0, -i * step, ax.figure.dpi_scale_trans)
        ax.text(x, y, text, color=colour, fontsize=fontsize, ha=ha, va="top",
                transform=ax.transAxes + offset)


def light_xticks(ax, positions: Sequence[float], labels: Sequence[str],
                 grid: bool | None = None) -> None:
    """x ticks as matplotlib would draw them in the current style (marks, vertical grid lines
    if ``grid``, by default as ``axes.grid`` says, labels), made of one line of marks, one
    collection of grid lines and one text per label instead of one ``Tick`` object (5 artists)
    per tick: a third of the cost, which counts on a slider frame. Works on any x scale
    (positions are data coordinates). The axis itself is left without ticks."""
    rc = matplotlib.rcParams
    if grid is None:
        grid = rc["axes.grid"] and rc["axes.grid.axis"] in ("both", "x")
    ax.set_xticks([])
    at_bottom = blended_transform_factory(ax.transData, ax.transAxes)
    if grid:
        ax.vlines(positions, 0, 1, transform=at_bottom, colors=rc["grid.color"],
                  alpha=rc["grid.alpha"], linewidth=rc["grid.linewidth"],
                  linestyles=rc["grid.linestyle"], zorder=1.5)
    size, pad = rc["xtick.major.size"], rc["xtick.major.pad"]
    ax.plot(positions, [0] * len(positions), transform=at_bottom, linestyle="none",
            marker=TICKDOWN, markersize=size, markeredgewidth=rc["xtick.major.width"],
            color=rc["xtick.color"], clip_on=False)
    below = at_bottom + ScaledTranslation(0, -(size + pad) / 72, ax.figure.dpi_scale_trans)
    for x, label in zip(positions, labels, strict=True):
        ax.text(x, 0, label, transform=below, ha="center", va="top",
                fontsize=rc["xtick.labelsize"], color=rc["xtick.labelcolor"]
                if rc["xtick.labelcolor"] != "inherit" else rc["xtick.color"])
    label_height = FontProperties(size=rc["xtick.labelsize"]).get_size_in_points()
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
) -> Axes:
    """Draw a 2-D tensor ``[rows, cols]`` as a heat map (e.g. attention weights, a state ``S``)."""
    data = torch.as_tensor(matrix).detach().to(torch.float64).cpu()
    if data.dim() != 2:
        raise ValueError(f"matrix: expected a 2-D tensor [rows, cols], got {tuple(data.shape)}")
    image = ax.imshow(data.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.grid(False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if xticklabels is not None:
        ax.set_xticks(range(len(xticklabels)), list(xticklabels), rotation=45, ha="right")
    if yticklabels is not None:
        ax.set_yticks(range(len(yticklabels)), list(yticklabels))
    if colorbar_label is not None:
        ax.figure.colorbar(image, ax=ax, label=colorbar_label, shrink=0.85)
    if annotate:
        mid = (data.max() + data.min()) / 2
        for (i, j), value in _cells(data):
            colour = "white" if value < mid else "black"
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=colour)
    return ax


def _cells(data: torch.Tensor):
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            yield (i, j), float(data[i, j])


def figure_png(fig: Figure, dpi: int = 80) -> bytes:
    """Render ``fig`` to PNG bytes (the slow part of a slider update: keep ``dpi`` modest)."""
    buffer = io.BytesIO()
    with course_style():  # text settings apply when the figure is drawn
        # zlib level 1: ~40% less encoding time than the default 6, for ~5% more bytes
        fig.savefig(buffer, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def figure_html(fig: Figure, alt: str, dpi: int = 80) -> str:
    """An ``<img>`` tag holding the figure as a data URI, with its alt text."""
    if not alt or not alt.strip():
        raise ValueError("alt: every figure needs alt text describing what it shows")
    data = base64.b64encode(figure_png(fig, dpi)).decode("ascii")
    return (
        f'<img class="attnlab-figure" src="data:image/png;base64,{data}" '
        f'alt="{html.escape(alt, quote=True)}" style="max-width:100%;height:auto">'
    )


class FigureDisplay:
    """A rendered figure with alt text, displayed as an ``<img>`` in notebooks and the book."""

    def __init__(self, fig: Figure, alt: str, dpi: int = 80) -> None:
        self.alt = alt
        self.html = figure_html(fig, alt, dpi)

    def _repr_html_(self) -> str:
        return self.html


def show_figure(fig: Figure, alt: str, dpi: int = 80) -> FigureDisplay:
    """Return ``fig`` as a displayable image with ``alt`` text (make it a cell's last line)."""
    return FigureDisplay(fig, alt, dpi)
