"""Move every slider of every open panel, as a reader would, and time each move.

Runs inside a notebook's kernel after all its cells (``notebooks.py`` appends a cell that calls
:func:`sweep_all`), with the panels in live mode: only the first frame of each panel exists, and
each move runs the panel's callback, which draws the new frame and sends it to the front end.
"""

from __future__ import annotations

import time

from attnbook.widgets import SliderPanel, open_panels

#: Pause between moves, so the kernel has sent the previous frame (a reader does not move a
#: slider every millisecond); it is not part of the timings.
PAUSE_S = 0.05


def snake(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every index of a grid, each one slider step from the last (a boustrophedon walk)."""
    if len(shape) == 1:
        return [(i,) for i in range(shape[0])]
    inner = snake(shape[1:])
    return [(i, *rest) for i in range(shape[0]) for rest in (inner if i % 2 == 0 else inner[::-1])]


def sweep(panel: SliderPanel) -> list[float]:
    """Milliseconds of every slider move that drew a new frame (callback + draw + PNG + send)."""
    times = []
    for index in snake(tuple(len(c.values) for c in panel.controls)):
        drawn = len(panel.render_seconds)
        start = time.perf_counter()
        for slider, i in zip(panel.sliders, index, strict=True):
            slider.index = i
        elapsed = time.perf_counter() - start
        if len(panel.render_seconds) == drawn + 1:  # one move, one new frame
            times.append(elapsed * 1000)
        time.sleep(PAUSE_S)
    return times


def sweep_all() -> dict[str, dict]:
    """For every open panel: the first frame's draw time (ms) and the timed slider moves."""
    return {panel.name: {"display_ms": panel.render_seconds[0] * 1000, "moves_ms": sweep(panel)}
            for panel in open_panels() if panel.mode == "live" and panel.render_seconds}

