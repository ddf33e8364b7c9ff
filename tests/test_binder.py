"""The Binder environment: repo2docker reads binder/, installs a CPU-only torch on Python 3.11, and
provides every package the lessons and attnlab import, at the course's pinned versions."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.binder

ROOT = Path(__file__).resolve().parents[1]
# Import names that come from repo2docker's base image or the standard library, or differ from
# their distribution names.
PROVIDED = {"IPython", "ipykernel", "attnlab", "attnbook"}
DIST_OF_IMPORT = {"myst_nb": "myst-nb", "yaml": "pyyaml", "PIL": "pillow"}


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line.strip())
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


@pytest.fixture(scope="module")
def dockerfile() -> str:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-repo2docker"), "--no-build", "--debug", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    return out.stdout + out.stderr


def test_repo2docker_uses_python_311_and_the_binder_requirements(dockerfile):
    assert "python=3.11" in dockerfile
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in dockerfile


def test_binder_torch_is_the_cpu_build_of_the_pinned_release():
    text = (ROOT / "binder" / "requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text
    root_torch = pins(ROOT / "requirements.txt")["torch"]
    assert pins(ROOT / "binder" / "requirements.txt")["torch"] == f"{root_torch}+cpu"
    assert "download.pytorch.org" not in (ROOT / "requirements.txt").read_text()


def test_binder_pins_agree_with_the_root_pins():
    root, binder = pins(ROOT / "requirements.txt"), pins(ROOT / "binder" / "requirements.txt")
    differ = {k: (v, root[k]) for k, v in binder.items() if k in root and k != "torch"
              and v != root[k]}
    assert not differ, differ
    assert "-e ." in (ROOT / "binder" / "requirements.txt").read_text()


def test_binder_runs_the_local_jupyterlab_and_ipywidgets():
    root, binder = pins(ROOT / "requirements.txt"), pins(ROOT / "binder" / "requirements.txt")
    for name in ("jupyterlab", "ipywidgets"):
        assert binder.get(name) == root[name], f"pin {name}=={root[name]} in binder/"


def imported_packages() -> set[str]:
    sources = [p.read_text() for p in (ROOT / "code").rglob("*.py")]
    for nb in (ROOT / "chapters").glob("*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        sources.append("\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code"))
    names = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - PROVIDED


def test_binder_provides_every_imported_package():
    binder = pins(ROOT / "binder" / "requirements.txt")
    missing = [n for n in imported_packages()
               if DIST_OF_IMPORT.get(n, n).lower().replace("_", "-") not in binder]
    assert not missing, f"add to binder/requirements.txt: {missing}"
