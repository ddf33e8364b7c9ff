"""Write (or check) every lesson's first code cell: the standalone set-up.

A lesson opened outside the repository (downloaded, or on Colab) has no ``attnlab``. Its first code
cell, hidden on the website (``remove-cell``), does nothing when the course's ``attnlab`` is
importable (the book build, CI, ``make lab``, Binder) and otherwise installs the **release the book
was written with**: the tag ``v<version>`` of the course's repository, where the version is
``pyproject.toml``'s and the repository ``_config.yml``'s ``repository.url`` (the setting the launch
buttons use). Those two settings are the only ones; this script writes them into every notebook.
On GitHub the cell installs the tag's archive (``…/archive/refs/tags/v<version>.zip``, no git
needed); elsewhere ``git+<url>@v<version>``. A local clone named by ``ATTNLAB_CLONE`` is installed
instead when set; torch's CPU build first when torch is missing.

The cell checks what it can before it installs — a folder next to the notebook in the way of the
package, an installed ``attnlab`` of another version, ``ATTNLAB_CLONE``, pip, a Python the system
manages (PEP 668), a read-only environment, git where it is needed, the network (with a time limit)
— and after it, that ``import attnlab, attnbook`` works and gives the pinned version. Each problem
stops the notebook with one sentence that says what to do (in Jupyter without a traceback).

After it comes the **language cell**, visible in Jupyter (removed on the website, where each
edition shows its own language): ``set_language("en")``, which the reader changes to ``"zh_CN"``
for Chinese figures, slider labels and messages. The Chinese edition's download of a lesson has
it set to ``"zh_CN"`` (``tools/build_edition.py``).

    python tools/bootstrap_cell.py          # write both cells into every chapters/NN_*.ipynb
    python tools/bootstrap_cell.py --check  # exit 1 if a notebook's cells are missing or stale
"""

from __future__ import annotations

import json
import string
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
CELL_ID = "attnlab-standalone-setup"
LANGUAGE_CELL_ID = "attnlab-language"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: Seconds of network silence before the cell gives up (pip's own timeout too).
NETWORK_TIMEOUT = 20

TEMPLATE = string.Template('''\
# Standalone set-up (hidden on the website): use the course's package, attnlab, if it is installed;
# otherwise install the release this book was written with, so the notebook also runs on Colab or
# after a download. A problem stops here with one sentence that says what to do. Written by
# tools/bootstrap_cell.py from _config.yml's repository.url and pyproject.toml's version.
ATTNLAB_VERSION = "$version"
ATTNLAB_RELEASE = "$release"


def _set_up_attnlab():
    """Nothing when the course's attnlab imports at ATTNLAB_VERSION; else install ATTNLAB_RELEASE
    (or the clone that ATTNLAB_CLONE names), or stop with one sentence that says what to do."""
    import importlib.metadata
    import importlib.util
    import json
    import os
    import shutil
    import site
    import subprocess
    import sys
    import sysconfig
    import tempfile
    import threading
    import urllib.error
    import urllib.parse
    import urllib.request
    from pathlib import Path

    torch_index = "$torch_index"
    timeout = $timeout  # seconds of network silence before giving up
    clone_fix = "set ATTNLAB_CLONE to a local clone of $repository"
    venv_fix = ("start Jupyter from a Python you can install into, a virtual environment: "
                "python3 -m venv ~/attnlab-env && ~/attnlab-env/bin/pip install jupyterlab && "
                "~/attnlab-env/bin/jupyter lab")

    class SetupStopped(Exception):
        """One sentence with the fix; Jupyter shows it without a traceback."""

        def _render_traceback_(self):
            return [f"The set-up stopped: {self}"]

    def importable():
        """True when attnlab and attnbook import as packages; stops on a folder in their way."""
        for name in ("attnlab", "attnbook"):
            spec = importlib.util.find_spec(name)
            if spec is None:
                return False
            if spec.origin is None:  # a folder without __init__.py, e.g. an empty one
                folder = next(iter(spec.submodule_search_locations))
                raise SetupStopped(f"the folder {folder} is in the way of the course's package "
                                   f"{name}: delete or rename it, then run this cell again.")
        return True

    def editable():
        """True when attnlab is installed from a working copy (pip install -e): left alone."""
        about = importlib.metadata.distribution("attnlab").read_text("direct_url.json")
        return json.loads(about or "{}").get("dir_info", {}).get("editable", False)

    def writable(folder):
        path = Path(folder)
        while not path.exists():
            path = path.parent
        try:
            with tempfile.TemporaryFile(dir=path):
                return True
        except OSError:
            return False

    def check_python():
        """Stop unless pip can install into this Python."""
        in_venv = sys.prefix != sys.base_prefix
        if not in_venv and Path(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED").exists():
            raise SetupStopped("this Python is managed by the operating system (PEP 668, as on "
                               f"Debian and Ubuntu), so pip may not install into it: {venv_fix}, "
                               "and open this notebook there.")
        if importlib.util.find_spec("pip") is None:
            raise SetupStopped(f"this Python ({sys.executable}) has no pip: install it (python -m "
                               "ensurepip --upgrade, or apt-get install python3-pip), then run "
                               "this cell again.")
        places = [sysconfig.get_path("purelib")]
        if not in_venv and site.ENABLE_USER_SITE:
            places.append(site.getusersitepackages())
        if not any(writable(place) for place in places):
            raise SetupStopped(f"pip cannot write to {' nor '.join(places)} (read-only): "
                               f"{venv_fix}, and open this notebook there.")

    def reachable(url):
        """Stop with the fix when url does not answer within timeout seconds (proxies too)."""
        host = urllib.parse.urlsplit(url).hostname
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"),
                                        timeout=timeout):
                pass
        except urllib.error.HTTPError as error:  # an answer: unless 404, pip takes over
            if error.code == 404:
                raise SetupStopped(f"{url} does not exist (HTTP 404): the release "
                                   f"v{ATTNLAB_VERSION} is not published there; {clone_fix}, or "
                                   f"ask its maintainers to push the tag v{ATTNLAB_VERSION}."
                                   ) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                raise SetupStopped(f"{host} did not answer within {timeout} s (the network is "
                                   "very slow or blocked): try again later or on another "
                                   f"network, or {clone_fix}.") from None
            raise SetupStopped(f"cannot reach {host} ({reason}): connect to the internet (and "
                               f"check any proxy settings), or {clone_fix}, then run this cell "
                               "again.") from None

    def attnlab_source():
        """Where pip installs attnlab from: ATTNLAB_CLONE, or the pinned release (checked)."""
        clone = os.environ.get("ATTNLAB_CLONE")
        if clone:
            root = Path(clone).expanduser()
            if not (root / "pyproject.toml").is_file() or not (root / "code/attnlab").is_dir():
                raise SetupStopped(f"ATTNLAB_CLONE is {clone!r}, which is not a clone of the "
                                   "course's repository (no pyproject.toml and code/attnlab in "
                                   "it): set it to your clone's folder, or unset it to install "
                                   "the release, then restart the kernel and run this cell "
                                   "again.")
            return root.resolve().as_uri()
        if ATTNLAB_RELEASE.startswith("git+"):
            if shutil.which("git") is None:
                raise SetupStopped("pip needs git to install attnlab from its repository, and "
                                   "git is not installed: install git (https://git-scm.com, or "
                                   f"apt-get install git), or {clone_fix}, then run this cell "
                                   "again.")
            reachable(ATTNLAB_RELEASE.removeprefix("git+").rsplit("@", 1)[0])
        else:
            reachable(ATTNLAB_RELEASE)
        return ATTNLAB_RELEASE

    pip_problems = [
        (("externally-managed-environment",),
         f"this Python is managed by the operating system (PEP 668): {venv_fix}."),
        (("Read-only file system", "Permission denied"),
         f"pip could not write where it installs packages (read-only): {venv_fix}."),
        (("No space left on device",),
         "the disk is full: free some space, then run this cell again."),
        (("Cannot find command 'git'",),
         f"pip needs git, which is not installed: install git, or {clone_fix}."),
        (("Name or service not known", "Temporary failure in name resolution", "timed out",
          "Network is unreachable", "Failed to establish a new connection", "ProxyError",
          "Max retries exceeded"),
         f"pip lost the network while downloading: check the connection and run this cell "
         f"again, or {clone_fix}."),
    ]

    def pip_install(*args):
        """Run pip, printing its progress; stop with the fix if it fails or stalls."""
        command = [sys.executable, "-m", "pip", "install", "--progress-bar", "off",
                   "--disable-pip-version-check", "--timeout", str(timeout), "--retries", "2",
                   *args]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        watchdog = threading.Timer(60 * timeout, process.kill)  # a download that never ends
        watchdog.start()
        lines = []
        for line in process.stdout:
            lines.append(line.rstrip())
            if line.startswith(("Collecting", "Downloading", "Installing", "Successfully")):
                print("   ", line.rstrip(), flush=True)
        watchdog.cancel()
        if process.wait() == 0:
            return
        if process.returncode < 0:
            raise SetupStopped(f"pip did not finish within {timeout} minutes (the network is "
                               f"very slow): run this cell again later, or {clone_fix}.")
        text = "\\n".join(lines)
        for needles, advice in pip_problems:
            if any(needle in text for needle in needles):
                raise SetupStopped(advice)
        raise SetupStopped(f"pip could not install {args[-1]!r} (its last words: "
                           f"{' / '.join(lines[-2:])}): fix what they name, then run this "
                           "cell again.")

    if importable():
        try:
            have = importlib.metadata.version("attnlab")
        except importlib.metadata.PackageNotFoundError:
            return  # a source folder on the path (PYTHONPATH=code in a clone): used as it is
        if have == ATTNLAB_VERSION:
            return
        if editable():
            print(f"Using your working copy of attnlab {have}; this lesson was written for "
                  f"{ATTNLAB_VERSION}.")
            return
        print(f"attnlab {have} is installed, but this lesson was written for "
              f"{ATTNLAB_VERSION}: installing it ...")
    loaded = "attnlab" in sys.modules
    check_python()
    source = attnlab_source()
    if importlib.util.find_spec("torch") is None:
        reachable(torch_index)
        print("torch is missing: installing its CPU build (a download of about 190 MB) ...")
        pip_install("torch", "--index-url", torch_index)
    print(f"installing attnlab from {source} ...")
    pip_install("--upgrade", f"attnlab @ {source}")
    importlib.invalidate_caches()
    user_site = site.getusersitepackages()
    if site.ENABLE_USER_SITE and os.path.isdir(user_site) and user_site not in sys.path:
        site.addsitedir(user_site)  # pip fell back to the user folder, new since Python started
    if loaded:
        raise SetupStopped("attnlab is installed, but this kernel still runs the one it had "
                           "imported: restart the kernel (Kernel → Restart) and run the "
                           "notebook from the top.")
    try:
        import attnbook  # noqa: F401
        import attnlab  # noqa: F401
    except Exception as error:
        raise SetupStopped(f"attnlab was installed but does not import "
                           f"({type(error).__name__}: {error}): restart the kernel (Kernel → "
                           "Restart) and run this cell again.") from None
    have = importlib.metadata.version("attnlab")
    if have != ATTNLAB_VERSION and not os.environ.get("ATTNLAB_CLONE"):
        raise SetupStopped(f"pip installed attnlab {have}, not {ATTNLAB_VERSION}: run pip "
                           f"install --force-reinstall 'attnlab @ {source}' in a terminal, then "
                           "restart the kernel.")
    print(f"attnlab {have} is installed: the lesson continues.")


_set_up_attnlab()
del _set_up_attnlab''')


def repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return config["repository"]["url"].rstrip("/")


def book_version() -> str:
    """The version of the package and the book, ``pyproject.toml``'s ``project.version``."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def release_source(repository: str, version: str) -> str:
    """What pip installs for the release ``v<version>`` of ``repository``: the tag's archive on
    GitHub (no git needed), ``git+<url>@v<version>`` elsewhere."""
    if urlsplit(repository).hostname == "github.com":
        return f"{repository}/archive/refs/tags/v{version}.zip"
    return f"git+{repository}@v{version}"


def cell_source(repository: str | None = None, version: str | None = None,
                timeout: float = NETWORK_TIMEOUT) -> str:
    """The cell's code; the defaults are the book's settings (the tests vary them)."""
    repository = repository or repository_url()
    version = version or book_version()
    return TEMPLATE.substitute(
        version=version, release=release_source(repository, version), repository=repository,
        torch_index=TORCH_CPU_INDEX, timeout=timeout)


def new_cell() -> dict:
    """The cell: hidden on the website (remove-cell), folded in JupyterLab (source_hidden)."""
    lines = cell_source().splitlines(keepends=True)
    metadata = {"jupyter": {"source_hidden": True}, "tags": ["remove-cell"]}
    return {"cell_type": "code", "execution_count": None, "id": CELL_ID,
            "metadata": metadata, "outputs": [], "source": lines}


def language_cell_source(lang: str = "en") -> str:
    """The language cell's code, choosing ``lang``."""
    return ('# The language of the figures, slider labels and messages: "en" (English) or "zh_CN"\n'
            '# (中文：改成 "zh_CN"，图、滑块标签和提示就会用中文).\n'
            "from attnlab.i18n import set_language\n"
            "\n"
            f'set_language("{lang}")\n')


def new_language_cell(lang: str = "en") -> dict:
    """The language cell: shown in Jupyter, removed on the website (remove-cell)."""
    return {"cell_type": "code", "execution_count": None, "id": LANGUAGE_CELL_ID,
            "metadata": {"tags": ["remove-cell"]}, "outputs": [],
            "source": language_cell_source(lang).splitlines(keepends=True)}


def lessons() -> list[Path]:
    return sorted((ROOT / "chapters").glob("[0-9][0-9]*.ipynb"))  # 16b too


def is_current(nb: dict) -> bool:
    """Whether the notebook's first two code cells are the current set-up and language cells."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"][:2]
    wanted = [new_cell(), new_language_cell()]
    return len(code) == 2 and all(
        c.get("id") == w["id"] and "".join(c["source"]) == "".join(w["source"])
        and c.get("metadata") == w["metadata"] for c, w in zip(code, wanted, strict=True))


def write(path: Path) -> bool:
    """Put the current cell first among the code cells of ``path``; True if the file changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    if is_current(nb):
        return False
    nb["cells"] = [c for c in nb["cells"] if c.get("id") not in (CELL_ID, LANGUAGE_CELL_ID)]
    at = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"][at:at] = [new_cell(), new_language_cell()]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = [p.name for p in lessons()
                 if not is_current(json.loads(p.read_text(encoding="utf-8")))]
        if stale:
            print("stale set-up or language cell (run tools/bootstrap_cell.py):", *stale)
        return 1 if stale else 0
    changed = [p.name for p in lessons() if write(p)]
    print(f"updated {len(changed)} notebooks", *changed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
