"""Run every lesson in a fresh kernel, as the book build does, and measure it.

Per notebook: wall time top to bottom, the kernel's peak memory (max RSS), and for every slider
panel the time of one callback + redraw (draw the figure and render its PNG) over every position
of its sliders — the panel renders all of them because the notebook runs in "static" mode. The
first frame, which the panel renders when its cell runs, is reported on its own: in JupyterLab it
is part of running the cell, and every later frame is what a slider move costs.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, resource
from attnlab.widgets import RENDER_LOG
print("ATTNLAB_BENCH" + json.dumps({
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "renders": list(RENDER_LOG)}))
"""


def run_notebook(path: Path, timeout: int = 600) -> dict:
    """Execute ``path`` in a fresh kernel; return wall seconds, peak MiB and panel latencies."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    os.environ["ATTNLAB_WIDGETS"] = "static"
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    probe = json.loads(text.split("ATTNLAB_BENCH", 1)[1])
    display_ms: dict[str, float] = {}
    slider_ms: dict[str, list[float]] = {}
    for name, seconds, on_display in probe["renders"]:
        if on_display:
            display_ms[name] = seconds * 1000
        else:
            slider_ms.setdefault(name, []).append(seconds * 1000)
    return {"notebook": path.name, "seconds": wall, "peak_mib": probe["peak_rss_mib"],
            "panels": {name: {"display_ms": first, **latency_summary(slider_ms.get(name, []))}
                       for name, first in display_ms.items()}}


def latency_summary(ms: list[float]) -> dict[str, float]:
    """Median and p95 of one panel's slider moves (every frame but the one shown on display)."""
    if not ms:
        return {"n": 0, "median_ms": 0.0, "p95_ms": 0.0}
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(ms), "median_ms": statistics.median(ms), "p95_ms": p95}


def main() -> list[dict]:
    return [run_notebook(p) for p in sorted((ROOT / "chapters").glob("*.ipynb"))]


if __name__ == "__main__":
    for row in main():
        print(json.dumps(row))
