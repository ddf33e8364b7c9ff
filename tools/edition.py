"""Sphinx extension: two editions, English and Chinese, from one source.

The English site is built at ``_build/html`` and the Chinese one at ``_build/html/zh`` from the
same executed notebooks (``tools/build_edition.py``). This extension makes each edition whole:

* **Figures in the page's language.** The build renders every figure and panel once per language
  (``attnlab.i18n.language_blocks``), each between ``<!--attnlab-lang:LANG-->`` markers; a page
  keeps its own language's block and drops the others, so it carries no second set of images.
* **Numbers survive translation.** A translated paragraph is parsed again, by itself, in a new
  document that has no notebook behind it, so myst-nb's glue roles cannot find the page's glued
  values ("No key … found in glue data") and the numbers vanish. Glue lookups here fall back to
  the notebook of the page being read. On a Chinese page a key glued per language
  (``key.zh_CN``, ``attnbook.notebook.glue_md``) is preferred: sentences chosen by code from
  data are chosen in the reader's language.
* **Chinese around hidden code cells**: myst-nb writes its "Show code cell source" prompts in
  English whatever the language; the Chinese pages say 显示代码 / 隐藏代码. Emphasis in Chinese
  text is marked with dots under the characters (着重号), not with slanted glyphs; a solution
  names its exercise by the translated title, and titles sit in full-width brackets; sizes in two
  units read "704.6 MB（672.0 MiB）" and percentages "56%".
* **A switch to the same page in the other edition**, at the top of every page, with
  ``<link rel="alternate" hreflang>`` for search engines; a Chinese page whose catalog is not yet
  translated says so above its English text.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

#: The pages the Chinese edition has translated (every message; ``tests/test_translation.py``
#: holds them to 0 untranslated and 0 fuzzy messages).
TRANSLATED = (
    "intro",
    "run_it_yourself",
    "chapters/glossary",
    "chapters/01_token_embeddings",
    "chapters/02_self_attention",
    "chapters/03_scaling_and_softmax",
    "chapters/04_multi_head_attention",
    "chapters/05_order_and_position",
    "chapters/05b_transformer_block",
    "chapters/06_kv_cache",
    "chapters/07_linear_attention",
    "chapters/08_three_forms",
    "chapters/09_fixed_state_memory",
    "chapters/10_gates",
    "chapters/11_delta_rule",
    "chapters/12_gated_deltanet",
    "chapters/13_chunkwise_delta_rule",
    "chapters/14_kda",
    "chapters/15_mla",
    "chapters/16_hybrid_stack",
    "chapters/16b_real_hybrids",
    "chapters/17_who_can_recall",
    "chapters/18_cost_of_a_token",
    "chapters/19_sophia_nano",
    "chapters/20_the_map",
    "notation",
    "calculator",
    "references",
    "benchmarks_page",
    "CHANGELOG",
)
#: Where the Chinese edition lives, relative to the English site's root.
ZH_PREFIX = "zh"
#: A link to the course PDF; the Chinese pages link the Chinese PDF, ``<name>.zh_CN.pdf``.
SHARED_FILE = re.compile(r'href="([^":/#?]+)\.pdf"')


LANG_BLOCK = re.compile(r"<!--attnlab-lang:(\w+)-->(.*?)<!--/attnlab-lang-->", re.S)


def chinese_pdf_name(stem: str) -> str:
    """The Chinese PDF's file name, from the English one's stem."""
    return f"{stem}.zh_CN.pdf"


def edition_language(app: Sphinx) -> str:
    """``"en"`` or ``"zh_CN"``: the language of the edition being built."""
    return "zh_CN" if (app.config.language or "en").startswith("zh") else "en"


def keep_language(html: str, lang: str) -> str:
    """``html`` with only ``lang``'s blocks, unwrapped (markers gone)."""
    return LANG_BLOCK.sub(lambda m: m.group(2) if m.group(1) == lang else "", html)


def keep_page_language(app: Sphinx, doctree: nodes.document) -> None:
    lang = edition_language(app)
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if "<!--attnlab-lang:" in text:
            raw.replace_self(nodes.raw("", keep_language(text, lang), format=raw["format"]))


# --- exercise titles are translatable ------------------------------------------------------


class TranslatableSources(SphinxTransform):
    """Sphinx's i18n skips a text node with no source as a built-in message, so two kinds of the
    course's text would stay English: an exercise's title ("Implement it yourself: …", which
    sphinx-exercise builds as a subtitle node with no source) and the cells of a table inside a
    dropdown (parsed with no source). Give them the source of the nearest part of the page that
    has one, before the i18n transform (priority 20) translates them."""

    default_priority = 10

    def apply(self, **kwargs) -> None:
        from sphinx_exercise.nodes import exercise_subtitle, solution_subtitle

        titles = (exercise_subtitle, solution_subtitle)
        for node in list(self.document.findall(
            lambda n: isinstance(n, titles)
            or (isinstance(n, nodes.paragraph) and isinstance(n.parent, nodes.entry))
        )):
            if node.source is not None or not node.astext().strip():
                continue
            parent = node.parent
            while parent is not None and parent.source is None:
                parent = parent.parent
            node.source = parent.source if parent is not None else self.document["source"]
            node.line = node.line or (parent.line if parent is not None else 0)
            node.rawsource = node.rawsource or node.astext()
            if isinstance(node, titles) and self.app.builder.name == "gettext":
                # sphinx-exercise's post-transform folds the subtitle into a new title node
                # that gettext cannot extract: an unrendered copy gives the catalog its message
                copy = nodes.paragraph(node.rawsource, node.rawsource)
                copy.source, copy.line = node.source, node.line
                self.document += copy


#: Pages translated except for parts kept in English, with the note the Chinese page shows: the
#: changelog's entries (a record of the project) and the benchmark's tables (machine output that
#: ``make bench`` rewrites each run) are not prose for a translator.
ENGLISH_PARTS = {
    "CHANGELOG": "更新日志的标题已译成中文；各条记录保留英文原文。",
    "benchmarks_page": ("下面的测量结果由 <code>make bench</code> 生成，每次运行都会重写，"
                        "保留英文原文。"),
}


def _kept_in_english(docname: str, node: nodes.Element) -> bool:
    if docname == "CHANGELOG":
        return any(isinstance(a, nodes.list_item) for a in _ancestors(node))
    if docname == "benchmarks_page":
        return "benchmarks/results/" in (node.source or "") or any(
            isinstance(a, nodes.table) for a in _ancestors(node))
    return False


def _ancestors(node: nodes.Node):
    while node is not None:
        yield node
        node = node.parent


class EnglishParts(SphinxTransform):
    """Mark the parts of ``ENGLISH_PARTS`` pages that stay English as not translatable, so that
    gettext does not extract them and the Chinese page shows them as they are."""

    default_priority = 5

    def apply(self, **kwargs) -> None:
        docname = self.env.docname
        if docname not in ENGLISH_PARTS:
            return
        for node in self.document.findall(nodes.TextElement):
            if _kept_in_english(docname, node):
                node["translatable"] = False


class TranslateTocCaptions(SphinxTransform):
    """The parts' captions ("Part I · How a transformer attends") come from ``_toc.yml`` through
    sphinx-external-toc, whose transform (priority 100) adds the toctrees after the i18n
    transform has run: translate their captions from the page's catalog here."""

    default_priority = 101

    def apply(self, **kwargs) -> None:
        if edition_language(self.app) == "en":
            return
        from attnlab.i18n import read_po

        po = (Path(self.app.srcdir) / "locale" / "zh_CN" / "LC_MESSAGES"
              / f"{self.env.docname}.po")
        if not po.exists():
            return
        messages = read_po(po)
        for toctree in self.document.findall(addnodes.toctree):
            caption = toctree.get("caption")
            if caption in messages:
                toctree["caption"] = messages[caption]


# --- glue after translation -----------------------------------------------------------------

class TranslateDisplayMath(SphinxTransform):
    """Sphinx's i18n puts a display formula's translation in as a literal block ("::" and the
    text), which the Markdown parser does not read, so the page would show "::" instead of the
    formula. Put each translated formula (its words in ``\\text{…}``) in place first, before the
    i18n transform (priority 20), which then finds nothing left to translate in it."""

    default_priority = 15

    def apply(self, **kwargs) -> None:
        if edition_language(self.app) == "en":
            return
        from sphinx.locale import init
        from sphinx.util.i18n import docname_to_domain

        dirs = [str(Path(self.env.srcdir) / d) for d in self.config.locale_dirs]
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        catalog, found = init(dirs, self.config.language, domain)
        if not found:
            return
        for node in self.document.findall(nodes.math_block):
            formula = catalog.gettext(node.rawsource or node.astext())
            if formula and formula != (node.rawsource or node.astext()):
                node.rawsource = formula
                node.children = [nodes.Text(formula)]


_RENDERERS: dict[str, object] = {}


def _patch_glue_lookup(app: Sphinx) -> None:
    """Make myst-nb's glue lookup find the page's notebook, and prefer ``key.<language>``."""
    from myst_nb.ext.glue import directives, roles, utils

    original = utils.retrieve_glue_data
    if getattr(original, "_attnlab", False):
        return

    def retrieve(document: nodes.document, key: str):
        env = getattr(document.settings, "env", None)
        docname = getattr(env, "docname", None)
        borrowed = "nb_renderer" not in document and docname in _RENDERERS
        if "nb_renderer" in document:
            _RENDERERS[docname] = document["nb_renderer"]
        elif borrowed:  # a translated message, parsed on its own: lend it the page's notebook
            document.attributes["nb_renderer"] = _RENDERERS[docname]
        try:
            lang = edition_language(app)
            if lang != "en" and "nb_renderer" in document:
                glued = document["nb_renderer"].renderer.nb_client.glue_data
                if f"{key}.{lang}" in glued:
                    key = f"{key}.{lang}"
            return original(document, key)
        finally:
            if borrowed:  # the message's nodes join the page, which must stay picklable
                del document.attributes["nb_renderer"]

    retrieve._attnlab = True  # type: ignore[attr-defined]
    for module in (utils, roles, directives):
        module.retrieve_glue_data = retrieve


# --- the switch between editions -------------------------------------------------------------

SWITCH = {
    "en": ('<a class="attnlab-edition" href="{href}" hreflang="zh-CN" lang="zh-CN">'
           "中文版</a>"),
    "zh_CN": ('<a class="attnlab-edition" href="{href}" hreflang="en" lang="en">'
              "English</a>"),
}
UNTRANSLATED = ('<div class="admonition note attnlab-untranslated" lang="zh-CN">'
                '<p class="admonition-title">本页尚未译成中文</p><p>下面是英文原文；'
                "代码、数字和图与英文版相同。</p></div>")


#: myst-nb's words around a hidden code cell (its summary's label and its show/hide prompts),
#: which it writes in English whatever the page's language
HIDDEN_CELL_LABEL = ('aria-label="Toggle hidden content"', 'aria-label="展开或收起隐藏的内容"')
HIDDEN_CELL_PROMPT = re.compile(r'(admonition-title">)(Show|Hide) code cell (\w+)<')
HIDDEN_CELL_WORDS = {"Show": "显示", "Hide": "隐藏", "source": "代码", "content": "整个代码单元",
                     "output": "输出", "outputs": "输出"}


def hidden_cells_in_chinese(body: str) -> str:
    """``body`` with myst-nb's prompts around hidden code cells in Chinese ("显示代码")."""
    body = body.replace(*HIDDEN_CELL_LABEL)
    return HIDDEN_CELL_PROMPT.sub(
        lambda m: f"{m[1]}{HIDDEN_CELL_WORDS[m[2]]}{HIDDEN_CELL_WORDS.get(m[3], m[3])}<", body)


#: Emphasis (``<em>``) around Chinese text; the lesson's reading-time line, set in italics in
#: English, is the one emphasis that is a by-line rather than a stress
CHINESE_EMPHASIS = re.compile(r"<em>((?:(?!</em>).)*?[\u4e00-\u9fff](?:(?!</em>).)*?)</em>", re.S)
READING_TIME_LINE = "阅读时间："


def chinese_emphasis(body: str) -> str:
    """``body`` with each ``<em>`` around Chinese text classed for Chinese typography
    (``_static/custom.css``: dots under the characters, as Chinese fonts have no italic), and
    the reading-time line set upright in a muted colour."""
    def mark(m: re.Match) -> str:
        kind = "attnlab-zh-byline" if m[1].startswith(READING_TIME_LINE) else "attnlab-zh-em"
        return f'<em class="{kind}">{m[1]}</em>'
    return CHINESE_EMPHASIS.sub(mark, body)


#: An exercise's title as sphinx-exercise writes it ("练习 3.5 " then " (title)"), and a solution's
#: link to its exercise, whose title sphinx-exercise takes from the English source
EXERCISE_TITLE = re.compile(
    r'(<div class="exercise[^"]*" id="([^"]+)">\s*<p class="admonition-title">'
    r'<span class="caption-number">[^<]*?)\s*</span>\s*\(([^<]*)\)</p>')
SOLUTION_LINK = re.compile(
    r'(<a class="reference internal" href="#([^"]+)">[^<(]*?)\s*\([^<]*\)</a>')


def exercise_titles_in_chinese(body: str) -> str:
    """``body`` with each exercise's title in full-width brackets ("练习 3.5（动手实现：…）") and
    each solution's link to its exercise carrying that translated title, not the English one."""
    titles = {m[2]: m[3] for m in EXERCISE_TITLE.finditer(body)}
    body = EXERCISE_TITLE.sub(lambda m: f"{m[1]}</span>（{m[3]}）</p>", body)
    return SOLUTION_LINK.sub(
        lambda m: f"{m[1]}（{titles[m[2]]}）</a>" if m[2] in titles else m[0], body)


#: What Chinese typography writes differently from the English text the code glues into a page:
#: a size in two units takes full-width brackets, "704.6 MB（672.0 MiB）", and a percentage no
#: space, "56%". Code, printed output and formulas are left as they are.
VERBATIM = re.compile(r"(<pre\b.*?</pre>|<code\b.*?</code>|\\\(.*?\\\)|\\\[.*?\\\]|<[^>]*>)", re.S)
BYTES_IN_TWO_UNITS = re.compile(r"(\d[\d,.]* [kMGTP]?B) \((\d[\d,.]* [KMGTP]iB)\)")
SPACED_PERCENT = re.compile(r"(\d) %")


def chinese_typography(body: str) -> str:
    """``body`` with the text between tags (not code, output or math) set as Chinese writes it."""
    def prose(part: str) -> str:
        return SPACED_PERCENT.sub(r"\1%", BYTES_IN_TWO_UNITS.sub(r"\1（\2）", part))
    return "".join(part if k % 2 else prose(part) for k, part in enumerate(VERBATIM.split(body)))


def other_edition_href(pagename: str, lang: str) -> str:
    """The relative URL of ``pagename`` in the other edition, from this edition's page."""
    depth = pagename.count("/")
    up = "../" * depth
    if lang == "en":
        return f"{up}{ZH_PREFIX}/{pagename}.html"
    return f"../{up}{pagename}.html"


def add_edition_switch(app: Sphinx, pagename: str, templatename: str, context: dict,
                       doctree) -> None:
    if app.builder.format != "html" or app.builder.name == "singlehtml":
        return
    lang = edition_language(app)
    href = other_edition_href(pagename, lang)
    switch = SWITCH[lang].format(href=href)
    banner = ""
    if lang != "en" and doctree is not None and pagename not in TRANSLATED:
        banner = UNTRANSLATED
    elif lang != "en" and pagename in ENGLISH_PARTS:
        banner = ('<div class="admonition note attnlab-english-parts" lang="zh-CN"><p>'
                  f"{ENGLISH_PARTS[pagename]}</p></div>")
    if "body" in context:
        body = context["body"]
        if lang != "en":  # the Chinese PDF (build_edition.py pdf) is beside the Chinese pages
            body = SHARED_FILE.sub(lambda m: f'href="{chinese_pdf_name(m.group(1))}"', body)
            body = chinese_emphasis(exercise_titles_in_chinese(hidden_cells_in_chinese(body)))
            body = chinese_typography(body)
        context["body"] = f'<div class="attnlab-edition-bar">{switch}</div>{banner}' + body
    other = "zh-CN" if lang == "en" else "en"
    context["metatags"] = context.get("metatags", "") + \
        f'\n<link rel="alternate" hreflang="{other}" href="{href}">'


def catalogs_exist(app: Sphinx) -> None:
    """A Chinese build with no catalogs would silently be English: refuse it."""
    if edition_language(app) == "en":
        return
    root = Path(app.srcdir) / "locale" / "zh_CN" / "LC_MESSAGES"
    missing = [page for page in TRANSLATED if not (root / f"{page}.po").exists()]
    if missing:
        raise FileNotFoundError(f"catalogs missing for translated pages: {missing}")


def setup(app: Sphinx) -> dict:
    _patch_glue_lookup(app)
    app.add_transform(EnglishParts)
    app.add_transform(TranslatableSources)
    app.add_transform(TranslateTocCaptions)
    app.add_transform(TranslateDisplayMath)
    app.connect("builder-inited", catalogs_exist)
    app.connect("doctree-read", keep_page_language)
    app.connect("html-page-context", add_edition_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
