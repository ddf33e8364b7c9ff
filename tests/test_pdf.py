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
LESSONS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))


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


def test_the_pdf_prints_the_solutions_and_typeset_math():
    text = " ".join(pdf_pages())
    assert text.count("Solution") >= len(LESSONS), "solutions missing from the PDF"
    raw_tex = re.findall(r"\\(?:frac|mathbf|sum|top)\b|\$\$", text)
    assert not raw_tex, f"untypeset math in the PDF: {raw_tex[:5]}"
