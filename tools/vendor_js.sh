#!/usr/bin/env bash
# Copy pinned JS assets (require.js, ipywidgets html-manager, MathJax 3) into
# _offline/_static/offline/ so the built book needs no CDN.  Run from the book root.
set -euo pipefail
cd "$(dirname "$0")/.."
# Nothing to do when the copy is there and matches the lock file and this script.
stamp=_offline/.lock-hash
hash=$(cat package-lock.json tools/vendor_js.sh | sha256sum | cut -d" " -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then exit 0; fi
[ -d node_modules ] || npm ci --no-audit --no-fund --ignore-scripts
NM=node_modules
DST=_offline/_static/offline
rm -rf "$DST"
mkdir -p "$DST/html-manager" "$DST/mathjax"
# require.js (AMD loader used by embed-amd.js)
cp "$NM/requirejs/require.js" "$DST/require.js"
# ipywidgets 8 static renderer (self-contained bundle incl. base/controls/output + font files)
cp "$NM/@jupyter-widgets/html-manager/dist/embed-amd.js" "$DST/html-manager/"
cp "$NM"/@jupyter-widgets/html-manager/dist/*.{woff,woff2,ttf,eot,svg} "$DST/html-manager/"
# MathJax 3, only the components the book uses (_config.yml's mathjax3_config.loader): the
# loader (startup.js), the core, TeX input, CommonHTML output and the hidden MathML that screen
# readers read (a11y/assistive-mml), 0.65 MB instead of the 1.17 MB combined file, most of whose
# difference is the right-click menu; TeX extensions and fonts load lazily from the same folder
MJ="$NM/mathjax/es5"
cp "$MJ/startup.js" "$MJ/core.js" "$DST/mathjax/"
for d in input/tex/extensions output/chtml/fonts a11y adaptors; do
  mkdir -p "$DST/mathjax/$d"; cp -r "$MJ/$d/." "$DST/mathjax/$d/"
done
cp "$MJ/input/tex.js" "$DST/mathjax/input/"
cp "$MJ/output/chtml.js" "$DST/mathjax/output/"
# Small glue script loaded between require.js and embed-amd.js:
#  1. tell require.js where the html-manager bundle lives. embed-amd.js derives its webpack
#     publicPath (used for its bundled Font Awesome fonts) from the AMD module URI; without
#     this it requests <page-dir>/@jupyter-widgets/html-manager/dist/*.woff2 (404).
#  2. ipywidgets' fallback typesetter for widget descriptions calls the MathJax 2 API
#     (MathJax.Hub.Queue); Sphinx loads MathJax 3 -> "Cannot read properties of undefined
#     (reading 'Queue')". Map it onto MathJax 3's typesetPromise.
cat > "$DST/widgets-offline.js" <<'JS'
(function () {
  var base = document.currentScript.src.replace(/[?#].*$/, "").replace(/[^/]*$/, "");
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": base + "html-manager" } });
  function shimMathJax2() {
    var MJ = window.MathJax;
    if (MJ && !MJ.Hub) {
      MJ.Hub = { Queue: function (job) {
        var el = job && job[2];
        if (window.MathJax.typesetPromise) {
          window.MathJax.typesetPromise(el ? [el] : undefined).catch(function (e) { console.warn(e); });
        }
      } };
    }
  }
  shimMathJax2();
  document.addEventListener("DOMContentLoaded", shimMathJax2);
})();
JS
echo "$hash" > "$stamp"
du -sh "$DST" | sed "s/^/offline assets: /"
