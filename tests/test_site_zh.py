"""The Chinese edition of the built website (``_build/html/zh``), opened as a reader would.

Each translated page (``tools/edition.py``'s ``TRANSLATED``): is ``<html lang="zh-CN">``, links to
its English page and back, reads in Chinese (its title, its prose, its figures' alt text and
slider labels), and carries every number of its English page. Chinese search finds Chinese pages.
The generic checks (renders offline, no console errors, links, footer) run on these pages in
``tests/test_site.py``.
"""

from __future__ import annotations

import re
import sys
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urljoin

import pytest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "tools"))
from edition import ENGLISH_PARTS, TRANSLATED  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")
#: A word a translation would have translated; a name (Sophia, DeltaNet, Kimi-Linear-48B-A3B)
#: starts with a capital letter or a digit and stays as it is
ENGLISH_WORD = re.compile(r"(?<![\w-])[a-z]{3,}\b")
#: Pages whose body stays English by design, so that their Chinese is their headings and the
#: prose around them: the bibliography (entries as published) and ``ENGLISH_PARTS``
ENGLISH_BODY = {"references", *ENGLISH_PARTS}
#: An element Sphinx marks as not translated from the catalog (``translation_progress_classes``)
#: and its content: a message with no translation, one Sphinx could not use (a heading's
#: translation that parses as a list), or text the catalog does not hold (a table glued in the
#: reader's language, a formula)
UNTRANSLATED = re.compile(
    r'<(\w+)[^>]*class="[^"]*(?<![\w-])untranslated(?![\w-])[^>]*>(.*?)</\1>', re.S)
MATH_OR_TAG = re.compile(r"\\\(.*?\\\)|\\\[.*?\\\]|<[^>]*>", re.S)


def shown_in_english(html: str) -> list[str]:
    """The text of each element of ``html`` left untranslated that reads as English."""
    texts = [MATH_OR_TAG.sub(" ", content) for _, content in UNTRANSLATED.findall(html)]
    return [t.strip()[:60] for t in texts if not CJK.search(t) and ENGLISH_WORD.search(t)]
#: Numbers as the prose writes them: 1,234.5, 0.95, and 18.9 in "18.9M" (not the 16 of bf16)
NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d,.]?\d)")


class _Page(HTMLParser):
    """The article's text, its images' alt texts, the edition switch and the html lang."""

    def __init__(self) -> None:
        super().__init__()
        self.lang = ""
        self.switch = ""
        self.text: list[str] = []
        self.alts: list[str] = []
        self.labels: list[str] = []
        self.headings: list[str] = []
        self._article = 0
        self._skip = 0
        self._label = False
        self._heading = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.lang = a.get("lang", "")
        if tag == "a" and "attnlab-edition" in (a.get("class") or ""):
            self.switch = a.get("href", "")
        if tag == "article":
            self._article += 1
        if tag in ("script", "style", "mjx-container", "pre") and self._article:
            self._skip += 1
        if tag == "img" and self._article:
            self.alts.append(a.get("alt", ""))
        if tag == "label" and self._article:
            self._label = True
            self.labels.append("")
        if re.fullmatch(r"h[1-6]", tag) and self._article:
            self._heading = True
            self.headings.append("")

    def handle_endtag(self, tag):
        if tag == "article":
            self._article -= 1
        if tag in ("script", "style", "mjx-container", "pre") and self._skip:
            self._skip -= 1
        if tag == "label":
            self._label = False
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = False

    def handle_data(self, data):
        if self._article and not self._skip:
            self.text.append(data)
            if self._label:
                self.labels[-1] += data
            if self._heading:
                self.headings[-1] += data


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_the_chinese_edition_was_built():
    assert (HTML / "zh" / "index.html").exists(), "build both editions first: make book"


@pytest.mark.parametrize("page", TRANSLATED)
def test_a_translated_page_is_chinese_and_linked_both_ways(page):
    zh, en = HTML / "zh" / f"{page}.html", HTML / f"{page}.html"
    chinese, english = parse(zh), parse(en)
    assert chinese.lang == "zh-CN" and english.lang == "en"
    assert (zh.parent / chinese.switch).resolve() == en.resolve()
    assert (en.parent / english.switch).resolve() == zh.resolve()
    html = zh.read_text(encoding="utf-8")
    assert "本页尚未译成中文" not in html
    captions = re.findall(r'caption-text">([^<]*)', html)
    assert captions and all(CJK.search(c) for c in captions), f"part captions: {captions}"
    english_headings = [h for h in chinese.headings if not CJK.search(h) and ENGLISH_WORD.search(h)]
    assert not english_headings, f"{page}: headings still English: {english_headings[:3]}"
    titles = re.findall(r'admonition-title">(.*?)</p>', html, re.S)
    english_titles = [t for t in titles if (not CJK.search(t) and ENGLISH_WORD.search(t))
                      or len(ENGLISH_WORD.findall(re.sub(r"<[^>]*>", " ", t))) >= 3]
    assert not english_titles, f"{page}: box titles still English: {english_titles[:3]}"
    assert "::\\]" not in html, f"{page}: a display formula shows '::' (its translation was lost)"
    english = shown_in_english(html)
    assert not english, f"{page}: messages shown in English: {english[:3]}"
    if page not in ENGLISH_BODY:
        text = " ".join(chinese.text)
        assert len(CJK.findall(text)) > 200, f"{page}: little Chinese on the page"


#: The reading time, counted in each language's own units (words or characters): its numbers
#: differ by design.
READING_TIME = re.compile(r"about \d+ minutes \(.*?solution|约 \d+ 分钟（.*?约 \d+ 分钟", re.S)


#: A count in the unit each language writes large numbers in: "3.1 million" in English is
#: "310 万" in Chinese, and both are the number 3100000
LARGE = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)\s*(million|billion|万|亿)")
SCALE = {"million": 10**6, "billion": 10**9, "万": 10**4, "亿": 10**8}


def in_full(number: str, unit: str) -> str:
    """``number`` × ``unit`` written out, as exactly as its decimal digits allow."""
    return str(round(Fraction(number) * SCALE[unit]))


@pytest.mark.parametrize("page", TRANSLATED)
def test_a_translated_page_keeps_every_number_of_its_english_page(page):
    def numbers(path: Path) -> set[str]:
        text = READING_TIME.sub(" ", " ".join(parse(path).text))
        return set(NUMBER.findall(LARGE.sub(lambda m: in_full(m[1], m[2]), text)))

    english, chinese = numbers(HTML / f"{page}.html"), numbers(HTML / "zh" / f"{page}.html")
    missing = sorted(english - chinese)
    assert not missing, f"{page}: numbers of the English page missing in Chinese: {missing[:20]}"


LESSON_PAGES = [p for p in TRANSLATED if re.match(r"chapters/\d", p)]


@pytest.mark.parametrize("page", LESSON_PAGES)
def test_a_translated_lessons_figures_and_sliders_speak_chinese(page):
    chinese, english = parse(HTML / "zh" / f"{page}.html"), parse(HTML / f"{page}.html")
    assert chinese.alts, f"{page}: no figures"
    english_alts = [a for a in chinese.alts if not CJK.search(a)]
    assert not english_alts, f"{page}: alt texts still English: {english_alts[:2]}"
    assert not [a for a in english.alts if CJK.search(a) and "注意力" not in a], \
        f"{page}: the English page carries Chinese alt text"
    english_labels = [x for x in chinese.labels if not CJK.search(x) and ENGLISH_WORD.search(x)]
    assert not english_labels, f"{page}: slider labels still English: {english_labels[:3]}"


@pytest.mark.parametrize("query", ["KV缓存", "黑板", "递推状态", "注意力"])
def test_chinese_search_finds_chinese_pages(browser, base_url, query):
    page = browser.new_page()
    try:
        page.goto(f"{base_url}/zh/search.html?q={quote(query)}", wait_until="load")
        page.wait_for_selector("#search-results ul.search li, #search-results p",
                               timeout=30000)
        page.wait_for_function(
            "() => document.querySelector('#search-results') && "
            "!document.querySelector('#search-results').textContent.includes('Searching')",
            timeout=30000)
        links = page.eval_on_selector_all("#search-results ul.search li a",
                                          "els => els.map(e => e.href)")
    finally:
        page.close()
    found = [urljoin(base_url, h).removeprefix(base_url + "/zh/") for h in links]
    translated = [h for h in found if h.split(".html")[0].split("#")[0] in TRANSLATED]
    assert translated, f"searching {query!r} found no translated page: {found[:5]}"
