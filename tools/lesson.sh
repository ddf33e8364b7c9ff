#!/usr/bin/env bash
# Author's helper: turn a lesson written in jupytext "percent" format (a .py file) into the
# stored notebook chapters/NAME.ipynb, without outputs and with the course's kernel metadata.
#   tools/lesson.sh path/to/NN_slug.py
set -euo pipefail
src=$1
name=$(basename "$src" .py)
cd "$(dirname "$0")/.."
out=chapters/$name.ipynb
.venv/bin/jupytext --quiet --to ipynb --output "$out" "$src"
.venv/bin/python - "$out" <<'PY'
import json, sys
path = sys.argv[1]
nb = json.load(open(path))
nb["metadata"] = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                 "name": "python3"}, "language_info": {"name": "python"}}
for cell in nb["cells"]:
    cell.get("metadata", {}).pop("lines_to_next_cell", None)
    if cell["cell_type"] == "code":
        cell["outputs"], cell["execution_count"] = [], None
with open(path, "w") as f:
    json.dump(nb, f, indent=1, ensure_ascii=False)
    f.write("\n")
PY
echo "wrote $out"
