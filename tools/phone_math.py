"""Which display equations of a lesson scroll sideways on a 390-px phone, without a new build.

``tests/test_site.py::test_a_lesson_fits_a_phone`` checks
the built site; rebuilding the book to try a stacked layout takes minutes. This script measures
the notebooks' current equations in the site's own page: it opens an already built lesson page
(for the theme's CSS, fonts and offline MathJax) in headless Chromium at 390 x 844 px, replaces
the article with every ``$$ … $$`` display of the notebook's markdown cells, typesets them and
reports each one whose rendered width exceeds its column (358 px; an equation inside a
directive such as a dropdown, or indented in a list, gets the 323-px column of an indented box).

    /work/main/.venv/bin/python tools/phone_math.py chapters/02_self_attention.ipynb ...
    /work/main/.venv/bin/python tools/phone_math.py --all chapters/15_mla.ipynb   # every width

Options: ``--html DIR`` the built site (default ``_build/html``, else ``/work/main/_build/html``);
``--chromium PATH`` (default ``/usr/bin/chromium``). Needs any previous build of the lesson's
page (only its stylesheet and scripts are used). Exit status 1 if a lesson has more than one
equation too wide (the site test's allowance).
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

import nbformat
from playwright.sync_api import sync_playwright

#: Text column of a 390-px phone, and of an indented box (dropdown, admonition, list item).
COLUMN_PX, INDENTED_PX = 358, 323
#: Display equations a lesson may let scroll sideways (as in the site test).
ALLOWED = 1
FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*\{([\w-]+)\}")
CLOSE = re.compile(r"^\s*(`{3,}|:{3,})\s*$")


def display_equations(source: str) -> list[tuple[str, bool]]:
    """Every ``$$ … $$`` block of a markdown cell with whether it sits in an indented box."""
    out, depth, i = [], [], 0
    lines = source.split("\n")
    while i < len(lines):
        line = lines[i]
        opened = FENCE.match(line)
        if opened:
            depth.append(opened.group(1))
        elif (
            CLOSE.match(line)
            and depth
            and CLOSE.match(line).group(1) == depth[-1]
        ):
            depth.pop()
        if "$$" in line:
            start = i
            text = line
            while text.count("$$") < 2 and i + 1 < len(lines):
                i += 1
                text += "\n" + lines[i]
            body = text.split("$$")[1]
            indented = (
                bool(depth)
                or lines[start][:1] == " "
                or _in_list(lines, start)
            )
            out.append((body.strip(), indented))
        i += 1
    return out


def _in_list(lines: list[str], start: int) -> bool:
    """True if the block at ``start`` continues a list item (no blank-line-separated paragraph
    at column 0 in between)."""
    for j in range(start - 1, -1, -1):
        if not lines[j].strip():
            continue
        if re.match(r"^(\d+\.|[-*+])\s", lines[j]):
            return True
        if not lines[j].startswith(" "):
            return False
    return False


def lesson_equations(path: Path) -> list[tuple[str, bool]]:
    nb = nbformat.read(path, 4)
    return [
        eq
        for c in nb.cells
        if c.cell_type == "markdown"
        for eq in display_equations(c.source)
    ]


def measure(page, equations: list[tuple[str, bool]]) -> list[tuple[int, int]]:
    """(rendered width, column width) in CSS px of each equation, typeset in the page."""
    blocks = "".join(
        f'<div style="{f"width:{INDENTED_PX}px" if ind else ""}">'
        f'<div class="math notranslate nohighlight">\\[{html.escape(tex)}\\]</div></div>'
        for tex, ind in equations
    )
    return page.evaluate(
        """async (blocks) => {
          await MathJax.startup.promise;
          const art = document.querySelector('article.bd-article') || document.body;
          art.innerHTML = blocks;
          MathJax.typesetClear();
          await MathJax.typesetPromise([art]);
          return [...art.querySelectorAll('mjx-container[display="true"]')].map(m =>
            [Math.round(m.querySelector('mjx-math').getBoundingClientRect().width),
             m.clientWidth]);
        }""",
        blocks,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--html", type=Path, default=None)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument(
        "--all", action="store_true", help="print every equation's width"
    )
    args = ap.parse_args(argv)
    site = args.html or next(
        d
        for d in (Path("_build/html"), Path("/work/main/_build/html"))
        if d.is_dir()
    )
    worst = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium)
        for nb_path in args.notebooks:
            built = (site / "chapters" / nb_path.name).with_suffix(".html")
            equations = lesson_equations(nb_path)
            page = browser.new_page(
                viewport={"width": 390, "height": 844}, device_scale_factor=2
            )
            page.goto(built.resolve().as_uri(), wait_until="load")
            widths = measure(page, equations)
            page.close()
            wide = 0
            for (tex, _), (w, col) in zip(equations, widths, strict=True):
                too_wide = w > col + 1
                wide += too_wide
                if too_wide or args.all:
                    verdict = "WIDE" if too_wide else "ok  "
                    flat = " ".join(tex.split())[:70]
                    print(f"  {verdict} {w:4d} px in {col} px: {flat}")
            print(
                f"{nb_path.name}: {wide} of {len(equations)} display equations too wide"
            )
            worst = max(worst, wide)
        browser.close()
    return 1 if worst > ALLOWED else 0


if __name__ == "__main__":
    sys.exit(main())
