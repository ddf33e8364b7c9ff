"""The Chinese edition: its catalogs and its website, from the English source.

English is the source; the Chinese prose lives in gettext catalogs, one per page, at
``locale/zh_CN/LC_MESSAGES/<page>.po``. Code cells, their outputs, numbers and figures are shared:
the Chinese site is built from the same executed notebooks (the English build's cache), so
nothing runs twice and nothing can drift.

    python tools/build_edition.py extract   # the English messages → _build/gettext/*.pot, and
                                            # every catalog brought up to date (a changed
                                            # paragraph's translation turns fuzzy)
    python tools/build_edition.py html      # the Chinese site → _build/html/zh (after the
                                            # English build, whose cache it reads)
                                            # and its downloads: each translated lesson
                                            # as a Chinese notebook (prose from the
                                            # catalogs, set_language("zh_CN"))
    python tools/build_edition.py pdf       # the Chinese PDF → _build/pdf, linked from the
                                            # Chinese site (the same cache, one HTML page
                                            # printed by headless Chromium as make_pdf.py does)

Both run Jupyter Book's own Sphinx configuration with a few settings changed: gettext's
``compact`` off (one catalog per page; on, translations are silently not found), and, for the
site, ``language = zh_CN`` with the catalogs under ``locale``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale"
LANG = "zh_CN"
POT_DIR = ROOT / "_build" / "gettext"
SITE = ROOT / "_build" / "html"
#: What _config.yml writes in English outside any page: the title and the footer.
TITLE = "从 KV 缓存到 KDA"
FOOTER = (
    '<p>文字与图：<a href="https://creativecommons.org/licenses/by-sa/4.0/">CC BY-SA 4.0</a>'
    "（<code>LICENSE</code>）；代码：<a href=\"https://opensource.org/license/mit\">MIT</a>"
    "（<code>LICENSE-CODE</code>），见代码仓库。</p>"
)
#: Dates as Chinese pages write them ("最后更新于 2026-12-02")
DATE_FORMAT = "%Y-%m-%d"
#: Math, inline code and roles' targets: what a translation copies, not translates.
NOT_PROSE = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|\{[\w:-]+\}|\\\w+", re.S)


def _build(builder: str, outdir: Path, overrides: dict, doctrees: Path, strict: bool) -> int:
    sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "code")]
    # as the English build: a notebook the cache lacks runs the same way (static panels, figures
    # in both languages)
    os.environ.setdefault("ATTNLAB_WIDGETS", "static")
    os.environ.setdefault("ATTNLAB_LANGUAGES", "en,zh_CN")
    from jupyter_book.sphinx import build_sphinx

    result = build_sphinx(
        str(ROOT),
        str(outdir),
        noconfig=True,
        path_config=str(ROOT / "_config.yml"),
        confoverrides={"gettext_compact": False, "latex_individualpages": False,
                       "external_toc_path": (ROOT / "_toc.yml").as_posix(), **overrides},
        doctreedir=str(doctrees),
        builder=builder,
        warningiserror=strict,
        keep_going=strict,
        freshenv=True,
        quiet=True,
    )
    return 1 if isinstance(result, Exception) else int(result or 0)


def is_prose_free(msgid: str) -> bool:
    """A message with no words to translate: display math, code, numbers."""
    return re.search(r"[A-Za-z]", NOT_PROSE.sub("", msgid)) is None


def update_catalogs(pot_dir: Path = POT_DIR, locale: Path = LOCALE, lang: str = LANG) -> list[str]:
    """Bring every page's catalog up to date with its template (babel's update, as msgmerge: a
    changed message keeps its old translation marked fuzzy, with the old msgid beside it). A
    message with nothing to translate gets itself as its translation. Returns the pages."""
    from babel.messages.pofile import read_po, write_po

    pages = []
    for pot in sorted(pot_dir.rglob("*.pot")):
        page = pot.relative_to(pot_dir).with_suffix("").as_posix()
        pages.append(page)
        with pot.open("rb") as f:
            template = read_po(f)
        po_path = locale / lang / "LC_MESSAGES" / f"{page}.po"
        if po_path.exists():
            with po_path.open("rb") as f:
                catalog = read_po(f, locale=lang)
            catalog.update(template, update_header_comment=False)
        else:
            catalog = template
            catalog.locale = lang
        catalog.obsolete.clear()
        for message in catalog:
            # prose, not format strings: "90% of" is not a printf directive
            message.flags -= {"python-format", "python-brace-format"}
            if message.id and not message.string and is_prose_free(str(message.id)):
                message.string = message.id
        po_path.parent.mkdir(parents=True, exist_ok=True)
        with po_path.open("wb") as f:
            write_po(f, catalog, width=100, omit_header=False, include_previous=True,
                     sort_output=False)
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["extract", "templates", "html", "pdf"])
    parser.add_argument("--out", type=Path, default=POT_DIR,
                        help="where the templates go (extract, templates)")
    args = parser.parse_args(argv)
    if args.step in ("extract", "templates"):
        # the messages come from the Markdown alone: no notebook runs, and text that code writes
        # (glued sentences, outputs) is translated through attnlab's own catalog instead
        status = _build("gettext", args.out, {"nb_execution_mode": "off"},
                        args.out / ".doctrees", strict=False)
        if status or args.step == "templates":
            return status
        pages = update_catalogs(args.out)
        print(f"{len(pages)} catalogs up to date under {LOCALE / LANG}")
        return 0
    # a message the page still shows in English (a translation Sphinx could not use, such as
    # one that parses as a list) is marked class="untranslated", which tests/test_site_zh.py finds
    chinese = {"language": LANG, "locale_dirs": [str(LOCALE)], "html_title": TITLE,
               "translation_progress_classes": "untranslated",
               "html_last_updated_fmt": DATE_FORMAT, "author": "本课程作者",
               "togglebutton_hint": "点击展开", "togglebutton_hint_hide": "点击收起",
               "html_theme_options": {"extra_footer": FOOTER, "search_bar_text": "搜索本书……"}}
    if args.step == "pdf":
        return chinese_pdf(chinese)
    status = _build("html", SITE / "zh", {**chinese, "nitpicky": True},
                    ROOT / "_build" / ".doctrees-zh", strict=True)
    if not status:
        write_chinese_notebooks(SITE / "zh" / "_sources")
    return status


#: A message's place in a Markdown cell: at a line's start (after its indentation and any
#: heading, list or quote marker, directive fence with its name, or option name) or after a
#: table's "|"; it ends at the line's end or the next "|". Its spaces stand for any whitespace
#: (the catalog joins a paragraph's lines).
_LEAD = (r"(?P<lead>(?:^|(?<=\n)|(?<=\|))[ \t]*"
         r"(?:(?:#{1,6}|[-*+]|\d+\.|>|[`:~]{3,}\{[\w:-]+\}|:[\w-]+:)[ \t]+)*)")
_END = r"(?=[ \t]*(?:\||\n|$))"


def translate_markdown(text: str, messages: dict[str, str]) -> tuple[str, set[str]]:
    """``text`` (a Markdown cell) with each of ``messages`` (msgid → msgstr) that stands as a
    whole heading, paragraph, list item, title or table cell replaced by its translation,
    longest first; and the msgids replaced."""
    found = set()
    for msgid in sorted(messages, key=len, reverse=True):
        body = r"\s+".join(re.escape(word) for word in msgid.split())
        text, n = re.subn(_LEAD + body + _END,
                          lambda m, new=messages[msgid]: m.group("lead") + new, text)
        if n:
            found.add(msgid)
    return text, found


def chinese_notebook(path: Path) -> tuple[dict, list[str]]:
    """The lesson notebook at ``path`` as the Chinese edition offers it for download: Markdown
    from the page's catalog, the language cell set to ``zh_CN``; and the translated messages
    that could not be placed (none, for a notebook the catalog was made from)."""
    import bootstrap_cell
    from attnlab.i18n import read_po

    page = path.relative_to(ROOT).with_suffix("").as_posix()
    translated = read_po(LOCALE / LANG / "LC_MESSAGES" / f"{page}.po")
    messages = {k: v for k, v in translated.items() if v != k}
    nb = json.loads(path.read_text(encoding="utf-8"))
    placed: set[str] = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text, found = translate_markdown("".join(cell["source"]), messages)
            cell["source"] = text.splitlines(keepends=True)
            placed |= found
        elif cell.get("id") == bootstrap_cell.LANGUAGE_CELL_ID:
            cell["source"] = bootstrap_cell.language_cell_source(LANG).splitlines(keepends=True)
    return nb, sorted(set(messages) - placed)


def write_chinese_notebooks(sources: Path) -> list[Path]:
    """Each translated lesson's Chinese notebook in place of its English copy under
    ``sources`` (the site's ``_sources``, which the page's download button offers)."""
    from edition import TRANSLATED

    written = []
    for page in TRANSLATED:
        path = ROOT / f"{page}.ipynb"
        if not path.exists():
            continue
        nb, _ = chinese_notebook(path)
        out = sources / f"{page}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(out)
    return written


def chinese_pdf(overrides: dict) -> int:
    """The Chinese single-page build printed as ``_build/pdf/<name>.zh_CN.pdf``, copied into the
    Chinese site (whose "Run it yourself" page links it)."""
    import make_pdf
    from edition import chinese_pdf_name

    name = chinese_pdf_name(Path(make_pdf.PDF_NAME).stem)
    folder = ROOT / "_build" / "singlehtml-zh"
    status = _build("singlehtml", folder, overrides, ROOT / "_build" / ".doctrees-zh-single",
                    strict=False)
    if status:
        return status
    out = ROOT / "_build" / "pdf" / name
    make_pdf.print_pdf(folder, out)
    if (SITE / "zh").is_dir():
        shutil.copy(out, SITE / "zh" / name)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
