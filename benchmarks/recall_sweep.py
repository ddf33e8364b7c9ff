"""The recall study: train every (mixer, N, lr, seed) cell of MQAR and store the results.

    .venv/bin/python benchmarks/recall_sweep.py                 # the shipped study (resumes)
    .venv/bin/python benchmarks/recall_sweep.py --seeds 0 --lrs 3e-3 --n-pairs 4 --out /tmp/s

Each finished cell is appended to ``<out>.jsonl`` at once, so an interrupted run keeps its
cells and a re-run with the same grid skips them; after every cell ``<out>.json`` is rewritten
with the provenance (command, git commit, date, machine, torch, and every earlier run that
added cells), the grid, the configuration and all rows so far. Lesson 17 reads the ``.json``
(``attnbook.recall_study.load_study``).
Cells run in the order seed → N → lr → mixer, so a partial run has whole seeds. One thread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch
from attnbook.recall_study import STUDY_MIXERS, StudyConfig, config_dict, train_cell

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "recall_study"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = StudyConfig()
    parser.add_argument("--mixers", nargs="+", default=["+".join(p) for p in STUDY_MIXERS],
                        help="layer patterns joined by '+', e.g. attn+attn kda+attn")
    parser.add_argument("--n-pairs", nargs="+", type=int, default=[2, 4, 8, 16])
    parser.add_argument("--lrs", nargs="+", type=float, default=[3e-3, 8e-3])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=default.steps)
    parser.add_argument("--d-model", type=int, default=default.d_model)
    parser.add_argument("--head-dim", type=int, default=default.head_dim)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="path without suffix: writes <out>.jsonl and <out>.json")
    return parser.parse_args()


def git_commit() -> str:
    """HEAD's commit, with ``+dirty`` when tracked files under code/ differ from it."""
    run = dict(cwd=ROOT, capture_output=True, text=True, check=False)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "code"],
                           **run).stdout.strip()
    return commit + ("+dirty" if dirty else "")


def machine() -> dict:
    """CPU model, logical CPUs, OS, Python and torch versions of this machine."""
    cpu = platform.processor() or "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads()}


def cell_key(row: dict) -> tuple:
    return ("+".join(row["pattern"]), row["n_pairs"], row["lr"], row["seed"])


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    config = StudyConfig(d_model=args.d_model, head_dim=args.head_dim, steps=args.steps)
    patterns = [tuple(m.split("+")) for m in args.mixers]
    grid = {"mixers": ["+".join(p) for p in patterns], "n_pairs": args.n_pairs,
            "lrs": args.lrs, "seeds": args.seeds}
    jsonl, summary = args.out.with_suffix(".jsonl"), args.out.with_suffix(".json")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
    stored_config = {r.pop("config_key") for r in rows}
    if stored_config - {json.dumps(config_dict(config), sort_keys=True)}:
        sys.exit(f"{jsonl} holds cells of another configuration; pick another --out")
    done = {cell_key(r) for r in rows}
    meta = {"command": "python benchmarks/recall_sweep.py " + shlex.join(sys.argv[1:]),
            "git_commit": git_commit(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine()}
    this_run = {key: meta[key] for key in ("command", "git_commit", "started")}
    previous = json.loads(summary.read_text())["meta"] if summary.exists() and rows else None
    earlier = [] if previous is None else previous.get(
        "runs", [{key: previous[key] for key in ("command", "git_commit", "started")}])
    meta["runs"] = [*earlier, this_run]  # every run that added cells, oldest first
    start = time.perf_counter()
    cells = [(seed, n, lr, p) for seed in args.seeds for n in args.n_pairs for lr in args.lrs
             for p in patterns]
    for i, (seed, n, lr, pattern) in enumerate(cells, 1):
        if ("+".join(pattern), n, lr, seed) in done:
            continue
        row = train_cell(pattern, n, lr, seed, config)
        row["git_commit"] = meta["git_commit"]
        with jsonl.open("a") as f:
            f.write(json.dumps({**row, "config_key": json.dumps(config_dict(config),
                                                                 sort_keys=True)}) + "\n")
        rows.append(row)
        meta["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        meta["wall_seconds_this_run"] = round(time.perf_counter() - start, 1)
        meta["cpu_seconds_all_cells"] = round(sum(r["cpu_seconds"] for r in rows), 1)
        meta["complete"] = len(rows) == len(cells)
        summary.write_text(json.dumps({"meta": meta, "config": config_dict(config),
                                       "grid": grid, "rows": rows}, indent=1) + "\n")
        print(f"[{i}/{len(cells)}] {row['mixer']:<9} N={n:<3} lr={lr:g} seed={seed}: "
              f"test {row['accuracy']:.3f} (val {row['val_accuracy']:.3f}), value "
              f"{row['value']:.2f}, in context {row['in_context']:.2f}, {row['steps']} steps, "
              f"{row['cpu_seconds']:.1f} s CPU", flush=True)


if __name__ == "__main__":
    main()
