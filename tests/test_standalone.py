"""A lesson runs on its own: downloaded, outside the repository, in a fresh environment.

Every lesson's first code cell (written by tools/bootstrap_cell.py, hidden on the website) installs
``attnlab`` when it is missing. The slow test proves it as a reader would meet it: a new virtual
environment in a temporary folder (no system site-packages, no PYTHONPATH), with only Jupyter's
kernel, nbclient and the CPU build of torch; one lesson copied out of the repository and run top
to bottom in that environment's kernel, installing ``attnlab`` and its dependencies from a local
clone of the repository (``ATTNLAB_CLONE``), as it would from GitHub. pip uses the machine's
configured sources. It takes a few minutes; the timings are printed (``-s``), never asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import bootstrap_cell  # noqa: E402

# The fastest lesson in benchmarks/results/latest.md
LESSON = "07_linear_attention.ipynb"


def test_every_lesson_starts_with_the_current_standalone_cell():
    stale = [p.name for p in bootstrap_cell.lessons()
             if not bootstrap_cell.is_current(json.loads(p.read_text()))]
    assert not stale, f"run tools/bootstrap_cell.py: {stale}"


def test_the_standalone_cell_installs_from_the_configured_repository():
    source = bootstrap_cell.cell_source()
    assert f'ATTNLAB_REPOSITORY = "{bootstrap_cell.repository_url()}"' in source
    assert "download.pytorch.org/whl/cpu" in source


def test_the_standalone_cell_does_nothing_when_attnlab_is_importable():
    out = subprocess.run([sys.executable, "-c", bootstrap_cell.cell_source()],
                         capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "code")})
    assert out.stdout == "" and out.stderr == ""


def run(cmd: list[str], **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, **kwargs)
    return time.perf_counter() - start


def pinned(name: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    return re.search(rf"^{name}==(\S+)", text, re.M).group(1)


@pytest.mark.standalone
def test_a_downloaded_lesson_runs_in_a_fresh_environment(tmp_path):
    assert not tmp_path.is_relative_to(ROOT)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH", "ATTNLAB_WIDGETS")}
    env |= {"JUPYTER_DATA_DIR": str(tmp_path / "jupyter"), "MPLBACKEND": "Agg",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    clone, venv, work = tmp_path / "clone", tmp_path / "venv", tmp_path / "download"
    times = {"clone": run(["git", "clone", "--quiet", str(ROOT), str(clone)])}
    times["venv"] = run([sys.executable, "-m", "venv", str(venv)], env=env)
    python = str(venv / "bin" / "python")
    # Jupyter's kernel and the runner, and torch as the reader's machine would have it: the CPU
    # build of the course's pin, named exactly (+cpu), so pip never falls back to a CUDA build.
    # The lesson's own first cell installs everything else.
    times["kernel + torch"] = run(
        [python, "-m", "pip", "install", "--quiet", "ipykernel", "nbclient",
         f"torch=={pinned('torch')}+cpu"], env=env)
    torch_version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                                   env=env, capture_output=True, text=True, check=True).stdout
    assert torch_version.strip().endswith("+cpu"), f"not the CPU build: {torch_version}"
    missing = subprocess.run([python, "-c", "import attnlab"], env=env, capture_output=True)
    assert missing.returncode != 0, "attnlab must not be importable before the lesson runs"

    work.mkdir()
    shutil.copy(ROOT / "chapters" / LESSON, work / LESSON)
    executed = work / "executed.ipynb"
    script = ("import sys, nbformat; from nbclient import NotebookClient\n"
              "nb = nbformat.read(sys.argv[1], as_version=4)\n"
              "NotebookClient(nb, timeout=900, kernel_name='python3',"
              " resources={'metadata': {'path': sys.argv[3]}}).execute()\n"
              "nbformat.write(nb, sys.argv[2])\n")
    times["lesson"] = run([python, "-c", script, str(work / LESSON), str(executed), str(work)],
                          env={**env, "ATTNLAB_CLONE": str(clone)}, cwd=work)
    print("standalone timings (s):", {k: round(v, 1) for k, v in times.items()})

    cells = json.loads(executed.read_text())["cells"]
    setup = next(c for c in cells if c.get("id") == bootstrap_cell.CELL_ID)
    printed = "".join("".join(o.get("text", "")) for o in setup.get("outputs", []))
    assert f"installing it from {clone.resolve().as_uri()}" in printed, printed
    assert "attnlab is installed" in printed, printed
    errors = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    where = subprocess.run([python, "-c", "import attnlab; print(attnlab.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout
    assert Path(where.strip()).is_relative_to(venv), where
