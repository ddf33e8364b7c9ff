"""Print the course as one PDF: the single-page HTML build, opened in headless Chromium.

    python tools/make_pdf.py [SINGLEHTML_DIR] [OUT.pdf]

``make pdf`` first builds the book with Sphinx's ``singlehtml`` builder (every page in one HTML
file, notebooks from the execution cache), then runs this script, which serves that folder on
127.0.0.1 (no request leaves the machine), waits until MathJax has typeset every formula and every
slider panel shows its first frame, opens every exercise solution, and prints with a print
stylesheet (no navigation, code wrapped, the sliders' controls hidden: each panel prints the
frame it opens on). The PDF is also copied into the website (``_build/html``), which links it
from the "Run it yourself" page.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PDF_NAME = "from-kv-cache-to-kda.pdf"
CHROMIUM = os.environ.get("ATTNLAB_CHROMIUM", "/usr/bin/chromium")

PRINT_CSS = """
@page { size: A4; margin: 16mm 14mm; }
@media print {
  .bd-header, .bd-header-article, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer,
  .bd-footer-article, .bd-footer-content, .prev-next-area, .header-article, .skip-link,
  .toggle-button, .widget-slider, .widget-label, .headerlink, .copybtn, #pst-back-to-top,
  .search-button-field, .theme-switch-button, details.above-input, details.below-input
  { display: none !important; }
  .bd-main, .bd-content, .bd-article-container, .bd-page-width, .bd-container,
  .bd-container__inner { max-width: 100% !important; width: 100% !important; margin: 0 !important;
    padding: 0 !important; }
  pre, pre code { white-space: pre-wrap !important; word-break: break-word; overflow: visible; }
  .toggle-hidden, .toggle-hidden > * { visibility: visible !important; height: auto !important;
    opacity: 1 !important; display: block !important; }
  img, figure, .attnlab-panel, mjx-container[display="true"], .cell_input, .cell_output,
  .admonition { break-inside: avoid; }
  span[id^="document-"] + section { break-before: page; }  /* each page of the book */
}
"""

OPEN_SOLUTIONS = """() => {
  // solutions and {toggle} blocks; a hidden code cell's source stays folded
  document.querySelectorAll('details:not(.above-input):not(.below-input)')
    .forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
}"""


PANELS_DRAWN = """() => {
  const views = document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]');
  const boxes = document.querySelectorAll('.cell_output .jupyter-widgets.widget-vbox,'
                                          + ' .cell_output .jupyter-widgets.widget-box');
  return boxes.length >= views.length && [...document.querySelectorAll('.attnlab-panel')].every(
    p => p.querySelector('img, .attnlab-message'));
}"""


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def root_page() -> str:
    """The book's first page (``root`` in _toc.yml): the single-page build's one real file."""
    import yaml

    return yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]


def print_pdf(folder: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    server, base = serve(folder)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update"])
            page = browser.new_page(viewport={"width": 1000, "height": 1400})
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                (base, "data:", "blob:")) else r.abort())
            # One page of the whole book: typesetting its math and drawing its widgets takes a
            # minute or two of a busy CPU, hence the long waits.
            page.goto(f"{base}/{root_page()}.html", wait_until="load", timeout=300000)
            page.wait_for_function("() => !window.MathJax || !MathJax.startup || "
                                   "MathJax.startup.promise.then(() => true)", timeout=300000)
            page.wait_for_function(
                "() => [...document.querySelectorAll('div.math, span.math')]"
                ".every(e => e.querySelector('mjx-container'))", timeout=300000)
            # every widget view rendered, every slider panel showing a frame
            page.wait_for_function(PANELS_DRAWN, timeout=300000)
            page.evaluate(OPEN_SOLUTIONS)
            page.add_style_tag(content=PRINT_CSS)
            page.emulate_media(media="print")
            page.wait_for_timeout(500)
            out.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(path=str(out), format="A4", print_background=True,
                     prefer_css_page_size=True, display_header_footer=True,
                     header_template="<span></span>",
                     footer_template='<div style="font-size:8px;width:100%;text-align:center">'
                                     '<span class="pageNumber"></span></div>')
            browser.close()
    finally:
        server.shutdown()


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "_build" / "singlehtml"
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "_build" / "pdf" / PDF_NAME
    if not (folder / f"{root_page()}.html").exists():
        print(f"no single-page build in {folder}: run make pdf", file=sys.stderr)
        return 1
    print_pdf(folder, out)
    site = ROOT / "_build" / "html"
    if site.is_dir():
        shutil.copy(out, site / PDF_NAME)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
