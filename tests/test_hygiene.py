"""Repository hygiene: notebooks stored without outputs, every lesson in the table of contents."""

import json
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
