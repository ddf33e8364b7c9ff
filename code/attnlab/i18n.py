"""The reader's language for text that code writes: figure titles and labels, slider labels, alt
text, sentences chosen from data, self-check diagnoses.

English is the source. A message is written in English, with named placeholders, and translated
through gettext catalogs (``.po`` files under ``attnlab/locale/<language>/``, one per lesson or
module, all read together)::

    tr("{n} tokens", n=12)          # "12 tokens", or "12 个 Token" under language("zh_CN")

A message missing from the catalog (or marked fuzzy) stays English, so nothing breaks while a
translation is under way; the book's drift tests count such messages.

The language is a context variable: ``with language("zh_CN"): ...`` draws in Chinese, and the
website's build renders each figure and panel once per language in :func:`rendered_languages`
(the environment variable ``ATTNLAB_LANGUAGES``, e.g. ``en,zh_CN``). In a notebook the reader
chooses with ``set_language("zh_CN")`` (each lesson's language cell, near its top); outside any
such choice, the environment variable ``ATTNLAB_LANGUAGE`` (``zh_CN``) gives the language, else
English.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

#: The languages the course is written in; the first is the source.
LANGUAGES = ("en", "zh_CN")
#: The ``lang`` attribute each language's HTML carries.
HTML_LANG = {"en": "en", "zh_CN": "zh-CN"}
LOCALE_DIR = Path(__file__).parent / "locale"

#: The language inside a ``with language(...)`` block (None outside any).
_LANGUAGE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "attnlab_language", default=None
)
#: The language outside such blocks: what :func:`set_language` chose (a plain global, so that it
#: holds in every later notebook cell, whichever task or thread runs it), else None: then
#: ``ATTNLAB_LANGUAGE``, else English.
_default_language: str | None = None

#: Text a caller may give either as a string or as a function that writes it (called once per
#: language, inside :func:`language`).
LocalText = str | Callable[[], str]


def _check_language(lang: object, name: str = "lang") -> str:
    if lang not in LANGUAGES:
        raise ValueError(f"{name}: expected one of {LANGUAGES}, got {lang!r}")
    return lang  # type: ignore[return-value]


def current_language() -> str:
    """The language text is written in now: the innermost :func:`language` block's, else the
    one :func:`set_language` chose, else the environment variable ``ATTNLAB_LANGUAGE``'s, else
    English."""
    return _LANGUAGE.get() or _default_language or environment_language()


def environment_language() -> str:
    """The environment variable ``ATTNLAB_LANGUAGE`` (``en`` or ``zh_CN``), English if unset."""
    raw = os.environ.get("ATTNLAB_LANGUAGE", "").strip()
    return _check_language(raw, "ATTNLAB_LANGUAGE") if raw else "en"


def set_language(lang: str) -> None:
    """Write figures, labels and messages in ``lang`` from now on, e.g. at the top of a
    notebook: ``set_language("zh_CN")``."""
    global _default_language
    _default_language = _check_language(lang)


@contextlib.contextmanager
def language(lang: str) -> Iterator[str]:
    """Within the block, text is written in ``lang``."""
    token = _LANGUAGE.set(_check_language(lang))
    try:
        yield lang
    finally:
        _LANGUAGE.reset(token)


def rendered_languages() -> tuple[str, ...]:
    """The languages a figure or panel is rendered in: ``ATTNLAB_LANGUAGES`` (comma-separated,
    English first), or just the current language when it is not set."""
    raw = os.environ.get("ATTNLAB_LANGUAGES", "").strip()
    if not raw:
        return (current_language(),)
    langs = tuple(part.strip() for part in raw.split(",") if part.strip())
    for lang in langs:
        _check_language(lang, "ATTNLAB_LANGUAGES")
    return langs


def _unquote(line: str) -> str:
    """The text of one quoted ``.po`` string (C escapes: \\n, \\t, \\", \\\\)."""
    return ast.literal_eval(line)


def read_po(path: Path) -> dict[str, str]:
    """The translated, non-fuzzy messages of one ``.po`` file: msgid → msgstr. (A small reader of
    the format's common part — comments, flags, msgid/msgstr over several quoted lines — so the
    package needs nothing beyond the standard library; contexts and plurals are not used.)"""
    messages: dict[str, str] = {}
    entry: dict[str, str] = {}
    field, fuzzy = None, False

    def close() -> None:
        if entry.get("msgid") and entry.get("msgstr") and not fuzzy:
            messages[entry["msgid"]] = entry["msgstr"]

    for raw in path.read_text(encoding="utf-8").splitlines() + [""]:
        line = raw.strip()
        if not line:
            close()
            entry, field, fuzzy = {}, None, False
        elif line.startswith("#,"):
            fuzzy = fuzzy or "fuzzy" in line
        elif line.startswith("#"):
            continue
        elif line.startswith(("msgid ", "msgstr ")):
            field, _, rest = line.partition(" ")
            entry[field] = _unquote(rest)
        elif line.startswith('"') and field:
            entry[field] += _unquote(line)
    return messages


@cache
def catalog(lang: str) -> dict[str, str]:
    """Every translated, non-fuzzy message of ``lang``: English msgid → translation."""
    _check_language(lang)
    messages: dict[str, str] = {}
    for path in sorted((LOCALE_DIR / lang).glob("*.po")):
        messages.update(read_po(path))
    return messages


#: How many messages ``tr`` has found in a catalog so far (``language_blocks`` compares it
#: before and after a rendering: none found means the rendering is the English one).
_translations_found = 0


def tr(message: str, /, **values: object) -> str:
    """``message`` in the current language, with ``{name}`` placeholders filled from ``values``
    (``str.format`` syntax, so ``{mb:,.1f}`` works). Untranslated messages stay English."""
    global _translations_found
    text = catalog(current_language()).get(message)
    if text is None:
        text = message
    else:
        _translations_found += 1
    return text.format(**values) if values else text


def text_of(text: LocalText) -> str:
    """A :data:`LocalText` written out in the current language."""
    return text() if callable(text) else text


def language_blocks(
    render: Callable[[], str], probe: Callable[[], object] | None = None
) -> str:
    """HTML that holds ``render()`` once per rendered language, each between markers the book
    keeps or drops by the page's language (``<!--attnlab-lang:zh_CN-->…<!--/attnlab-lang-->``).
    With one language, just that language's HTML and no markers.

    A language in which nothing rendered is translated (``tr`` found no message: a lesson not
    yet translated) gets no block of its own: both editions show the first language's, so an
    untranslated figure costs nothing twice. ``probe`` (e.g. one frame of a panel) is tried
    first in such a language, so that a costly ``render`` runs only when it would differ."""
    langs = rendered_languages()
    if len(langs) == 1:
        with language(langs[0]):
            return render()
    parts = []
    for k, lang in enumerate(langs):
        with language(lang):
            before = _translations_found
            if k and probe is not None:
                probe()
                if _translations_found == before:
                    continue
            html = render()
            if k and _translations_found == before:
                continue
        parts.append((lang, html))
    if len(parts) == 1:
        return parts[0][1]
    return "".join(f"<!--attnlab-lang:{lang}-->{html}<!--/attnlab-lang-->" for lang, html in parts)
