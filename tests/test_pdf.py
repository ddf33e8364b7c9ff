"""The course PDF (``make pdf``): one document with every lesson, math typeset, solutions printed.

Run after ``make pdf`` (``make test`` makes it first). A missing PDF FAILS these tests.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from pathlib import Path

import pytest

pytestmark = pytest.mark.pdf

ROOT = Path(__file__).resolve().parents[1]
PDF = ROOT / "_build" / "pdf" / "from-kv-cache-to-kda.pdf"
LESSONS = sorted((ROOT / "chapters").glob("[0-9][0-9]*.ipynb"))  # numbered, 16b too


def lesson_title(path: Path) -> str:
    """'Token embeddings' from the notebook's first line, '# Lesson 1 · Token embeddings'."""
    first = "".join(json.loads(path.read_text())["cells"][0]["source"]).splitlines()[0]
    return first.split("·", 1)[1].strip()


def flat(text: str) -> str:
    """Text as printed and as typed compare equal: ligatures split, quotes straight, one space."""
    text = unicodedata.normalize("NFKC", text).translate(str.maketrans("‘’“”", "''\"\"", "\u00ad"))
    return re.sub(r"\s+", " ", text)


@functools.cache
def pdf_pages() -> list[str]:
    from pypdf import PdfReader

    assert PDF.exists(), "make the PDF first: make pdf"
    return [flat(page.extract_text() or "") for page in PdfReader(PDF).pages]


def test_the_pdf_has_a_plausible_number_of_pages():
    pages = len(pdf_pages())
    assert 3 * len(LESSONS) <= pages <= 40 * len(LESSONS), f"{pages} pages"


def test_the_pdf_contains_every_lesson_title_in_order():
    text = " ".join(pdf_pages())
    at = 0
    for path in LESSONS:
        title = flat(lesson_title(path))
        found = text.find(title, at)
        assert found >= 0, f"{path.name}: '{title}' not in the PDF (after the previous lesson)"
        at = found + len(title)


def solution_phrases(path: Path) -> list[str]:
    """From each lesson's solutions: the first run of plain words and numbers (no markup) of 30+
    characters."""
    cells = json.loads(path.read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    bodies = re.findall(r"^(`{3,}|:{3,})\{solution\}.*?\n(.*?)^\1\s*$", text, re.M | re.S)
    phrases = [re.search(r"[A-Za-z][A-Za-z0-9 ,]{28,}[A-Za-z]", body) for _, body in bodies]
    return [flat(m.group(0)) for m in phrases if m]


def test_the_pdf_prints_every_lesson_s_solutions():
    text = " ".join(pdf_pages())
    phrases = {p.name: solution_phrases(p) for p in LESSONS}
    assert all(phrases.values()), f"lessons with no solution found: {phrases}"
    missing = {name: [p for p in ps if p not in text] for name, ps in phrases.items()}
    assert not any(missing.values()), f"solution text not in the PDF: {missing}"


def test_the_pdf_has_typeset_math():
    text = " ".join(pdf_pages())
    raw_tex = re.findall(r"\\(?:frac|mathbf|sum|top)\b|\$\$", text)
    assert not raw_tex, f"untypeset math in the PDF: {raw_tex[:5]}"
