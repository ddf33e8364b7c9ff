"""The built website, opened as a reader would: served on 127.0.0.1, in headless Chromium.

Run after the book is built (``make test`` builds it first). A missing build or browser FAILS these
tests: they are the only proof that the pages render offline.

Checks on every page: no console error, no failed or external request, no HTTP error, math typeset
by MathJax, every widget rendered, every image loaded, no broken internal link, no Thebe code, the
licences in the footer and a "last updated" date from git. On every lesson page: every slider moves
its figure with no kernel behind the page, a page without JavaScript says the sliders need it and
shows each panel's first figure, and the Colab button opens that lesson's notebook. A screenshot
of each page is saved under ``_build/screenshots/``.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest
import yaml

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("ATTNLAB_SITE", ROOT / "_build"))  # tools/preview.sh sets it
HTML = BUILD / "html"
SHOTS = BUILD / "screenshots"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
sys.path.insert(0, str(ROOT / "tools"))
from build_edition import DATE_FORMAT  # noqa: E402
from edition import TRANSLATED  # noqa: E402


def site_pages() -> list[str]:
    """Every page of the English site, and the Chinese edition's translated pages (the others
    are the English text under a Chinese frame: tests/test_site_zh.py opens a sample)."""
    if not (HTML / "index.html").exists():
        return []
    skip = ("_static/", "_sources/", "_images/", "offline/", "zh/")
    english = [
        p.relative_to(HTML).as_posix()
        for p in HTML.rglob("*.html")
        if not p.relative_to(HTML).as_posix().startswith(skip)
    ]
    chinese = [f"zh/{page}.html" for page in TRANSLATED if (HTML / "zh" / f"{page}.html").exists()]
    return sorted(english) + chinese


PAGES = site_pages()
# numbered lessons (16b too), not the glossary
LESSONS = [p for p in PAGES if re.match(r"chapters/\d\d[a-z]?_", p)]


def test_site_was_built():
    assert (HTML / "index.html").exists(), "build the book first: make book"
    assert LESSONS, "no lesson pages under _build/html/chapters"


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 1600})
    log: dict[str, list[str]] = {"errors": [], "warnings": [], "failed": [], "external": [],
                                 "http": []}
    page.on("console", lambda m: m.type in ("error", "warning")
            and log["errors" if m.type == "error" else "warnings"].append(m.text))
    page.on("pageerror", lambda e: log["errors"].append(str(e)))
    page.on("requestfailed", lambda r: log["failed"].append(f"{r.url} {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and not r.url.endswith("favicon.ico")
            and log["http"].append(f"{r.status} {r.url}"))

    def local_only(route):
        if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
            return route.continue_()
        log["external"].append(route.request.url)
        return route.abort()

    page.route("**/*", local_only)
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    return page, log


def wait_for_rendering(page) -> None:
    """Wait until MathJax has typeset and every widget view has rendered (or time out)."""
    if page.locator(".math").count():
        page.wait_for_selector("mjx-container", timeout=20000)
        page.wait_for_function("() => !window.MathJax || !MathJax.startup || "
                               "MathJax.startup.promise.then(() => true)", timeout=20000)
    views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
    if views:
        page.wait_for_function(
            "n => document.querySelectorAll('.widget-slider').length > 0"
            " && document.querySelectorAll('.widget-html img, .widget-html .attnlab-message')"
            ".length > 0", arg=views, timeout=30000)
        page.wait_for_timeout(300)


@pytest.mark.parametrize("rel", PAGES)
def test_page_renders_offline(browser, base_url, rel):
    page, log = open_page(browser, f"{base_url}/{rel}")
    try:
        wait_for_rendering(page)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / (rel.replace("/", "__") + ".png")), full_page=True)

        unrendered_math = page.evaluate(
            "() => [...document.querySelectorAll('div.math, span.math')]"
            ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60))")
        assert not unrendered_math, f"math not typeset: {unrendered_math[:3]}"

        views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        rendered = page.locator(".cell_output .jupyter-widgets.widget-vbox, "
                                ".cell_output .jupyter-widgets.widget-box").count()
        assert rendered >= views, f"{views} widget views on the page, {rendered} rendered"
        assert page.locator(".jupyter-widgets .widget-error, .jupyter-widgets-error").count() == 0

        broken = page.evaluate(
            "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))"
            ".map(i => i.src.slice(0, 80))")
        assert not broken, f"images not loaded: {broken}"
        missing_alt = page.evaluate(
            "() => [...document.querySelectorAll('main img')].filter(i => !i.alt).length")
        assert missing_alt == 0, f"{missing_alt} images without alt text"
    finally:
        page.close()
    assert not log["external"], f"requests to other hosts: {log['external'][:5]}"
    assert not log["failed"], f"failed requests: {log['failed'][:5]}"
    assert not log["http"], f"HTTP errors: {log['http'][:5]}"
    assert not log["errors"], f"console errors: {log['errors'][:5]}"


def visible_frame(panel) -> str:
    """What the panel shows now: the visible frame's image data or message ('' if none)."""
    return panel.evaluate(
        "el => [...el.querySelectorAll('.attnlab-frame')].filter(f => !f.hidden)"
        ".map(f => { const x = f.querySelector('img, .attnlab-message');"
        " return x ? (x.src || x.textContent) : ''; }).join('|')")


def move_control(page, control) -> None:
    """Move one control one step, as a reader would: arrow key, click or choice."""
    kind = control.evaluate("c => c.querySelector('input[type=range]') ? 'range' :"
                            " c.querySelector('select') ? 'select' : 'toggles'")
    if kind == "range":
        handle = control.locator("input[type=range]")
        at_end = handle.evaluate("r => r.value === r.max")
        handle.focus()
        page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
    elif kind == "select":
        select = control.locator("select")
        n = select.locator("option").count()
        select.select_option(index=(int(select.input_value()) + 1) % n)
    else:
        radios = control.locator("input[type=radio]")
        chosen = next(i for i in range(radios.count()) if radios.nth(i).is_checked())
        control.locator("label.attnlab-toggle").nth((chosen + 1) % radios.count()).click()


@pytest.mark.parametrize("rel", LESSONS)
def test_every_control_moves_its_figure_without_a_kernel(browser, base_url, rel):
    page, log = open_page(browser, f"{base_url}/{rel}")
    try:
        wait_for_rendering(page)
        panels = page.locator(".attnlab-static")
        assert panels.count() > 0, "a lesson needs at least one slider panel"
        for i in range(panels.count()):
            panel = panels.nth(i)
            panel.scroll_into_view_if_needed()
            controls = panel.locator(".attnlab-control")
            assert controls.count() > 0, f"panel {i} has no control"
            for j in range(controls.count()):
                before = visible_frame(panel)
                assert before, f"panel {i} shows no figure"
                move_control(page, controls.nth(j))
                after = visible_frame(panel)
                assert after and after != before, f"panel {i}, control {j}: figure did not change"
                announced = panel.evaluate(
                    "el => [el.querySelector('.attnlab-status').textContent,"
                    " [...el.querySelectorAll('.attnlab-frame')].filter(f => !f.hidden)"
                    ".map(f => { const x = f.querySelector('img, .attnlab-message');"
                    " return x.alt || x.textContent; })[0]]")
                assert announced[0] and announced[0] == announced[1], \
                    f"panel {i}, control {j}: the new frame was not announced ({announced})"
                spoken = panel.evaluate(
                    "el => [...el.querySelectorAll('input[type=range]')].map(r =>"
                    " [r.getAttribute('aria-valuetext'),"
                    "  r.parentNode.querySelector('output').textContent])")
                assert all(a == b for a, b in spoken), f"panel {i}: sliders announce {spoken}"
    finally:
        page.close()
    assert not log["errors"], f"console errors: {log['errors'][:5]}"


@pytest.mark.parametrize("rel", LESSONS)
def test_without_javascript_every_panel_says_so_and_shows_its_first_figure(browser, base_url,
                                                                             rel):
    """With JavaScript off the controls move nothing: each panel says so in its <noscript>
    line and shows one frame, the first setting, loaded. With JavaScript on, the line is not
    shown."""
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{base_url}/{rel}", wait_until="load")
        panels = page.locator(".attnlab-static")
        assert panels.count() > 0, "a lesson needs at least one slider panel"
        for i in range(panels.count()):
            panel = panels.nth(i)
            line = panel.locator(".attnlab-noscript")
            assert line.count() == 1 and line.is_visible(), f"panel {i}: no <noscript> line"
            assert "need JavaScript" in line.inner_text()
            shown = panel.evaluate(
                "el => [...el.querySelectorAll('.attnlab-frame')].filter(f => !f.hidden)"
                ".map(f => { const img = f.querySelector('img');"
                " return img ? img.complete && img.naturalWidth > 0 : true; })")
            assert shown == [True], f"panel {i}: frames shown without JavaScript: {shown}"
    finally:
        context.close()
    page, _ = open_page(browser, f"{base_url}/{rel}")
    try:
        assert page.locator(".attnlab-noscript").count() == 0
    finally:
        page.close()


def test_a_panel_whose_script_fails_says_so_in_the_panel(browser, base_url):
    """A script error while switching frames (here: a slider's list of values made unreadable)
    shows as a message in the panel, not only in the console, and goes away once it works."""
    rel = next(r for r in LESSONS if "type=\"range\"" in (HTML / r).read_text("utf-8"))
    page, log = open_page(browser, f"{base_url}/{rel}")
    try:
        panel = page.locator(".attnlab-static:has(input[type=range])").first
        panel.scroll_into_view_if_needed()
        slider = panel.locator("input[type=range]").first
        values = slider.get_attribute("data-values")
        slider.evaluate("r => { r.dataset.values = 'not a list'; }")
        move_control(page, slider.locator(".."))
        note = panel.locator(".attnlab-script-error")
        assert note.count() == 1 and "stopped working" in note.inner_text()
        slider.evaluate("(r, v) => { r.dataset.values = v; }", values)
        move_control(page, slider.locator(".."))
        assert note.count() == 0
    finally:
        page.close()
    assert not log["errors"], f"console errors: {log['errors'][:5]}"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


@functools.cache
def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_no_broken_internal_links():
    broken = []
    for rel in PAGES:
        for href in _parse(HTML / rel).links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", href) and not href.startswith("file:"):
                continue  # external (http, mailto, …): not followed offline
            url, anchor = urldefrag(urljoin(f"http://site/{rel}", href))
            target = HTML / unquote(urlparse(url).path.lstrip("/"))
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{rel}: {href}")
            elif anchor and target.suffix == ".html" and anchor not in _parse(target).ids:
                broken.append(f"{rel}: {href} (no #{anchor})")
    assert not broken, "broken internal links:\n" + "\n".join(broken[:20])


def test_no_page_carries_thebe():
    """No live-code button: no Thebe script, configuration, stylesheet or button on any page."""
    code = re.compile(r"<script\b[^>]*>.*?</script>|<link\b[^>]*>|<button\b[^>]*>|class=\"[^\"]*\"",
                      re.S | re.I)
    carrying = [rel for rel in PAGES if any(
        "thebe" in m.group(0).lower() for m in code.finditer((HTML / rel).read_text("utf-8")))]
    assert not carrying, f"Thebe code on: {carrying[:5]}"


@pytest.mark.parametrize("rel", LESSONS)
def test_the_colab_button_opens_this_lessons_notebook(rel):
    """Colab's URL comes from repository.url and branch: github/ORG/REPO/blob/BRANCH/PATH."""
    repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    colab = CONFIG["launch_buttons"]["colab_url"].rstrip("/")
    expected = f"{colab}/github/{repo}/blob/{CONFIG['repository']['branch']}/" \
               f"{rel.removesuffix('.html')}.ipynb"
    links = [h for h in _parse(HTML / rel).links if h.startswith(colab)]
    assert links == [expected], f"Colab links {links}, expected {expected}"
    assert (ROOT / f"{rel.removesuffix('.html')}.ipynb").exists()


@pytest.mark.parametrize("rel", PAGES)
def test_the_footer_names_the_licences_and_the_date_of_the_last_change(rel):
    html = (HTML / rel).read_text(encoding="utf-8")
    if re.search(r'<meta http-equiv="refresh"', html, re.I):
        return  # index.html only redirects to the root page
    text = re.sub(r"<[^>]+>|\s+", " ", html)
    assert "CC BY-SA 4.0" in text and "LICENSE-CODE" in text and "MIT" in text
    chinese = rel.startswith("zh/")
    found = re.search(r"最后更新于 (\d{4}-\d\d-\d\d)" if chinese else
                      r"Last updated on (\d{1,2} [A-Z][a-z]+ \d{4})", text)
    assert found, "no 'Last updated' date"
    page = rel.removeprefix("zh/")
    source = next(((ROOT / page).with_suffix(s) for s in (".ipynb", ".md")
                  if (ROOT / page).with_suffix(s).exists()), None)
    if source is None:  # search, index: pages Sphinx makes, dated by the build
        return
    committed = subprocess.run(["git", "log", "-1", "--format=%cI", "--", str(source)], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", str(source)], cwd=ROOT)
    if committed and changed.returncode == 0:  # the page's source is committed as built
        fmt = DATE_FORMAT if chinese else CONFIG["sphinx"]["config"]["html_last_updated_fmt"]
        assert found.group(1) == datetime.fromisoformat(committed).strftime(fmt)


# Exercises numbered per lesson (tools/exercise_numbers.py): "Exercise N.k" on the page whose
# title is "Lesson N · …", its solution "Solution to Exercise N.k", and every link to it, anywhere
# in the book, showing that number.

class _Exercises(HTMLParser):
    """A page's h1, its exercise and solution headings ({id, kind, text, href}) and every link
    ({href, text}), in page order."""

    def __init__(self) -> None:
        super().__init__()
        self.h1 = ""
        self.headings: list[dict] = []
        self.links: list[dict] = []
        self._box: tuple[str, str] | None = None  # (kind, id) of the admonition we are in
        self._open: list[tuple[str, dict]] = []  # (tag, record) whose text is being collected

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "div" and "admonition" in classes:
            kind = next((k for k in ("exercise", "solution") if k in classes), None)
            self._box = (kind, a.get("id", "")) if kind else None
        elif tag == "h1" and not self.h1:
            self._open.append(("h1", {"text": ""}))
        elif tag == "p" and "admonition-title" in classes and self._box:
            record = {"kind": self._box[0], "id": self._box[1], "text": "", "href": None}
            self.headings.append(record)
            self._open.append(("p", record))
        elif tag == "a" and a.get("href"):
            link = {"href": a["href"], "text": ""}
            self.links.append(link)
            if self._open and self._open[-1][0] == "p":
                self._open[-1][1]["href"] = a["href"]
            self._open.append(("a", link))

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            tag_, record = self._open.pop()
            if tag_ == "h1":
                self.h1 = record["text"].strip()

    def handle_data(self, data):
        for _, record in self._open:
            record["text"] += data


@functools.cache
def _exercises(rel: str) -> _Exercises:
    parser = _Exercises()
    parser.feed((HTML / rel).read_text(encoding="utf-8"))
    return parser


def _shown_exercise(text: str) -> str | None:
    """'13.2' from 'Solution to Exercise 13.2' (the number a text shows), None if it shows none."""
    found = re.search(r"(?:Exercise|练习)\s*(\d+[a-z]?(?:\.\d+)?)", text)
    return found.group(1) if found else None


def _exercise_numbers() -> dict[tuple[str, str], str]:
    """(page, anchor) → the number shown in the heading, for every exercise and solution."""
    numbers = {}
    for rel in PAGES:
        page = _exercises(rel)
        of_exercise = {h["id"]: _shown_exercise(h["text"]) for h in page.headings
                       if h["kind"] == "exercise"}
        numbers |= {(rel, anchor): number for anchor, number in of_exercise.items()}
        numbers |= {(rel, h["id"]): of_exercise.get(urldefrag(h["href"] or "")[1])
                    for h in page.headings if h["kind"] == "solution"}
    return numbers


@pytest.mark.parametrize("rel", LESSONS)
def test_exercises_are_numbered_within_their_lesson(rel):
    page = _exercises(rel)
    lesson = re.match(r"Lesson (\d+[a-z]?) ·", page.h1)
    assert lesson, f"title {page.h1!r} has no lesson number"
    exercises = [h for h in page.headings if h["kind"] == "exercise"]
    shown = [_shown_exercise(h["text"]) for h in exercises]
    assert shown == [f"{lesson[1]}.{k}" for k in range(1, len(exercises) + 1)], \
        f"exercises numbered {shown}"
    number_of = {h["id"]: n for h, n in zip(exercises, shown, strict=True)}
    for solution in (h for h in page.headings if h["kind"] == "solution"):
        href = solution["href"] or ""
        assert href.startswith("#") and href[1:] in number_of, \
            f"solution {solution['id']} links {href!r}, not an exercise of this page"
        assert _shown_exercise(solution["text"]) == number_of[href[1:]], \
            f"{solution['text']!r} does not name {number_of[href[1:]]}"


def test_every_link_to_an_exercise_shows_its_number():
    """{ref}, {numref} and Markdown links to an exercise (or its solution), from any page."""
    numbers = _exercise_numbers()
    assert numbers, "no exercise found in the book"
    wrong, seen = [], 0
    for rel in PAGES:
        for link in _exercises(rel).links:
            url, anchor = urldefrag(urljoin(f"http://site/{rel}", link["href"]))
            target = (unquote(urlparse(url).path.lstrip("/")), anchor)
            if not url.startswith("http://site/") or target not in numbers:
                continue
            seen += 1
            shown = _shown_exercise(link["text"])
            if shown is not None and shown != numbers[target]:
                wrong.append(f"{rel}: {link['text'].strip()!r} links {target}, "
                             f"which is Exercise {numbers[target]}")
    assert seen, "no link to an exercise found (every solution links its exercise)"
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("rel", LESSONS)
def test_no_code_block_scrolls_sideways_at_1280_px(browser, base_url, rel):
    """Every code block and printed output fits the text column of a 1280-px window, with every
    folded block ("Show code cell source", dropdowns, solutions) opened as a reader would."""
    page, _ = open_page(browser, f"{base_url}/{rel}")
    try:
        wide = page.evaluate(
            "() => { document.querySelectorAll('details').forEach(d => d.open = true);"
            " document.querySelectorAll('.toggle-hidden').forEach("
            "e => e.classList.remove('toggle-hidden'));"
            " return [...document.querySelectorAll('div.highlight pre, .cell_output pre')]"
            ".filter(p => p.scrollWidth > p.clientWidth + 1)"
            ".map(p => `${p.scrollWidth} > ${p.clientWidth} px: `"
            " + p.textContent.trim().split('\\n')[0].slice(0, 60)); }")
    finally:
        page.close()
    assert not wide, f"{rel}: code scrolls sideways at 1280 px: {wide}"


#: Display equations a lesson may let scroll sideways on a phone (the widest one, at most).
PHONE_WIDE_EQUATIONS = 1


@pytest.mark.parametrize("rel", LESSONS + [f"zh/{rel}" for rel in LESSONS
                                           if f"zh/{rel}" in PAGES])
def test_a_lesson_fits_a_phone(browser, base_url, rel):
    """On a 390-px phone, with every fold opened, the page never scrolls sideways (long inline
    names break), and its display equations fit the text column (long ones are stacked), except
    at most :data:`PHONE_WIDE_EQUATIONS`, which scroll inside their own box. Both editions."""
    page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    try:
        page.goto(f"{base_url}/{rel}", wait_until="load")
        page.wait_for_load_state("networkidle")
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        wait_for_rendering(page)
        wide = page.evaluate(
            "() => [...document.querySelectorAll('mjx-container[display=\"true\"]')]"
            ".filter(m => { const math = m.querySelector('mjx-math');"
            " return math && math.getBoundingClientRect().width > m.clientWidth + 1; })"
            ".map(m => `${Math.round(m.querySelector('mjx-math').getBoundingClientRect().width)}"
            " > ${m.clientWidth} px: ` + (m.getAttribute('aria-label') || m.textContent)"
            ".slice(0, 60))")
        page_width = page.evaluate("() => document.documentElement.scrollWidth")
    finally:
        page.close()
    assert page_width <= 390, f"{rel}: the page is {page_width} px wide on a 390-px phone"
    assert len(wide) <= PHONE_WIDE_EQUATIONS, (
        f"{rel}: {len(wide)} display equations scroll sideways at 390 px: {wide}")
