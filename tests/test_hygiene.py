"""Repository hygiene: notebooks stored without outputs, every lesson in the table of contents."""

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


def test_there_are_lessons():
    assert NOTEBOOKS


def test_notebooks_are_stored_without_outputs():
    dirty = []
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count")):
                dirty.append(path.name)
                break
    assert not dirty, f"strip outputs from: {dirty}"


def test_every_lesson_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    files = {entry["file"] for part in yaml.safe_load(toc)["parts"] for entry in part["chapters"]}
    missing = [p.stem for p in NOTEBOOKS if f"chapters/{p.stem}" not in files]
    assert not missing, f"lessons missing from _toc.yml: {missing}"


def test_lessons_open_with_their_title_and_question():
    for path in NOTEBOOKS:
        first = "".join(json.loads(path.read_text())["cells"][0]["source"])
        assert first.startswith("# Lesson "), path.name
        assert "question" in first.lower(), path.name


#: Lessons whose core path must read in at most ten minutes: Parts I and II.
CORE_LIMIT_MINUTES, PARTS_I_II = 10, range(1, 15)


def test_reading_times_are_computed_and_parts_i_ii_read_in_ten_minutes():
    """Each lesson's reading time is glued from its own core path (never typed), and the core
    path of Lessons 1-14 reads in at most ten minutes (the rest is in "going deeper" boxes)."""
    from attnbook.notebook import reading_minutes

    typed, too_long = [], []
    for path in NOTEBOOKS:
        if not path.name[:2].isdigit():
            continue
        cells = json.loads(path.read_text())["cells"]
        first = "".join(cells[0]["source"])
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if ("{glue:md}`reading_time`" not in first or re.search(r"about \d+ minutes", first)
                or f'reading_minutes("{path.name}")' not in code):
            typed.append(path.name)
        minutes = reading_minutes(path).minutes
        if int(path.name[:2]) in PARTS_I_II and minutes > CORE_LIMIT_MINUTES:
            too_long.append(f"{path.name}: {minutes:.1f} min")
    assert not typed, f"reading time typed instead of glued from reading_minutes: {typed}"
    assert not too_long, f"core paths over {CORE_LIMIT_MINUTES} minutes: {too_long}"


PACKAGE = ROOT / "code" / "attnlab"


def package_imports() -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level or inside functions
    (``from .x import``, ``from ..x import``, ``from . import x``, ``import attnlab.x``); an
    import under ``if TYPE_CHECKING:`` is for annotations only and never runs."""
    import ast

    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__") or "__init__"
        package = parts[:-1]
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for block in ast.walk(tree):
            if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING"):
                block.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                stem = ".".join([*base, *(node.module.split(".") if node.module else [])])
                if node.module:
                    targets.add(stem)
                else:  # from . import x, y
                    targets |= {".".join([*base, alias.name]) for alias in node.names}
            elif isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                    node.module or ""]
                targets |= {m.removeprefix("attnlab.") for m in modules
                            if m.startswith("attnlab.")}
        known = {t for t in targets if (PACKAGE / (t.replace(".", "/") + ".py")).exists()
                 or (PACKAGE / t.replace(".", "/") / "__init__.py").exists()}
        graph[name] = known - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search (each reported once, from where it closes)."""
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_the_package_has_no_import_loop():
    graph = package_imports()
    assert {"configs", "blocks", "layers", "model", "train"} <= set(graph)
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_loop():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_low_modules_import_no_layer_or_model():
    """The registry of layer kinds sits below the description of models, which sits below the
    memory arithmetic; the building blocks sit below every layer."""
    graph = package_imports()
    assert not graph["kinds"] & {"configs", "memory", "serving", "model", "train"}
    assert graph["configs"] <= {"checks", "kinds", "mla"}
    assert graph["blocks"] <= {"checks"}
    assert graph["memory"] <= {"checks", "configs", "kinds"}
    assert "model" not in graph["embedding"] and "model" not in graph["train"]
