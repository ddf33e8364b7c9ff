"""Lesson 1 in a real JupyterLab, as a reader runs it: headless Chromium, live widget mode.

A ``jupyter lab`` server (from this environment, on 127.0.0.1, settings and workspaces in a
temporary folder, on a temporary copy of ``chapters/``) serves the lesson; the test runs all its
cells from the Run menu and proves that:

* every code cell ran, with no error output (read back from the saved copy);
* the kernel knew it was in a Jupyter server, so panels were built in *live* mode: the kernel
  sent the browser one figure per panel, not every frame of every slider grid;
* moving a slider shows a new figure that the kernel rendered on demand: its image arrived over
  the kernel's websocket after the move.

No request leaves 127.0.0.1. A screenshot is saved as ``_build/screenshots/lab_01.png``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page, Route

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("ATTNLAB_SITE", ROOT / "_build")) / "screenshots"  # as test_site.py
LESSON = "01_token_embeddings.ipynb"
PNG = re.compile(rb"data:image/png;base64,([A-Za-z0-9+/=]{64,})")
# Settings a fresh user would otherwise click through, and every cell attached to the DOM.
SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                    "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}
KERNEL_IDLE = ("[...document.querySelectorAll('.jp-StatusBar-TextItem')]"
               ".some(e => /\\(ipykernel\\) \\| Idle$/.test(e.textContent))")
PROMPTS = ("[...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
           ".map(e => e.textContent.trim())")
# Run All has finished when the kernel is idle, a cell has a count and none is queued ("[*]:").
RUN_DONE = (f"{KERNEL_IDLE} && {PROMPTS}.some(t => /^\\[\\d+\\]:$/.test(t))"
            f" && !{PROMPTS}.includes('[*]:')")


@dataclass
class Lab:
    url: str
    token: str
    notebooks: Path  # the server's root: a temporary copy of chapters/


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("lab")
    notebooks = tmp / "chapters"
    notebooks.mkdir()
    for nb in (ROOT / "chapters").glob("*.ipynb"):
        shutil.copy(nb, notebooks / nb.name)
    for name, values in SETTINGS.items():
        path = tmp / "settings" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_WIDGETS"}  # mode from the server
    for var, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")]:
        env[var] = str(tmp / sub)
    port, token = _free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    log = (tmp / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={notebooks}", f"--LabApp.user_settings_dir={tmp / 'settings'}",
         f"--LabApp.workspaces_dir={tmp / 'workspaces'}", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])],
        env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, "jupyter lab exited:\n" + (tmp / "server.log").read_text()
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "jupyter lab did not answer within 60 s"
                time.sleep(0.25)
        yield Lab(url, token, notebooks)
    finally:
        try:  # a clean shutdown also stops the kernels (they run in sessions of their own)
            request = urllib.request.Request(f"{url}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(request, timeout=5).close()
            server.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def _move_first_control(page, panel: Locator) -> None:
    """One step of the panel's first control: a slider's arrow key, the next dropdown option, or
    the next toggle button."""
    handles = panel.locator(".widget-slider .noUi-handle")
    if handles.count():
        handle = handles.first
        handle.focus()
        at_end = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
    elif panel.locator("select").count():
        select = panel.locator("select").first
        n = select.locator("option").count()
        current = select.evaluate("s => s.selectedIndex")
        select.select_option(index=(current + 1) % n)
    else:
        panel.locator(".widget-toggle-button:not(.mod-active)").first.click()


def _visible_figure(panel: Locator) -> str:
    """The base64 PNG of the figure the panel shows now ('' while its frame is empty)."""
    return panel.evaluate(
        "el => [...el.querySelectorAll('img.attnlab-figure')].filter(i => i.offsetParent !== null)"
        ".map(i => i.src.split('base64,')[1] || '').join('|')")


def _menu(page: Page, menu: str, command: str) -> None:
    page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{menu}$")).click()
    page.locator(f'.lm-Menu-item[data-command="{command}"]').click()


def test_lesson_1_runs_live_in_jupyterlab(lab: Lab, browser: Browser) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    external: list[str] = []
    page_errors: list[str] = []
    sent: list[tuple[int, bytes]] = []  # (number of slider moves so far, PNG) from the kernel
    moves = 0

    def local_only(route: Route) -> None:
        if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
            route.continue_()
        else:
            external.append(route.request.url)
            route.abort()

    def on_frame(payload: str | bytes) -> None:
        data = payload.encode() if isinstance(payload, str) else payload
        sent.extend((moves, m) for m in PNG.findall(data))

    page.route("**/*", local_only)
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("websocket", lambda ws: ws.on("framereceived", on_frame))
    try:
        page.goto(f"{lab.url}/lab/tree/{LESSON}?token={lab.token}")
        # The notebook's execution indicator says "idle" even before a kernel exists: wait for
        # the status bar's "Python 3 (ipykernel) | Idle".
        page.wait_for_function(f"() => {KERNEL_IDLE}", timeout=60_000)
        _menu(page, "Run", "runmenu:run-all")
        page.wait_for_function(f"() => {RUN_DONE}", timeout=180_000)

        _menu(page, "File", "docmanager:save")
        page.wait_for_selector(".lm-TabBar-tab.jp-mod-current:not(.jp-mod-dirty)")
        cells = json.loads((lab.notebooks / LESSON).read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        errors = [f"{o['ename']}: {o['evalue']}" for c in code for o in c["outputs"]
                  if o["output_type"] == "error"]
        assert not errors, f"cells failed: {errors}"
        assert all(c["execution_count"] for c in code), "not every code cell ran"

        panels = page.locator(".attnlab-panel")
        assert panels.count() >= 3, f"{panels.count()} slider panels rendered, expected ≥ 3"
        plain = page.locator(".jp-OutputArea img.attnlab-figure").count() - page.locator(
            ".attnlab-panel img.attnlab-figure").count()
        grids = [panels.nth(i).evaluate(
            "el => [...el.querySelectorAll('.noUi-handle')]"
            ".reduce((n, h) => n * (Number(h.getAttribute('aria-valuemax')) + 1), 1)"
            " * [...el.querySelectorAll('select')].reduce((n, s) => n * s.options.length, 1)"
            " * [...el.querySelectorAll('.widget-toggle-buttons')]"
            ".reduce((n, t) => n * t.querySelectorAll('button').length, 1)")
            for i in range(panels.count())]
        n_sent, n_live = len({png for _, png in sent}), panels.count() + plain
        assert n_live < sum(grids), "pre-rendering would not show: the grids are too small"
        # Static mode would have sent every frame of every grid up front.
        assert n_sent <= n_live, (f"the kernel sent {n_sent} figures for {panels.count()} panels "
                                  f"and {plain} plain figure(s): frames were pre-rendered")

        for i in range(panels.count()):
            panel = panels.nth(i)
            panel.scroll_into_view_if_needed()
            shown = panel.locator("img.attnlab-figure").count()
            assert shown == 1, f"panel {i} shows {shown} figures, expected its current frame"
            before = _visible_figure(panel)
            assert before, f"panel {i} shows no figure"
            moves += 1
            _move_first_control(page, panel)
            page.wait_for_function(
                "([el, before]) => [...el.querySelectorAll('img.attnlab-figure')]"
                ".some(i => i.offsetParent !== null && !i.src.endsWith(before))",
                arg=[panel.element_handle(), before], timeout=10_000)
            after = _visible_figure(panel)
            assert after and after != before, f"panel {i}: the figure did not change"
            from_kernel = (moves, after.encode()) in sent
            assert from_kernel, f"panel {i}: the kernel did not send the new figure after the move"

        page.locator(".attnlab-panel").first.scroll_into_view_if_needed()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "lab_01.png"))
    finally:
        page.close()
    assert not external, f"requests to other hosts: {external[:5]}"
    assert not page_errors, f"page errors: {page_errors[:5]}"
