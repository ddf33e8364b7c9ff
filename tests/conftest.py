"""Shared test settings: a hypothesis profile sized for a 2-core machine, and the headless
Chromium (Debian's, driven by playwright: no browser download) of the site and lab tests."""

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import settings

CHROMIUM = os.environ.get("ATTNLAB_CHROMIUM", "/usr/bin/chromium")

settings.register_profile("course", deadline=None, max_examples=25, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole session, with nothing that phones home."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"],
        )
        yield b
        b.close()


@pytest.fixture(scope="session")
def base_url():
    """The built site (``_build/html``, or ``$ATTNLAB_SITE/html``) served on 127.0.0.1."""
    html = Path(os.environ.get("ATTNLAB_SITE", Path(__file__).resolve().parents[1] / "_build"))
    html = html / "html"

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(html))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
