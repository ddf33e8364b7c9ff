"""`make bench`: measure the notebooks, their sliders and the kernels; print one table and write it
to benchmarks/results/latest.md, which the book's "Speed and memory" page includes, and the same
measurements to benchmarks/results/latest.json, which the "Run it yourself" page reads
(``python run_all.py --render`` re-renders the table from that JSON without measuring)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path

import kernels
import notebooks
import torch
from attnbook.timing import best_seconds

RESULTS = Path(__file__).resolve().parent / "results" / "latest.md"
RESULTS_JSON = RESULTS.with_suffix(".json")
BUDGET_S, BUDGET_MIB, BUDGET_MEDIAN_MS, BUDGET_P95_MS = 30, 1500 / 1.048576, 150, 250
BUDGET_ALL_S, BUDGET_SPEEDUP = 180, 20


def mark(ok: bool) -> str:
    return "✅" if ok else "❌ over budget"


def notebook_table(rows: list[dict]) -> list[str]:
    lines = ["| notebook | within budget | wall time (s) | kernel peak memory (MiB) |",
             "|---|---|---:|---:|"]
    for r in rows:
        ok = r["seconds"] <= BUDGET_S and r["peak_mib"] <= BUDGET_MIB
        lines.append(f"| {r['notebook']} | {mark(ok)} | {r['seconds']:.1f} | {r['peak_mib']:.0f} |")
    total = sum(r["seconds"] for r in rows)
    lines.append(f"| **all notebooks** | {mark(total <= BUDGET_ALL_S)} | **{total:.1f}** | |")
    return lines


def slider_table(rows: list[dict]) -> list[str]:
    lines = ["| notebook | panel (draw function) | within budget | moves | median (ms) "
             "| p95 (ms) | first frame (ms) |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        for name, s in r["panels"].items():
            ok = s["median_ms"] <= BUDGET_MEDIAN_MS and s["p95_ms"] <= BUDGET_P95_MS
            lines.append(f"| {r['notebook'].removesuffix('.ipynb')} | `{name}` | {mark(ok)} "
                         f"| {s['n']} | {s['median_ms']:.0f} | {s['p95_ms']:.0f} "
                         f"| {s['display_ms']:.0f} |")
    return lines


def kernel_table(report: dict) -> list[str]:
    threads = report["threads"]
    # thread counts are int keys when measured, str keys when read back from JSON
    matmul = {int(n): v for n, v in report["matmul_gflops"].items()}
    batched = {int(n): v for n, v in report["batched_matmul_gflops"].items()}
    lines = [f"Threads: {threads} (torch's default here, one per core), and 1 for the "
             f"last speed-up column. Machine's float32 matmul (512 × 512): "
             f"**{matmul[threads]:.1f} GFLOP/s** on {threads} threads, "
             f"{matmul[1]:.1f} on 1; 256 batched 64 × 64 products, the chunkwise kernels' own "
             f"kind of work: **{batched[threads]:.1f} GFLOP/s** on {threads} threads, "
             f"{batched[1]:.1f} on 1 (a lower rate here than usual means a busy machine, not "
             f"slower kernels). glibc malloc told to keep freed memory: "
             f"{'yes' if report['malloc_tuned'] else 'no'}.", "",
             "| kernel | T | recurrent (ms) | chunkwise (ms) | speed-up | speed-up on 1 thread "
             "| max abs. difference | chunkwise nominal GFLOP/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    def flag(speedup: float, length: int) -> str:
        if length < 4096:
            return ""
        return " ✅" if speedup >= BUDGET_SPEEDUP else f" ❌ < {BUDGET_SPEEDUP}×"

    for r in report["rows"]:
        lines.append(f"| {r['kernel']} | {r['T']} | {r['recurrent_ms']:.1f} | {r['chunk_ms']:.1f} "
                     f"| {r['speedup']:.1f}×{flag(r['speedup'], r['T'])} "
                     f"| {r['speedup_1_thread']:.1f}×{flag(r['speedup_1_thread'], r['T'])} "
                     f"| {r['max_abs_diff']:.1e} | {r['chunk_gflops']:.2f} |")
    return lines


def loop_ms(repeats: int = 5) -> float:
    """A fixed pure-Python loop (best of ``repeats``): how fast this machine is right now."""

    def loop() -> int:
        total = 0
        for i in range(3_000_000):
            total += i * i
        return total

    return best_seconds(loop, repeats=repeats, warmup=False) * 1000


def measured_line(machine: dict) -> str:
    """"Measured <when> on <arch>, <cores> CPU cores, torch <version>": the facts of ``machine``
    (each kept on its own in the JSON too, for pages that word them in another language)."""
    return (f"Measured {machine['when']} on {machine['arch']}, {machine['cores']} CPU cores, "
            f"torch {machine['torch']}")


def render(report: dict) -> str:
    """The Markdown of the "Speed and memory" page's tables, from one run's ``report``."""
    calib = report["calibration_loop_ms"]
    nb_rows = report["notebooks"]
    return "\n".join([
        f"*{report['measured']}.*", "",
        f"This machine's speed varies with its neighbours: a fixed pure-Python loop took "
        f"{calib['before']:.0f} ms before and {calib['after']:.0f} ms after these runs: it is "
        "the yardstick between runs (the same loop twice as slow means every time below is "
        "about twice as long for the same code).", "",
        "The budgets: one notebook in a fresh kernel, top to bottom, ≤ "
        f"{BUDGET_S} s and ≤ 1.5 GB; all notebooks ≤ {BUDGET_ALL_S / 60:.0f} min; a slider "
        f"move ≤ {BUDGET_MEDIAN_MS} ms median and ≤ {BUDGET_P95_MS} ms p95; the chunkwise "
        f"kernels ≥ {BUDGET_SPEEDUP}× faster than the recurrence at T = 4096, same result.", "",
        "**Notebooks**, each in a fresh kernel with live sliders, as in JupyterLab, top to "
        "bottom:", "",
        *notebook_table(nb_rows), "",
        "**Slider panels**: after the notebook has run, every slider of every panel is moved "
        "one step at a time through its whole grid, and each move is timed in the kernel: the "
        "callback draws the new frame, renders its PNG and hands it to the front end. The "
        "panel's first frame is drawn when its cell runs, before any slider moves (it also "
        "computes the layout the other frames reuse); its time is in the last column, and it "
        "counts towards the notebook's wall time. A panel drawn by a lambda is named by its "
        "sliders:", "",
        *slider_table(nb_rows), "",
        "**Kernels**: chunkwise form against the token-by-token recurrence, B = 1, H = 4, "
        "Dk = Dv = 64, float32, on the machine's threads and, for Binder's single CPU, on one. "
        "The recurrence is a chain of small operations, so a second core hardly helps it; the "
        "chunkwise form is mostly large matrix products, which use both. GFLOP/s counts the "
        "recurrence's nominal work, identical for both forms.", "",
        *kernel_table(report["kernels"]), ""])


def main() -> None:
    """Measure everything, write latest.json and its rendering latest.md; with ``--render``,
    only re-render latest.md from the latest.json already there."""
    if "--render" in sys.argv[1:]:
        report = json.loads(RESULTS_JSON.read_text())
    else:
        calib_before = loop_ms()
        nb_rows = notebooks.main()
        k_rows = kernels.main()
        calib_after = loop_ms()
        when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        machine = {"when": when, "arch": platform.machine(), "cores": os.cpu_count(),
                   "torch": torch.__version__}
        report = {
            "machine": machine,
            "measured": measured_line(machine),
            "calibration_loop_ms": {"before": calib_before, "after": calib_after},
            "notebooks": nb_rows,
            "total_seconds": sum(r["seconds"] for r in nb_rows),
            "kernels": k_rows,
        }
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_JSON.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    text = render(report)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
