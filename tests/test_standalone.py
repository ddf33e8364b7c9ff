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
import socket
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
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def test_every_lesson_starts_with_the_current_standalone_cell():
    stale = [p.name for p in bootstrap_cell.lessons()
             if not bootstrap_cell.is_current(json.loads(p.read_text()))]
    assert not stale, f"run tools/bootstrap_cell.py: {stale}"


def test_the_standalone_cell_installs_the_release_of_the_books_version():
    """Pinned: the tag v<pyproject.toml's version> of _config.yml's repository, nothing else."""
    source = bootstrap_cell.cell_source()
    version, repository = bootstrap_cell.book_version(), bootstrap_cell.repository_url()
    assert f'ATTNLAB_VERSION = "{version}"' in source
    assert f'ATTNLAB_RELEASE = "{repository}/archive/refs/tags/v{version}.zip"' in source
    assert "download.pytorch.org/whl/cpu" in source
    assert bootstrap_cell.release_source("https://git.example.org/a/b", "1.2") == \
        "git+https://git.example.org/a/b@v1.2"


def test_the_standalone_cell_does_nothing_when_attnlab_is_importable():
    out = subprocess.run([sys.executable, "-c", bootstrap_cell.cell_source()],
                         capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "code")})
    assert out.stdout == "" and out.stderr == ""


# --- each problem the cell meets, in a throwaway environment, prints its fix -------------------
# A fresh virtual environment without attnlab (and without pip: a stand-in pip module on
# PYTHONPATH answers for it), a home folder of its own, and no network but what a test gives:
# an HTTPS proxy that refuses (offline) or never answers (a stalled network). Nothing here
# reaches the internet or installs anything real.

STAND_IN_PIP = """\
import os, shutil, site, sys
mode = os.environ.get("STAND_IN_PIP", "refuse")
if mode == "refuse":
    print("the test's stand-in pip ran, and it should not have")
    sys.exit(3)
if mode == "user":  # as pip does when site-packages is read-only: into the user folder
    shutil.copytree(os.environ["STAND_IN_PACKAGES"], site.getusersitepackages(),
                    dirs_exist_ok=True)
print("Successfully installed attnlab")
"""


def packages(folder: Path, version: str, *, editable: bool = False) -> Path:
    """Importable attnlab and attnbook (empty) with attnlab's metadata at ``version``."""
    for name in ("attnlab", "attnbook"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text("")
    info = folder / f"attnlab-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: attnlab\nVersion: {version}\n")
    if editable:
        (info / "direct_url.json").write_text(
            json.dumps({"url": "file:///clone", "dir_info": {"editable": True}}))
    return folder


class Setup:
    """A throwaway Python for the cell: ``run(...)`` executes the cell there."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)],
                       check=True, timeout=120)
        self.python = str(self.venv / "bin" / "python")
        self.purelib = Path(subprocess.run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True).stdout.strip())
        self.stand_ins = tmp_path / "stand-ins"
        (self.stand_ins / "pip").mkdir(parents=True)
        (self.stand_ins / "pip" / "__init__.py").write_text("")
        (self.stand_ins / "pip" / "__main__.py").write_text(STAND_IN_PIP)
        (self.stand_ins / "torch").mkdir()  # torch is there: no CPU build to fetch
        (self.stand_ins / "torch" / "__init__.py").write_text("")
        self.env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"),
                    "PYTHONUSERBASE": str(tmp_path / "home" / "user-base"),
                    "PYTHONPATH": str(self.stand_ins), "LANG": "C.UTF-8"}

    def run(self, *, source: str | None = None, prelude: str = "", command=(), cwd=None,
            timeout: float = 30, **env) -> subprocess.CompletedProcess:
        code = prelude + (source or bootstrap_cell.cell_source())
        start = time.perf_counter()
        done = subprocess.run([*command, self.python, "-c", code], capture_output=True,
                              text=True, timeout=timeout, cwd=cwd or self.tmp,
                              env={**self.env, **env})
        done.seconds = time.perf_counter() - start
        return done


def offline() -> dict[str, str]:
    """Proxy settings that send every request to a port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proxy = f"http://127.0.0.1:{port}"
    return {"https_proxy": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy,
            "HTTP_PROXY": proxy}


def stopped(done: subprocess.CompletedProcess, *advice: str) -> None:
    """The cell stopped, saying ``advice``, and reported no success."""
    assert done.returncode != 0, done.stdout
    assert "SetupStopped" in done.stderr, done.stderr
    for words in advice:
        assert words in done.stderr, done.stderr
    assert "the lesson continues" not in done.stdout
    assert "stand-in pip ran" not in done.stderr + done.stdout


def test_offline_the_cell_says_to_connect_or_use_a_clone(tmp_path):
    done = Setup(tmp_path).run(**offline())
    stopped(done, "cannot reach github.com", "connect to the internet", "ATTNLAB_CLONE")
    assert done.seconds < 15


def test_a_stalled_network_is_given_up_within_the_time_limit(tmp_path):
    """A proxy that accepts the connection and never answers (a stalled network)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # connections wait in the backlog: accepted by the kernel, never answered
    proxy = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        done = Setup(tmp_path).run(source=bootstrap_cell.cell_source(timeout=1),
                                   https_proxy=proxy, HTTPS_PROXY=proxy)
    finally:
        server.close()
    stopped(done, "github.com did not answer within 1 s", "ATTNLAB_CLONE")
    assert done.seconds < 10


def test_without_git_the_cell_says_to_install_it_where_git_is_needed(tmp_path):
    setup = Setup(tmp_path)
    no_git = tmp_path / "bin"
    no_git.mkdir()
    elsewhere = bootstrap_cell.cell_source(repository="https://git.example.org/course/kv")
    stopped(setup.run(source=elsewhere, PATH=str(no_git), **offline()),
            "git is not installed", "install git")
    # GitHub's release is an archive: no git needed, the next question is the network
    stopped(setup.run(PATH=str(no_git), **offline()), "cannot reach github.com")


def test_a_read_only_environment_is_told_to_use_a_virtual_environment(tmp_path):
    setup = Setup(tmp_path)
    command = []
    if os.geteuid() == 0:  # root writes anywhere: drop the privilege in a user namespace
        command = ["unshare", "--user"]
        if subprocess.run([*command, "true"]).returncode != 0:
            pytest.skip("running as root, and no user namespace to drop the privilege in")
    setup.purelib.chmod(0o555)
    try:
        done = setup.run(command=command, **offline())
    finally:
        setup.purelib.chmod(0o755)
    stopped(done, f"pip cannot write to {setup.purelib}", "read-only", "python3 -m venv")


SYSTEM_PYTHON = Path("/usr/bin/python3")
MANAGED = """\
import sys, sysconfig, tempfile, pathlib
sys.base_prefix = sys.prefix  # not a virtual environment, as a system Python
marker = pathlib.Path(tempfile.mkdtemp())
(marker / "EXTERNALLY-MANAGED").write_text("[externally-managed]")
get_path = sysconfig.get_path
sysconfig.get_path = lambda name, *a: str(marker) if name == "stdlib" else get_path(name, *a)
"""


def test_an_externally_managed_python_is_told_to_use_a_virtual_environment(tmp_path):
    """Simulated (the marker of PEP 668 where a system Python has it), and, where this machine
    has one, Debian's own Python."""
    setup = Setup(tmp_path)
    stopped(setup.run(prelude=MANAGED, **offline()), "managed by the operating system",
            "python3 -m venv")
    marker = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sysconfig, pathlib; print(pathlib.Path("
         "sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED').exists())"],
        capture_output=True, text=True) if SYSTEM_PYTHON.exists() else None
    if marker is not None and marker.stdout.strip() == "True":
        done = subprocess.run([str(SYSTEM_PYTHON), "-c", bootstrap_cell.cell_source()],
                              capture_output=True, text=True, timeout=30, cwd=tmp_path,
                              env={**setup.env, "PYTHONPATH": "", **offline()})
        stopped(done, "managed by the operating system")


@pytest.mark.parametrize("clone", ["/no/such/folder", "empty"])
def test_a_wrong_attnlab_clone_is_named(tmp_path, clone):
    if clone == "empty":
        clone = str(tmp_path / "empty")
        Path(clone).mkdir()
    stopped(Setup(tmp_path).run(ATTNLAB_CLONE=clone, **offline()),
            f"ATTNLAB_CLONE is {clone!r}, which is not a clone")


def test_an_empty_attnlab_folder_next_to_the_notebook_is_found(tmp_path):
    setup = Setup(tmp_path)
    notebook_folder = tmp_path / "download"
    (notebook_folder / "attnlab").mkdir(parents=True)
    stopped(setup.run(cwd=notebook_folder, **offline()),
            f"the folder {notebook_folder / 'attnlab'} is in the way", "delete or rename it")


def test_an_old_attnlab_is_replaced_and_a_working_copy_left_alone(tmp_path):
    setup = Setup(tmp_path)
    old = packages(tmp_path / "old", "0.0.1")
    done = setup.run(PYTHONPATH=f"{setup.stand_ins}:{old}", **offline())
    assert "attnlab 0.0.1 is installed, but this lesson was written for " \
        f"{bootstrap_cell.book_version()}" in done.stdout
    stopped(done, "cannot reach github.com")
    working_copy = packages(tmp_path / "copy", "0.0.1", editable=True)
    done = setup.run(PYTHONPATH=f"{setup.stand_ins}:{working_copy}", **offline())
    assert done.returncode == 0 and "Using your working copy of attnlab 0.0.1" in done.stdout


def fake_clone(folder: Path) -> Path:
    (folder / "code" / "attnlab").mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[project]\nname = 'attnlab'\n")
    return folder


def test_success_is_reported_only_when_the_import_works(tmp_path):
    """pip says it installed attnlab but nothing importable arrived: the cell says so."""
    done = Setup(tmp_path).run(ATTNLAB_CLONE=str(fake_clone(tmp_path / "clone")),
                               STAND_IN_PIP="noop")
    stopped(done, "attnlab was installed but does not import", "restart the kernel")


def test_a_user_folder_install_is_found_by_the_running_kernel(tmp_path):
    """pip falls back to the user folder, created after Python started: the cell adds it to
    the path, imports attnlab and reports it (a Python with user folders, as outside a venv)."""
    done = Setup(tmp_path).run(
        prelude="import site\nsite.ENABLE_USER_SITE = True\n",
        ATTNLAB_CLONE=str(fake_clone(tmp_path / "clone")), STAND_IN_PIP="user",
        STAND_IN_PACKAGES=str(packages(tmp_path / "built", bootstrap_cell.book_version())))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("is installed: the lesson continues."), done.stdout


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
    assert f"installing attnlab from {clone.resolve().as_uri()}" in printed, printed
    assert "is installed: the lesson continues." in printed, printed
    errors = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    where = subprocess.run([python, "-c", "import attnlab; print(attnlab.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout
    assert Path(where.strip()).is_relative_to(venv), where

    # the same lesson as the Chinese edition offers it: Chinese figures and messages
    from build_edition import chinese_notebook

    chinese, _ = chinese_notebook(ROOT / "chapters" / LESSON)
    (work / "zh.ipynb").write_text(json.dumps(chinese, ensure_ascii=False), encoding="utf-8")
    times["lesson in Chinese"] = run(
        [python, "-c", script, str(work / "zh.ipynb"), str(work / "zh-executed.ipynb"), str(work)],
        env=env, cwd=work)
    print("with the Chinese run (s):", {k: round(v, 1) for k, v in times.items()})
    outputs = [o for c in json.loads((work / "zh-executed.ipynb").read_text())["cells"]
               if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    shown = ["".join(o.get("data", {}).get(kind, "")) for o in outputs
             for kind in ("text/html", "text/markdown")]
    alts = [a for text in shown for a in re.findall(r'alt="([^"]*)"', text)]
    assert alts and all(CHINESE.search(a) for a in alts), alts[:3]
    verdicts = [text for text in shown if text.startswith("**✗") or text.startswith("**✓")]
    assert verdicts and all(CHINESE.search(v) for v in verdicts), verdicts
