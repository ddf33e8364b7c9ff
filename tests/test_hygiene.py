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


CODE = ROOT / "code"
MATHS, BOOK = CODE / "attnlab", CODE / "attnbook"


def module_of(path: Path) -> str:
    """``code/attnlab/delta.py`` -> ``attnlab.delta``; a package's ``__init__`` -> the package."""
    parts = path.relative_to(CODE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def package_imports() -> dict[str, set[str]]:
    """Module -> every module it imports (absolute names, at module level or inside functions),
    for both packages; third-party and standard-library names are kept as their top package. An
    import under ``if TYPE_CHECKING:`` is for annotations only and never runs."""
    import ast

    graph: dict[str, set[str]] = {}
    for path in sorted([*MATHS.rglob("*.py"), *BOOK.rglob("*.py")]):
        name = module_of(path)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for block in ast.walk(tree):
            if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING"):
                block.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                if node.module:
                    targets.add(".".join([*base, *node.module.split(".")]))
                else:  # from . import x, y
                    targets |= {".".join([*base, alias.name]) for alias in node.names}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                first = node.module.split(".")[0]
                targets |= ({f"{node.module}.{a.name}" for a in node.names}
                            if first in ("attnlab", "attnbook") else {node.module})
        graph[name] = {resolve(t) for t in targets} - {name}
    return graph


def resolve(target: str) -> str:
    """The module a dotted import names: ``attnlab.delta.delta_write`` -> ``attnlab.delta``;
    outside the two packages, the top-level name (``torch.nn`` -> ``torch``)."""
    parts = target.split(".")
    if parts[0] not in ("attnlab", "attnbook"):
        return parts[0]
    for n in range(len(parts), 0, -1):
        stem = CODE.joinpath(*parts[:n])
        if stem.with_suffix(".py").exists() or (stem / "__init__.py").exists():
            return ".".join(parts[:n])
    return target


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


def internal(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph restricted to the two packages' own modules."""
    return {m: {t for t in ts if t.split(".")[0] in ("attnlab", "attnbook")}
            for m, ts in graph.items()}


def test_the_packages_have_no_import_loop():
    graph = internal(package_imports())
    assert {"attnlab.configs", "attnlab.layers", "attnlab.model", "attnbook.plotting"} <= set(graph)
    assert import_cycles(graph) == []


def test_the_maths_imports_torch_and_the_standard_library_only():
    """attnlab is the maths a reader can lift: no plotting, widget or notebook library, and
    never the book machinery (attnbook depends on attnlab, not the reverse)."""
    import sys

    allowed = {"torch", "attnlab", "__future__", *sys.stdlib_module_names}
    foreign = {m: sorted(t for t in ts if t.split(".")[0] not in allowed)
               for m, ts in package_imports().items() if m.startswith("attnlab")}
    assert not {m: ts for m, ts in foreign.items() if ts}


def test_importing_the_maths_changes_no_global_state():
    """``import attnlab`` leaves torch's thread count and default dtype as they were and loads
    nothing beyond what ``import torch`` loads but its own modules and the standard library."""
    import subprocess
    import sys

    probe = (
        "import sys, torch; torch.set_num_threads(2); before = (torch.get_num_threads(), "
        "torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled())\n"
        "with_torch = set(sys.modules)\n"
        "import attnlab, attnlab.selfcheck, attnlab.serving, attnlab.train\n"
        "after = (torch.get_num_threads(), torch.get_default_dtype(), "
        "torch.are_deterministic_algorithms_enabled())\n"
        "loaded = {m.split('.')[0] for m in set(sys.modules) - with_torch} - {'attnlab'}\n"
        "loaded -= set(sys.stdlib_module_names)\n"
        "assert before == after, (before, after)\n"
        "assert not loaded, loaded\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env={"PYTHONPATH": str(CODE), "PATH": ""}, check=False)
    assert result.returncode == 0, result.stderr[-2000:]


def import_closure(module: str, graph: dict[str, set[str]]) -> set[str]:
    """``module`` and every package module it imports, directly or not."""
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return seen


def lines_of(module: str) -> int:
    stem = CODE.joinpath(*module.split("."))
    path = stem.with_suffix(".py") if stem.with_suffix(".py").exists() else stem / "__init__.py"
    return len(path.read_text().splitlines())


def test_a_mechanism_can_be_lifted_out_alone():
    """``kda_chunk`` with everything it imports from the package: at most 1,200 lines (issue 20:
    it was 8 modules and 2,753 lines), and no plotting, widget or notebook library."""
    graph = internal(package_imports())
    closure = import_closure("attnlab.kda", graph) - {"attnlab"}
    total = sum(lines_of(m) for m in closure)
    assert total <= 1200, f"attnlab.kda imports {sorted(closure)}: {total} lines"


def test_every_phony_make_target_has_a_recipe():
    """``make test-package`` once "passed" having run nothing: a phony target with no recipe."""
    makefile = (ROOT / "Makefile").read_text()
    phony = {t for line in re.findall(r"^\.PHONY:(.*)$", makefile, re.M) for t in line.split()}
    rules = dict(re.findall(r"^([\w-]+):[^=\n]*\n((?:\t.*\n)*)", makefile, re.M))
    empty = sorted(t for t in phony if not rules.get(t, "").strip())
    assert not empty, f"phony targets without a recipe: {empty}"
    assert "check" in phony and "test" in phony


def test_the_cycle_finder_finds_a_loop():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_low_modules_import_no_layer_or_model():
    """The registry of layer kinds sits below the description of models, which sits below the
    memory arithmetic; softmax attention needs only the checks, its KV cache and the building
    blocks (the short convolution of Lesson 17's toy), which sit below every layer and need
    nothing but the checks."""
    graph = {m.removeprefix("attnlab."): {t.removeprefix("attnlab.") for t in ts}
             for m, ts in internal(package_imports()).items() if m.startswith("attnlab.")}
    assert not graph["kinds"] & {"configs", "memory", "serving", "model", "train"}
    assert graph["configs"] <= {"checks", "kinds", "mla"}
    assert graph["memory"] <= {"checks", "configs", "kinds"}
    assert graph["kv_cache"] <= {"checks"}
    assert graph["attention"] <= {"checks", "kv_cache", "blocks"}
    assert graph["blocks"] <= {"checks"}
    assert "model" not in graph["embedding"] and "model" not in graph["train"]
