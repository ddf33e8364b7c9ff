"""Run every lesson in a fresh kernel, as a reader in JupyterLab does, and measure it.

Per notebook, in a fresh kernel with live panels (as in JupyterLab): the wall time top to
bottom, the kernel's peak memory (max RSS), and for every slider panel the latency of each slider
move — its callback draws the new frame, renders the PNG and hands it to the front end — over the
whole grid of its sliders (``slider_sweep.py``). The first frame, drawn when the panel's cell
runs, is reported on its own: it is part of running the cell, not of moving a slider.
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
import json, resource, sys
sys.path.insert(0, {bench_dir!r})
from slider_sweep import sweep_all
panels = sweep_all()
print("ATTNLAB_BENCH" + json.dumps({{
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "panels": panels}}))
"""


def run_notebook(path: Path, timeout: int = 600) -> dict:
    """Run ``path`` top to bottom in a fresh kernel with live panels, as JupyterLab does; then
    move every slider of every panel through its whole grid. Returns the wall time of the run
    (not of the sweep), the kernel's peak memory and each panel's slider-move latencies."""
    nb = nbformat.read(path, as_version=4)
    n_cells = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE.format(bench_dir=str(Path(__file__).parent))))
    os.environ["ATTNLAB_WIDGETS"] = "live"
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        start = time.perf_counter()
        for index, cell in enumerate(nb.cells[:n_cells]):
            client.execute_cell(cell, index)
        wall = time.perf_counter() - start
        client.execute_cell(nb.cells[-1], n_cells)
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    probe = json.loads(text.split("ATTNLAB_BENCH", 1)[1])
    return {"notebook": path.name, "seconds": wall, "peak_mib": probe["peak_rss_mib"],
            "panels": {name: {"display_ms": p["display_ms"], **latency_summary(p["moves_ms"])}
                       for name, p in probe["panels"].items()}}


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
