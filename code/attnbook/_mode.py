"""Where the lessons run: live in a Jupyter server (JupyterLab, Binder) or executed to build the
static website. Slider panels and training progress bars both ask."""

from __future__ import annotations

import os


def widget_mode() -> str:
    """ "live" inside a Jupyter server session (JupyterLab, Binder), else "static".

    ``ATTNLAB_WIDGETS=live|static`` overrides the guess. The book build executes notebooks with
    no Jupyter server, so it gets "static": panels render every frame, and training shows no
    progress bar (a frozen bar on a web page tells a reader nothing).
    """
    forced = os.environ.get("ATTNLAB_WIDGETS")
    if forced in ("live", "static"):
        return forced
    return "live" if os.environ.get("JPY_SESSION_NAME") else "static"
