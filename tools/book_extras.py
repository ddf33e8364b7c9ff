"""A local Sphinx extension for the course's website (``sphinx.local_extensions`` in _config.yml).

1. **No Thebe.** Jupyter Book 1 always loads ``sphinx_thebe``, which puts a Thebe configuration and
   a loader script that fetches Thebe from a CDN into every page, even with the launch button off
   (and emits its inline script twice, a console error). The course has no live-code button (the
   README says why), so this extension disconnects sphinx-thebe's event handlers and drops its
   script and stylesheet: no page carries any Thebe code.
2. **The single-page build** (``make pdf``) works: sphinx-exercise registers its nodes for the
   ``singlehtml`` builder, so Sphinx no longer falls back to the ``html`` handlers for every other
   extension's nodes there (myst-nb's hidden code cells, sphinx-jupyterbook-latex's toc markers):
   this extension gives ``singlehtml`` every ``html`` handler it lacks. And myst-nb adds a
   notebook's widget state (the slider panels' frames) to that notebook's page only; the single
   page gets the states of every notebook, merged, with the widget scripts.
3. **The calculator's scripts on its page only.** Jupyter Book 1 adds every ``.js`` under
   ``_static/`` to every page; ``calculator.js`` and its presets are dropped from every page but
   ``calculator`` (the config.json calculator), so no other page carries their weight.
4. **Last updated from git.** Each page's "Last updated" date (``html_last_updated_fmt``) is the
   date of the last commit that changed its source file, not the build date. A file git does not
   know (not yet committed) keeps the build date.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

from sphinx.application import Sphinx

THEBE_MODULE = "sphinx_thebe"


def drop_thebe(app: Sphinx) -> None:
    """Disconnect every sphinx-thebe handler and forget its stylesheet (it is already set up)."""
    for event, listeners in app.events.listeners.items():
        app.events.listeners[event] = [
            lst for lst in listeners if getattr(lst.handler, "__module__", "") != THEBE_MODULE]
    app.registry.css_files = [
        (name, attrs) for name, attrs in app.registry.css_files if "thebe" not in str(name)]


def remove_thebe_assets(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Drop any script or stylesheet that mentions Thebe from the page (belt and braces)."""
    for key in ("script_files", "css_files"):
        if key in context:
            context[key][:] = [f for f in context[key] if "thebe" not in _asset_text(f).lower()]


CALCULATOR_PAGE = "calculator"
CALCULATOR_SCRIPTS = ("calculator.js", "calculator_presets.js")


def calculator_scripts_on_its_page(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Keep ``_static/calculator*.js`` on the calculator's page only."""
    if pagename != CALCULATOR_PAGE and "script_files" in context:
        context["script_files"][:] = [
            f for f in context["script_files"]
            if not str(getattr(f, "filename", f)).endswith(CALCULATOR_SCRIPTS)]


def _asset_text(asset) -> str:
    attributes = getattr(asset, "attributes", {}) or {}
    return f"{getattr(asset, 'filename', asset)} {attributes.get('body', '')}"


def git_date(path: Path, fmt: str) -> str | None:
    """The commit date of the last change to ``path``, formatted with ``fmt``; None if unknown."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cI", "--", path.name],
            cwd=path.parent, capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return datetime.fromisoformat(out.strip()).strftime(fmt) if out.strip() else None


def last_updated_from_git(app: Sphinx, pagename, templatename, context, doctree) -> None:
    fmt = app.config.html_last_updated_fmt
    if fmt is None or pagename not in app.env.all_docs:
        return
    date = git_date(Path(app.env.doc2path(pagename)), fmt)
    if date:
        context["last_updated"] = date


def share_html_handlers(app: Sphinx) -> None:
    """Let the single-page HTML translator render every node the HTML translator renders."""
    handlers = app.registry.translation_handlers
    if app.builder.name == "singlehtml" and "singlehtml" in handlers:
        for node, visitors in handlers.get("html", {}).items():
            handlers["singlehtml"].setdefault(node, visitors)


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def merge_widget_states(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """On the single page, add every notebook's widget state (and the widget scripts) at once."""
    if app.builder.name != "singlehtml" or pagename != app.config.root_doc:
        return
    from myst_nb.sphinx_ import NbMetadataCollector

    merged: dict | None = None
    scripts: dict[str, tuple] = {}
    for data in NbMetadataCollector.get_doc_data(app.env).values():
        for key, (uri, kwargs) in data.get("js_files", {}).items():
            if kwargs.get("type") != WIDGET_STATE:
                scripts[key] = (uri, kwargs)
                continue
            state = json.loads(kwargs["body"].replace(r"<\/script>", "</script>"))
            if merged is None:
                merged = {k: v for k, v in state.items() if k != "state"} | {"state": {}}
            merged["state"].update(state["state"])
    if merged is None:
        return
    body = json.dumps(merged).replace("</script>", r"<\/script>")
    app.add_js_file(None, type=WIDGET_STATE, body=body)
    for uri, kwargs in scripts.values():
        app.add_js_file(uri, **kwargs)


def setup(app: Sphinx) -> dict:
    drop_thebe(app)
    app.connect("builder-inited", share_html_handlers, priority=100)
    app.connect("html-page-context", merge_widget_states)
    app.connect("html-page-context", remove_thebe_assets)
    app.connect("html-page-context", calculator_scripts_on_its_page)
    app.connect("html-page-context", last_updated_from_git)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
