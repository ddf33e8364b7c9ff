"""The built website as a first-time visitor gets it: how much a cold visit transfers, whether the
pages pass an accessibility audit, and whether the course's own scripts stay quiet.

* Weight: a cold first visit to any lesson (empty cache, every request the page makes until the
  network is idle) transfers at most :data:`MAX_COLD_BYTES`, served as-is (no compression).
* Accessibility: axe-core (the npm package, run inside the page) finds no critical or serious
  violation in the course's own markup (the article). Violations in the theme's chrome are
  printed, not failed: they are the theme's.
* Quiet: no console error or warning on any page.
"""

from __future__ import annotations

import json

import pytest
from test_site import (
    HTML,
    LESSONS,
    PAGES,
    ROOT,
    open_page,
    wait_for_rendering,
)

pytestmark = pytest.mark.site

#: The budget of a cold visit to one lesson, in bytes (5 MB).
MAX_COLD_BYTES = 5_000_000
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
#: The part of a page the course writes (the theme's header, sidebars and footer are not ours).
ARTICLE = "article.bd-article"


def cold_visit_bytes(browser, url: str) -> tuple[int, list[tuple[int, str]]]:
    """Bytes a cold visit transfers (Chromium's encoded data length of every response), and the
    five largest responses."""
    context = browser.new_context()
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    sizes: dict[str, int] = {}
    urls: dict[str, str] = {}
    cdp.on("Network.responseReceived",
           lambda e: urls.__setitem__(e["requestId"], e["response"]["url"]))
    cdp.on("Network.loadingFinished",
           lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])))
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(500)
    context.close()
    largest = sorted(((n, urls.get(k, "?")) for k, n in sizes.items()), reverse=True)[:5]
    return sum(sizes.values()), largest


@pytest.mark.parametrize("rel", LESSONS)
def test_a_cold_visit_to_a_lesson_is_light(browser, base_url, rel):
    total, largest = cold_visit_bytes(browser, f"{base_url}/{rel}")
    assert total <= MAX_COLD_BYTES, (
        f"{rel}: a cold visit transfers {total / 1e6:.2f} MB (budget "
        f"{MAX_COLD_BYTES / 1e6:.0f} MB); largest: "
        + ", ".join(f"{n / 1e6:.2f} MB {u.rsplit('/', 1)[-1][:40]}" for n, u in largest))


@pytest.mark.parametrize("rel", PAGES)
def test_pages_pass_the_accessibility_audit_and_stay_quiet(browser, base_url, rel):
    assert AXE.exists(), "axe-core is missing: run tools/vendor_js.sh (npm ci)"
    page, log = open_page(browser, f"{base_url}/{rel}")
    try:
        wait_for_rendering(page)
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
        result = page.evaluate(
            "() => axe.run(document, {resultTypes: ['violations']})"
            ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact,"
            " nodes: v.nodes.map(n => n.target.join(' '))})))")
        ours = page.evaluate(
            "([sel, violations]) => violations.map(v => ({...v, nodes: v.nodes.filter(t => {"
            " const el = document.querySelector(t); return el && el.closest(sel); })}))"
            ".filter(v => v.nodes.length)", [ARTICLE, result])
        icons = page.evaluate(
            "() => [...document.querySelectorAll('.fa-solid, .fa-brands, .fas, .fab')]"
            ".filter(i => i.offsetParent !== null)"
            ".map(i => getComputedStyle(i, '::before').fontFamily)")
    finally:
        page.close()
    theirs = [v for v in result if v["id"] not in {o["id"] for o in ours}]
    if theirs:
        print(f"{rel}: theme violations (not the course's): "
              + json.dumps([(v["id"], v["impact"], len(v["nodes"])) for v in theirs]))
    serious = [v for v in ours if v["impact"] in ("critical", "serious")]
    assert not serious, f"{rel}: {json.dumps(serious, ensure_ascii=False)[:1500]}"
    assert all("Font Awesome" in family for family in icons), f"icons without their font: {icons}"
    assert not log["errors"], f"console errors: {log['errors'][:5]}"
    assert not log["warnings"], f"console warnings: {log['warnings'][:5]}"


def test_no_page_loads_the_fontawesome_script():
    loading = [rel for rel in PAGES
               if "scripts/fontawesome.js" in (HTML / rel).read_text(encoding="utf-8")]
    assert not loading, f"pages still load fontawesome.js: {loading[:5]}"


def test_chinese_text_is_marked_and_has_a_cjk_font(browser, base_url):
    page, _ = open_page(browser, f"{base_url}/chapters/glossary.html")
    try:
        unmarked = page.evaluate(
            "() => { const out = []; const walk = document.createTreeWalker("
            "document.querySelector('article'), NodeFilter.SHOW_TEXT);"
            " while (walk.nextNode()) { const t = walk.currentNode;"
            " if (/[\\u4e00-\\u9fff]/.test(t.textContent) && !t.parentElement.closest('[lang|=zh]')"
            " && !t.parentElement.closest('mjx-container, pre, code')) out.push(t.textContent); }"
            " return out.slice(0, 5); }")
        fonts = page.evaluate(
            "() => [...new Set([...document.querySelectorAll('article [lang|=zh]')]"
            ".map(e => getComputedStyle(e).fontFamily))]")
    finally:
        page.close()
    assert not unmarked, f"Chinese text without lang=zh: {unmarked}"
    assert fonts and all("CJK" in f for f in fonts), fonts


@pytest.mark.parametrize("query", ["键值缓存", "缓存", "键值", "KV cache"])
def test_search_finds_chinese_terms_and_their_parts(browser, base_url, query):
    page, _ = open_page(browser, f"{base_url}/search.html?q={query}")
    try:
        page.wait_for_selector("#search-results ul.search li", timeout=20000)
        hits = page.evaluate(
            "() => [...document.querySelectorAll('#search-results ul.search li a')]"
            ".map(a => a.getAttribute('href'))")
    finally:
        page.close()
    assert any("glossary" in h for h in hits), f"{query!r}: results {hits[:10]}"


def test_the_search_field_leaves_the_query_readable(browser, base_url):
    """The magnifier icon sits before the text of the search field, never over its first
    characters (the theme drew it over them on the search page)."""
    page, _ = open_page(browser, f"{base_url}/search.html?q=attention")
    try:
        field = page.evaluate(
            "() => { const form = document.querySelector('.bd-search-container form.bd-search');"
            " const icon = form.querySelector('.fa-magnifying-glass').getBoundingClientRect();"
            " const input = form.querySelector('input');"
            " const box = input.getBoundingClientRect();"
            " const text = box.left + parseFloat(getComputedStyle(input).paddingLeft);"
            " return {icon: [icon.left, icon.right], text, value: input.value,"
            "  width: icon.width}; }")
    finally:
        page.close()
    assert field["value"] == "attention" and field["width"] > 0, field
    assert field["icon"][1] <= field["text"], f"the icon covers the query: {field}"
