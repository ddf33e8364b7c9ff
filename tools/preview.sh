#!/usr/bin/env bash
# Build a private preview of some lessons (plus the intro and references) into DIR, without
# touching the shared _build/ — so several authors can preview at once — then run the site tests
# on it. Usage: tools/preview.sh DIR chapters/NN_slug.ipynb [more lessons...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "$1"); shift
mkdir -p "$out"
{
  echo "format: jb-book"
  echo "root: intro"
  echo "parts:"
  echo "  - caption: Preview"
  echo "    chapters:"
  for nb in "$@"; do echo "      - file: ${nb%.ipynb}"; done
  echo "      - file: references"
} > "$out/_toc.yml"
sed "s#cache: _build/.jupyter_cache#cache: $out/.jupyter_cache#" _config.yml > "$out/_config.yml"
ATTNLAB_WIDGETS=static .venv/bin/jupyter-book build . --toc "$out/_toc.yml" \
  --config "$out/_config.yml" --path-output "$out" -W -n --keep-going
ATTNLAB_SITE="$out/_build" .venv/bin/python -m pytest tests/test_site.py -q -p no:cacheprovider
echo "Screenshots: $out/_build/screenshots/"
