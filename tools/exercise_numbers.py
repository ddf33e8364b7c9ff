"""Sphinx extension: exercises numbered per lesson ("Exercise 13.2"), not across the whole book.

sphinx-exercise makes ``{exercise}`` an enumerable node, so Sphinx numbers exercises like figures:
one counter over the whole table of contents (Lesson 13's exercises would read "Exercise 55–58").
Every place that shows an exercise's number reads it from one table, ``env.toc_fignumbers``
(docname → ``"exercise"`` → node id → number): the exercise's own heading (the HTML writer's
``add_fignumber``), the heading of its solution ("Solution to Exercise …", sphinx-exercise's
``get_node_number``) and every ``{numref}`` or ``{ref}`` to it (the standard domain's
``get_fignumber``), in the ``html`` and the ``singlehtml`` build the PDF is printed from.

So this extension rewrites that table once, right after Sphinx fills it (``env-get-updated``):
the k-th exercise of a page whose title is "Lesson N · …" gets the number (N, k), shown "N.k"
("Lesson 16b · …" → "16b.1"). A page with exercises but no lesson number in its title numbers
them 1, 2, … within the page. The lesson is read from the title, so a new lesson needs nothing.

It also makes a Markdown link with no text, ``[](#l13-ex-two)``, read "Exercise 13.1" like
``{numref}`l13-ex-two` ``: sphinx-exercise turns such a link into a ``numref`` but leaves it in
MyST's domain, where nothing resolves it (an empty, unlinked box on the page).
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx_exercise.nodes import exercise_enumerable_node

FIGTYPE = "exercise"
#: "Lesson 13 · …" → "13", "Lesson 16b · …" → "16b"; the Chinese edition's "第 13 课 · …" too.
LESSON_TITLE = re.compile(r"^(?:Lesson\s+(\d+[a-z]?)\b|第\s*(\d+[a-z]?)\s*课)")


def lesson_number(title: str) -> str | None:
    """The lesson's number as its title writes it ("13", "16b"), or None if the title has none."""
    found = LESSON_TITLE.match(title.strip())
    return (found.group(1) or found.group(2)) if found else None


def per_lesson_numbers(book_numbers: dict[str, tuple], lesson: str | None
                       ) -> dict[str, tuple]:
    """Renumber one page's exercises: ``{id: book number}`` → ``{id: (lesson, k)}``.

    k = 1, 2, … in the order of the book numbers (the order on the page); without a lesson the
    number is ``(k,)``. ``book_numbers`` maps node id → the tuple Sphinx assigned.
    """
    ordered = sorted(book_numbers, key=book_numbers.__getitem__)
    prefix = () if lesson is None else (lesson,)
    return {node_id: (*prefix, k) for k, node_id in enumerate(ordered, start=1)}


def number_exercises_per_lesson(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Replace each page's book-wide exercise numbers by its per-lesson numbers, keeping the
    book-wide ones for ``restore_book_numbers`` (the next build's comparison)."""
    env.exercise_book_numbers = {}
    for docname, numbers in env.toc_fignumbers.items():
        if FIGTYPE in numbers:
            env.exercise_book_numbers[docname] = numbers[FIGTYPE]
            title = env.titles[docname].astext() if docname in env.titles else ""
            numbers[FIGTYPE] = per_lesson_numbers(numbers[FIGTYPE], lesson_number(title))
    return []


def restore_book_numbers(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Put back the last build's book-wide numbers before Sphinx assigns new ones: Sphinx rewrites
    every page whose numbers differ from the last build's, and without this every page with
    exercises would differ (per-lesson against book-wide) in every build."""
    for docname, numbers in getattr(env, "exercise_book_numbers", {}).items():
        if FIGTYPE in env.toc_fignumbers.get(docname, {}):
            env.toc_fignumbers[docname][FIGTYPE] = numbers
    return []


class MarkdownLinksToExercisesAsNumref(SphinxPostTransform):
    """``[](#label)`` to a numbered exercise becomes ``{numref}`label` ``, before sphinx-exercise's
    own rewrite of references to exercises (its post-transform of priority 5) sees it."""

    default_priority = 4

    def run(self, **kwargs) -> None:
        registry = getattr(self.env, "sphinx_exercise_registry", {})
        for node in self.document.findall(addnodes.pending_xref):
            if node.get("reftype") != "myst" or node.get("refdomain") or node.get("refexplicit"):
                continue
            target = registry.get(node["reftarget"], {}).get("node")
            if isinstance(target, exercise_enumerable_node):
                label = nodes.fully_normalize_name(node["reftarget"])
                node["refdomain"], node["reftype"], node["reftarget"] = "std", "numref", label
                node.clear()
                node += nodes.literal(label, label, classes=["xref", "std", "std-numref"])


def setup(app: Sphinx) -> dict:
    # around the toctree collector (priority 500), which assigns the book-wide numbers
    app.connect("env-get-updated", restore_book_numbers, priority=100)
    app.connect("env-get-updated", number_exercises_per_lesson, priority=900)
    app.add_post_transform(MarkdownLinksToExercisesAsNumref)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
