"""Code a reader sees on a lesson page fits the text column: no sideways scrolling at 1280 px.

At 1280 px the book's text column holds 82 characters of the code font (a code block is 686 px
wide with 16-px padding, a character 7.9 px at 0.82em), 80 inside a "Show code cell source" box
and 78 inside a ``{dropdown}`` (651 px), where Lessons 6 and 14 include code. The limit is the
package's ruff line length (``code/ruff.toml``), so ``ruff format`` keeps the package's code
within it; these tests check what the formatter does not wrap: docstrings, comments and strings
of the objects the lessons include, and the notebook code cells whose input is shown.
Exercise and solution boxes are narrower (619 px, 74 characters): code written in their
Markdown is checked on the built pages by ``tests/test_site.py``.
"""

from __future__ import annotations

import ast
import json
import re
import statistics
import textwrap
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.directives.code import LiteralIncludeReader

ROOT = Path(__file__).resolve().parents[1]
LIMIT = tomllib.loads((ROOT / "code" / "ruff.toml").read_text())["line-length"]
PAGES = sorted([*ROOT.glob("*.ipynb"), *ROOT.glob("*.md"), *(ROOT / "chapters").glob("*.ipynb"),
                *(ROOT / "chapters").glob("*.md")])
HIDDEN_INPUT = {"remove-cell", "remove-input"}  # hide-input code is one click away: shown
# ```{literalinclude} path  (or a ::: fence), then its :option: value lines
DIRECTIVE = re.compile(
    r"^(?:`{3,}|:{3,})\{literalinclude\}[ \t]+(\S+)[ \t]*\n((?:[ \t]*:[\w-]+:.*\n)*)", re.MULTILINE)
OPTION = re.compile(r"^[ \t]*:([\w-]+):[ \t]*(.*?)[ \t]*$", re.MULTILINE)


def markdown_and_code(page: Path) -> tuple[list[str], dict[int, str]]:
    """A page's Markdown sources, and its code cells whose input is shown by cell number."""
    if page.suffix == ".md":
        return [page.read_text()], {}
    cells = json.loads(page.read_text())["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    shown = {i: "".join(c["source"]) for i, c in enumerate(cells) if c["cell_type"] == "code"
             and not HIDDEN_INPUT & set(c.get("metadata", {}).get("tags", []))}
    return markdown, shown


def literal_includes(page: Path) -> list[tuple[Path, dict[str, str]]]:
    """Every ``literalinclude`` on a page: the included file and the directive's options."""
    found = []
    for text in markdown_and_code(page)[0]:
        for m in DIRECTIVE.finditer(text):
            options = {k: v for k, v in OPTION.findall(m.group(2))}
            if "dedent" in options and options["dedent"] == "":
                options["dedent"] = None  # a bare :dedent: strips the common indent, as Sphinx
            found.append(((page.parent / m.group(1)).resolve(), options))
    return found


def included_text(path: Path, options: dict[str, str]) -> str:
    """What the page shows for one ``literalinclude``, read by Sphinx's own reader."""
    config = SimpleNamespace(source_encoding="utf-8")
    return LiteralIncludeReader(str(path), options, config).read()[0]


def too_long(text: str) -> list[str]:
    """The lines of ``text`` longer than LIMIT, each with its length."""
    return [f"{len(line)} chars: {line.strip()[:60]}" for line in text.splitlines()
            if len(line) > LIMIT]


INCLUDES = [(page, path, options) for page in PAGES for path, options in literal_includes(page)]


def test_the_lessons_include_code():
    assert len(INCLUDES) > 40, "the literalinclude parser found almost nothing"
    assert all("pyobject" in options for _, _, options in INCLUDES)


@pytest.mark.parametrize(("page", "path", "options"), INCLUDES,
                         ids=[f"{p.stem}:{o['pyobject']}" for p, _, o in INCLUDES])
def test_included_code_fits_the_text_column(page, path, options):
    long = too_long(included_text(path, options))
    assert not long, (f"{page.name} includes {options.get('pyobject', '')} from "
                      f"{path.relative_to(ROOT)}; lines over {LIMIT}: {long}")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_shown_code_cells_fit_the_text_column(page):
    long = [f"cell {i} ({code.splitlines()[0][:40]}): {line}"
            for i, code in markdown_and_code(page)[1].items() for line in too_long(code)]
    assert not long, f"{page.name}: shown code cells with lines over {LIMIT}: {long}"


def test_a_long_line_is_caught():
    assert too_long("x = 1\n" + "y" * (LIMIT + 1)) and not too_long("z" * LIMIT)


# ------------------------------------------------------------------------------------------
# What an included object is made of: the code a lesson shows should be the equation
# ------------------------------------------------------------------------------------------
def _is_validation(node: ast.stmt) -> bool:
    """A statement that checks the caller's input: it raises, asserts, or calls a checker
    (``check_*``, ``_check_*``, ``validate*``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Raise | ast.Assert):
            return True
        if isinstance(sub, ast.Call):
            name = getattr(sub.func, "id", None) or getattr(sub.func, "attr", "")
            if name.lstrip("_").startswith(("check", "validate")):
                return True
    return False


def anatomy(text: str) -> tuple[int, int, bool]:
    """``(overhead, total, validates)`` of an included object's source: ``total`` counts its
    non-blank lines, ``overhead`` those of signatures (decorators included), docstrings and
    input checks, and ``validates`` says whether any input check is among the lines shown."""
    tree = ast.parse(textwrap.dedent(text))
    lines = textwrap.dedent(text).splitlines()
    overhead: set[int] = set()
    validates = False

    def span(node: ast.AST) -> range:
        return range(node.lineno, node.end_lineno + 1)

    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        overhead.update(range(first, node.body[0].lineno))  # decorators and signature
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            overhead.update(span(body[0]))
            body = body[1:]
        if isinstance(node, ast.ClassDef):
            continue
        for stmt in body:
            if _is_validation(stmt):
                overhead.update(span(stmt))
                validates = True
    counted = {i for i, line in enumerate(lines, 1) if line.strip()}
    return len(overhead & counted), len(counted), validates


OBJECTS = {(path, options["pyobject"]): included_text(path, options)
           for _, path, options in INCLUDES}


def test_included_objects_are_mostly_the_maths():
    """The median included object is at most half signature, docstring and checks, and at most
    one in ten carries input validation among its shown lines (validation belongs at the
    public boundary, outside what a lesson shows)."""
    shares, validating = [], []
    for (path, name), text in OBJECTS.items():
        overhead, total, validates = anatomy(text)
        shares.append(overhead / total)
        if validates:
            validating.append(f"{path.name}:{name}")
    assert statistics.median(shares) <= 0.5, f"median overhead {statistics.median(shares):.2f}"
    assert len(validating) <= len(OBJECTS) / 10, f"validation in included lines: {validating}"


def test_anatomy_counts_signature_docstring_and_checks():
    source = '''
@checked(kernel_inputs)
def f(q, k, *, beta):
    """o = q + k."""
    check_tensor("q", q)
    if beta < 0:
        raise ValueError("beta")
    return q + k
'''
    assert anatomy(source) == (6, 7, True)
    assert anatomy("def g(x):\n    return 2 * x\n") == (1, 2, False)


if __name__ == "__main__":  # a report per included object: python tests/test_shown_code.py
    for (path, name), text in sorted(OBJECTS.items(), key=lambda kv: -anatomy(kv[1])[0]):
        overhead, total, validates = anatomy(text)
        print(f"{overhead / total:4.0%} of {total:3d} lines{'  checks' if validates else ''}"
              f"  {path.relative_to(ROOT / 'code')}:{name}")
