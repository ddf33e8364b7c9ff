"""Sphinx extension: page markup that screen readers understand and search finds.

* myst-nb's "Show code cell source" toggles carry ``aria-label="Toggle hidden content"``, a name
  that differs from the words on screen (axe-core: ``label-content-name-mismatch``, serious); the
  label goes, so the visible words are the name.
* The references list: docutils writes ``<div role="list">`` around entries of role
  ``doc-biblioentry``, a combination axe-core reports as a critical ``aria-required-children``
  violation (a list must hold list items). The entries become ``role="listitem"``.

* Every run of Chinese characters in a page's prose becomes ``<span lang="zh">…</span>``, so a
  screen reader switches voice (WCAG 3.1.2, language of parts) and the stylesheet can give it a
  CJK font (``_static/custom.css``). Code, literal text and math are left alone.
* Search: the book's search language is ``zh`` (``_config.yml``), whose index splits Chinese with
  ``jieba`` and still stems English words like the English index does. jieba does not know the
  course's own terms, so this extension gives it every Chinese term of the glossary as a user
  dictionary: a search for 键值缓存, 键值 or 缓存 then finds the glossary's 键值缓存. A query is
  split where Latin letters meet Chinese ones ("KV缓存" → "KV", "缓存"), as the index is.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.search.zh import SearchChinese

#: CJK ideographs and punctuation (a run may hold the full-width punctuation between words).
CHINESE_RUN = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]+")
#: Nodes whose text is not prose.
SKIP = (nodes.literal, nodes.literal_block, nodes.math, nodes.math_block, nodes.raw,
        nodes.comment)
GLOSSARY = Path("chapters") / "glossary.md"


def glossary_terms(text: str) -> list[str]:
    """The Chinese terms of the glossary's tables: every Chinese run of a table row's cells,
    split at the separators the glossary uses between synonyms (、 / and spaces)."""
    terms: list[str] = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        for run in CHINESE_RUN.findall(line):
            for term in re.split(r"[、/\s（）()]+", run):
                if len(term) >= 2 and term not in terms:
                    terms.append(term)
    return terms


def mark_chinese(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Wrap every Chinese run of the page's prose in ``<span lang="zh">`` (on an English page:
    a Chinese page is ``lang="zh-CN"`` as a whole)."""
    if app.builder.format != "html" or (app.config.language or "en").startswith("zh"):
        return
    for text in list(doctree.findall(nodes.Text)):
        parent = text.parent
        if parent is None or isinstance(parent, SKIP) or not CHINESE_RUN.search(text):
            continue
        if any(isinstance(a, SKIP) for a in _ancestors(parent)):
            continue
        pieces: list[nodes.Node] = []
        last = 0
        source = str(text)
        for match in CHINESE_RUN.finditer(source):
            if match.start() > last:
                pieces.append(nodes.Text(source[last:match.start()]))
            escaped = (match.group().replace("&", "&amp;").replace("<", "&lt;")
                       .replace(">", "&gt;"))
            pieces.append(nodes.raw("", f'<span lang="zh">{escaped}</span>', format="html"))
            last = match.end()
        if last < len(source):
            pieces.append(nodes.Text(source[last:]))
        parent.replace(text, pieces)


def _ancestors(node: nodes.Node):
    while node is not None:
        yield node
        node = node.parent


def give_jieba_the_glossary(app: Sphinx) -> None:
    """Write the glossary's Chinese terms as a jieba user dictionary and point search at it."""
    glossary = Path(app.srcdir) / GLOSSARY
    if app.config.html_search_language != "zh" or not glossary.exists():
        return
    path = Path(app.doctreedir) / "zh_search_terms.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    terms = glossary_terms(glossary.read_text(encoding="utf-8"))
    path.write_text("".join(f"{term} 1000 n\n" for term in terms), encoding="utf-8")
    app.config.html_search_options = {**(app.config.html_search_options or {}),
                                      "dict": str(path)}


#: Replacements in every page's body (see the module's docstring).
BODY_FIXES = (
    ('<summary aria-label="Toggle hidden content">', "<summary>"),
    ('role="doc-biblioentry"', 'role="listitem"'),
)


def fix_body_markup(app: Sphinx, pagename: str, templatename: str, context: dict,
                    doctree: nodes.document | None) -> None:
    """Code-toggle names and bibliography roles that axe-core accepts."""
    body = context.get("body")
    if body:
        for old, new in BODY_FIXES:
            body = body.replace(old, new)
        context["body"] = body


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search, with a query split where Latin letters meet Chinese ones: the
    pages write "KV 缓存" (a space between scripts, as Chinese technical writing does), the index
    holds "kv" and "缓存", and a reader types "KV缓存"."""

    js_splitter_code = r"""
function splitQuery(query) {
  const boundary = /(?<=[A-Za-z0-9_])(?=\p{Script=Han})|(?<=\p{Script=Han})(?=[A-Za-z0-9_])/u;
  return query
    .split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)
    .flatMap((word) => word.split(boundary))
    .filter((term) => term);
}
"""


def setup(app: Sphinx) -> dict:
    app.add_search_language(ChineseSearch)
    app.connect("builder-inited", give_jieba_the_glossary)
    app.connect("html-page-context", fix_body_markup)
    app.connect("doctree-resolved", mark_chinese)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
