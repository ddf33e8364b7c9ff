"""A slider panel as plain HTML, for the static website: native controls, pre-rendered frames.

On the website no kernel runs, so every frame of a panel is rendered when the book is built and
the page switches between them. This module writes that page fragment with the browser's own
controls — no widget library — which keeps a lesson page light and accessible:

* an ordered grid (numbers) is an ``<input type="range">`` whose ``aria-valuetext`` is the value
  shown, not its position; a categorical grid (words, true/false) is a group of radio buttons
  (at most :data:`MAX_TOGGLES` options) or a ``<select>``;
* every frame is an element with ``data-index="i,j"`` (one position per control); only the
  selected one is visible, so a page without JavaScript, and a printed page, shows the default,
  and a ``<noscript>`` line says so (:data:`NO_SCRIPT`);
* a visually hidden ``aria-live="polite"`` line announces the new frame's alt text;
* a frame that could not be drawn, and a note about the whole panel, is a message
  (:func:`message_html`) instead of an image.

``_static/attnlab-panels.js`` (about 40 lines, loaded on every page) wires the controls to the
frames. :func:`panel_html` is all the package needs; the JavaScript relies on the class names and
data attributes documented there.
"""

from __future__ import annotations

import html
import itertools
import json
import numbers
from collections.abc import Mapping, Sequence

#: A categorical control with at most this many options is a row of toggles, else a dropdown.
MAX_TOGGLES = 5

#: What a panel says where JavaScript does not run: its controls then move nothing.
NO_SCRIPT = "The sliders need JavaScript; the figure shows its first setting."

#: The heading of a note about a whole panel (e.g. a control whose labels could not be written).
NOTE_HEADING = "This panel has a problem:"


def is_ordered(values: Sequence[object]) -> bool:
    """True when every value is a real number (a slider fits); words and booleans are
    categories (toggles or a dropdown)."""
    return all(
        isinstance(v, numbers.Real) and not isinstance(v, bool)
        for v in values
    )


def _control_html(
    panel_id: str,
    position: int,
    label: str,
    options: Sequence[str],
    ordered: bool,
    default: int,
) -> str:
    """One control: a range input for an ordered grid, toggles or a dropdown for categories."""
    name = f"{panel_id}-c{position}"
    text = html.escape(label)
    shown = html.escape(options[default])
    if ordered:
        values = html.escape(
            json.dumps(list(options), ensure_ascii=False), quote=True
        )
        return (
            f'<div class="attnlab-control"><label for="{name}">{text}</label>'
            f'<input type="range" id="{name}" min="0" max="{len(options) - 1}" step="1" '
            f'value="{default}" data-values="{values}" aria-valuetext="{shown}">'
            f'<output for="{name}" class="attnlab-readout">{shown}</output></div>'
        )
    if len(options) <= MAX_TOGGLES:
        buttons = "".join(
            f'<label class="attnlab-toggle"><input type="radio" name="{name}" value="{i}"'
            f"{' checked' if i == default else ''}><span>{html.escape(option)}</span></label>"
            for i, option in enumerate(options)
        )
        return (
            f'<fieldset class="attnlab-control"><legend>{text}</legend>{buttons}'
            "</fieldset>"
        )
    choices = "".join(
        f'<option value="{i}"{" selected" if i == default else ""}>{html.escape(option)}</option>'
        for i, option in enumerate(options)
    )
    return (
        f'<div class="attnlab-control"><label for="{name}">{text}</label>'
        f'<select id="{name}">{choices}</select></div>'
    )


def message_html(message: str, heading: str) -> str:
    """A message shown in a panel in place of a figure (or above it): a heading and the text."""
    return (
        '<div class="attnlab-message" role="status" style="border-left:4px solid #D55E00;'
        'padding:0.5em 1em;background:#fff4ec">'
        f"<strong>{html.escape(heading)}</strong> {html.escape(message)}</div>"
    )


def panel_html(
    panel_id: str,
    controls: Sequence[tuple[str, Sequence[str], bool]],
    frames: Mapping[tuple[int, ...], tuple[str, str]],
    default: tuple[int, ...],
    notes: Sequence[str] = (),
) -> str:
    """The page fragment of one panel.

    ``controls``: per control, ``(label, formatted options, ordered)``. ``frames``: for every
    combination of positions, ``(frame HTML, alt text)``; ``default``: the positions shown first;
    ``notes``: problems of the whole panel, shown above its figure.
    Raises ``ValueError`` when ``frames`` does not hold exactly one frame per combination.
    """
    shape = [len(options) for _, options, _ in controls]
    grid = set(itertools.product(*(range(n) for n in shape)))
    if set(frames) != grid:
        raise ValueError(
            f"frames: expected one frame for each of the {len(grid)} combinations "
            f"of {shape}, got {len(frames)}"
        )
    if default not in grid:
        raise ValueError(
            f"default: expected positions within {shape}, got {default}"
        )
    inputs = "".join(
        _control_html(panel_id, i, label, options, ordered, default[i])
        for i, (label, options, ordered) in enumerate(controls)
    )
    body = "".join(
        f'<div class="attnlab-frame" data-index="{",".join(map(str, index))}"'
        f"{'' if index == default else ' hidden'}>{content}</div>"
        for index, (content, _alt) in sorted(frames.items())
    )
    status = html.escape(frames[default][1])
    problems = "".join(message_html(note, NOTE_HEADING) for note in notes)
    return (
        f'<div class="attnlab-panel attnlab-static" id="{panel_id}">'
        f'<div class="attnlab-controls">{inputs}</div>'
        f'<noscript><p class="attnlab-noscript">{html.escape(NO_SCRIPT)}</p></noscript>'
        f"{problems}"
        f'<div class="attnlab-frames">{body}</div>'
        f'<p class="attnlab-status" aria-live="polite">{status}</p></div>'
    )
