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
CHINESE_PDF = PDF.with_name("from-kv-cache-to-kda.zh_CN.pdf")
CATALOGS = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
LESSONS = sorted((ROOT / "chapters").glob("[0-9][0-9]*.ipynb"))  # numbered, 16b too


def lesson_title(path: Path) -> str:
    """'Token embeddings' from the notebook's first line, '# Lesson 1 · Token embeddings'."""
    first = "".join(json.loads(path.read_text())["cells"][0]["source"]).splitlines()[0]
    return first.split("·", 1)[1].strip()


#: CJK radicals a PDF's text layer may give for the same glyph as a whole character (a CJK font
#: draws 门 and the radical ⻔ alike); NFKC maps the Kangxi radicals (⼀ → 一), not these.
RADICALS = str.maketrans("⻅⻆⻉⻋⻓⻔⻙⻚⻛⻜⻝⻢⻥⻦⻧⻨⻩⻬⻮⻰⻳",
                         "见角贝车长门韦页风飞食马鱼鸟卤麦黄齐齿龙龟")


def flat(text: str) -> str:
    """Text as printed and as typed compare equal: ligatures split, quotes straight, radicals as
    the characters they stand for, one space."""
    text = unicodedata.normalize("NFKC", text).translate(RADICALS)
    text = text.translate(str.maketrans("‘’“”", "''\"\"", "\u00ad"))
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


# ---------------------------------------------------------------- the Chinese PDF


def chinese_title(path: Path) -> str:
    """'词嵌入' from the translation of the lesson's first line ('第 1 课 · 词嵌入')."""
    from babel.messages.pofile import read_po

    first = "".join(json.loads(path.read_text())["cells"][0]["source"]).splitlines()[0]
    with (CATALOGS / "chapters" / f"{path.stem}.po").open("rb") as f:
        translated = read_po(f).get(first.lstrip("# ").strip())
    assert translated is not None and translated.string, f"{path.name}: title not translated"
    return translated.string.split("·", 1)[1].strip()


@functools.cache
def chinese_pdf():
    from pypdf import PdfReader

    assert CHINESE_PDF.exists(), "make the Chinese PDF first: make pdf"
    return PdfReader(CHINESE_PDF)


def test_the_chinese_pdf_has_a_plausible_number_of_pages():
    pages = len(chinese_pdf().pages)
    assert 3 * len(LESSONS) <= pages <= 40 * len(LESSONS), f"{pages} pages"


def test_the_chinese_pdf_contains_every_chinese_lesson_title_in_order():
    text = re.sub(r"\s+", "", "".join(flat(p.extract_text() or "") for p in chinese_pdf().pages))
    at = 0
    for path in LESSONS:
        title = re.sub(r"\s+", "", flat(chinese_title(path)))
        found = text.find(title, at)
        assert found >= 0, f"{path.name}: '{title}' not in the Chinese PDF (after the previous)"
        at = found + len(title)


def notdef_glyphs(reader) -> list[tuple[int, str]]:
    """(page, font) of each text drawn with glyph 0, a font's "missing glyph" box (tofu): the
    printed text is shown through two-byte glyph ids of embedded composite fonts, so a
    character no installed font has becomes the id 0."""
    from pypdf.generic import ContentStream

    found = []
    for number, page in enumerate(reader.pages, 1):
        fonts = (page.get("/Resources") or {}).get("/Font") or {}
        composite = {name for name, ref in fonts.items()
                     if ref.get_object().get("/Subtype") == "/Type0"}
        contents = page.get_contents()
        if contents is None:
            continue
        font = None
        for operands, op in ContentStream(contents, reader).operations:
            if op == b"Tf":
                font = operands[0]
            elif op in (b"Tj", b"TJ") and font in composite:
                shown = operands[0] if op == b"TJ" else [operands[0]]
                for item in shown:
                    if isinstance(item, (int, float)):  # a TJ kerning number
                        continue
                    data = item.original_bytes if hasattr(item, "original_bytes") else bytes(item)
                    if any(data[i:i + 2] == b"\0\0" for i in range(0, len(data) - 1, 2)):
                        found.append((number, str(font)))
    return found


def test_neither_pdf_has_missing_glyph_boxes():
    from pypdf import PdfReader

    assert not notdef_glyphs(chinese_pdf()), "Chinese PDF: text printed as empty boxes (tofu)"
    assert PDF.exists(), "make the PDF first: make pdf"
    assert not notdef_glyphs(PdfReader(PDF)), "English PDF: text printed as empty boxes (tofu)"
