"""Write (or check) every lesson's first code cell: the standalone set-up.

A lesson opened outside the repository (downloaded, or on Colab) has no ``attnlab``. Its first code
cell, hidden on the website (``remove-cell``), imports nothing when ``attnlab`` is importable (the
book build, CI, ``make lab``, Binder) and otherwise installs it with pip from the course's
repository (``_config.yml``'s ``repository.url``, the setting the launch buttons use), or from a
local clone named by ``ATTNLAB_CLONE``; first the CPU build of torch when torch is missing.

    python tools/bootstrap_cell.py          # write the cell into every chapters/NN_*.ipynb
    python tools/bootstrap_cell.py --check  # exit 1 if a notebook's cell is missing or stale
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CELL_ID = "attnlab-standalone-setup"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

TEMPLATE = '''\
# Standalone set-up (hidden on the website): use the course's package, attnlab, if it is installed;
# otherwise install it, so this notebook also runs on Colab or after a download. Written by
# tools/bootstrap_cell.py from _config.yml's repository.url.
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ATTNLAB_REPOSITORY = "{repository}"

# attnlab (the maths) and attnbook (the book machinery) install together
if importlib.util.find_spec("attnbook") is None:
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    if importlib.util.find_spec("torch") is None:
        print("torch is missing: installing its CPU build (a download of about 190 MB) ...")
        subprocess.run([*pip, "torch", "--index-url", "{torch_index}"], check=True)
    clone = os.environ.get("ATTNLAB_CLONE")  # a local clone of the repository, if set
    source = Path(clone).resolve().as_uri() if clone else f"git+{{ATTNLAB_REPOSITORY}}"
    print(f"attnlab is missing: installing it from {{source}} ...")
    subprocess.run([*pip, f"attnlab @ {{source}}"], check=True)
    importlib.invalidate_caches()
    print("attnlab is installed: the lesson continues.")'''


def repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return config["repository"]["url"].rstrip("/")


def cell_source() -> str:
    return TEMPLATE.format(repository=repository_url(), torch_index=TORCH_CPU_INDEX)


def new_cell() -> dict:
    lines = cell_source().splitlines(keepends=True)
    return {"cell_type": "code", "execution_count": None, "id": CELL_ID,
            "metadata": {"tags": ["remove-cell"]}, "outputs": [], "source": lines}


def lessons() -> list[Path]:
    return sorted((ROOT / "chapters").glob("[0-9][0-9]*.ipynb"))  # 16b too


def first_code_cell(nb: dict) -> dict | None:
    return next((c for c in nb["cells"] if c["cell_type"] == "code"), None)


def is_current(nb: dict) -> bool:
    cell = first_code_cell(nb)
    return (cell is not None and cell.get("id") == CELL_ID
            and "".join(cell["source"]) == cell_source()
            and "remove-cell" in cell.get("metadata", {}).get("tags", []))


def write(path: Path) -> bool:
    """Put the current cell first among the code cells of ``path``; True if the file changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    if is_current(nb):
        return False
    nb["cells"] = [c for c in nb["cells"] if c.get("id") != CELL_ID]
    at = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"].insert(at, new_cell())
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = [p.name for p in lessons()
                 if not is_current(json.loads(p.read_text(encoding="utf-8")))]
        if stale:
            print("stale standalone set-up cell (run tools/bootstrap_cell.py):", *stale)
        return 1 if stale else 0
    changed = [p.name for p in lessons() if write(p)]
    print(f"updated {len(changed)} notebooks", *changed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
