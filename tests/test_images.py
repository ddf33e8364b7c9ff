"""The static diagrams in images/: each used by a lesson with alt text, each rebuilt exactly by
tools/draw_diagrams.py, and each drawn to the figure standard (text size, nothing clipped or
overlapping)."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
from attnbook.plotting import SMALL_TEXT_PT

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
FIGURE = re.compile(r"```\{figure\} \.\./images/(?P<name>[^\s`]+)\n(?P<options>(?::[^\n]*\n)*)")


def _draw_diagrams():
    spec = importlib.util.spec_from_file_location("draw_diagrams",
                                                  ROOT / "tools" / "draw_diagrams.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _figure_uses() -> dict[str, list[str]]:
    """Image name → the alt texts of its figure directives in the lessons' markdown cells."""
    uses: dict[str, list[str]] = {}
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for m in FIGURE.finditer("".join(cell["source"])):
                alt = re.search(r"^:alt: *(.*)$", m["options"], re.M)
                uses.setdefault(m["name"], []).append(alt[1].strip() if alt else "")
    return uses


def test_every_image_is_used_by_a_lesson_with_alt_text():
    files = sorted(p.name for p in IMAGES.iterdir())
    assert files, "images/ is empty"
    uses = _figure_uses()
    # images/<name>.zh_CN.svg is what the Chinese edition shows for <name>.svg
    unused = [name for name in files if re.sub(r"\.zh_CN(\.\w+)$", r"\1", name) not in uses]
    assert not unused, f"images used by no lesson: {unused}"
    no_alt = [name for name, alts in uses.items() if not all(alts)]
    assert not no_alt, f"figures without alt text: {no_alt}"
    missing = [name for name in uses if name not in files]
    assert not missing, f"lessons show images that do not exist: {missing}"


def test_the_script_rebuilds_the_committed_images_exactly(tmp_path):
    written = _draw_diagrams().main(tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in IMAGES.glob("*.svg"))
    stale = [p.name for p in written if p.read_bytes() != (IMAGES / p.name).read_bytes()]
    assert not stale, f"run tools/draw_diagrams.py: {stale} differ from the script's output"


DRAWN = [(name, lang) for name in sorted(_draw_diagrams().DIAGRAMS) for lang in ("en", "zh_CN")
         if lang == "en" or name in _draw_diagrams().TRANSLATED]


@pytest.mark.parametrize(("name", "lang"), DRAWN)
def test_diagrams_meet_the_figure_standard(name, lang):
    """Text at least SMALL_TEXT_PT in a figure at most 6.4 inches wide, inside the figure, and no
    two texts overlapping, in each language the diagram is drawn in."""
    from attnbook.plotting import course_style, missing_glyphs
    from attnlab.i18n import language

    with language(lang), course_style(), missing_glyphs() as tofu:
        fig = _draw_diagrams().DIAGRAMS[name]()
        fig.canvas.draw()
    assert not tofu, f"characters drawn as empty boxes: {tofu}"
    assert fig.get_figwidth() <= 6.4
    renderer = fig.canvas.get_renderer()
    texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_fontsize"))
             if t.get_text().strip() and t.get_visible()]
    assert texts
    small = [t.get_text() for t in texts if t.get_fontsize() < SMALL_TEXT_PT]
    assert not small, f"text below {SMALL_TEXT_PT} pt: {small}"
    page = fig.bbox
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    clipped = [s for s, b in boxes if b.x0 < page.x0 or b.x1 > page.x1 or b.y0 < page.y0
               or b.y1 > page.y1]
    assert not clipped, f"text outside the figure: {clipped}"
    overlapping = [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
                   if ba.overlaps(bb)]
    assert not overlapping, f"overlapping text: {overlapping}"
