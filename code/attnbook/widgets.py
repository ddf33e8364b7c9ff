"""Slider panels that bind a package function to a figure — live in Jupyter, and still working on
the static website, where no kernel runs.

One call, ``slider_panel(draw, controls)``, gives both behaviours:

* Every control moves over a small grid of values: a slider for numbers, toggle buttons (or a
  dropdown) for categories. Each combination of values has its own frame (an ``<img>`` with alt
  text).
* In JupyterLab or Binder (``mode="live"``) the controls are ipywidgets: only the first frame is
  rendered, the package function runs when a control reaches a new combination, and the frame is
  kept for the next visit (frames sit in ``ipywidgets.Stack`` s ``jslink`` -ed to the controls).
* When the notebook is executed to build the website (``mode="static"``) every frame is rendered
  up front into plain HTML with the browser's own controls (``attnbook.panel_page``): the page
  switches frames with no kernel and no widget library.

``draw(fig, **values)`` adds its axes (``fig.subplots(...)``) to a cleared figure that the panel
reuses, in the course style, so nothing flickers and no figure leaks. Nothing the author's
functions raise escapes the panel, in either mode: if ``draw`` rejects a combination with
``ValueError`` the frame shows that message; any other error in ``draw``, in the alt text function
or in rendering the frame shows its type and message in the frame; a ``formats`` function that
fails leaves its control with the plain values and a note above the figure. The panel keeps
working either way.

Live moves are debounced: a move that comes from the reader's browser while the kernel's event
loop runs draws its frame :data:`DEBOUNCE_SECONDS` later, with the controls where they are then,
so a run of quick moves draws the frame where they stop instead of every frame on the way (a move
made in code, e.g. by ``make bench``, draws at once).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from attnlab.i18n import LocalText, language_blocks, text_of, tr

from ._mode import widget_mode
from .panel_page import (
    MAX_TOGGLES,
    NOTE_HEADING,
    is_ordered,
    message_html,
    panel_html,
)
from .plotting import PIXEL_DENSITY, course_style, figure_html, new_figure

DrawFunction = Callable[..., None]
AltText = str | Callable[..., str]

#: Frames beyond this many per panel make pages heavy (≈ 20–40 KB each): choose coarser grids.
MAX_FRAMES = 40

#: Seconds a live panel waits after a move from the browser before it draws (see the module doc).
DEBOUNCE_SECONDS = 0.05

#: Every panel alive in this process (its sliders keep it alive), by number: ``make bench``
#: moves their sliders.
_OPEN_PANELS: weakref.WeakValueDictionary[int, SliderPanel] = (
    weakref.WeakValueDictionary()
)
_PANEL_NUMBERS = itertools.count(1)


def fast_sliders(enable: bool = True) -> None:
    """Opt in (a notebook's setup cell calls it) to slider moves without garbage-collection stalls.

    With ``enable``: collect garbage once, then move every object alive now (torch, matplotlib,
    the lesson's data) out of the cycle collector's reach (``gc.freeze``). A full collection then
    scans only what later cells and frames create, ~40 ms instead of ~200 ms in a kernel with
    torch loaded, so it no longer stalls a slider move; objects alive now are never collected as
    cycles, which costs nothing for what stays alive anyway. This changes the interpreter's
    garbage collector, so it is never done behind the caller's back: ``slider_panel`` does not
    call it. ``fast_sliders(False)`` undoes it (``gc.unfreeze``: the objects go back to the
    collector's oldest generation). Calling it again refreezes what is alive then."""
    if enable:
        gc.collect()
        gc.freeze()
    else:
        gc.unfreeze()


def open_panels() -> list[SliderPanel]:
    """The slider panels alive in this process (e.g. a notebook's kernel), oldest first."""
    return [panel for _, panel in sorted(_OPEN_PANELS.items())]


@dataclass
class Control:
    """One slider: its name (the keyword passed to ``draw``), grid of values and label."""

    name: str
    values: Sequence[Any]
    label: LocalText
    default: Any
    fmt: Callable[[Any], str] = str

    def __post_init__(self) -> None:
        self.values = list(self.values)
        if not self.values:
            raise ValueError(
                f"controls[{self.name!r}]: expected at least one value, got none"
            )
        if self.default not in self.values:
            raise ValueError(
                f"defaults[{self.name!r}]: expected one of {self.values}, got {self.default!r}"
            )


@dataclass
class SliderPanel:
    """The widgets of one panel; display it by making it a cell's last expression."""

    draw: DrawFunction
    controls: list[Control]
    alt: AltText
    mode: str
    figure: Figure
    density: float
    sliders: list[widgets.ValueWidget] = field(default_factory=list)
    frames: dict[tuple[int, ...], widgets.HTML] = field(default_factory=dict)
    widget: widgets.VBox | None = None
    page_html: str = ""
    default_index: tuple[int, ...] = ()
    render_seconds: list[float] = field(default_factory=list)
    layouts: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    number: int = field(default_factory=lambda: next(_PANEL_NUMBERS))
    notes: list[str] = field(default_factory=list)
    pending: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The draw function's name and the panel's number in this process,
        e.g. "draw_x#3"; a lambda is named by its sliders, "panel(step)#1"."""
        name = getattr(self.draw, "__name__", "<lambda>")
        if name == "<lambda>":
            name = f"panel({', '.join(c.name for c in self.controls)})"
        return f"{name}#{self.number}"

    def values_at(self, index: tuple[int, ...]) -> dict[str, Any]:
        """The keyword arguments of ``draw`` for one combination of slider positions."""
        return {
            c.name: c.values[i]
            for c, i in zip(self.controls, index, strict=True)
        }

    def current_index(self) -> tuple[int, ...]:
        """The slider positions now (the defaults, in static mode, where there are no sliders)."""
        if not self.sliders:
            return self.default_index
        return tuple(s.index for s in self.sliders)

    def draw_frame(self, index: tuple[int, ...]) -> tuple[str, ...] | None:
        """Draw the frame at ``index`` onto the panel's figure, laid out as earlier frames of the
        same shape were (see :meth:`remember_layout`); nothing is rendered yet. Returns the
        layout's key. Raises what ``draw`` raises."""
        fig = self.figure
        _clear_figure(fig)
        fig.set_layout_engine("constrained")
        with course_style():
            self.draw(fig, **self.values_at(index))
        return self._reuse_layout(fig)

    def remember_layout(self, layout: tuple[str, ...] | None) -> None:
        """After a frame was rendered: keep its axes positions for later frames of its shape."""
        if layout is not None and layout not in self.layouts:
            self.layouts[layout] = [
                ax.get_position() for ax in self.figure.axes
            ]

    def render(self, index: tuple[int, ...]) -> tuple[str, str]:
        """Run ``draw`` for one combination: the frame's HTML (its image, or a message) and its
        text (the image's alt text, or the message), which the website announces.

        A ``ValueError`` from ``draw`` (a combination it rejects) shows its message; any other
        error in ``draw``, in the alt text or in rendering shows its type and message, so the
        panel keeps working either way."""
        start = time.perf_counter()
        values = self.values_at(index)
        try:
            alt = self.alt(**values) if callable(self.alt) else self.alt
            if not isinstance(alt, str) or not alt.strip():
                raise ValueError(f"expected a non-empty text, got {alt!r}")
        except Exception as error:  # noqa: BLE001 - a frame must never stay blank
            frame = _message(
                _describe(error),
                heading=tr("The alt text of this frame could not be written:"),
            )
        else:
            frame = self._draw_and_render(index, alt)
        self.render_seconds.append(time.perf_counter() - start)
        return frame

    def _draw_and_render(
        self, index: tuple[int, ...], alt: str
    ) -> tuple[str, str]:
        try:
            layout = self.draw_frame(index)
        except ValueError as error:  # a combination draw rejects: it says why
            return _message(_text(error))
        except Exception as error:  # noqa: BLE001 - a frame must never stay blank
            return _message(
                _describe(error), heading=tr("This frame could not be drawn:")
            )
        try:
            content = figure_html(self.figure, alt, density=self.density)
        except Exception as error:  # noqa: BLE001 - e.g. an artist that cannot be saved
            return _message(
                _describe(error), heading=tr("This frame could not be drawn:")
            )
        self.remember_layout(layout)
        return content, alt

    def _reuse_layout(self, fig: Figure) -> tuple[str, ...] | None:
        """Place the axes where constrained layout put them for an earlier frame of the same shape.

        Constrained layout costs a second draw of every frame; the frames of one panel share
        their structure, so the first frame of each shape pays for it and the rest reuse its
        axes positions. Returns the shape's key, or None when the figure chose its own layout.
        """
        if not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
            _remove_layout_engine(fig)
            return None
        # the y labels and the widest y tick label set the left margin: frames that differ in
        # them get their own layout (else a longer label would be clipped)
        key = tuple(
            (
                ax.get_label() or type(ax).__name__,
                ax.get_ylabel(),
                _widest_ytick(ax),
            )
            for ax in fig.axes
        )
        if key in self.layouts:
            _remove_layout_engine(fig)
            for ax, position in zip(fig.axes, self.layouts[key], strict=True):
                ax.set_position(position)
        return key

    def fill(self, index: tuple[int, ...]) -> None:
        """Render the frame at ``index`` unless it already holds its figure."""
        frame = self.frames[index]
        if not frame.value:
            frame.value = self.render(index)[0]

    def _on_slider(self, _change: dict) -> None:
        """A control moved: draw its frame now, or, for a move from the browser in a running
        kernel, :data:`DEBOUNCE_SECONDS` after the last of a run of moves (the last wins)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: a script, a test, no kernel
            loop = None
        # ipywidgets locks the properties a browser message sets while it notifies observers
        from_browser = any(slider._property_lock for slider in self.sliders)
        if loop is None or not from_browser:
            self.fill(self.current_index())
            return
        if self.pending is not None:
            self.pending.cancel()
        self.pending = loop.call_later(
            DEBOUNCE_SECONDS, self._fill_where_the_controls_are
        )

    def _fill_where_the_controls_are(self) -> None:
        self.pending = None
        self.fill(self.current_index())

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(
            HTML(self.page_html) if self.mode == "static" else self.widget
        )

    def static_html(self) -> str:
        """Every frame rendered, as the plain-HTML panel of the website (no widgets)."""
        controls = [
            (text_of(c.label), self.option_labels(c), is_ordered(c.values))
            for c in self.controls
        ]
        frames = {
            index: self.render(index)
            for index in itertools.product(
                *(range(len(c.values)) for c in self.controls)
            )
        }
        return panel_html(
            f"attnlab-panel-{self.number}",
            controls,
            frames,
            self.current_index(),
            notes=self.notes,
        )

    def option_labels(self, control: Control) -> list[str]:
        """What a control shows for each value: ``control.fmt`` of it, or, when that fails
        or gives no text, the value as written by default (and a note in :attr:`notes`)."""
        try:
            labels = [control.fmt(v) for v in control.values]
            wrong = [x for x in labels if not isinstance(x, str)]
            if wrong:
                raise TypeError(f"returned {wrong[0]!r}, not text")
        except Exception as error:  # noqa: BLE001 - the panel still works with plain labels
            self.notes.append(
                f"the values of the control {control.label!r} are shown as they are: "
                f"its format function failed ({_describe(error)})."
            )
            return [_format_value(v) for v in control.values]
        return labels


def slider_panel(
    draw: DrawFunction,
    controls: dict[str, Sequence[Any]],
    *,
    alt: AltText,
    defaults: dict[str, Any] | None = None,
    labels: dict[str, LocalText] | None = None,
    formats: dict[str, Callable[[Any], str]] | None = None,
    width: float = 6.4,
    height: float = 3.6,
    mode: str | None = None,
) -> SliderPanel:
    """A panel of sliders, one per entry of ``controls`` (name → grid of values), and a figure.

    ``draw(fig, **values)`` draws onto ``fig`` (cleared before each call). ``alt`` is the frames'
    alt text, or a function of the values that returns it; ``labels`` are the controls' labels,
    each an English message (shown through ``tr``, so in the page's language) or a function
    that writes it. ``draw``, ``alt``, ``labels`` and ``formats`` are
    called once per language the book is built in (``attnlab.i18n``), so their text may use
    ``tr``. ``defaults`` picks each slider's first
    position (else the first value); that frame is always rendered, so even a page that never
    runs JavaScript shows a meaningful figure.
    """
    defaults, labels, formats = defaults or {}, labels or {}, formats or {}
    for name in list(defaults) + list(labels) + list(formats):
        if name not in controls:
            raise ValueError(
                f"{name!r}: not one of the controls {list(controls)}"
            )
    if not callable(alt) and not (isinstance(alt, str) and alt.strip()):
        raise ValueError(
            "alt: every panel needs alt text (or a function of the values giving it)"
        )
    mode = mode or widget_mode()
    if mode not in ("live", "static"):
        raise ValueError(f"mode: expected 'live' or 'static', got {mode!r}")
    parsed = [
        Control(
            name,
            list(values),
            _label(labels.get(name, name)),
            defaults.get(name, list(values)[0] if len(values) else None),
            formats.get(name, _format_value),
        )
        for name, values in controls.items()
    ]
    n_frames = 1
    for control in parsed:
        n_frames *= len(control.values)
    if n_frames > MAX_FRAMES:
        raise ValueError(
            f"controls: {n_frames} combinations; at most {MAX_FRAMES} keep pages light"
        )

    # the website's frames at 2× pixel density (build time only); live frames at 1×, which keeps
    # a slider move within its latency budget, shown at the same CSS size
    density = PIXEL_DENSITY if mode == "static" else 1
    panel = SliderPanel(
        draw, parsed, alt, mode, new_figure(width, height), density
    )
    panel.default_index = tuple(c.values.index(c.default) for c in parsed)
    if mode == "static":
        panel.page_html = language_blocks(
            panel.static_html, probe=lambda: panel.render(panel.default_index)
        )
        return panel
    _OPEN_PANELS[panel.number] = panel
    panel.sliders = [_make_control(c, panel.option_labels(c)) for c in parsed]
    shape = [len(c.values) for c in parsed]
    panel.frames = {
        index: widgets.HTML()  # no fixed height: the image scales with the column, no gap
        for index in itertools.product(*(range(n) for n in shape))
    }
    stack = _nested_stack(panel, (), 0)
    notes = [
        widgets.HTML(message_html(note, NOTE_HEADING)) for note in panel.notes
    ]
    panel.widget = widgets.VBox(
        [*panel.sliders, *notes, stack], layout=widgets.Layout(width="100%")
    )
    panel.widget.add_class("attnlab-panel")

    panel.fill(panel.current_index())
    for slider in panel.sliders:
        slider.observe(panel._on_slider, names="index")
    return panel


def _clear_figure(fig: Figure) -> None:
    """``fig.clear()`` without its costly part: it resets every axes (all their ticks and
    artists) before dropping them. Dropping them is enough."""
    for ax in list(fig.axes):
        fig.delaxes(ax)
    fig.clear()


def _widest_ytick(ax) -> int:
    """The number of characters of the longest y tick label shown (within the y limits)."""
    low, high = sorted(ax.get_ylim())
    return max(
        (
            len(label.get_text())
            for value, label in zip(
                ax.get_yticks(), ax.get_yticklabels(), strict=False
            )
            if low <= value <= high
        ),
        default=0,
    )


def _remove_layout_engine(fig: Figure) -> None:
    """Leave the axes where they are. Any layout engine — even the placeholder that
    ``set_layout_engine("none")`` installs once another engine was set — makes ``savefig`` draw
    the whole figure twice."""
    fig.set_layout_engine(None)


def _nested_stack(
    panel: SliderPanel, prefix: tuple[int, ...], depth: int
) -> widgets.Widget:
    """Stack for slider ``depth``: its pages are the frames (last slider) or deeper stacks."""
    control = panel.controls[depth]
    last = depth == len(panel.controls) - 1
    pages = [
        panel.frames[(*prefix, i)]
        if last
        else _nested_stack(panel, (*prefix, i), depth + 1)
        for i in range(len(control.values))
    ]
    slider = panel.sliders[depth]
    stack = widgets.Stack(pages, selected_index=slider.index)
    widgets.jslink((slider, "index"), (stack, "selected_index"))
    return stack


def _label(text: LocalText) -> LocalText:
    """A control's label: a function that writes it in the current language (a plain string
    is a message for ``tr``)."""
    return text if callable(text) else lambda: tr(text)


def _make_control(control: Control, labels: list[str]) -> widgets.ValueWidget:
    """A slider for an ordered grid (numbers); toggle buttons, or a dropdown past
    ``MAX_TOGGLES`` options, for categories — as on the website (see ``panel_page``).
    ``labels``: what it shows for each value."""
    options = list(zip(labels, control.values, strict=True))
    common = dict(
        options=options,
        value=control.default,
        description=text_of(control.label),
        style={"description_width": "initial"},
    )
    if is_ordered(control.values):
        return widgets.SelectionSlider(
            **common,
            continuous_update=False,
            layout=widgets.Layout(width="min(100%, 520px)"),
        )
    if len(options) <= MAX_TOGGLES:
        return widgets.ToggleButtons(**common)
    return widgets.Dropdown(**common)


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _message(message: str, heading: str | None = None) -> tuple[str, str]:
    """A message in place of a figure: its HTML and its plain text."""
    heading = heading or tr("Not a valid combination:")
    return (message_html(message, heading), f"{heading} {message}")


def _describe(error: BaseException) -> str:
    """The exception's type and message, e.g. "TypeError: …"."""
    text = _text(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _text(error: BaseException) -> str:
    """The exception's message, even when it cannot print itself."""
    try:
        return str(error)
    except Exception as inner:  # noqa: BLE001 - the message of a message
        return f"(no message: its __str__ raised {type(inner).__name__})"
