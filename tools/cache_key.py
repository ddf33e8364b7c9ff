"""Empty the notebook execution cache when the package under code/ has changed.

Jupyter Book's cache keys a notebook on its own code cells only, so a change to ``attnlab`` would
leave stale outputs, and so would a change to its Chinese messages (``.po``: the figures are drawn
in both languages when the notebook runs). ``make book`` calls this first: it hashes every
``.py`` and ``.po`` file under code/ and, when
the hash differs from the one stored at the last build, removes ``_build/.jupyter_cache`` and
Sphinx's saved environment ``_build/.doctrees`` (without the second, Sphinx sees no changed
source, reads no notebook and so executes none: the old pages would stay).
"""

import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
DOCTREES = ROOT / "_build" / ".doctrees"
STAMP = ROOT / "_build" / ".code-hash"


def code_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in (ROOT / "code").rglob("*") if p.suffix in (".py", ".po")):
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def main() -> int:
    current = code_hash()
    if STAMP.exists() and STAMP.read_text() == current:
        return 0
    if CACHE.exists() or DOCTREES.exists():
        shutil.rmtree(CACHE, ignore_errors=True)
        shutil.rmtree(DOCTREES, ignore_errors=True)
        print("code/ changed since the last build: notebook cache and saved environment emptied")
    STAMP.parent.mkdir(parents=True, exist_ok=True)
    STAMP.write_text(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
