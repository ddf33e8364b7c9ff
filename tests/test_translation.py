"""The Chinese edition cannot drift from the English source without a failing test.

* Every translated page (``tools/edition.py``'s ``TRANSLATED``) has 0 untranslated and 0 fuzzy
  messages (counted with babel: ``sphinx-intl stat`` counts fuzzy messages as translated).
* The catalogs are those the English source makes today: a changed English paragraph is a
  message the catalog lacks, and the test names the page and the paragraph
  (``make catalogs`` brings them up to date, turning the old translation fuzzy).
* Every translation keeps its English message's roles, math, inline code and link targets, and
  opens and closes its emphasis where CommonMark can see it next to Chinese punctuation.
* The term table (``locale/zh_CN/terms.tsv``) drives the glossary, and no translated page uses
  a form the table says to avoid.
* The package's own catalogs (figures, sliders, messages) keep every placeholder.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from edition import TRANSLATED  # noqa: E402

PAGES = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
PACKAGE = ROOT / "code" / "attnlab" / "locale" / "zh_CN"
TERMS = ROOT / "locale" / "zh_CN" / "terms.tsv"

#: What a translation must carry over unchanged: roles with their targets, display and inline
#: math, inline code, link targets, footnote references.
KEPT = re.compile(
    r"\{[\w:-]+\}`[^`]*`"  # a role
    r"|\$\$.*?\$\$|\$[^$\n]+\$"  # math
    r"|`[^`]+`"  # inline code
    r"|\]\([^)\s]+\)"  # a link's target
    r"|\[\^[\w-]+\]",  # a footnote
    re.S,
)


def catalog(path: Path):
    with path.open("rb") as f:
        return read_po(f)


def messages(path: Path):
    return [m for m in catalog(path) if m.id]


def kept_parts(text: str) -> Counter:
    """The parts a translation keeps; a cross-reference with its own text
    (``{ref}`Notation <notation>` ``) keeps its target, its text is translated."""
    return Counter(re.sub(r"^(\{[\w:-]+\}`)[^`<]*<([^>`]+)>`$", r"\1<\2>`", part)
                   for part in KEPT.findall(text))


@pytest.mark.parametrize("page", TRANSLATED)
def test_a_translated_page_has_every_message_translated(page):
    untranslated = [str(m.id)[:70] for m in messages(PAGES / f"{page}.po") if not m.string]
    fuzzy = [str(m.id)[:70] for m in messages(PAGES / f"{page}.po") if m.string and m.fuzzy]
    assert not untranslated and not fuzzy, (
        f"{page}: {len(untranslated)} untranslated, {len(fuzzy)} fuzzy messages, e.g. "
        f"{(untranslated + fuzzy)[:3]}"
    )


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> Path:
    """The messages of the English source as it is now (Sphinx's gettext builder, ~15 s)."""
    out = tmp_path_factory.mktemp("pot")
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_edition.py"), "templates", "--out",
         str(out)],
        check=True, cwd=ROOT, capture_output=True,
    )
    return out


def test_the_catalogs_are_those_the_english_source_makes(templates):
    """A paragraph changed in English is a message the catalog does not have: the test says
    which page, and `make catalogs` turns its old translation fuzzy for a translator."""
    drift = {}
    for pot in sorted(templates.rglob("*.pot")):
        page = pot.relative_to(templates).with_suffix("").as_posix()
        po = PAGES / f"{page}.po"
        wanted = {str(m.id) for m in messages(pot)}
        have = {str(m.id) for m in messages(po)} if po.exists() else set()
        if wanted - have or have - wanted:
            drift[page] = sorted(wanted - have)[:2] or sorted(have - wanted)[:2]
    assert not drift, f"catalogs out of date with the English (run `make catalogs`): {drift}"


def all_translations():
    for path in sorted(PAGES.rglob("*.po")):
        for m in messages(path):
            if m.string:
                yield path.relative_to(PAGES).with_suffix("").as_posix(), m


def test_translations_keep_roles_math_code_and_links():
    lost = [
        (page, str(m.id)[:60], dict(kept_parts(str(m.id)) - kept_parts(str(m.string))))
        for page, m in all_translations()
        if kept_parts(str(m.id)) - kept_parts(str(m.string))
    ]
    assert not lost, f"{len(lost)} translations lose a role, formula, code or link: {lost[:5]}"


def test_every_translation_parses_as_text():
    """Sphinx puts a translation in place of a paragraph or heading only if it parses as one:
    a heading translated as "2. 全注意力 Sophia 的 KV 缓存" reads as a numbered list and the page
    silently keeps the English (a list marker is escaped: "2\\. …")."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark")
    not_text = [(page, str(m.string)[:40]) for page, m in all_translations()
                if m.string != m.id and parser.parse(str(m.string))[0].type != "paragraph_open"]
    assert not not_text, f"translations Sphinx would not use: {not_text[:5]}"


def _is_punct(char: str) -> bool:
    return bool(char) and unicodedata.category(char).startswith(("P", "S"))


def emphasis_problems(text: str) -> list[str]:
    """Emphasis delimiters CommonMark will not take as such next to Chinese text: an opening
    ``**`` (or ``*``) followed by punctuation right after a letter, or a closing one preceded by
    punctuation right before a letter (the flanking rules), e.g. ``**本课的问题：**语言``."""
    stripped = KEPT.sub("x", text)
    problems = []
    for delimiter in ("**", "*"):
        pattern = re.escape(delimiter)
        runs = [m for m in re.finditer(rf"(?<!\*){pattern}(?!\*)", stripped)]
        for k, run in enumerate(runs):
            before = stripped[run.start() - 1] if run.start() else " "
            after = stripped[run.end()] if run.end() < len(stripped) else " "
            opening = k % 2 == 0
            if opening and _is_punct(after) and not (before.isspace() or _is_punct(before)):
                problems.append(stripped[max(0, run.start() - 8): run.end() + 8])
            if not opening and _is_punct(before) and not (after.isspace() or _is_punct(after)):
                problems.append(stripped[max(0, run.start() - 8): run.end() + 8])
    return problems


def test_emphasis_lint_catches_the_known_case():
    assert emphasis_problems("**本课的问题：**第 6 课")
    assert not emphasis_problems("**本课的问题**：第 6 课")
    assert not emphasis_problems("这是 **KV 缓存**。")


def test_translated_emphasis_renders():
    bad = [(page, p) for page, m in all_translations()
           for p in emphasis_problems(str(m.string))]
    assert not bad, f"emphasis CommonMark will show as asterisks: {bad[:5]}"


def terms() -> list[dict]:
    with TERMS.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_the_term_table_is_complete_and_consistent():
    rows = terms()
    assert {"english", "chinese", "also", "avoid"} <= set(rows[0])
    wanted = ["KV cache", "delta rule", "chunkwise", "recurrent state", "TTFT", "TPOT",
              "query", "residual connection", "logits", "tokenizer", "temperature",
              "outer product", "MLA", "RoPE", "Kimi Delta Attention"]
    english = " | ".join(r["english"] for r in rows)
    missing = [w for w in wanted if w.lower() not in english.lower()]
    assert not missing, f"terms.tsv lacks {missing}"
    for r in rows:
        avoid = [a for a in r["avoid"].split("、") if a]
        assert r["chinese"] and r["chinese"] not in avoid, r


def test_translated_pages_avoid_the_forms_the_term_table_rejects():
    avoid = {a: r["english"] for r in terms() for a in r["avoid"].split("、") if a}
    found = [(page, form, avoid[form]) for page, m in all_translations()
             if page in TRANSLATED for form in avoid if form in str(m.string)]
    assert not found, f"translations use rejected forms (page, form, term): {found[:5]}"


def glossary_rows() -> dict[str, str]:
    """The glossary's term table: English cell → 中文 cell."""
    rows = {}
    for line in (ROOT / "chapters" / "glossary.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and not set(cells[0]) <= set("-: "):
            rows[cells[0]] = cells[1]
    return rows


def test_the_glossary_uses_the_term_table():
    """Each term of the table is a row of the glossary, its 中文 cell the table's Chinese."""
    rows = glossary_rows()
    missing = [r["english"] for r in terms() if r["english"] not in rows]
    wrong = [(r["english"], rows[r["english"]], r["chinese"]) for r in terms()
             if r["english"] in rows and rows[r["english"]] != r["chinese"]]
    assert not missing, f"terms.tsv terms with no glossary row: {missing[:5]}"
    assert not wrong, f"glossary cells that differ from the table: {wrong[:5]}"


PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def test_the_package_catalogs_are_complete_keep_placeholders_and_define_each_message_once():
    seen: dict[str, str] = {}
    problems = []
    for path in sorted(PACKAGE.glob("*.po")):
        for m in messages(path):
            if m.id in seen:
                problems.append(f"{m.id!r} in {path.name} and {seen[m.id]}")
            seen[str(m.id)] = path.name
            if not m.string or m.fuzzy:
                problems.append(f"{path.name}: {m.id!r} untranslated or fuzzy")
            elif Counter(PLACEHOLDER.findall(str(m.id))) != Counter(
                PLACEHOLDER.findall(str(m.string))
            ):
                problems.append(f"{path.name}: {m.id!r} → {m.string!r}")
    assert not problems, problems[:5]


def test_every_message_a_translated_lessons_code_writes_is_translated():
    """Each lesson with a package catalog (``lNN.po``): every ``tr("…")`` of its figure module
    and of its notebook's code has a translation (in any of the package's catalogs)."""
    import ast
    import json

    from attnlab.i18n import catalog

    chinese = catalog("zh_CN")

    def messages(source: str) -> set[str]:
        """The messages of ``tr("…")`` calls, and the labels of ``labels={…: "…"}`` (a slider
        panel's control labels, which it shows through ``tr``)."""
        found = set()
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value)
            if (isinstance(node, ast.keyword) and node.arg == "labels"
                    and isinstance(node.value, ast.Dict)):
                found |= {v.value for v in node.value.values
                          if isinstance(v, ast.Constant) and isinstance(v.value, str)}
        return found

    lessons = sorted(p.stem[1:] for p in PACKAGE.glob("l[0-9]*.po"))
    assert lessons
    for lesson in lessons:
        sources = [p.read_text(encoding="utf-8") for p in
                   (ROOT / "code" / "attnbook" / "figures").glob(f"l{lesson}_*.py")]
        for path in (ROOT / "chapters").glob(f"{lesson}_*.ipynb"):
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            sources += ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        written = set().union(*map(messages, sources))
        assert written, f"Lesson {lesson} has a catalog but its code calls no tr()"
        missing = sorted(written - set(chinese))
        assert not missing, f"Lesson {lesson}: {len(missing)} untranslated, e.g. {missing[:3]}"


def test_a_message_in_chinese_reads_from_the_catalog_and_falls_back_to_english():
    from attnlab.i18n import language, tr

    with language("zh_CN"):
        assert tr("This frame could not be drawn:") == "这一帧无法绘制："
        assert tr("No such message, {n}", n=3) == "No such message, 3"
    assert tr("This frame could not be drawn:") == "This frame could not be drawn:"


LESSON_PAGES = [p for p in TRANSLATED
                if p.startswith("chapters/") and (ROOT / f"{p}.ipynb").exists()]


@pytest.mark.parametrize("page", LESSON_PAGES)
def test_the_chinese_download_of_a_lesson_is_written_in_chinese(page):
    """The Chinese site's download of a lesson: every translated message of the page in its
    Markdown, and its language cell set to Chinese (``tools/build_edition.py``)."""
    import bootstrap_cell
    from build_edition import chinese_notebook

    nb, unplaced = chinese_notebook(ROOT / f"{page}.ipynb")
    assert not unplaced, f"{page}: {len(unplaced)} messages not placed, e.g. {unplaced[:2]}"
    language_cell = next(c for c in nb["cells"] if c.get("id") == bootstrap_cell.LANGUAGE_CELL_ID)
    assert 'set_language("zh_CN")' in "".join(language_cell["source"])
    title = "".join(nb["cells"][0]["source"]).splitlines()[0]
    assert re.match(r"# 第 \d+\w? 课 · ", title), title


def test_every_page_of_the_book_is_translated():
    """Every page of the table of contents has its Chinese page (the Chinese edition is whole)."""
    import yaml

    def pages(entries):
        for entry in entries:
            if "file" in entry:
                yield entry["file"]
            yield from pages(entry.get("chapters", []) + entry.get("sections", []))
            for part in entry.get("parts", []):
                yield from pages(part.get("chapters", []))

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    book = {toc["root"], *pages(toc.get("parts", []) + toc.get("chapters", []))}
    assert book - set(TRANSLATED) == set(), "pages with no Chinese page"


def test_a_page_not_yet_translated_says_so_on_the_chinese_site():
    """A new English page, before its translation: the Chinese site shows it with a note."""
    from types import SimpleNamespace

    from edition import add_edition_switch

    app = SimpleNamespace(builder=SimpleNamespace(format="html", name="html"),
                          config=SimpleNamespace(language="zh_CN"))
    context = {"body": "<p>English text</p>"}
    add_edition_switch(app, "chapters/99_new_lesson", "page.html", context, doctree=object())
    assert "本页尚未译成中文" in context["body"] and "English text" in context["body"]
    context = {"body": "<p>中文</p>"}
    add_edition_switch(app, "chapters/01_token_embeddings", "page.html", context, doctree=object())
    assert "本页尚未译成中文" not in context["body"]
