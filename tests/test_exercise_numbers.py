"""tools/exercise_numbers.py: exercises numbered per lesson, "Exercise N.k".

A tiny book (two lessons, one page without a lesson number) is built with Sphinx, sphinx-exercise
and the extension, as the website (``html``) and as the single page the PDF is printed from
(``singlehtml``): every exercise heading, solution heading and cross-reference shows "N.k".
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"


def _extension():
    spec = importlib.util.spec_from_file_location("exercise_numbers",
                                                  TOOLS / "exercise_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("title", "number"), [
    ("Lesson 13 · Training in parallel: the chunkwise delta rule", "13"),
    ("Lesson 16b · Real hybrids side by side", "16b"),
    ("Lesson 7 · Linear attention", "7"),
    ("Glossary", None),
    ("Lessons learned", None),
])
def test_the_lesson_number_is_read_from_the_title(title, number):
    assert _extension().lesson_number(title) == number


def test_a_pages_exercises_count_from_one_in_page_order():
    book = {"b": (57,), "a": (55,), "c": (58,)}
    ext = _extension()
    assert ext.per_lesson_numbers(book, "13") == {"a": ("13", 1), "b": ("13", 2), "c": ("13", 3)}
    assert ext.per_lesson_numbers(book, None) == {"a": (1,), "b": (2,), "c": (3,)}


PAGES = {
    "index.md": """# A tiny book

```{toctree}
lesson_a
lesson_b
notes
```
""",
    "lesson_a.md": """# Lesson 3 · First

```{exercise}
:label: l3-first
One.
```

```{solution} l3-first
First solution.
```

```{exercise}
:label: l3-second
Two.
```

```{solution} l3-second
Second solution.
```
""",
    "lesson_b.md": """# Lesson 16b · Second

```{exercise}
:label: l16b-only
Only.
```

```{solution} l16b-only
Its solution.
```
""",
    "notes.md": """# Notes

See {numref}`l3-second`, {ref}`l16b-only` and [](#l3-first).

```{exercise}
:label: notes-ex
A page without a lesson number.
```
""",
}

CONF = f"""
import sys
sys.path.insert(0, {str(TOOLS)!r})
extensions = ["myst_parser", "sphinx_exercise", "exercise_numbers"]
myst_enable_extensions = ["colon_fence"]
"""


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory) -> dict[str, str]:
    """Build the tiny book as ``html`` and ``singlehtml``; return {builder: its pages' HTML}."""
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    src = tmp_path_factory.mktemp("book")
    (src / "conf.py").write_text(CONF)
    for name, text in PAGES.items():
        (src / name).write_text(text)
    built = {}
    for builder in ("html", "singlehtml"):
        out = src / "_build" / builder
        with docutils_namespace():  # each build registers its nodes afresh
            app = Sphinx(str(src), str(src), str(out), str(out / ".doctrees"), builder,
                         status=None, warningiserror=True, freshenv=True)
            app.build()
        built[builder] = "\n".join(
            (out / f"{name[:-3]}.html").read_text() for name in PAGES
            if (out / f"{name[:-3]}.html").exists())
    return built


def headings(html: str) -> list[str]:
    """The text of every exercise and solution heading, in page order."""
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", h)).strip()
            for h in re.findall(r'<p class="admonition-title">(.*?)</p>', html, re.S)]


@pytest.mark.parametrize("builder", ["html", "singlehtml"])
def test_exercise_and_solution_headings_show_the_lesson_number(tiny_book, builder):
    assert headings(tiny_book[builder]) == [
        "Exercise 3.1", "Solution to Exercise 3.1", "Exercise 3.2", "Solution to Exercise 3.2",
        "Exercise 16b.1", "Solution to Exercise 16b.1",
        "Exercise 1",  # the page without a lesson number counts from 1
    ]


@pytest.mark.parametrize("builder", ["html", "singlehtml"])
def test_references_to_exercises_link_them_with_their_number(tiny_book, builder):
    """{numref}, {ref} and a Markdown link with no text, from a page that is not the lesson."""
    links = dict(re.findall(r'<a class="reference internal" href="[^"#]*#([^"]+)">'
                            r"<span[^>]*>([^<]*)</span>", tiny_book[builder]))
    assert links.get("l3-second") == "Exercise 3.2"
    assert links.get("l16b-only") == "Exercise 16b.1"
    assert links.get("l3-first") == "Exercise 3.1"
